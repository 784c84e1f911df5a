//! `[stream-processor]`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use kplane_runtime::Validate;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Admin listener for /metrics, /healthz and /readyz.
    pub admin: SocketAddr,
    /// Where window results and per-partition checkpoints are written
    /// (`partition-<n>.jsonl`, one per bus partition).
    pub data_dir: PathBuf,
    /// Tumbling window length, on event time (the `received` column).
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// Bounded lateness: a window closes once the partition's event time passes its end by
    /// this much; rows for a closed window are late (counted, not added).
    #[serde(with = "humantime_serde")]
    pub lateness: Duration,
    /// When no partition has delivered anything for this long (wall clock), every partition
    /// closes its open windows (the end of a stream). Keep it longer than a consumer-group
    /// rebalance, during which nothing arrives either.
    #[serde(with = "humantime_serde")]
    pub idle_close: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            admin: SocketAddr::from(([127, 0, 0, 1], 9102)),
            data_dir: PathBuf::from("kplane-data/stream-processor"),
            window: Duration::from_secs(1),
            lateness: Duration::from_secs(2),
            idle_close: Duration::from_secs(10),
        }
    }
}

impl Validate for Config {
    fn validate(&self, problems: &mut Vec<String>) {
        let mut need = |ok: bool, what: &str| {
            if !ok {
                problems.push(format!("stream-processor: {what}"));
            }
        };
        need(
            self.window >= Duration::from_millis(1),
            "window must be >= 1ms",
        );
        need(
            !self.data_dir.as_os_str().is_empty(),
            "data-dir must not be empty",
        );
        need(
            self.idle_close >= Duration::from_millis(10),
            "idle-close must be >= 10ms",
        );
    }
}
