/// What went wrong talking to a switch. [`P4rtError::is_retryable`] tells a transient
/// failure (the switch is unreachable, busy, or was restarted) from one that repeating the
/// same request cannot fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum P4rtError {
    #[error("{addr}: cannot connect: {message}")]
    Connect { addr: String, message: String },
    #[error("{addr}: not the primary controller of device {device_id}: {message}")]
    NotPrimary {
        addr: String,
        device_id: u64,
        message: String,
    },
    #[error("{addr}: {rpc} failed: {code}: {message}")]
    Rpc {
        addr: String,
        rpc: &'static str,
        code: String,
        message: String,
        retryable: bool,
    },
    /// A Write in which some updates failed; `failed` holds (update index, error message).
    #[error("{addr}: {} of {total} updates failed: {}", failed.len(), describe(failed))]
    Write {
        addr: String,
        total: usize,
        failed: Vec<(usize, String)>,
    },
    #[error("{addr}: the switch answered something kplane's P4Info cannot type: {message}")]
    Mismatch { addr: String, message: String },
}

fn describe(failed: &[(usize, String)]) -> String {
    failed
        .iter()
        .take(3)
        .map(|(i, m)| format!("#{i}: {m}"))
        .collect::<Vec<_>>()
        .join("; ")
}

impl P4rtError {
    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Connect { .. } | Self::NotPrimary { .. } => true,
            Self::Rpc { retryable, .. } => *retryable,
            Self::Write { .. } | Self::Mismatch { .. } => false,
        }
    }

    pub(crate) fn rpc(addr: &str, rpc: &'static str, s: &tonic::Status) -> Self {
        use tonic::Code;
        Self::Rpc {
            addr: addr.to_string(),
            rpc,
            code: format!("{:?}", s.code()),
            message: s.message().to_string(),
            retryable: matches!(
                s.code(),
                Code::Unavailable
                    | Code::DeadlineExceeded
                    | Code::ResourceExhausted
                    | Code::Aborted
                    | Code::Unknown
                    | Code::FailedPrecondition
                    | Code::PermissionDenied
            ),
        }
    }
}
