//! # kplane probe
//!
//! Probe-based network-wide INT (`../shared/seeds/gpint-reliable-int-monitoring.txt`): the
//! paths that source-routed INT probes take so that together they visit every switch.
//! [`plan`] holds the planners — GPINT (§III-A) and the Euler / INT-Path baseline — over an
//! undirected [`Graph`] of switches; [`monitor`] the monitoring module that sends the probes
//! and recovers lost ones (§IV, Algorithms 1–2), and the SNMP-style polling baseline;
//! [`wire_net`] the monitor's network on real switches (probes as Ethernet frames on
//! `AF_PACKET` sockets, [`packet_socket`]).

mod error;
pub mod graph;
pub mod monitor;
pub mod packet_socket;
pub mod plan;
pub mod wire_net;

pub use error::ProbeError;
pub use graph::Graph;
pub use plan::{PLANNERS, Plan, Planner};
