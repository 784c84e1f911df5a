//! The probe crate's one error type.

/// What planning and probing can fail with. [`ProbeError::is_retryable`]: a socket that
/// could not be opened or written may work later; a bad graph or plan will not.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// A graph whose edges name nodes it does not have.
    #[error("graph: {0}")]
    Graph(String),
    /// A probe plan (`GET /v1/probe-plans`) that does not describe probes.
    #[error("probe plan: {0}")]
    Plan(String),
    #[error("probe network: {0}")]
    Io(#[from] std::io::Error),
}

impl ProbeError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Io(_))
    }
}
