//! # kplane probe
//!
//! Probe-based network-wide INT (`../shared/seeds/gpint-reliable-int-monitoring.txt`): the
//! paths that source-routed INT probes take so that together they visit every switch.
//! [`plan`] holds the planners — GPINT (§III-A) and the Euler / INT-Path baseline — over an
//! undirected [`Graph`] of switches; [`monitor`] the monitoring module that sends the probes
//! and recovers lost ones (§IV, Algorithms 1–2), and the SNMP-style polling baseline.

pub mod graph;
pub mod monitor;
pub mod plan;

pub use graph::Graph;
pub use plan::{PLANNERS, Plan, Planner};
