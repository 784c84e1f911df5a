//! Where reports come from: UDP sockets (recvmmsg on dedicated threads), AF_XDP sockets
//! (an XDP program steering the telemetry ports, one thread per receive queue) or a capture
//! file.

pub mod af_xdp;
pub mod pcap;
pub mod udp;

use std::net::SocketAddr;

/// Datagrams received in one system call, copied into one buffer.
#[derive(Debug, Default)]
pub struct RecvBatch {
    pub data: Vec<u8>,
    /// (offset, length, source, truncated) per datagram.
    pub datagrams: Vec<(usize, usize, SocketAddr, bool)>,
    /// Receive time, ns since the Unix epoch (one clock read per batch).
    pub received_ns: u64,
}
