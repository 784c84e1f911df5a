//! The emulator's one error type.

/// Everything the emulator refuses or fails at. Only a socket error the OS calls transient is
/// worth trying again ([`EmulatorError::is_retryable`]); the rest need other input.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error(
        "unknown topology {0:?} (fat-tree:K, leaf-spine:S,L,H, watts-strogatz:N,K,P[,SEED], or a .toml file)"
    )]
    UnknownTopology(String),
    #[error("bad topology parameter: {0}")]
    TopologyParameter(String),
    #[error("topology file {path}: {reason}")]
    TopologyFile { path: String, reason: String },
    #[error("scenario: {0}")]
    Scenario(String),
    /// A table entry that does not fit the P4 program.
    #[error(transparent)]
    Entry(#[from] kplane_p4::P4Error),
    #[error("table {0} is not emulated")]
    NotEmulated(String),
    #[error("{0}: the entry already exists")]
    EntryExists(String),
    #[error("{table}: no such entry to {action}")]
    NoSuchEntry { table: String, action: &'static str },
    #[error("cannot open a UDP socket: {0}")]
    Socket(std::io::Error),
    #[error("cannot write the ground truth to {path}: {source}")]
    Truth {
        path: String,
        source: std::io::Error,
    },
}

impl EmulatorError {
    pub fn is_retryable(&self) -> bool {
        use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
        matches!(self, Self::Socket(e) if matches!(e.kind(), Interrupted | TimedOut | WouldBlock))
    }
}
