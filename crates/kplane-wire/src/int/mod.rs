//! Embedded INT: headers of every version and the per-hop metadata stack.

mod hop;
mod stack;
pub mod v05;
pub mod v10;
pub mod v2;

pub use hop::decode_hop;
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
