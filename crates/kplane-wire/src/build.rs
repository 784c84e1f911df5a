//! Builders for every format: the inverse of the decoders, for tests, benchmarks, sample
//! captures and the emulator. They write valid packets; corrupting them is the tests' job.

use std::net::{IpAddr, Ipv4Addr};

use kplane_model::{HopField, HopRecord};

use crate::int::v2::{GpeShimV2, GreShimV2, MdHeaderV2, MxHeaderV2, ShimV2, TYPE_MD, TYPE_MX};
use crate::int::v05::{MdHeaderV05, ShimV05, TailV05};
use crate::int::v10::{MdHeaderV10, ShimV10};
use crate::int::{IntVersion, baseline_len, encode_hop};
use crate::layers::{
    Ethernet, Geneve, GeneveOption, Gre, Ipv4, Ipv6, Tcp, Udp, Vxlan, ethertype, ipproto,
};
use crate::papers::{IntLabel, KdnHeader};
use crate::report::v05::{DropHeaderV05, FixedHeaderV05, LocalHeaderV05};
use crate::report::v10::{ReportHeaderV10, encode_rep_md};
use crate::report::v20::{GroupHeader, IndividualHeader, REP_MD_DROP};

/// An INT instruction set and the hops that answered it (path order: source first).
#[derive(Clone, Debug, PartialEq)]
pub struct IntSpec {
    pub version: IntVersion,
    /// INT-MX (v2 only): header without a stack.
    pub mx: bool,
    pub bitmap: u16,
    pub hops: Vec<HopRecord>,
    /// Extra domain-specific words per hop (v2), to exercise skipping.
    pub ds_words_per_hop: usize,
    pub remaining_hop_count: u8,
}

impl IntSpec {
    pub fn new(version: IntVersion, bitmap: u16, hops: Vec<HopRecord>) -> Self {
        Self {
            version,
            mx: false,
            bitmap,
            hops,
            ds_words_per_hop: 0,
            remaining_hop_count: 8,
        }
    }

    /// Bytes per hop.
    pub fn stride(&self) -> usize {
        let cs = if self.bitmap & 1 != 0 && self.version != IntVersion::V05 {
            4
        } else {
            0
        };
        match self.version {
            IntVersion::V05 => self.bitmap.count_ones() as usize * 4,
            v => baseline_len(v, self.bitmap) + cs + self.ds_words_per_hop * 4,
        }
    }

    fn write_stack(&self, out: &mut Vec<u8>) {
        let stride = self.stride();
        let bitmap = if self.version == IntVersion::V05 {
            self.bitmap & 0xFF00
        } else {
            self.bitmap
        };
        for hop in self.hops.iter().rev() {
            encode_hop(self.version, bitmap, stride, hop, out);
        }
    }

    fn stack_len(&self) -> usize {
        if self.mx {
            0
        } else {
            self.stride() * self.hops.len()
        }
    }

    /// v2 body: MD header + stack, or MX header.
    pub fn write_v2_body(&self, out: &mut Vec<u8>) {
        if self.mx {
            MxHeaderV2 {
                version: 2,
                instruction_bitmap: self.bitmap,
                ..MxHeaderV2::default()
            }
            .write(out);
        } else {
            MdHeaderV2 {
                version: 2,
                hop_ml: (self.stride() / 4) as u8,
                remaining_hop_count: self.remaining_hop_count,
                instruction_bitmap: self.bitmap,
                ..MdHeaderV2::default()
            }
            .write(out);
            self.write_stack(out);
        }
    }

    fn v2_type(&self) -> u8 {
        if self.mx { TYPE_MX } else { TYPE_MD }
    }

    fn v2_words(&self) -> u8 {
        ((12 + self.stack_len()) / 4) as u8
    }

    fn md_v05(&self) -> MdHeaderV05 {
        MdHeaderV05 {
            version: 0,
            instruction_count: self.bitmap.count_ones() as u8,
            max_hop_count: 8,
            total_hop_count: self.hops.len() as u8,
            instruction_bitmap: self.bitmap & 0xFF00,
            ..MdHeaderV05::default()
        }
    }

