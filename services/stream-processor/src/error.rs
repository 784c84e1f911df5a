//! The stream processor's one error type.

use std::path::PathBuf;

use kplane_bus::BusError;

/// Everything the stream processor can fail with. [`ProcessorError::is_retryable`] tells a
/// condition that may clear by itself (a full bus, an unreachable broker, an interrupted
/// write) from one that needs a change: configuration, a damaged store, a bug.
#[derive(Debug, thiserror::Error)]
pub enum ProcessorError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("store: {0}")]
    Io(#[from] std::io::Error),
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    #[error("query: {0}")]
    Query(#[from] datafusion::error::DataFusionError),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// A store file to repair or remove before the processor can resume; the message says how.
    #[error("{path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    /// A message or saved state that does not decode.
    #[error("{0}")]
    Undecodable(String),
    #[error("bus: {0}")]
    Bus(#[from] BusError),
    #[error(transparent)]
    Kafka(#[from] kplane_bus::kafka::KafkaBusError),
    /// The store's layout, writer, compaction or read side.
    #[error(transparent)]
    Store(#[from] kplane_store::StoreError),
}

impl ProcessorError {
    pub fn is_retryable(&self) -> bool {
        use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
        match self {
            Self::Io(e) => matches!(e.kind(), Interrupted | TimedOut | WouldBlock),
            Self::Bus(e) => e.is_retryable(),
            Self::Store(e) => e.is_retryable(),
            Self::Kafka(kplane_bus::kafka::KafkaBusError::Client(_)) => true,
            _ => false,
        }
    }
}
