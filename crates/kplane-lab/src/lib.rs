//! `kplane lab`: a fabric of BMv2 `simple_switch_grpc` switches in network namespaces.
//!
//! * [`topology`]: the fabric (leaf-spine by default, or a topology file) and its shortest-path
//!   routes;
//! * [`net`]: namespaces, veth pairs, and the clean-up that finds them by name after a crash;
//! * [`switch`]: the switch processes;
//! * [`traffic`]: hosts sending real packets (Poisson flows of mice and elephants) and
//!   scripted attacks with their ground truth;
//! * [`lab`]: all of it up, and the P4Runtime driver configuration that provisions it.
//!
//! Needs root and the P4 toolchain (`../shared/p4-toolchain/install.sh`).

pub mod error;
pub mod lab;
pub mod net;
pub mod switch;
pub mod topology;
pub mod traffic;

pub use error::{LabError, Result};
pub use lab::{Lab, LabSpec};
pub use topology::Topology;