    /// The INT block placed after a TCP/UDP header (shim first).
    fn write_after_l4(&self, orig: &FlowSpec, npt: u8, out: &mut Vec<u8>) {
        match self.version {
            IntVersion::V05 => {
                ShimV05 {
                    int_type: 1,
                    length: ((16 + self.stack_len()) / 4) as u8,
                }
                .write(out);
                self.md_v05().write(out);
                self.write_stack(out);
                TailV05 {
                    protocol: orig.protocol,
                    destination_port: orig.dst_port,
                    dscp: orig.dscp,
                }
                .write(out);
            }
            IntVersion::V10 => {
                ShimV10 {
                    int_type: 1,
                    length: ((12 + self.stack_len()) / 4) as u8,
                    dscp: Some(orig.dscp),
                    next_protocol: None,
                }
                .write(out);
                self.write_v10_md(out);
            }
            IntVersion::V2 => {
                ShimV2 {
                    int_type: self.v2_type(),
                    npt,
                    length: self.v2_words(),
                    dscp: (npt == 0).then_some(orig.dscp),
                    original_destination_port: (npt == 1).then_some(orig.dst_port),
                    original_protocol: (npt == 2).then_some(orig.protocol),
                }
                .write(out);
                self.write_v2_body(out);
            }
        }
    }

    fn write_v10_md(&self, out: &mut Vec<u8>) {
        MdHeaderV10 {
            version: 1,
            hop_ml: (self.stride() / 4) as u8,
            remaining_hop_count: self.remaining_hop_count,
            instruction_bitmap: self.bitmap,
            ..MdHeaderV10::default()
        }
        .write(out);
        self.write_stack(out);
    }
}

/// The user flow a packet belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    pub src_port: u16,
    pub dst_port: u16,
    pub dscp: u8,
}

impl FlowSpec {
    pub fn udp(src: IpAddr, dst: IpAddr, src_port: u16, dst_port: u16) -> Self {
        Self {
            src,
            dst,
            protocol: ipproto::UDP,
            src_port,
            dst_port,
            dscp: 0,
        }
    }

    pub fn tcp(src: IpAddr, dst: IpAddr, src_port: u16, dst_port: u16) -> Self {
        Self {
            protocol: ipproto::TCP,
            ..Self::udp(src, dst, src_port, dst_port)
        }
    }
}

/// Where the INT block goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encap {
    /// After the flow's own TCP/UDP header, flagged by DSCP `dscp` (v2: NPT 0).
    Dscp { dscp: u8 },
    /// After a UDP header to `port` (v2: NPT 1, original UDP payload follows).
    UdpPort { port: u16 },
    /// v2 NPT 2: a new UDP header to `port`, the original L4 header after INT.
    UdpPortNewL4 { port: u16 },
    /// v2 GRE shim after a GRE header of `protocol`; tunnel endpoints from the spec.
    Gre { protocol: u16 },
    /// VXLAN-GPE with `next_protocol` (0x82 for v2, 0x08 for v1.0).
    VxlanGpe { next_protocol: u8 },
    /// A Geneve option of `class` (v2).
    Geneve { class: u16 },
    /// The KDN paper's INT port (v0.5-style header).
    Kdn { port: u16, to_controller: bool },
    /// The INT-label option with IP protocol `protocol`; `int_num_offset` is MAX_hop for a
    /// specific flow, 0 otherwise.
    IntLabel { protocol: u8, int_num_offset: u8 },
}

/// A whole packet.
#[derive(Clone, Debug, PartialEq)]
pub struct PacketSpec {
    pub ethernet: bool,
    pub vlans: Vec<u16>,
    pub flow: FlowSpec,
    pub int: Option<(IntSpec, Encap)>,
    pub payload: Vec<u8>,
    /// Tunnel endpoints (GRE, VXLAN-GPE, Geneve).
    pub tunnel_src: IpAddr,
    pub tunnel_dst: IpAddr,
    /// The length the (outermost) IP header declares, when larger than what is built: a
    /// report carries a truncated copy of a packet whose IP length is the original one.
    pub ip_length: Option<u16>,
}

