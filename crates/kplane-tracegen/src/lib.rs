//! # kplane-tracegen
//!
//! A second source of telemetry for evaluating kplane on traffic it did not generate. It
//! shares no code with `kplane-emulator` (nor with the collector's decoders): the fabric, the
//! flow model, the queue model and the byte layout are written here from the specifications
//! (Telemetry Report v2.0, INT-MD v2.1; `../shared/FORMATS.md` §3 and §6).
//!
//! * [`fabric`]: a three-tier fabric (edge, aggregation, core) with ECMP paths that avoid
//!   failed links.
//! * [`traffic`]: background flows (Poisson arrivals, Pareto sizes, hosts of unequal weight)
//!   and the scripted events: a DDoS from spoofed sources, a port scan, a link failure, an
//!   incast, and benign load (a flash crowd of fetches, a heavy hitter's copies).
//! * [`encode`]: the Telemetry Report bytes a sink sends for one packet.
//! * [`run`]: the time loop (a fluid queue per egress port, 1 ms steps, shorter on links over 1 Gb/s), UDP out, and the
//!   ground truth.
//!
//! What differs from the emulator on purpose: addresses (172.16.0.0/12), node ids (edges
//! 1…, aggregation 101…, core 201…), a heavy-tailed flow size, hosts of unequal popularity, a
//! fluid rather than per-packet queue, INT carried after a new UDP header (NPT 2, port
//! 0x4568) rather than flagged by DSCP, the inner packet as IPv4 (InType 4) rather than
//! Ethernet, and spoofed DDoS sources.

pub mod encode;
mod error;
pub mod fabric;
pub mod run;
pub mod traffic;

pub use error::TracegenError;
