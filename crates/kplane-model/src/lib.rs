//! The normalised records every kplane service exchanges, and their Arrow schemas.
//!
//! This crate is the single owner of the record types: the wire decoder fills them, the
//! collector batches them, the stream processor queries them. Nobody else redefines them.

#[cfg(feature = "arrow")]
pub mod batch;
mod envelope;
mod event;
mod flow;
mod hop;
mod record;
pub mod schema;

pub use envelope::{ReportEnvelope, ReportFlags, ReportFormat};
pub use event::{Detector, EventKind, EventRow, Metric};
pub use flow::{FlowKey, ip_from_16, ip_to_16};
pub use hop::{HopField, HopRecord};
pub use record::{MAX_HOPS, ReportRecord};