impl PacketSpec {
    pub fn new(flow: FlowSpec) -> Self {
        Self {
            ethernet: true,
            vlans: Vec::new(),
            flow,
            int: None,
            payload: b"kplane".to_vec(),
            tunnel_src: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
            tunnel_dst: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
            ip_length: None,
        }
    }

    pub fn with_int(mut self, int: IntSpec, encap: Encap) -> Self {
        self.int = Some((int, encap));
        self
    }

    pub fn build(&self) -> Vec<u8> {
        let mut ip_packet = self.build_ip();
        if let Some(len) = self.ip_length {
            declare_ip_length(&mut ip_packet, len);
        }
        if !self.ethernet {
            return ip_packet;
        }
        let mut out = Vec::with_capacity(ip_packet.len() + 22);
        ethernet_header(&self.vlans, ip_version(&ip_packet)).write(&mut out);
        out.extend_from_slice(&ip_packet);
        out
    }

    fn l4(&self, dst_port: u16, payload_len: usize, out: &mut Vec<u8>) {
        let f = &self.flow;
        match f.protocol {
            ipproto::TCP => Tcp {
                src_port: f.src_port,
                dst_port,
                seq: 1,
                data_offset: 5,
                flags: 0x18,
                window: 512,
                ..Tcp::default()
            }
            .write(out),
            _ => Udp {
                src_port: f.src_port,
                dst_port,
                ..Udp::default()
            }
            .write(payload_len, out),
        }
    }

    /// The plain user packet (IP + L4 + payload), no INT.
    fn plain(&self, flow: &FlowSpec) -> Vec<u8> {
        let mut l4 = Vec::new();
        self.l4(flow.dst_port, self.payload.len(), &mut l4);
        l4.extend_from_slice(&self.payload);
        ip_packet(flow.src, flow.dst, flow.protocol, flow.dscp, &l4)
    }

