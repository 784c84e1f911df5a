//! `[intent-api.intents]`.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::backpressure::BackpressureConfig;
use kplane_southbound::DriverConfig;

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct IntentsConfig {
    /// Desired state (`intents.json`) and the audit log (`audit.jsonl`).
    pub state_dir: PathBuf,
    /// How often switches are read back and brought to the desired state.
    #[serde(with = "humantime_serde")]
    pub reconcile_interval: Duration,
    /// How often the drivers are asked for the fabric's topology.
    #[serde(with = "humantime_serde")]
    pub topology_refresh: Duration,
    /// Verify every applied intent against fresh telemetry (off: active once written).
    pub verify: bool,
    /// How long an applied intent's effect may take to show before it is rolled back.
    #[serde(with = "humantime_serde")]
    pub verify_deadline: Duration,
    /// Longest wait between retries of an unreachable switch (doubling from the interval).
    #[serde(with = "humantime_serde")]
    pub max_backoff: Duration,
    /// Switch drivers (`[[intent-api.intents.drivers]]`, `kind = "emulator"` or `"p4runtime"`);
    /// none: intents are refused (nothing to program).
    pub drivers: Vec<DriverConfig>,
    /// Telemetry backpressure (`[intent-api.intents.backpressure]`).
    pub backpressure: BackpressureConfig,
    /// INT-label Pro's controller (`[intent-api.intents.int-label-pro]`).
    pub int_label_pro: super::label_pro::ProControllerConfig,
    /// Submit the knowledge service's recommended intents (`int.anomalies`) as
    /// `origin: recommendation` (the policy decides whether they wait for approval).
    pub follow_recommendations: bool,
    /// Anomalies detected longer ago than this are not acted on (a replay after a restart).
    #[serde(with = "humantime_serde")]
    pub recommendation_max_age: Duration,
    /// The blast-radius rule and TTL bounds (`[intent-api.intents.safety]`).
    pub safety: super::safety::SafetyConfig,
    /// How long a link or switch the probe monitor found unavailable stays out of the probe
    /// plan after it was last found; then it is planned again, to be checked.
    #[serde(with = "humantime_serde")]
    pub probe_recheck: Duration,
    /// Reroutes from the knowledge service's link forecasts
    /// (`[intent-api.intents.traffic-engineering]`).
    pub traffic_engineering: super::traffic_engineering::TrafficEngineeringConfig,
}

impl Default for IntentsConfig {
    fn default() -> Self {
        Self {
            state_dir: PathBuf::from("kplane-data/intent-api"),
            reconcile_interval: Duration::from_millis(500),
            topology_refresh: Duration::from_secs(10),
            verify: true,
            verify_deadline: Duration::from_secs(10),
            max_backoff: Duration::from_secs(30),
            drivers: Vec::new(),
            backpressure: BackpressureConfig::default(),
            int_label_pro: Default::default(),
            follow_recommendations: true,
            recommendation_max_age: Duration::from_secs(60),
            safety: Default::default(),
            probe_recheck: Duration::from_secs(30),
            traffic_engineering: Default::default(),
        }
    }
}

impl IntentsConfig {
    pub fn check(&self, problems: &mut Vec<String>) {
        if self.reconcile_interval < Duration::from_millis(10) {
            problems.push("intent-api.intents: reconcile-interval must be >= 10ms".into());
        }
        if self.verify_deadline < Duration::from_millis(100) {
            problems.push("intent-api.intents: verify-deadline must be >= 100ms".into());
        }
        for d in &self.drivers {
            d.check(problems);
        }
        self.backpressure.check(problems);
        self.int_label_pro.check(problems);
        self.safety.check(problems);
        self.traffic_engineering.check(problems);
    }
}
