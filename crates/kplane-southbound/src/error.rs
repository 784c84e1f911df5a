//! The crate's one error type.

/// Why a driver call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DriverError {
    pub message: String,
    /// Trying again later may succeed (unreachable, restarting, not primary).
    pub retryable: bool,
    /// Indices of the updates of a batch that the switch refused (the others were applied).
    pub failed: Vec<usize>,
}

impl DriverError {
    pub fn retryable(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retryable: true,
            failed: Vec::new(),
        }
    }

    pub fn fatal(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retryable: false,
            failed: Vec::new(),
        }
    }
}

impl DriverError {
    /// Whether trying again later may succeed (the switch was unreachable, restarting or
    /// had another primary controller).
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }
}