    fn build_ip(&self) -> Vec<u8> {
        let f = self.flow;
        let Some((int, encap)) = &self.int else {
            return self.plain(&f);
        };
        let mut body = Vec::with_capacity(96 + int.stack_len() + self.payload.len());
        match *encap {
            Encap::Dscp { dscp } => {
                let mut block = Vec::with_capacity(32 + int.stack_len());
                int.write_after_l4(&f, 0, &mut block);
                let payload_len = block.len() + self.payload.len();
                self.l4(f.dst_port, payload_len, &mut body);
                body.extend_from_slice(&block);
                body.extend_from_slice(&self.payload);
                ip_packet(f.src, f.dst, f.protocol, dscp, &body)
            }
            Encap::UdpPort { port } => {
                let mut block = Vec::new();
                int.write_after_l4(&f, 1, &mut block);
                block.extend_from_slice(&self.payload);
                udp_header(f.src_port, port, block.len(), &mut body);
                body.extend_from_slice(&block);
                ip_packet(f.src, f.dst, ipproto::UDP, f.dscp, &body)
            }
            Encap::UdpPortNewL4 { port } => {
                let mut block = Vec::new();
                int.write_after_l4(&f, 2, &mut block);
                self.l4(f.dst_port, self.payload.len(), &mut block);
                block.extend_from_slice(&self.payload);
                udp_header(f.src_port, port, block.len(), &mut body);
                body.extend_from_slice(&block);
                ip_packet(f.src, f.dst, ipproto::UDP, f.dscp, &body)
            }
            Encap::Gre { protocol } => {
                let inner = self.plain(&f);
                Gre {
                    protocol,
                    ..Gre::default()
                }
                .write(&mut body);
                GreShimV2 {
                    int_type: int.v2_type(),
                    gre_inserted: true,
                    length: int.v2_words(),
                    next_protocol: ip_ethertype(&inner),
                }
                .write(&mut body);
                int.write_v2_body(&mut body);
                body.extend_from_slice(&inner);
                ip_packet(self.tunnel_src, self.tunnel_dst, ipproto::GRE, 0, &body)
            }
            Encap::VxlanGpe { next_protocol } => {
                let inner = self.plain(&f);
                let inner_np = if ip_version(&inner) == 6 { 2 } else { 1 };
                let mut gpe = Vec::new();
                Vxlan {
                    flags: 0x0C,
                    next_protocol: Some(next_protocol),
                    vni: 42,
                }
                .write(&mut gpe);
                if int.version == IntVersion::V10 {
                    ShimV10 {
                        int_type: 1,
                        length: ((12 + int.stack_len()) / 4) as u8,
                        dscp: None,
                        next_protocol: Some(inner_np),
                    }
                    .write(&mut gpe);
                    int.write_v10_md(&mut gpe);
                } else {
                    GpeShimV2 {
                        int_type: int.v2_type(),
                        length: int.v2_words(),
                        was_vxlan: false,
                        next_protocol: inner_np,
                    }
                    .write(&mut gpe);
                    int.write_v2_body(&mut gpe);
                }
                gpe.extend_from_slice(&inner);
                udp_header(49152, 4790, gpe.len(), &mut body);
                body.extend_from_slice(&gpe);
                ip_packet(self.tunnel_src, self.tunnel_dst, ipproto::UDP, 0, &body)
            }
            Encap::Geneve { class } => {
                let inner = self.plain(&f);
                let mut opt = Vec::new();
                int.write_v2_body(&mut opt);
                let mut geneve = Vec::new();
                Geneve {
                    options_length: (1 + opt.len() / 4) as u8,
                    protocol: ip_ethertype(&inner),
                    vni: 7,
                    ..Geneve::default()
                }
                .write(&mut geneve);
                GeneveOption {
                    class,
                    option_type: int.v2_type(),
                    length: (opt.len() / 4) as u8,
                }
                .write(&mut geneve);
                geneve.extend_from_slice(&opt);
                geneve.extend_from_slice(&inner);
                udp_header(49153, 6081, geneve.len(), &mut body);
                body.extend_from_slice(&geneve);
                ip_packet(self.tunnel_src, self.tunnel_dst, ipproto::UDP, 0, &body)
            }
            Encap::Kdn {
                port,
                to_controller,
            } => {
                let mut block = Vec::new();
                KdnHeader {
                    original_destination_port: f.dst_port,
                    to_controller,
                    int_length: ((8 + int.stack_len()) / 4) as u8,
                }
                .write(&mut block);
                int.md_v05().write(&mut block);
                int.write_stack(&mut block);
                block.extend_from_slice(&self.payload);
                udp_header(f.src_port, port, block.len(), &mut body);
                body.extend_from_slice(&block);
                ip_packet(f.src, f.dst, ipproto::UDP, f.dscp, &body)
            }
            Encap::IntLabel {
                protocol,
                int_num_offset,
            } => {
                let n = int.hops.len() as u8 + int_num_offset;
                IntLabel::write(f.protocol, n, &int.hops, &mut body);
                self.l4(f.dst_port, self.payload.len(), &mut body);
                body.extend_from_slice(&self.payload);
                ip_packet(f.src, f.dst, protocol, f.dscp, &body)
            }
        }
    }
}

fn ip_version(packet: &[u8]) -> u8 {
    packet.first().map_or(4, |b| b >> 4)
}

fn ip_ethertype(packet: &[u8]) -> u16 {
    if ip_version(packet) == 6 {
        ethertype::IPV6
    } else {
        ethertype::IPV4
    }
}

fn ethernet_header(vlans: &[u16], ip_version: u8) -> Ethernet {
    let mut e = Ethernet {
        dst: [0x02, 0, 0, 0, 0, 0x02],
        src: [0x02, 0, 0, 0, 0, 0x01],
        ethertype: if ip_version == 6 {
            ethertype::IPV6
        } else {
            ethertype::IPV4
        },
        ..Ethernet::default()
    };
    for (i, v) in vlans.iter().take(2).enumerate() {
        e.vlan_ids[i] = *v;
        e.vlan_count += 1;
    }
    e
}

fn udp_header(src_port: u16, dst_port: u16, payload_len: usize, out: &mut Vec<u8>) {
    Udp {
        src_port,
        dst_port,
        ..Udp::default()
    }
    .write(payload_len, out);
}

