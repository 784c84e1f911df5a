//! What the receiver knows of a report besides its bytes.

use std::net::SocketAddr;

/// Where and when a report was received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordMeta {
    pub exporter: Option<SocketAddr>,
    pub received_ns: u64,
}
