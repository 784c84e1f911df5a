//! # kplane-emulator
//!
//! A discrete-event emulator of a P4 INT fabric (see `docs/emulator.md` and `p4/`).

pub mod control;
pub mod detect;
mod error;
pub mod hop;
pub mod label;
pub mod probe;
pub mod report;
pub mod routing;
pub mod run;
pub mod scenario;
pub mod sim;
pub mod tables;
pub mod topology;
pub mod traffic;

pub use error::EmulatorError;
