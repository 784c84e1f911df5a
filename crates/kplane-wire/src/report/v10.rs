//! Telemetry Report v1.0: 16-byte header, RepMdBits optional words, inner packet per NProt.

use kplane_model::{HopField, HopRecord};

use crate::bytes::{Bytes, be16, be24, be32};
use crate::error::{ErrorKind, Result, WireError};
use crate::opts::DecodeOptions;
use crate::packet::{Packet, Start};

pub mod rep_md {
    //! RepMdBits (6 bits, bit 0 = MSB = mask 0x20).
    pub const PORT_IDS: u8 = 0x20;
    pub const HOP_LATENCY: u8 = 0x10;
    pub const QUEUE_OCCUPANCY: u8 = 0x08;
    pub const EGRESS_TIMESTAMP: u8 = 0x04;
    pub const QUEUE_DROP_REASON: u8 = 0x02;
    pub const TX_UTILIZATION: u8 = 0x01;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ReportHeaderV10 {
    pub version: u8,
    /// Header length in words including the optional metadata.
    pub length: u8,
    /// 0 = Ethernet, 1 = IPv4, 2 = IPv6.
    pub next_proto: u8,
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::json::hex8"))]
    pub rep_md_bits: u8,
    pub dropped: bool,
    pub congested_queue: bool,
    pub tracked_flow: bool,
    pub hw_id: u8,
    pub switch_id: u32,
    pub sequence: u32,
    pub ingress_timestamp: u32,
}

impl ReportHeaderV10 {
    pub const LEN: usize = 16;
    const H: &'static str = "tr_v1.0";

    pub fn write(&self, out: &mut Vec<u8>) {
        out.push((self.version << 4) | (self.length & 0x0F));
        out.push(((self.next_proto & 7) << 5) | ((self.rep_md_bits >> 1) & 0x1F));
        out.push(((self.rep_md_bits & 1) << 7) | u8::from(self.dropped));
        out.push(
            (u8::from(self.congested_queue) << 7)
                | (u8::from(self.tracked_flow) << 6)
                | (self.hw_id & 0x3F),
        );
        out.extend_from_slice(&self.switch_id.to_be_bytes());
        out.extend_from_slice(&self.sequence.to_be_bytes());
        out.extend_from_slice(&self.ingress_timestamp.to_be_bytes());
    }
}

#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ReportV10<'a> {
    pub header: ReportHeaderV10,
    /// The reporting switch's own metadata from the optional words.
    pub metadata: HopRecord,
    pub inner: Packet<'a>,
}

impl<'a> ReportV10<'a> {
    pub fn parse(b: Bytes<'a>, opts: &DecodeOptions) -> Result<Self> {
        let a = b.array::<16>(ReportHeaderV10::H, "version")?;
        let header = ReportHeaderV10 {
            version: a[0] >> 4,
            length: a[0] & 0x0F,
            next_proto: a[1] >> 5,
            rep_md_bits: ((a[1] & 0x1F) << 1) | (a[2] >> 7),
            dropped: a[2] & 0x01 != 0,
            congested_queue: a[3] & 0x80 != 0,
            tracked_flow: a[3] & 0x40 != 0,
            hw_id: a[3] & 0x3F,
            switch_id: be32(a, 4),
            sequence: be32(a, 8),
            ingress_timestamp: be32(a, 12),
        };
        let words = 4 + header.rep_md_bits.count_ones() as usize;
        if usize::from(header.length) != words {
            return Err(WireError::new(
                ReportHeaderV10::H,
                "length",
                b.offset(),
                ErrorKind::BadLength {
                    value: header.length.into(),
                    expected: "4 + one word per RepMdBits bit",
                },
            ));
        }
        let rest = b.skip(
            ReportHeaderV10::LEN,
            ReportHeaderV10::H,
            "ingress_timestamp",
        )?;
        let (md, rest) = rest.split((words - 4) * 4, ReportHeaderV10::H, "optional_metadata")?;
        let metadata = decode_rep_md(header.rep_md_bits, md.data());
        let start = match header.next_proto {
            0 => Start::Ethernet,
            1 => Start::Ipv4,
            2 => Start::Ipv6,
            other => {
                return Err(WireError::new(
                    ReportHeaderV10::H,
                    "next_proto",
                    b.offset() + 1,
                    ErrorKind::Unsupported {
                        value: other.into(),
                    },
                ));
            }
        };
        let inner = Packet::parse(rest, start, opts)?;
        Ok(Self {
            header,
            metadata,
            inner,
        })
    }
}

