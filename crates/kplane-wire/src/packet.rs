//! Walks a packet's headers, finds the telemetry it carries (embedded INT of any version,
//! the papers' formats) and restores the monitored flow's 5-tuple.

use std::net::IpAddr;

use kplane_model::{FlowKey, ReportFormat};

use crate::bytes::Bytes;
use crate::error::{ErrorKind, Result, WireError};
use crate::int::HopStack;
use crate::int::v2::{GpeShimV2, GreShimV2, IntV2Body, ShimV2};
use crate::int::v05::{IntV05, MdHeaderV05, ShimV05, TailV05};
use crate::int::v10::{IntV10, MdHeaderV10, ShimV10};
use crate::layers::{Ethernet, Geneve, GeneveOption, Gre, Ipv4, Ipv6, Tcp, Udp, Vxlan};
use crate::layers::{ethertype, ipproto};
use crate::opts::DecodeOptions;
use crate::papers::{GpintProbe, IntLabel, KdnInt, ProbeKind};

/// Where parsing starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    Ethernet,
    Ipv4,
    Ipv6,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Ip {
    Ipv4(Ipv4),
    Ipv6(Ipv6),
}

impl Ip {
    pub fn src(&self) -> IpAddr {
        match self {
            Self::Ipv4(h) => h.src.into(),
            Self::Ipv6(h) => h.src.into(),
        }
    }
    pub fn dst(&self) -> IpAddr {
        match self {
            Self::Ipv4(h) => h.dst.into(),
            Self::Ipv6(h) => h.dst.into(),
        }
    }
    pub fn dscp(&self) -> u8 {
        match self {
            Self::Ipv4(h) => h.dscp,
            Self::Ipv6(h) => h.dscp(),
        }
    }
    pub fn protocol(&self) -> u8 {
        match self {
            Self::Ipv4(h) => h.protocol,
            Self::Ipv6(h) => h.protocol,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum L4 {
    Udp(Udp),
    Tcp(Tcp),
}

impl L4 {
    pub fn ports(&self) -> (u16, u16) {
        match self {
            Self::Udp(h) => (h.src_port, h.dst_port),
            Self::Tcp(h) => (h.src_port, h.dst_port),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Tunnel {
    Gre(Gre),
    Vxlan(Vxlan),
    VxlanGpe(Vxlan),
    Geneve(Geneve),
}

/// Headers of the packet inside a tunnel or after an INT block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct InnerHeaders {
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub ethernet: Option<Ethernet>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub ip: Option<Ip>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub l4: Option<L4>,
}

/// How the INT block was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Carrier {
    /// After the TCP/UDP header, flagged by DSCP.
    Dscp,
    /// After the TCP/UDP header, flagged by the L4 destination port.
    L4Port,
    Gre,
    VxlanGpe,
    Geneve,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Shim {
    V05(ShimV05),
    V10(ShimV10),
    V2(ShimV2),
    V2Gre(GreShimV2),
    V2Gpe(GpeShimV2),
    Geneve(GeneveOption),
}

#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum IntBody<'a> {
    V05 {
        header: MdHeaderV05,
        hops: HopStack<'a>,
        tail: TailV05,
    },
    V10 {
        header: MdHeaderV10,
        hops: HopStack<'a>,
    },
    V2(IntV2Body<'a>),
}

/// An INT block found inside a packet.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct EmbeddedInt<'a> {
    pub carrier: Carrier,
    pub shim: Shim,
    pub int: IntBody<'a>,
}

impl<'a> EmbeddedInt<'a> {
    pub fn format(&self) -> ReportFormat {
        match self.int {
            IntBody::V05 { .. } => ReportFormat::IntV05,
            IntBody::V10 { .. } => ReportFormat::IntV10,
            IntBody::V2(IntV2Body::Md { .. }) => ReportFormat::IntMdV2,
            IntBody::V2(IntV2Body::Mx { .. }) => ReportFormat::IntMxV2,
        }
    }

    pub fn hops(&self) -> Option<&HopStack<'a>> {
        match &self.int {
            IntBody::V05 { hops, .. } | IntBody::V10 { hops, .. } => Some(hops),
            IntBody::V2(b) => b.hops(),
        }
    }
}

/// Telemetry carried inside a packet (reports are handled one level up, in [`crate::frame`]).
#[derive(Clone, Copy, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Telemetry<'a> {
    #[default]
    None,
    Int(EmbeddedInt<'a>),
    Kdn(KdnInt<'a>),
    Gpint(GpintProbe<'a>),
    IntLabel(IntLabel<'a>),
}

impl Telemetry<'_> {
    pub fn format(&self) -> Option<ReportFormat> {
        match self {
            Self::None => None,
            Self::Int(i) => Some(i.format()),
            Self::Kdn(_) => Some(ReportFormat::KdnUdpInt),
            Self::Gpint(_) => Some(ReportFormat::GpintProbe),
            Self::IntLabel(_) => Some(ReportFormat::IntLabel),
        }
    }
}

/// A parsed packet: its headers, the telemetry it carries, and the monitored flow.
#[derive(Clone, Copy, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Packet<'a> {
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub ethernet: Option<Ethernet>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub ip: Option<Ip>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub l4: Option<L4>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub tunnel: Option<Tunnel>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub inner: Option<InnerHeaders>,
    #[cfg_attr(
        feature = "serde",
        serde(skip_serializing_if = "Telemetry::is_none_ref")
    )]
    pub telemetry: Telemetry<'a>,
    /// The monitored flow, with INT's changes undone.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub flow: Option<FlowKey>,
    /// The UDP payload, when the outermost L4 is UDP and nothing else claimed it.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub udp_payload: Option<Bytes<'a>>,
}

impl Telemetry<'_> {
    #[cfg(feature = "serde")]
    fn is_none_ref(&self) -> bool {
        matches!(self, Self::None)
    }
}

#[inline]
fn flow(ip: &Ip, protocol: u8, ports: (u16, u16)) -> FlowKey {
    FlowKey {
        src_ip: ip.src(),
        dst_ip: ip.dst(),
        src_port: ports.0,
        dst_port: ports.1,
        protocol,
    }
}

/// Parses an L4 header of `protocol` if any bytes are left (truncated reports may end here).
#[inline]
fn parse_l4(protocol: u8, b: Bytes<'_>) -> Result<(Option<L4>, Bytes<'_>)> {
    if b.is_empty() {
        return Ok((None, b));
    }
    Ok(match protocol {
        ipproto::UDP => {
            let (h, rest) = Udp::parse(b)?;
            (Some(L4::Udp(h)), rest)
        }
        ipproto::TCP => {
            let (h, rest) = Tcp::parse(b)?;
            (Some(L4::Tcp(h)), rest)
        }
        _ => (None, b),
    })
}

/// Parses the headers after a tunnel or INT block, for the inner flow.
#[inline]
fn parse_inner(start: Start, b: Bytes<'_>) -> Result<(InnerHeaders, Option<FlowKey>)> {
    let mut inner = InnerHeaders::default();
    if b.is_empty() {
        return Ok((inner, None));
    }
    let (ethertype, b) = match start {
        Start::Ethernet => {
            let (e, rest) = Ethernet::parse(b)?;
            inner.ethernet = Some(e);
            (e.ethertype, rest)
        }
        Start::Ipv4 => (ethertype::IPV4, b),
        Start::Ipv6 => (ethertype::IPV6, b),
    };
    let (ip, payload) = match ethertype {
        ethertype::IPV4 if !b.is_empty() => {
            let (h, p) = Ipv4::parse(b)?;
            (Ip::Ipv4(h), p)
        }
        ethertype::IPV6 if !b.is_empty() => {
            let (h, p) = Ipv6::parse(b)?;
            (Ip::Ipv6(h), p)
        }
        _ => return Ok((inner, None)),
    };
    inner.ip = Some(ip);
    let (l4, _) = parse_l4(ip.protocol(), payload)?;
    inner.l4 = l4;
    let ports = l4.map_or((0, 0), |l| l.ports());
    Ok((inner, Some(flow(&ip, ip.protocol(), ports))))
}

fn gpe_inner_start(next_protocol: u8) -> Option<Start> {
    match next_protocol {
        1 => Some(Start::Ipv4),
        2 => Some(Start::Ipv6),
        3 => Some(Start::Ethernet),
        _ => None,
    }
}

fn ethertype_start(ethertype: u16) -> Option<Start> {
    match ethertype {
        ethertype::IPV4 => Some(Start::Ipv4),
        ethertype::IPV6 => Some(Start::Ipv6),
        ethertype::TEB => Some(Start::Ethernet),
        _ => None,
    }
}

impl<'a> Packet<'a> {
    /// Parses a packet from `start`.
    #[inline]
    pub fn parse(data: Bytes<'a>, start: Start, opts: &DecodeOptions) -> Result<Self> {
        let mut p = Packet::default();
        let (ethertype, b) = match start {
            Start::Ethernet => {
                let (e, rest) = Ethernet::parse(data)?;
                p.ethernet = Some(e);
                (e.ethertype, rest)
            }
            Start::Ipv4 => (ethertype::IPV4, data),
            Start::Ipv6 => (ethertype::IPV6, data),
        };
        // The INT-label authors' probes: no IP header, so no flow.
        if matches!(
            ethertype,
            ethertype::INT_LABEL | ethertype::INT_LABEL_SOURCE_ROUTE
        ) {
            if let Some((label, _)) = IntLabel::parse_authors(ethertype, b)? {
                p.telemetry = Telemetry::IntLabel(label);
            }
            return Ok(p);
        }
        let (ip, payload, fragment) = match ethertype {
            ethertype::IPV4 => {
                let (h, rest) = Ipv4::parse(b)?;
                (Ip::Ipv4(h), rest, h.fragment_offset != 0)
            }
            ethertype::IPV6 => {
                let (h, rest) = Ipv6::parse(b)?;
                (Ip::Ipv6(h), rest, false)
            }
            _ => return Ok(p),
        };
        p.ip = Some(ip);
        let protocol = ip.protocol();
        if fragment {
            p.flow = Some(flow(&ip, protocol, (0, 0)));
            return Ok(p);
        }
        if protocol == opts.int_label_protocol {
            let (label, rest) = IntLabel::parse(payload, opts.int_label_max_hop)?;
            p.telemetry = Telemetry::IntLabel(label);
            let (l4, _) = parse_l4(label.next_header, rest)?;
            p.l4 = l4;
            p.flow = Some(flow(
                &ip,
                label.next_header,
                l4.map_or((0, 0), |l| l.ports()),
            ));
            return Ok(p);
        }
        if protocol == opts.gpint_protocol && matches!(ip, Ip::Ipv4(_)) {
            let kind = ProbeKind::from_dscp(ip.dscp()).ok_or(WireError::new(
                "ipv4",
                "dscp",
                data.offset(),
                ErrorKind::Unsupported {
                    value: ip.dscp().into(),
                },
            ))?;
            let (probe, _) = GpintProbe::parse(kind, payload)?;
            p.telemetry = Telemetry::Gpint(probe);
            p.flow = Some(flow(&ip, protocol, (0, 0)));
            return Ok(p);
        }
        match protocol {
            ipproto::UDP => p.after_udp(ip, payload, opts)?,
            ipproto::TCP => {
                let (tcp, rest) = Tcp::parse(payload)?;
                p.l4 = Some(L4::Tcp(tcp));
                let ports = (tcp.src_port, tcp.dst_port);
                if opts.int_l4_ports.contains(&tcp.dst_port) {
                    p.int_after_l4(ip, ipproto::TCP, ports, Carrier::L4Port, rest)?;
                } else if opts.dscp_marks_int(ip.dscp()) {
                    p.int_after_l4(ip, ipproto::TCP, ports, Carrier::Dscp, rest)?;
                } else {
                    p.flow = Some(flow(&ip, protocol, ports));
                }
            }
            ipproto::GRE => {
                let (gre, rest) = Gre::parse(payload)?;
                p.tunnel = Some(Tunnel::Gre(gre));
                if gre.protocol == opts.gre_int_protocol {
                    let shim = GreShimV2::parse(rest)?;
                    let rest = rest.skip(GreShimV2::LEN, "int_v2_gre_shim", "length")?;
                    let (body, rest) = IntV2Body::parse(shim.int_type, shim.length.into(), rest)?;
                    p.telemetry = Telemetry::Int(EmbeddedInt {
                        carrier: Carrier::Gre,
                        shim: Shim::V2Gre(shim),
                        int: IntBody::V2(body),
                    });
                    p.inner_from(ethertype_start(shim.next_protocol), rest, ip)?;
                } else {
                    p.inner_from(ethertype_start(gre.protocol), rest, ip)?;
                }
            }
            _ => p.flow = Some(flow(&ip, protocol, (0, 0))),
        }
        Ok(p)
    }

