//! Plain network headers: just enough of each to find the telemetry and the flow.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::bytes::{Bytes, be16, be24, be32};
use crate::error::{ErrorKind, Result, WireError};

pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const IPV6: u16 = 0x86DD;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88A8;
    pub const QINQ_OLD: u16 = 0x9100;
    pub const TEB: u16 = 0x6558;
    /// INT-label as the authors' published code sends it: a source route (`type_1`)…
    pub const INT_LABEL_SOURCE_ROUTE: u16 = 0x0700;
    /// …then, or at once once the route is spent, the INT option (`type_2`).
    pub const INT_LABEL: u16 = 0x0701;
}

pub mod ipproto {
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const GRE: u8 = 47;
}

/// Ethernet II with up to two VLAN tags (802.1Q, QinQ).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Ethernet {
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::json::mac"))]
    pub dst: [u8; 6],
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::json::mac"))]
    pub src: [u8; 6],
    /// VLAN ids, outermost first (0 when absent; `vlan_count` says how many).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "no_vlans"))]
    pub vlan_ids: [u16; 2],
    pub vlan_count: u8,
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::json::hex16"))]
    pub ethertype: u16,
}

#[cfg(feature = "serde")]
fn no_vlans(v: &[u16; 2]) -> bool {
    *v == [0, 0]
}

impl Ethernet {
    const H: &'static str = "ethernet";

    #[inline]
    pub fn parse(b: Bytes<'_>) -> Result<(Self, Bytes<'_>)> {
        let a = b.array::<14>(Self::H, "ethertype")?;
        let mut e = Self {
            dst: a[0..6].try_into().unwrap_or_default(),
            src: a[6..12].try_into().unwrap_or_default(),
            ethertype: be16(a, 12),
            ..Self::default()
        };
        let mut rest = b.skip(14, Self::H, "ethertype")?;
        while matches!(
            e.ethertype,
            ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_OLD
        ) {
            if usize::from(e.vlan_count) == e.vlan_ids.len() {
                return Err(WireError::new(
                    "vlan",
                    "tpid",
                    rest.offset(),
                    ErrorKind::Unsupported {
                        value: e.ethertype.into(),
                    },
                ));
            }
            let t = rest.array::<4>("vlan", "tci")?;
            e.vlan_ids[usize::from(e.vlan_count)] = be16(t, 0) & 0x0FFF;
            e.vlan_count += 1;
            e.ethertype = be16(t, 2);
            rest = rest.skip(4, "vlan", "tci")?;
        }
        Ok((e, rest))
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.dst);
        out.extend_from_slice(&self.src);
        let tpids = if self.vlan_count == 2 {
            [ethertype::QINQ, ethertype::VLAN]
        } else {
            [ethertype::VLAN, ethertype::VLAN]
        };
        let n = usize::from(self.vlan_count.min(2));
        for (tpid, id) in tpids.iter().zip(&self.vlan_ids).take(n) {
            out.extend_from_slice(&tpid.to_be_bytes());
            out.extend_from_slice(&(id & 0x0FFF).to_be_bytes());
        }
        out.extend_from_slice(&self.ethertype.to_be_bytes());
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Ipv4 {
    pub ihl: u8,
    pub dscp: u8,
    pub ecn: u8,
    pub total_length: u16,
    pub identification: u16,
    pub flags: u8,
    pub fragment_offset: u16,
    pub ttl: u8,
    pub protocol: u8,
    pub checksum: u16,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
}

impl Ipv4 {
    const H: &'static str = "ipv4";

    pub fn new(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, dscp: u8) -> Self {
        Self {
            ihl: 5,
            dscp,
            ecn: 0,
            total_length: 0,
            identification: 0,
            flags: 2,
            fragment_offset: 0,
            ttl: 64,
            protocol,
            checksum: 0,
            src,
            dst,
        }
    }

