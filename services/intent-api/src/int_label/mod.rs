//! INT-label in the control plane: Pro's controller ([`pro`]).

pub mod pro;