/// Decodes the optional words (length checked by the caller).
fn decode_rep_md(bits: u8, w: &[u8]) -> HopRecord {
    let mut h = HopRecord::default();
    let mut off = 0;
    for bit in [0x20u8, 0x10, 0x08, 0x04, 0x02, 0x01] {
        if bits & bit == 0 {
            continue;
        }
        match bit {
            rep_md::PORT_IDS => {
                h.set_raw(HopField::L1IngressPort, be16(w, off).into(), 16);
                h.set_raw(HopField::L1EgressPort, be16(w, off + 2).into(), 16);
            }
            rep_md::HOP_LATENCY => h.set_raw(HopField::HopLatency, be32(w, off).into(), 32),
            rep_md::QUEUE_OCCUPANCY => {
                h.set_raw(HopField::QueueId, w[off].into(), 8);
                h.set_raw(HopField::QueueOccupancy, be24(w, off + 1).into(), 24);
            }
            rep_md::EGRESS_TIMESTAMP => {
                h.set_raw(HopField::EgressTimestamp, be32(w, off).into(), 32)
            }
            rep_md::QUEUE_DROP_REASON => {
                h.set_raw(HopField::QueueId, w[off].into(), 8);
                h.set_raw(HopField::DropReason, w[off + 1].into(), 8);
            }
            _ => h.set_raw(HopField::TxUtilization, be32(w, off).into(), 32),
        }
        off += 4;
    }
    h
}

/// Writes the optional words for `bits` from `hop` (absent values as all-ones).
pub fn encode_rep_md(bits: u8, hop: &HopRecord, out: &mut Vec<u8>) {
    let g = |f: HopField, ones: u64| hop.get(f).unwrap_or(ones);
    for bit in [0x20u8, 0x10, 0x08, 0x04, 0x02, 0x01] {
        if bits & bit == 0 {
            continue;
        }
        match bit {
            rep_md::PORT_IDS => {
                out.extend_from_slice(&(g(HopField::L1IngressPort, 0xFFFF) as u16).to_be_bytes());
                out.extend_from_slice(&(g(HopField::L1EgressPort, 0xFFFF) as u16).to_be_bytes());
            }
            rep_md::HOP_LATENCY => {
                out.extend_from_slice(&(g(HopField::HopLatency, 0xFFFF_FFFF) as u32).to_be_bytes())
            }
            rep_md::QUEUE_OCCUPANCY => {
                let v = (g(HopField::QueueId, 0xFF) << 24) | g(HopField::QueueOccupancy, 0xFF_FFFF);
                out.extend_from_slice(&(v as u32).to_be_bytes());
            }
            rep_md::EGRESS_TIMESTAMP => out.extend_from_slice(
                &(g(HopField::EgressTimestamp, 0xFFFF_FFFF) as u32).to_be_bytes(),
            ),
            rep_md::QUEUE_DROP_REASON => {
                out.push(g(HopField::QueueId, 0xFF) as u8);
                out.push(g(HopField::DropReason, 0xFF) as u8);
                out.extend_from_slice(&[0, 0]);
            }
            _ => out
                .extend_from_slice(&(g(HopField::TxUtilization, 0xFFFF_FFFF) as u32).to_be_bytes()),
        }
    }
}
