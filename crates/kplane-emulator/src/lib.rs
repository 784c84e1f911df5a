//! # kplane-emulator
//!
//! A discrete-event emulator of a P4 INT fabric (see `docs/emulator.md` and `p4/`).

pub mod report;
pub mod rng;
pub mod sim;
pub mod routing;
pub mod scenario;
pub mod tables;
pub mod topology;
pub mod traffic;