    /// Inner headers become the flow when they have an IP header; otherwise the outer one.
    #[inline]
    fn inner_from(&mut self, start: Option<Start>, b: Bytes<'a>, outer: Ip) -> Result<()> {
        if let Some(start) = start {
            let (inner, f) = parse_inner(start, b)?;
            self.inner = Some(inner);
            self.flow = f;
        }
        if self.flow.is_none() {
            let ports = self.l4.map_or((0, 0), |l| l.ports());
            self.flow = Some(flow(&outer, outer.protocol(), ports));
        }
        Ok(())
    }

    #[inline]
    fn after_udp(&mut self, ip: Ip, payload: Bytes<'a>, opts: &DecodeOptions) -> Result<()> {
        let (udp, rest) = Udp::parse(payload)?;
        self.l4 = Some(L4::Udp(udp));
        let ports = (udp.src_port, udp.dst_port);
        let dport = udp.dst_port;
        if dport == opts.vxlan_gpe_port {
            let (gpe, rest) = Vxlan::parse(rest, true)?;
            self.tunnel = Some(Tunnel::VxlanGpe(gpe));
            let np = gpe.next_protocol.unwrap_or(0);
            if np == opts.gpe_int_next_protocol {
                let shim = GpeShimV2::parse(rest)?;
                let rest = rest.skip(GpeShimV2::LEN, "int_v2_gpe_shim", "length")?;
                let (body, rest) = IntV2Body::parse(shim.int_type, shim.length.into(), rest)?;
                self.telemetry = Telemetry::Int(EmbeddedInt {
                    carrier: Carrier::VxlanGpe,
                    shim: Shim::V2Gpe(shim),
                    int: IntBody::V2(body),
                });
                return self.inner_from(gpe_inner_start(shim.next_protocol), rest, ip);
            }
            if np == opts.gpe_int_v10_next_protocol {
                let (int, rest) = IntV10::parse(rest, true)?;
                self.telemetry = Telemetry::Int(EmbeddedInt {
                    carrier: Carrier::VxlanGpe,
                    shim: Shim::V10(int.shim),
                    int: IntBody::V10 {
                        header: int.md,
                        hops: int.stack,
                    },
                });
                let next = int.shim.next_protocol.unwrap_or(0);
                return self.inner_from(gpe_inner_start(next), rest, ip);
            }
            return self.inner_from(gpe_inner_start(np), rest, ip);
        }
        if dport == opts.geneve_port {
            let (geneve, mut options, rest) = Geneve::parse(rest)?;
            self.tunnel = Some(Tunnel::Geneve(geneve));
            while !options.is_empty() {
                let (opt, data, more) = GeneveOption::next(options)?;
                if opt.class == opts.geneve_int_class {
                    let (body, _) = IntV2Body::parse(opt.option_type, opt.length.into(), data)?;
                    self.telemetry = Telemetry::Int(EmbeddedInt {
                        carrier: Carrier::Geneve,
                        shim: Shim::Geneve(opt),
                        int: IntBody::V2(body),
                    });
                    break;
                }
                options = more;
            }
            return self.inner_from(ethertype_start(geneve.protocol), rest, ip);
        }
        if dport == opts.vxlan_port {
            let (vx, rest) = Vxlan::parse(rest, false)?;
            self.tunnel = Some(Tunnel::Vxlan(vx));
            return self.inner_from(Some(Start::Ethernet), rest, ip);
        }
        if opts.kdn_port == Some(dport) {
            let (kdn, _) = KdnInt::parse(rest)?;
            self.telemetry = Telemetry::Kdn(kdn);
            let orig = (udp.src_port, kdn.kdn.original_destination_port);
            self.flow = Some(flow(&ip, ipproto::UDP, orig));
            return Ok(());
        }
        if opts.int_l4_ports.contains(&dport) {
            return self.int_after_l4(ip, ipproto::UDP, ports, Carrier::L4Port, rest);
        }
        if opts.dscp_marks_int(ip.dscp()) {
            return self.int_after_l4(ip, ipproto::UDP, ports, Carrier::Dscp, rest);
        }
        self.flow = Some(flow(&ip, ipproto::UDP, ports));
        self.udp_payload = Some(rest);
        Ok(())
    }

