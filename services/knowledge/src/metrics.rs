//! `kplane_knowledge_*`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabel {
    pub r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: &'static str,
}

#[derive(Clone, Debug, Default)]
pub struct KnowledgeMetrics {
    pub windows: Counter,
    pub entity_windows: Counter,
    pub late_results: Counter,
    pub telemetry_gaps: Counter,
    pub unknown_not_raised: Counter,
    pub undecodable: Counter,
    pub consume_errors: Counter,
    pub anomalies: Family<TypeLabel, Counter>,
    pub forecasts: Counter,
    pub publish_failures: Counter,
    pub store_failures: Counter,
    pub trainings: Family<ResultLabel, Counter>,
    pub model_version: Gauge,
    pub learning: Gauge,
    pub open_anomalies: Gauge,
    pub last_result_age_seconds: Gauge,
}

impl KnowledgeMetrics {
    pub fn register(&self, r: &mut Registry) {
        let r = r.sub_registry_with_prefix("knowledge");
        r.register(
            "windows",
            "Windows completed and scored",
            self.windows.clone(),
        );
        r.register(
            "telemetry_gaps",
            "Windows in which most expected links were missing: a gap in the telemetry, not link failures",
            self.telemetry_gaps.clone(),
        );
        r.register(
            "unknown_not_raised",
            "Outliers no anomaly type explains that ended before `unknown-after` windows over their threshold or before their entity was seen in 20 windows (not raised)",
            self.unknown_not_raised.clone(),
        );
        r.register(
            "entity_windows",
            "Entity-windows scored (sources, destinations, queues, links)",
            self.entity_windows.clone(),
        );
        r.register(
            "late_results",
            "Window results for a window already completed (skipped)",
            self.late_results.clone(),
        );
        r.register(
            "undecodable",
            "Result messages that could not be decoded (skipped)",
            self.undecodable.clone(),
        );
        r.register(
            "consume_errors",
            "Retryable bus errors",
            self.consume_errors.clone(),
        );
        // Every type's series from the start: a dashboard shows 0, not "no data".
        for t in kplane_model::results::AnomalyType::ALL {
            let _ = self
                .anomalies
                .get_or_create(&TypeLabel { r#type: t.as_str() });
        }
        r.register(
            "anomalies",
            "Anomalies raised, by type",
            self.anomalies.clone(),
        );
        r.register("forecasts", "Forecasts made", self.forecasts.clone());
        r.register(
            "publish_failures",
            "Anomaly or forecast messages the bus refused",
            self.publish_failures.clone(),
        );
        r.register(
            "store_failures",
            "Anomaly or forecast batches that could not be appended to the store",
            self.store_failures.clone(),
        );
        r.register(
            "trainings",
            "Model trainings, by result (ok, failed)",
            self.trainings.clone(),
        );
        r.register(
            "model_version",
            "Version of the models in use (0: none yet)",
            self.model_version.clone(),
        );
        r.register(
            "learning",
            "1 while the service is still learning (cold start)",
            self.learning.clone(),
        );
        r.register(
            "open_anomalies",
            "Anomaly episodes open now",
            self.open_anomalies.clone(),
        );
        r.register(
            "last_result_age_seconds",
            "Seconds since the last window result arrived (-1: none yet)",
            self.last_result_age_seconds.clone(),
        );
    }
}
