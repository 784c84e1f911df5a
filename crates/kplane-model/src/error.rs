//! The crate's one error type.

/// Text that is not what it should be (a prefix, a port range, a protocol); the message
/// names the text and what was expected. Never retryable: the text must change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

impl ParseError {
    /// Never: the text has to change.
    pub fn is_retryable(&self) -> bool {
        false
    }
}
