//! The knowledge service's one error type.

use std::path::PathBuf;

/// Everything the knowledge service can fail with. [`KnowledgeError::is_retryable`] tells a
/// condition that may clear by itself (not enough history yet, an interrupted read) from
/// one that needs a change: configuration, a damaged state file.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    /// A setting that names nothing kplane has (a detector, say).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// No model could be fitted on what there is (too little history, a degenerate sample):
    /// more history may do.
    #[error("training: {0}")]
    Training(String),
    /// A saved model, registry or labelled set to repair or remove; the message says what.
    #[error("{path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    /// A saved model this version cannot load (trained with other features or a detector it
    /// does not have): it is trained afresh.
    #[error("saved model: {0}")]
    Incompatible(String),
    #[error("state: {0}")]
    Io(#[from] std::io::Error),
}

impl KnowledgeError {
    pub fn is_retryable(&self) -> bool {
        use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
        match self {
            Self::Training(_) => true,
            Self::Io(e) => matches!(e.kind(), Interrupted | TimedOut | WouldBlock),
            Self::Config(_) | Self::Corrupt { .. } | Self::Incompatible(_) => false,
        }
    }
}
