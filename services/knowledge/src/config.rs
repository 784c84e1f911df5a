//! `[knowledge]`: the knowledge service's settings (docs/knowledge.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Admin listener for /metrics, /healthz and /readyz.
    pub admin: SocketAddr,
    /// The document's `[http]` section (tokens, limits) for the admin listener.
    #[serde(skip)]
    pub http: kplane_runtime::HttpConfig,
    /// The stream processor's store: history at start, and where the `anomalies` and
    /// `forecasts` tables are written.
    pub store_dir: PathBuf,
    /// The model registry (`models.json`) and labelled anomalies (`types.json`).
    pub state_dir: PathBuf,
    /// Detector of normal behaviour (see `detectors/`): `kmeans`.
    pub detector: String,
    /// Its size parameter (k-means: clusters).
    pub clusters: usize,
    /// Windows of history needed before the first training ("learning" until then).
    pub min_windows: usize,
    /// Windows the models are (re)trained on: the most recent ones.
    pub training_windows: usize,
    /// Retrain after this many windows.
    pub retrain_every: usize,
    /// Spans of time the training windows are cut into to calibrate thresholds out of fold.
    pub calibration_folds: usize,
    /// False alarms per hour of normal traffic the thresholds are calibrated for, shared
    /// equally by the entity kinds' models. The default is half the target of one an hour:
    /// the thresholds extrapolate a tail from minutes of training, and on held-out clean
    /// traffic they were passed more often than calibrated for (docs/knowledge.md).
    pub false_alarms_per_hour: f64,
    /// Windows below threshold that close an anomaly.
    pub close_after: u32,
    /// Windows of an `unknown` anomaly over its threshold before it is raised (1: at once). A
    /// typed one is raised at its first window.
    pub unknown_after: u32,
    /// An `unknown` episode that lasts this long ends as settled: the change is the entity's
    /// usual from then on. `0s`: never.
    #[serde(with = "humantime_serde")]
    pub settle_after: Duration,
    /// Window length assumed before the first result says otherwise.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// No window result for this long (after the first) makes `/readyz` fail: the processor
    /// stopped publishing.
    #[serde(with = "humantime_serde")]
    pub stale_after: Duration,
    /// Complete the newest window when nothing arrived for this long.
    #[serde(with = "humantime_serde")]
    pub idle_close: Duration,
    /// How often buffered anomalies and forecasts are written to the store (and at shutdown).
    #[serde(with = "humantime_serde")]
    pub store_every: Duration,
    /// Publish on `int.anomalies` / `int.forecasts` (else only the store and the log).
    pub publish: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            admin: SocketAddr::from(([127, 0, 0, 1], 9103)),
            http: kplane_runtime::HttpConfig::default(),
            store_dir: PathBuf::from("kplane-data/stream-processor"),
            state_dir: PathBuf::from("kplane-data/knowledge"),
            detector: "kmeans".into(),
            clusters: 4,
            min_windows: 60,
            training_windows: 3_600,
            retrain_every: 600,
            calibration_folds: 4,
            false_alarms_per_hour: 0.5,
            close_after: 2,
            unknown_after: 2,
            settle_after: Duration::from_secs(15 * 60),
            window: Duration::from_secs(1),
            stale_after: Duration::from_secs(30),
            idle_close: Duration::from_secs(2),
            store_every: Duration::from_secs(30),
            publish: true,
        }
    }
}

impl kplane_runtime::Validate for Config {
    fn validate(&self, problems: &mut Vec<String>) {
        if let Err(e) = crate::detectors::by_name(&self.detector) {
            problems.push(format!("knowledge.detector: {e}"));
        }
        if self.clusters == 0 {
            problems.push("knowledge.clusters: must be at least 1".into());
        }
        if !(2..=20).contains(&self.calibration_folds) {
            problems.push("knowledge.calibration-folds: must be between 2 and 20".into());
        }
        if self.min_windows < 2 * self.calibration_folds {
            problems.push("knowledge.min-windows: must be at least 2 × calibration-folds".into());
        }
        if self.training_windows < self.min_windows {
            problems.push("knowledge.training-windows: must be at least min-windows".into());
        }
        if self.false_alarms_per_hour <= 0.0 {
            problems.push("knowledge.false-alarms-per-hour: must be above 0".into());
        }
        if self.close_after == 0 || self.unknown_after == 0 || self.retrain_every == 0 {
            problems.push(
                "knowledge.close-after, unknown-after and retrain-every: must be at least 1".into(),
            );
        }
    }
}

impl kplane_runtime::Listeners for Config {
    fn set_http(&mut self, http: kplane_runtime::HttpConfig) {
        self.http = http;
    }

    fn validate_listeners(&self, problems: &mut Vec<String>) {
        self.http
            .check_listener("knowledge.admin", self.admin, problems);
    }
}
