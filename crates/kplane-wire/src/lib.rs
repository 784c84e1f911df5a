//! # kplane-wire
//!
//! Zero-copy decoders — and builders — for every INT telemetry format kplane handles
//! (see `docs/wire-formats.md`):
//!
//! * Telemetry Report v0.5, v1.0 and v2.0 ([`report`]);
//! * embedded INT v0.5, v1.0 and v2.0/v2.1 INT-MD / INT-MX over TCP, UDP, GRE, VXLAN-GPE and
//!   Geneve, found by DSCP, L4 port or encapsulation ([`packet`], [`int`]);
//! * the seed papers' formats: KDN INT-over-UDP, GPINT probes, INT-label ([`papers`]).
//!
//! Decoding never panics and never allocates per report: headers are small `Copy` structs,
//! stacks are views over the buffer, and [`Decoder`] fills a reused [`ReportRecord`].
//! Errors ([`WireError`]) name the header, the field and the byte offset.
//!
//! [`ReportRecord`]: kplane_model::ReportRecord

pub mod build;
mod bytes;
mod error;
mod fast;
pub mod frame;
pub mod fuzzing;
pub mod int;
#[cfg(feature = "serde")]
mod json;
pub mod layers;
mod meta;
mod normalize;
pub mod opts;
pub mod packet;
pub mod papers;
pub mod report;
pub mod samples;

pub use bytes::Bytes;
pub use error::{ErrorKind, Result, WireError};
pub use frame::{Decoded, decode_frame};
pub use normalize::{DecodeOutcome, Decoder, RecordMeta, RecordSink};
pub use opts::{DecodeOptions, DscpMatch};
pub use packet::{Packet, Start};
pub use report::TelemetryReport;
