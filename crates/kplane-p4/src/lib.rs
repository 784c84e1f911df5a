//! # kplane-p4
//!
//! The P4 program in `p4/` as data. [`P4Info`] is what p4c generates from `p4/kplane_int.p4`
//! (`make p4` writes `p4/build/kplane_int.p4info.json`); [`EntrySpec`] is a table entry as
//! people and the intent compiler write it (names and text values), and [`Entry`] the same
//! entry checked against the P4Info and put in canonical form (P4Runtime's rules: wildcards
//! omitted, value bits outside a mask or prefix zero, priorities only where a table needs
//! them), so two entries are the same entry exactly when their [`EntryKey`]s are equal.
//!
//! The emulator, the intent compiler and the P4Runtime driver all type entries with this
//! crate, so they cannot disagree about a table, a key width or an action parameter.

mod entry;
mod error;
mod p4info;
pub mod tx_util;

pub use entry::{Entry, EntryKey, EntrySpec, MatchValue, parse_match};
pub use error::P4Error;
pub use p4info::{ActionInfo, MatchField, MatchKind, P4Info, ParamInfo, TableInfo};

/// p4c's P4Info of `p4/kplane_int.p4` (JSON), as committed in `p4/build/`.
pub const KPLANE_P4INFO_JSON: &str = include_str!("../../../p4/build/kplane_int.p4info.json");
/// The same P4Info, serialized protobuf (what P4Runtime's SetForwardingPipelineConfig carries).
pub const KPLANE_P4INFO_BIN: &[u8] = include_bytes!("../../../p4/build/kplane_int.p4info.bin");
/// The BMv2 configuration p4c compiled from `p4/kplane_int.p4`.
pub const KPLANE_BMV2_JSON: &[u8] = include_bytes!("../../../p4/build/kplane_int.json");

/// The P4Info of kplane's program, parsed once.
pub fn kplane() -> &'static P4Info {
    static INFO: std::sync::LazyLock<P4Info> = std::sync::LazyLock::new(|| {
        P4Info::from_json(KPLANE_P4INFO_JSON).expect("p4/build/kplane_int.p4info.json parses")
    });
    &INFO
}

#[cfg(test)]
mod tests;
