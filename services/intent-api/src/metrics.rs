//! `kplane_intent_api_*`: what the API answered, and what became of user queries.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabel {
    pub status: String,
}

#[derive(Clone, Debug, Default)]
pub struct ApiMetrics {
    /// Answers by HTTP status: refusals (401, 403, 421, 429) and bad input (4xx) are counted.
    pub responses: Family<StatusLabel, Counter>,
    pub query_worker_crashes: Counter,
    pub query_timeouts: Counter,
}

impl ApiMetrics {
    pub fn register(&self, r: &mut Registry) {
        let r = r.sub_registry_with_prefix("intent_api");
        r.register(
            "responses",
            "HTTP answers of the API port, by status",
            self.responses.clone(),
        );
        r.register(
            "query_worker_crashes",
            "Queries that ended their worker process (answered 422; a fresh worker took the next)",
            self.query_worker_crashes.clone(),
        );
        r.register(
            "query_timeouts",
            "Queries whose worker was killed at query-timeout (answered 504)",
            self.query_timeouts.clone(),
        );
    }

    /// Middleware: counts every answer by status.
    pub async fn count(
        axum::extract::State(m): axum::extract::State<Self>,
        req: axum::extract::Request,
        next: axum::middleware::Next,
    ) -> axum::response::Response {
        let r = next.run(req).await;
        m.responses
            .get_or_create(&StatusLabel {
                status: r.status().as_u16().to_string(),
            })
            .inc();
        r
    }
}
