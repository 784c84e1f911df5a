//! Embedded INT: headers of every version and the per-hop metadata stack.

mod hop;
mod shuffle;
mod stack;
pub mod v05;
pub mod v10;
pub mod v2;

pub use hop::decode_hop;
pub(crate) use hop::{decode_report_metadata, push_hops};
pub(crate) use stack::exact_hops;
pub use stack::{HopStack, baseline_len, encode_hop, instruction_width};

/// INT specification generation. Field widths differ between them (4- vs 8-byte timestamps,
/// L2 interface ids, buffer, checksum complement).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum IntVersion {
    /// INT v0.5 (and the 2016 draft the KDN paper follows): every item 4 bytes.
    #[cfg_attr(feature = "serde", serde(rename = "0.5"))]
    V05,
    /// INT v1.0: 4-byte timestamps, 8-byte L2 port ids.
    #[cfg_attr(feature = "serde", serde(rename = "1.0"))]
    V10,
    /// INT v2.0 / v2.1: 8-byte timestamps, buffer id/occupancy.
    #[cfg_attr(feature = "serde", serde(rename = "2.x"))]
    V2,
}

impl IntVersion {
    /// The version for a monomorphised decoder's generation number (0, 1, 2).
    pub(crate) const fn from_generation(v: u8) -> Self {
        match v {
            0 => Self::V05,
            1 => Self::V10,
            _ => Self::V2,
        }
    }
}