    /// Parses the header and returns the payload, bounded by Total Length when the buffer is
    /// longer (Ethernet padding) and left as is when shorter (truncated capture).
    #[inline]
    pub fn parse(b: Bytes<'_>) -> Result<(Self, Bytes<'_>)> {
        let a = b.array::<20>(Self::H, "version")?;
        if a[0] >> 4 != 4 {
            return Err(WireError::new(
                Self::H,
                "version",
                b.offset(),
                ErrorKind::BadVersion { found: a[0] >> 4 },
            ));
        }
        let ihl = a[0] & 0x0F;
        if ihl < 5 {
            return Err(WireError::new(
                Self::H,
                "ihl",
                b.offset(),
                ErrorKind::BadLength {
                    value: ihl.into(),
                    expected: ">= 5 words",
                },
            ));
        }
        let h = Self {
            ihl,
            dscp: a[1] >> 2,
            ecn: a[1] & 3,
            total_length: be16(a, 2),
            identification: be16(a, 4),
            flags: a[6] >> 5,
            fragment_offset: be16(a, 6) & 0x1FFF,
            ttl: a[8],
            protocol: a[9],
            checksum: be16(a, 10),
            src: Ipv4Addr::new(a[12], a[13], a[14], a[15]),
            dst: Ipv4Addr::new(a[16], a[17], a[18], a[19]),
        };
        let hl = usize::from(ihl) * 4;
        let payload = b.skip(hl, Self::H, "options")?;
        let total = usize::from(h.total_length);
        let payload = if total >= hl {
            payload.prefix(total - hl)
        } else {
            payload
        };
        Ok((h, payload))
    }

    /// Writes a 20-byte header for `payload_len` bytes, with a correct checksum.
    pub fn write(&self, payload_len: usize, out: &mut Vec<u8>) {
        let start = out.len();
        out.push(0x45);
        out.push((self.dscp << 2) | (self.ecn & 3));
        out.extend_from_slice(&((20 + payload_len) as u16).to_be_bytes());
        out.extend_from_slice(&self.identification.to_be_bytes());
        out.extend_from_slice(
            &((u16::from(self.flags) << 13) | (self.fragment_offset & 0x1FFF)).to_be_bytes(),
        );
        out.push(self.ttl);
        out.push(self.protocol);
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.src.octets());
        out.extend_from_slice(&self.dst.octets());
        let sum = checksum(&out[start..start + 20]);
        out[start + 10..start + 12].copy_from_slice(&sum.to_be_bytes());
    }
}

/// RFC 1071 Internet checksum.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in data.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Ipv6 {
    pub traffic_class: u8,
    pub flow_label: u32,
    pub payload_length: u16,
    /// The Next Header of the fixed header.
    pub next_header: u8,
    /// The upper-layer protocol after any extension headers.
    pub protocol: u8,
    pub hop_limit: u8,
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
}

impl Ipv6 {
    const H: &'static str = "ipv6";

    pub fn new(src: Ipv6Addr, dst: Ipv6Addr, protocol: u8, dscp: u8) -> Self {
        Self {
            traffic_class: dscp << 2,
            flow_label: 0,
            payload_length: 0,
            next_header: protocol,
            protocol,
            hop_limit: 64,
            src,
            dst,
        }
    }

    pub fn dscp(&self) -> u8 {
        self.traffic_class >> 2
    }

    #[inline]
    pub fn parse(b: Bytes<'_>) -> Result<(Self, Bytes<'_>)> {
        let a = b.array::<40>(Self::H, "version")?;
        if a[0] >> 4 != 6 {
            return Err(WireError::new(
                Self::H,
                "version",
                b.offset(),
                ErrorKind::BadVersion { found: a[0] >> 4 },
            ));
        }
        let word = be32(a, 0);
        let src: [u8; 16] = a[8..24].try_into().unwrap_or_default();
        let dst: [u8; 16] = a[24..40].try_into().unwrap_or_default();
        let mut h = Self {
            traffic_class: ((word >> 20) & 0xFF) as u8,
            flow_label: word & 0xF_FFFF,
            payload_length: be16(a, 4),
            next_header: a[6],
            protocol: a[6],
            hop_limit: a[7],
            src: Ipv6Addr::from(src),
            dst: Ipv6Addr::from(dst),
        };
        let mut rest = b
            .skip(40, Self::H, "addresses")?
            .prefix(h.payload_length.into());
        // Walk extension headers: hop-by-hop, routing, fragment, destination options.
        while matches!(h.protocol, 0 | 43 | 44 | 60) {
            let e = rest.array::<2>("ipv6_extension", "next_header")?;
            let len = if h.protocol == 44 {
                8
            } else {
                (usize::from(e[1]) + 1) * 8
            };
            h.protocol = e[0];
            rest = rest.skip(len, "ipv6_extension", "length")?;
        }
        Ok((h, rest))
    }

