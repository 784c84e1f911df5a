//! The store's one error type.

use std::path::PathBuf;

/// Everything reading or writing the store can fail with. [`StoreError::is_retryable`] tells
/// a condition that may clear by itself (an interrupted or timed-out write) from one that
/// needs a change: a damaged file, a schema mismatch, a bug.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store: {0}")]
    Io(#[from] std::io::Error),
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    #[cfg(feature = "query")]
    #[error("query: {0}")]
    Query(#[from] datafusion::error::DataFusionError),
    /// A store file to repair or remove; the message says how.
    #[error("{path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

impl StoreError {
    pub fn is_retryable(&self) -> bool {
        use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
        matches!(self, Self::Io(e) if matches!(e.kind(), Interrupted | TimedOut | WouldBlock))
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