/// An IP packet (v4 or v6 by the addresses) around `payload`.
pub fn ip_packet(src: IpAddr, dst: IpAddr, protocol: u8, dscp: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 40);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            Ipv4::new(s, d, protocol, dscp).write(payload.len(), &mut out)
        }
        (s, d) => Ipv6::new(v6(s), v6(d), protocol, dscp).write(payload.len(), &mut out),
    }
    out.extend_from_slice(payload);
    out
}

fn v6(ip: IpAddr) -> std::net::Ipv6Addr {
    match ip {
        IpAddr::V4(v) => v.to_ipv6_mapped(),
        IpAddr::V6(v) => v,
    }
}

/// An Ethernet/IP/UDP frame carrying `payload` (a report) from `src` to `dst`.
pub fn udp_frame(
    src: IpAddr,
    dst: IpAddr,
    src_port: u16,
    dst_port: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut udp = Vec::with_capacity(payload.len() + 8);
    udp_header(src_port, dst_port, payload.len(), &mut udp);
    udp.extend_from_slice(payload);
    let ip = ip_packet(src, dst, ipproto::UDP, 0, &udp);
    let mut out = Vec::with_capacity(ip.len() + 14);
    ethernet_header(&[], ip_version(&ip)).write(&mut out);
    out.extend_from_slice(&ip);
    out
}

/// Telemetry Report v0.5. `local` / `drop` choose NProto 2 / 1; `frame` is the inner Ethernet frame.
pub fn report_v05(
    fixed: FixedHeaderV05,
    drop: Option<DropHeaderV05>,
    local: Option<LocalHeaderV05>,
    frame: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(frame.len() + 28);
    let next_proto = match (drop, local) {
        (Some(_), _) => 1,
        (None, Some(_)) => 2,
        _ => 0,
    };
    FixedHeaderV05 {
        next_proto,
        ..fixed
    }
    .write(&mut out);
    if let Some(d) = drop {
        d.write(&mut out);
    } else if let Some(l) = local {
        l.write(&mut out);
    }
    out.extend_from_slice(frame);
    out
}

/// Telemetry Report v1.0 with the optional words for `header.rep_md_bits` taken from `md`;
/// `inner` starts with what `header.next_proto` says. Length is computed.
pub fn report_v10(header: ReportHeaderV10, md: &HopRecord, inner: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(inner.len() + 40);
    ReportHeaderV10 {
        version: 1,
        length: 4 + header.rep_md_bits.count_ones() as u8,
        ..header
    }
    .write(&mut out);
    encode_rep_md(header.rep_md_bits, md, &mut out);
    out.extend_from_slice(inner);
    out
}

/// One individual report of a v2.0 report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndividualSpec {
    /// Flags and types; lengths are computed.
    pub header: IndividualHeader,
    /// Main contents (RepType 1).
    pub main: Option<MainSpec>,
    pub inner: Vec<u8>,
    /// Write Report Length 0xFF ("to the end of the payload"); only valid for the last one.
    pub to_end: bool,
}

impl IndividualSpec {
    /// RepType 1 with the node's own metadata for `rep_md_bits`, and an inner packet.
    pub fn int(rep_md_bits: u16, metadata: HopRecord, in_type: u8, inner: Vec<u8>) -> Self {
        Self {
            header: IndividualHeader {
                rep_type: 1,
                in_type,
                ..IndividualHeader::default()
            },
            main: Some(MainSpec {
                rep_md_bits,
                metadata,
                ds_words: 0,
            }),
            inner,
            to_end: false,
        }
    }
}

/// Main contents of a RepType 1 report: the node's metadata for `rep_md_bits`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MainSpec {
    pub rep_md_bits: u16,
    pub metadata: HopRecord,
    /// Domain-specific words appended (zeros), to exercise skipping.
    pub ds_words: usize,
}

impl MainSpec {
    /// Writes the main contents; returns the MD Length in words.
    pub fn write(&self, out: &mut Vec<u8>) -> u8 {
        out.extend_from_slice(&self.rep_md_bits.to_be_bytes());
        out.extend_from_slice(&[0; 6]);
        let baseline = self.rep_md_bits & 0x7FFE;
        let base_len = baseline_len(IntVersion::V2, baseline);
        encode_hop(IntVersion::V2, baseline, base_len, &self.metadata, out);
        let mut words = base_len / 4 + self.ds_words;
        if self.rep_md_bits & REP_MD_DROP != 0 {
            out.push(self.metadata.queue_id().unwrap_or(0xFF));
            out.push(self.metadata.get(HopField::DropReason).unwrap_or(0xFF) as u8);
            out.extend_from_slice(&[0, 0]);
            words += 1;
        }
        out.resize(out.len() + self.ds_words * 4, 0);
        words as u8
    }
}

