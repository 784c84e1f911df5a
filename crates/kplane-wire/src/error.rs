use std::fmt;

/// What went wrong while decoding, and where: the header, the field, and the byte offset
/// from the start of the buffer handed to the decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireError {
    pub header: &'static str,
    pub field: &'static str,
    pub offset: usize,
    pub kind: ErrorKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The buffer ends before the field does.
    Truncated { needed: usize, available: usize },
    /// A version field holds a value this decoder does not know.
    BadVersion { found: u8 },
    /// A length field is inconsistent with the header or the buffer.
    BadLength {
        value: usize,
        expected: &'static str,
    },
    /// A type / protocol / option value is not one the format allows here.
    Unsupported { value: u32 },
    /// The packet carries no telemetry this decoder recognises.
    NotTelemetry,
}

impl WireError {
    /// Never: the bytes are what they are (the packet is counted and dropped).
    pub fn is_retryable(&self) -> bool {
        false
    }

    pub(crate) const fn new(
        header: &'static str,
        field: &'static str,
        offset: usize,
        kind: ErrorKind,
    ) -> Self {
        Self {
            header,
            field,
            offset,
            kind,
        }
    }

    /// A short, bounded label for metrics (`reason="truncated"`).
    pub const fn reason(&self) -> &'static str {
        match self.kind {
            ErrorKind::Truncated { .. } => "truncated",
            ErrorKind::BadVersion { .. } => "bad_version",
            ErrorKind::BadLength { .. } => "bad_length",
            ErrorKind::Unsupported { .. } => "unsupported",
            ErrorKind::NotTelemetry => "not_telemetry",
        }
    }

    /// Every reason label, for metric pre-registration.
    pub const REASONS: [&'static str; 5] = [
        "truncated",
        "bad_version",
        "bad_length",
        "unsupported",
        "not_telemetry",
    ];
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{} at byte {}: ",
            self.header, self.field, self.offset
        )?;
        match self.kind {
            ErrorKind::Truncated { needed, available } => {
                write!(f, "truncated (need {needed} bytes, {available} available)")
            }
            ErrorKind::BadVersion { found } => write!(f, "unknown version {found}"),
            ErrorKind::BadLength { value, expected } => {
                write!(f, "bad length {value} (expected {expected})")
            }
            ErrorKind::Unsupported { value } => write!(f, "unsupported value {value:#x}"),
            ErrorKind::NotTelemetry => write!(f, "no telemetry found"),
        }
    }
}

impl std::error::Error for WireError {}

pub type Result<T, E = WireError> = std::result::Result<T, E>;
