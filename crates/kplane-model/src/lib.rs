//! The normalised records every kplane service exchanges, and their Arrow schemas.
//!
//! This crate is the single owner of the record types: the wire decoder fills them, the
//! collector batches them, the stream processor queries them. Nobody else redefines them.

#[cfg(feature = "arrow")]
pub mod batch;
pub mod detection;
mod envelope;
mod error;
mod event;
mod flow;
mod hint;
mod hop;
pub mod id_table;
pub mod incidents;
#[cfg(feature = "arrow")]
pub mod knowledge_tables;
mod record;
pub mod results;
pub mod rng;
pub mod schema;

pub use envelope::{ReportEnvelope, ReportFlags, ReportFormat};
pub use error::ParseError;
pub use event::{Detector, EventKind, EventRow, Metric};
pub use flow::{FlowHashKey, FlowKey, ip_from_16, ip_to_16};
pub use hop::{HopField, HopRecord};
pub use record::{MAX_HOPS, ReportRecord};

/// Wall-clock time, ns since the Unix epoch: the clock of every receive time (`received_ns`)
/// and bus timestamp kplane writes.
pub fn unix_time_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
