//! INT-label in the control plane (int-label-distributed-labeling): the ports the
//! processor's `int_label` windows tell of ([`ports`]), Pro's controller (Algo. 3, [`pro`])
//! that turns ports not heard from into `label-frequency` intents ([`controller`]), and the
//! routes ([`routes`]). Labelling itself is configured by `int-label` intents
//! (docs/int-label.md).

pub mod controller;
pub mod ports;
pub mod pro;
pub mod routes;

pub use controller::ProControllerConfig;
pub use ports::LabelPorts;