    pub fn write(&self, payload_len: usize, out: &mut Vec<u8>) {
        let word = (6u32 << 28) | (u32::from(self.traffic_class) << 20) | self.flow_label;
        out.extend_from_slice(&word.to_be_bytes());
        out.extend_from_slice(&(payload_len as u16).to_be_bytes());
        out.push(self.protocol);
        out.push(self.hop_limit);
        out.extend_from_slice(&self.src.octets());
        out.extend_from_slice(&self.dst.octets());
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Udp {
    pub src_port: u16,
    pub dst_port: u16,
    pub length: u16,
    pub checksum: u16,
}

impl Udp {
    pub const LEN: usize = 8;
    const H: &'static str = "udp";

    /// Parses the header; the payload is bounded by the UDP Length when the buffer is longer.
    #[inline]
    pub fn parse(b: Bytes<'_>) -> Result<(Self, Bytes<'_>)> {
        let a = b.array::<8>(Self::H, "src_port")?;
        let h = Self {
            src_port: be16(a, 0),
            dst_port: be16(a, 2),
            length: be16(a, 4),
            checksum: be16(a, 6),
        };
        let rest = b.skip(8, Self::H, "checksum")?;
        let len = usize::from(h.length);
        if len < 8 {
            return Err(WireError::new(
                Self::H,
                "length",
                b.offset() + 4,
                ErrorKind::BadLength {
                    value: len,
                    expected: ">= 8",
                },
            ));
        }
        Ok((h, rest.prefix(len - 8)))
    }

    pub fn write(&self, payload_len: usize, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.src_port.to_be_bytes());
        out.extend_from_slice(&self.dst_port.to_be_bytes());
        out.extend_from_slice(&((8 + payload_len) as u16).to_be_bytes());
        out.extend_from_slice(&self.checksum.to_be_bytes());
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Tcp {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub data_offset: u8,
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::json::hex8"))]
    pub flags: u8,
    pub window: u16,
}

impl Tcp {
    const H: &'static str = "tcp";

    #[inline]
    pub fn parse(b: Bytes<'_>) -> Result<(Self, Bytes<'_>)> {
        let a = b.array::<20>(Self::H, "src_port")?;
        let h = Self {
            src_port: be16(a, 0),
            dst_port: be16(a, 2),
            seq: be32(a, 4),
            ack: be32(a, 8),
            data_offset: a[12] >> 4,
            flags: a[13],
            window: be16(a, 14),
        };
        if h.data_offset < 5 {
            return Err(WireError::new(
                Self::H,
                "data_offset",
                b.offset() + 12,
                ErrorKind::BadLength {
                    value: h.data_offset.into(),
                    expected: ">= 5 words",
                },
            ));
        }
        let rest = b.skip(usize::from(h.data_offset) * 4, Self::H, "options")?;
        Ok((h, rest))
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.src_port.to_be_bytes());
        out.extend_from_slice(&self.dst_port.to_be_bytes());
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.extend_from_slice(&self.ack.to_be_bytes());
        out.push(5 << 4);
        out.push(self.flags);
        out.extend_from_slice(&self.window.to_be_bytes());
        out.extend_from_slice(&[0, 0, 0, 0]);
    }
}

/// GRE (RFC 2784/2890): checksum, key and sequence present per the C/K/S bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Gre {
    pub checksum_present: bool,
    pub key_present: bool,
    pub sequence_present: bool,
    pub version: u8,
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::json::hex16"))]
    pub protocol: u16,
}

impl Gre {
    #[inline]
    pub fn parse(b: Bytes<'_>) -> Result<(Self, Bytes<'_>)> {
        let a = b.array::<4>("gre", "flags")?;
        let h = Self {
            checksum_present: a[0] & 0x80 != 0,
            key_present: a[0] & 0x20 != 0,
            sequence_present: a[0] & 0x10 != 0,
            version: a[1] & 7,
            protocol: be16(a, 2),
        };
        let opt = 4
            * (usize::from(h.checksum_present)
                + usize::from(h.key_present)
                + usize::from(h.sequence_present));
        Ok((h, b.skip(4 + opt, "gre", "options")?))
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[0, self.version & 7]);
        out.extend_from_slice(&self.protocol.to_be_bytes());
    }
}

