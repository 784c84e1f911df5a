/// Why an entry or a P4Info was refused. Every variant names what it refers to; none is
/// retryable (the input has to change).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum P4Error {
    #[error("P4Info does not parse: {0}")]
    P4Info(String),
    #[error("unknown table {0:?} (tables: {1})")]
    UnknownTable(String, String),
    #[error("{table}: unknown key {key:?} (keys: {known})")]
    UnknownKey {
        table: String,
        key: String,
        known: String,
    },
    #[error("{table}: key {key} is an exact match and must be given")]
    MissingExactKey { table: String, key: String },
    #[error("{table}.{key}: {value:?} is not a valid {kind} value of {bitwidth} bits{hint}")]
    BadValue {
        table: String,
        key: String,
        value: String,
        kind: &'static str,
        bitwidth: u32,
        hint: &'static str,
    },
    /// A match value that does not parse (the message says what its kind takes).
    #[error("{0}")]
    InvalidMatch(String),
    #[error("unknown action {0:?}")]
    UnknownAction(String),
    #[error("action {action:?} is not allowed in {table} (allowed: {allowed})")]
    ActionNotAllowed {
        table: String,
        action: String,
        allowed: String,
    },
    #[error("{action}: missing parameter {param:?}")]
    MissingParam { action: String, param: String },
    #[error("{action}: unknown parameter {param:?} (parameters: {known})")]
    UnknownParam {
        action: String,
        param: String,
        known: String,
    },
    #[error("{action}.{param}: {value} does not fit {bitwidth} bits")]
    ParamTooWide {
        action: String,
        param: String,
        value: u64,
        bitwidth: u32,
    },
    #[error("{table}: priority must be {expected} ({why}), not {got}")]
    Priority {
        table: String,
        expected: &'static str,
        why: &'static str,
        got: u32,
    },
}

impl P4Error {
    /// Never: the entry or the P4Info has to change.
    pub fn is_retryable(&self) -> bool {
        false
    }
}
