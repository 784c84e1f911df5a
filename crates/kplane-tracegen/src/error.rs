/// What can go wrong: a bad fabric or scenario (fatal: fix the input), or the socket.
#[derive(Debug, thiserror::Error)]
pub enum TracegenError {
    #[error("fabric {0:?}: {1}")]
    Fabric(String, String),
    #[error("scenario {0:?}: {1}")]
    Scenario(String, String),
    #[error("socket: {0}")]
    Socket(#[from] std::io::Error),
}
