//! The lab's one error type.

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A topology that cannot be built (bad file, unknown switch, a port used twice).
    #[error("topology: {0}")]
    Topology(String),
    /// A command that sets up the fabric failed (`ip`, `simple_switch_grpc`).
    #[error("{command}: {message}")]
    Command { command: String, message: String },
    /// What the lab needs is missing here (root, BMv2).
    #[error("{0}")]
    Missing(String),
    /// Another lab on this host holds what this one needs (its collector address).
    #[error("{0}")]
    Clash(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl LabError {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }

    /// Whether trying again can help: never for a bad topology or a missing tool; a failed
    /// command (an interface still being deleted) may pass on the next try.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Command { .. })
    }
}

pub type Result<T> = std::result::Result<T, LabError>;