    /// INT right after a TCP/UDP header: the version is told by the metadata header's
    /// version nibble, which every version places at byte 4 (after a 4-byte shim).
    #[inline]
    fn int_after_l4(
        &mut self,
        ip: Ip,
        protocol: u8,
        ports: (u16, u16),
        carrier: Carrier,
        b: Bytes<'a>,
    ) -> Result<()> {
        let head = b.array::<5>("int_shim", "type")?;
        let version = head[4] >> 4;
        let mut key = flow(&ip, protocol, ports);
        match version {
            0 => {
                let (int, _) = IntV05::parse(b)?;
                key.protocol = int.tail.protocol;
                key.dst_port = int.tail.destination_port;
                self.telemetry = Telemetry::Int(EmbeddedInt {
                    carrier,
                    shim: Shim::V05(int.shim),
                    int: IntBody::V05 {
                        header: int.md,
                        hops: int.stack,
                        tail: int.tail,
                    },
                });
            }
            1 => {
                let (int, _) = IntV10::parse(b, false)?;
                self.telemetry = Telemetry::Int(EmbeddedInt {
                    carrier,
                    shim: Shim::V10(int.shim),
                    int: IntBody::V10 {
                        header: int.md,
                        hops: int.stack,
                    },
                });
            }
            2 => {
                let shim = ShimV2::parse(b)?;
                let rest = b.skip(ShimV2::LEN, "int_v2_shim", "length")?;
                let (body, rest) = IntV2Body::parse(shim.int_type, shim.length.into(), rest)?;
                if let Some(port) = shim.original_destination_port {
                    key.dst_port = port;
                }
                if let Some(proto) = shim.original_protocol {
                    // A new UDP header was inserted; the original L4 header follows INT.
                    key.protocol = proto;
                    let (l4, _) = parse_l4(proto, rest)?;
                    if let Some(l4) = l4 {
                        (key.src_port, key.dst_port) = l4.ports();
                        self.inner = Some(InnerHeaders {
                            l4: Some(l4),
                            ..InnerHeaders::default()
                        });
                    }
                }
                self.telemetry = Telemetry::Int(EmbeddedInt {
                    carrier,
                    shim: Shim::V2(shim),
                    int: IntBody::V2(body),
                });
            }
            v => {
                return Err(WireError::new(
                    "int_md_header",
                    "version",
                    b.offset() + 4,
                    ErrorKind::BadVersion { found: v },
                ));
            }
        }
        self.flow = Some(key);
        Ok(())
    }
}
