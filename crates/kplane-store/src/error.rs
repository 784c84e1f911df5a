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
    #[error("object store: {0}")]
    Object(#[from] object_store::Error),
    /// A store location or setting that cannot work.
    #[error("store configuration: {0}")]
    Config(String),
    /// A store file to repair or remove; the message says how.
    #[error("{path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

impl StoreError {
    pub fn is_retryable(&self) -> bool {
        use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
        match self {
            Self::Io(e) => matches!(e.kind(), Interrupted | TimedOut | WouldBlock),
            // The client has retried with backoff already; an HTTP or connection failure left
            // may still clear (a restarting endpoint), a refusal will not.
            Self::Object(e) => matches!(e, object_store::Error::Generic { .. }),
            _ => false,
        }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
