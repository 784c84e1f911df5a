//! # kplane-p4runtime
//!
//! A P4Runtime v1 client over gRPC for kplane's switch driver: it becomes the primary
//! controller of a device (arbitration on the stream channel, kept open), pushes the
//! forwarding pipeline (P4Info + target config), writes batches of [`kplane_p4::Entry`]
//! (INSERT / MODIFY / DELETE), reads every table entry back, and programs clone sessions.
//! Messages are generated at build time from `proto/` (the P4Runtime specification's
//! messages, field numbers as there) by protox: no protoc to install.
//!
//! Only the intent API links this crate (tonic and prost stay out of the other services).

mod convert;
mod error;
mod session;

pub use convert::to_table_entry;
pub use error::P4rtError;
pub use session::{Pipeline, Session, SessionConfig, UpdateKind};

/// The generated messages and client (`p4.v1`, `google.rpc`).
pub mod proto {
    #[allow(clippy::all, missing_debug_implementations, missing_docs)]
    pub mod google {
        pub mod rpc {
            tonic::include_proto!("google.rpc");
        }
    }
    #[allow(clippy::all, missing_debug_implementations, missing_docs)]
    pub mod p4 {
        pub mod v1 {
            tonic::include_proto!("p4.v1");
        }
    }
    pub use p4::v1::*;
}
