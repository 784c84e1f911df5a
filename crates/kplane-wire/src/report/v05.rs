//! Telemetry Report v0.5: fixed header, optional drop / switch-local header, Ethernet frame.

use crate::bytes::{Bytes, be16, be24, be32};
use crate::error::{ErrorKind, Result, WireError};
use crate::opts::DecodeOptions;
use crate::packet::{Packet, Start};

/// `Ver(4) NProto(4) | D Q F Reserved(15) hw_id(6) | Sequence | Ingress Timestamp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct FixedHeaderV05 {
    pub version: u8,
    /// 0 = Ethernet, 1 = drop report, 2 = switch-local report.
    pub next_proto: u8,
    pub dropped: bool,
    pub congested_queue: bool,
    pub tracked_flow: bool,
    pub hw_id: u8,
    pub sequence: u32,
    pub ingress_timestamp: u32,
}

impl FixedHeaderV05 {
    pub const LEN: usize = 12;

    pub fn parse(b: Bytes<'_>) -> Result<Self> {
        let a = b.array::<12>("tr_v0.5_fixed", "version")?;
        Ok(Self {
            version: a[0] >> 4,
            next_proto: a[0] & 0x0F,
            dropped: a[1] & 0x80 != 0,
            congested_queue: a[1] & 0x40 != 0,
            tracked_flow: a[1] & 0x20 != 0,
            hw_id: a[3] & 0x3F,
            sequence: be32(a, 4),
            ingress_timestamp: be32(a, 8),
        })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.push((self.version << 4) | (self.next_proto & 0x0F));
        out.push(
            (u8::from(self.dropped) << 7)
                | (u8::from(self.congested_queue) << 6)
                | (u8::from(self.tracked_flow) << 5),
        );
        out.push(0);
        out.push(self.hw_id & 0x3F);
        out.extend_from_slice(&self.sequence.to_be_bytes());
        out.extend_from_slice(&self.ingress_timestamp.to_be_bytes());
    }
}

/// Drop report header (12 B).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DropHeaderV05 {
    pub switch_id: u32,
    pub ingress_port: u16,
    pub egress_port: u16,
    pub queue_id: u8,
    pub drop_reason: u8,
}

impl DropHeaderV05 {
    pub const LEN: usize = 12;

    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.switch_id.to_be_bytes());
        out.extend_from_slice(&self.ingress_port.to_be_bytes());
        out.extend_from_slice(&self.egress_port.to_be_bytes());
        out.extend_from_slice(&[self.queue_id, self.drop_reason, 0, 0]);
    }
}

/// Switch-local report header (16 B).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LocalHeaderV05 {
    pub switch_id: u32,
    pub ingress_port: u16,
    pub egress_port: u16,
    pub queue_id: u8,
    pub queue_occupancy: u32,
    pub egress_timestamp: u32,
}

impl LocalHeaderV05 {
    pub const LEN: usize = 16;

    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.switch_id.to_be_bytes());
        out.extend_from_slice(&self.ingress_port.to_be_bytes());
        out.extend_from_slice(&self.egress_port.to_be_bytes());
        out.push(self.queue_id);
        out.extend_from_slice(&self.queue_occupancy.to_be_bytes()[1..]);
        out.extend_from_slice(&self.egress_timestamp.to_be_bytes());
    }
}

#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ReportV05<'a> {
    pub fixed: FixedHeaderV05,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub drop: Option<DropHeaderV05>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub local: Option<LocalHeaderV05>,
    /// The (possibly truncated) original frame.
    pub inner: Packet<'a>,
}

impl<'a> ReportV05<'a> {
    pub fn parse(b: Bytes<'a>, opts: &DecodeOptions) -> Result<Self> {
        let fixed = FixedHeaderV05::parse(b)?;
        let mut rest = b.skip(FixedHeaderV05::LEN, "tr_v0.5_fixed", "timestamp")?;
        let (mut drop, mut local) = (None, None);
        match fixed.next_proto {
            0 => {}
            1 => {
                let a = rest.array::<12>("tr_v0.5_drop", "switch_id")?;
                drop = Some(DropHeaderV05 {
                    switch_id: be32(a, 0),
                    ingress_port: be16(a, 4),
                    egress_port: be16(a, 6),
                    queue_id: a[8],
                    drop_reason: a[9],
                });
                rest = rest.skip(DropHeaderV05::LEN, "tr_v0.5_drop", "pad")?;
            }
            2 => {
                let a = rest.array::<16>("tr_v0.5_local", "switch_id")?;
                local = Some(LocalHeaderV05 {
                    switch_id: be32(a, 0),
                    ingress_port: be16(a, 4),
                    egress_port: be16(a, 6),
                    queue_id: a[8],
                    queue_occupancy: be24(a, 9),
                    egress_timestamp: be32(a, 12),
                });
                rest = rest.skip(LocalHeaderV05::LEN, "tr_v0.5_local", "egress_ts")?;
            }
            other => {
                return Err(WireError::new(
                    "tr_v0.5_fixed",
                    "next_proto",
                    b.offset(),
                    ErrorKind::Unsupported {
                        value: other.into(),
                    },
                ));
            }
        }
        let inner = Packet::parse(rest, Start::Ethernet, opts)?;
        Ok(Self {
            fixed,
            drop,
            local,
            inner,
        })
    }
}
