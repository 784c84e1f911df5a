use std::fmt;

/// Configuration could not be loaded or is invalid. Carries *every* problem found.
#[derive(Debug)]
pub struct ConfigError {
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "invalid configuration ({} problem(s)):",
            self.problems.len()
        )?;
        for p in &self.problems {
            writeln!(f, "  - {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot bind the admin listener on {addr}: {source}")]
    AdminBind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("admin server failed: {0}")]
    AdminServe(std::io::Error),
    #[error("cannot install the logger: {0}")]
    Logging(String),
}

impl RuntimeError {
    /// Whether starting again later may succeed: an admin address still held by a process
    /// that is stopping may be free then; a logger that cannot be installed will not be.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::AdminBind { source, .. } if source.kind() == std::io::ErrorKind::AddrInUse)
    }
}

impl ConfigError {
    /// Never: the configuration has to change.
    pub fn is_retryable(&self) -> bool {
        false
    }
}
