//! # kplane-emulator
//!
//! A discrete-event emulator of a P4 INT fabric (see `docs/emulator.md` and `p4/`).

pub mod rng;
pub mod routing;
pub mod tables;
pub mod topology;