/// Telemetry Report v2.0.
pub fn report_v20(group: GroupHeader, reports: &[IndividualSpec]) -> Vec<u8> {
    let inner: usize = reports.iter().map(|r| r.inner.len() + 64).sum();
    let mut out = Vec::with_capacity(8 + inner);
    GroupHeader {
        version: 2,
        ..group
    }
    .write(&mut out);
    for r in reports {
        let mut main = Vec::with_capacity(64);
        let md_words = r.main.as_ref().map_or(0, |m| m.write(&mut main));
        let words = (main.len() + r.inner.len()).div_ceil(4);
        let mut h = r.header;
        h.md_length = md_words;
        h.report_length = if r.to_end { 0xFF } else { words as u8 };
        h.write(&mut out);
        out.extend_from_slice(&main);
        out.extend_from_slice(&r.inner);
        // Report Length counts words: pad the (truncated) inner packet to a word boundary.
        out.resize(out.len() + (words * 4 - main.len() - r.inner.len()), 0);
    }
    out
}

/// An Inner-Only Telemetry Report v2.0 from `node_id` whose inner packet is the IPv4 packet
/// `ip` (how `kplane probe` hands returned GPINT probes to the collector).
pub fn report_v20_ipv4(node_id: u32, sequence: u32, ip: &[u8]) -> Vec<u8> {
    report_v20(
        GroupHeader {
            sequence,
            node_id,
            ..GroupHeader::default()
        },
        &[IndividualSpec {
            header: IndividualHeader {
                rep_type: 0,
                in_type: 4,
                ..IndividualHeader::default()
            },
            main: None,
            inner: ip.to_vec(),
            to_end: true,
        }],
    )
}

/// A hop with the given node id and a typical set of values, for tests and benchmarks.
pub fn sample_hop(node: u32, latency_ns: u32, queue_occupancy: u32) -> HopRecord {
    let mut h = HopRecord::default();
    h.set(HopField::NodeId, node.into());
    h.set(HopField::L1IngressPort, 1);
    h.set(HopField::L1EgressPort, 2);
    h.set(HopField::HopLatency, latency_ns.into());
    h.set(HopField::QueueId, 0);
    h.set(HopField::QueueOccupancy, queue_occupancy.into());
    h.set(HopField::IngressTimestamp, 1_000_000 + u64::from(node) * 10);
    h.set(
        HopField::EgressTimestamp,
        1_000_000 + u64::from(node) * 10 + u64::from(latency_ns),
    );
    h.set(HopField::L2IngressPort, 11);
    h.set(HopField::L2EgressPort, 12);
    h.set(HopField::TxUtilization, 500);
    h.set(HopField::BufferId, 1);
    h.set(HopField::BufferOccupancy, queue_occupancy.into());
    h
}

/// Sets the IP length field of `ip` (v4 total length with its checksum, or v6 payload length)
/// to at least `len` bytes of packet.
fn declare_ip_length(ip: &mut [u8], len: u16) {
    match ip.first().map(|b| b >> 4) {
        Some(4) if ip.len() >= 20 => {
            let actual = u16::from_be_bytes([ip[2], ip[3]]);
            ip[2..4].copy_from_slice(&len.max(actual).to_be_bytes());
            ip[10..12].copy_from_slice(&[0, 0]);
            let ihl = usize::from(ip[0] & 0x0F) * 4;
            let sum = crate::layers::checksum(&ip[..ihl.min(ip.len())]);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
        }
        Some(6) if ip.len() >= 40 => {
            let actual = u16::from_be_bytes([ip[4], ip[5]]);
            ip[4..6].copy_from_slice(&len.saturating_sub(40).max(actual).to_be_bytes());
        }
        _ => {}
    }
}