/// VXLAN (RFC 7348) and VXLAN-GPE share 8 bytes; GPE adds a next-protocol byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Vxlan {
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::json::hex8"))]
    pub flags: u8,
    /// VXLAN-GPE only: 1 IPv4, 2 IPv6, 3 Ethernet, 0x82 INT (v2), 0x08 INT (v1.0).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub next_protocol: Option<u8>,
    pub vni: u32,
}

impl Vxlan {
    pub const LEN: usize = 8;

    pub fn parse(b: Bytes<'_>, gpe: bool) -> Result<(Self, Bytes<'_>)> {
        let a = b.array::<8>(if gpe { "vxlan_gpe" } else { "vxlan" }, "flags")?;
        let h = Self {
            flags: a[0],
            next_protocol: gpe.then_some(a[3]),
            vni: be24(a, 4),
        };
        Ok((h, b.skip(8, "vxlan", "vni")?))
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[self.flags, 0, 0, self.next_protocol.unwrap_or(0)]);
        out.extend_from_slice(&(self.vni << 8).to_be_bytes());
    }
}

/// Geneve (RFC 8926) base header; options are walked by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Geneve {
    pub version: u8,
    /// Words of options.
    pub options_length: u8,
    pub oam: bool,
    pub critical: bool,
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::json::hex16"))]
    pub protocol: u16,
    pub vni: u32,
}

impl Geneve {
    pub const LEN: usize = 8;

    /// Returns the header, its options, and the payload.
    pub fn parse(b: Bytes<'_>) -> Result<(Self, Bytes<'_>, Bytes<'_>)> {
        let a = b.array::<8>("geneve", "version")?;
        let h = Self {
            version: a[0] >> 6,
            options_length: a[0] & 0x3F,
            oam: a[1] & 0x80 != 0,
            critical: a[1] & 0x40 != 0,
            protocol: be16(a, 2),
            vni: be24(a, 4),
        };
        if h.version != 0 {
            return Err(WireError::new(
                "geneve",
                "version",
                b.offset(),
                ErrorKind::BadVersion { found: h.version },
            ));
        }
        let rest = b.skip(8, "geneve", "vni")?;
        let (opts, payload) = rest.split(usize::from(h.options_length) * 4, "geneve", "options")?;
        Ok((h, opts, payload))
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.push((self.version << 6) | (self.options_length & 0x3F));
        out.push((u8::from(self.oam) << 7) | (u8::from(self.critical) << 6));
        out.extend_from_slice(&self.protocol.to_be_bytes());
        out.extend_from_slice(&(self.vni << 8).to_be_bytes());
    }
}

/// One Geneve option TLV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GeneveOption {
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::json::hex16"))]
    pub class: u16,
    pub option_type: u8,
    /// Words of option data (excluding the 4-byte option header).
    pub length: u8,
}

impl GeneveOption {
    /// Splits the next option off `b`: (option header, its data, remaining options).
    pub fn next<'a>(b: Bytes<'a>) -> Result<(Self, Bytes<'a>, Bytes<'a>)> {
        let a = b.array::<4>("geneve_option", "class")?;
        let o = Self {
            class: be16(a, 0),
            option_type: a[2],
            length: a[3] & 0x1F,
        };
        let rest = b.skip(4, "geneve_option", "length")?;
        let (data, rest) = rest.split(usize::from(o.length) * 4, "geneve_option", "data")?;
        Ok((o, data, rest))
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.class.to_be_bytes());
        out.push(self.option_type);
        out.push(self.length & 0x1F);
    }
}
