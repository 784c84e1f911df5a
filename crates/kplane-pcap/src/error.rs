//! The crate's one error type.

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not a pcap or pcapng file (magic {magic:#010x})")]
    NotACapture { path: String, magic: u32 },
    #[error("{path}: {source}")]
    Format {
        path: String,
        source: pcap_file::PcapError,
    },
    #[error("cannot write capture: {0}")]
    Write(String),
}

impl CaptureError {
    /// Never: a capture that cannot be opened, read or written needs another file or disk.
    pub fn is_retryable(&self) -> bool {
        false
    }
}
