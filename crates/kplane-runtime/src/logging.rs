//! One logger for every service: `tracing` with `RUST_LOG` honoured, text or JSON lines.

use serde::{Deserialize, Serialize};
use tracing_subscriber::EnvFilter;

use crate::error::RuntimeError;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// `[log]`
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct LogConfig {
    /// `text` or `json`.
    pub format: LogFormat,
    /// Default filter (`RUST_LOG` syntax) when `RUST_LOG` is not set.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Text,
            level: "info".into(),
        }
    }
}

impl crate::Validate for LogConfig {
    fn validate(&self, problems: &mut Vec<String>) {
        if let Err(e) = EnvFilter::try_new(&self.level) {
            problems.push(format!(
                "log.level {:?} is not a valid filter: {e}",
                self.level
            ));
        }
    }
}

/// Installs the global subscriber (logs go to stderr; stdout stays for command output).
pub fn init_logging(cfg: &LogConfig) -> Result<(), RuntimeError> {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&cfg.level))
        .map_err(|e| RuntimeError::Logging(e.to_string()))?;
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let result = match cfg.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    result.map_err(|e| RuntimeError::Logging(e.to_string()))
}
