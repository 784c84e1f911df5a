//! The collector's one error type.

use std::net::SocketAddr;

use kplane_runtime::RuntimeError;

/// Everything the collector can fail with. [`CollectorError::is_retryable`] tells a condition
/// that may clear by itself (a port still held by a process going away) from one that needs a
/// change of configuration or code.
#[derive(Debug, thiserror::Error)]
pub enum CollectorError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// The `af-xdp` input could not be set up; `what` says which step and what to change.
    #[error("AF_XDP input on {interface}: {what}: {source}")]
    AfXdp {
        interface: String,
        what: String,
        source: std::io::Error,
    },
    #[error("cannot start the {0} thread: {1}")]
    Thread(&'static str, std::io::Error),
    #[error(transparent)]
    Admin(#[from] RuntimeError),
    #[error("the {0} thread panicked")]
    Panicked(&'static str),
    /// A batch that could not be encoded for the bus (Arrow IPC or JSON lines).
    #[error("encoding a batch: {0}")]
    Encode(String),
}

impl CollectorError {
    pub fn is_retryable(&self) -> bool {
        use std::io::ErrorKind::AddrInUse;
        match self {
            Self::Listen { source, .. } => source.kind() == AddrInUse,
            Self::Admin(RuntimeError::AdminBind { source, .. }) => source.kind() == AddrInUse,
            _ => false,
        }
    }
}

impl From<arrow_schema::ArrowError> for CollectorError {
    fn from(e: arrow_schema::ArrowError) -> Self {
        Self::Encode(e.to_string())
    }
}

impl From<serde_json::Error> for CollectorError {
    fn from(e: serde_json::Error) -> Self {
        Self::Encode(e.to_string())
    }
}
