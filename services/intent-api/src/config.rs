//! `[intent-api]`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use kplane_runtime::Validate;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Admin listener for /metrics, /healthz and /readyz.
    pub admin: SocketAddr,
    /// The HTTP API and the web console.
    pub listen: SocketAddr,
    /// The stream processor's analytics store (its `data-dir`); the knowledge service's
    /// anomalies are read from `<store-dir>/knowledge/` at start.
    pub store_dir: PathBuf,
    /// The knowledge service's `state-dir`: `GET /v1/models` serves its `models.json`.
    pub knowledge_dir: PathBuf,
    /// The document's `[http]` section: tokens, roles, Host allow-list, connection limits.
    #[serde(skip)]
    pub http: kplane_runtime::HttpConfig,
    /// `POST /v1/query`: longest a query may run (then 504, and its worker is killed).
    #[serde(with = "humantime_serde")]
    pub query_timeout: Duration,
    /// `POST /v1/query`: most rows returned (the rest is cut, and the answer says so).
    pub query_max_rows: usize,
    /// `POST /v1/query`: memory a query's operators may use (bytes) — huge scans and joins
    /// fail cleanly. The fixed routes' queries have the same limit.
    pub query_memory: usize,
    /// `POST /v1/query` runs in worker processes (this executable's `query-worker`), so that
    /// no query can crash the API: how many at once, across callers.
    pub query_workers: usize,
    /// Address space of a query worker (bytes): an allocation past it ends the worker, not
    /// the API.
    pub query_worker_memory: u64,
    /// The query worker program (default: this executable, `kplane` or `kplane-intent-api`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_worker: Option<PathBuf>,
    /// `POST /v1/query`s one token may run at once (more: 429).
    pub query_concurrency: usize,
    /// `POST /v1/query`s one token may start per minute (more: 429 with Retry-After).
    pub query_rate: u32,
    /// Intent changes (submit, approve, delete) one token may make per minute.
    pub intent_rate: u32,
    /// Live alerts kept in memory for `GET /v1/events?live=true` and the SSE stream.
    pub live_alerts: usize,
    /// Intents, their state directory and the switch drivers (`[intent-api.intents]`).
    pub intents: kplane_control_plane::IntentsConfig,
    /// Incidents: their time span and where they are sent (`[intent-api.incidents]`).
    pub incidents: crate::incidents::IncidentsConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            admin: SocketAddr::from(([127, 0, 0, 1], 9104)),
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            store_dir: PathBuf::from("kplane-data/stream-processor"),
            knowledge_dir: PathBuf::from("kplane-data/knowledge"),
            http: kplane_runtime::HttpConfig::default(),
            query_timeout: Duration::from_secs(10),
            query_max_rows: 10_000,
            query_memory: 256 << 20,
            query_workers: 2,
            query_worker_memory: 4 << 30,
            query_worker: None,
            query_concurrency: 2,
            query_rate: 120,
            intent_rate: 60,
            live_alerts: 1_000,
            intents: kplane_control_plane::IntentsConfig::default(),
            incidents: crate::incidents::IncidentsConfig::default(),
        }
    }
}

impl Validate for Config {
    fn validate(&self, problems: &mut Vec<String>) {
        let mut need = |ok: bool, what: String| {
            if !ok {
                problems.push(format!("intent-api: {what}"));
            }
        };
        need(
            self.query_max_rows >= 1,
            "query-max-rows must be >= 1".into(),
        );
        need(
            self.query_timeout >= Duration::from_millis(10),
            "query-timeout must be >= 10ms".into(),
        );
        need(
            self.query_memory >= 1 << 20,
            "query-memory must be >= 1 MiB".into(),
        );
        need(
            (1..=64).contains(&self.query_workers),
            "query-workers must be 1-64".into(),
        );
        need(
            self.query_worker_memory >= 256 << 20,
            "query-worker-memory must be >= 256 MiB".into(),
        );
        need(
            self.query_concurrency >= 1,
            "query-concurrency must be >= 1".into(),
        );
        need(
            self.query_rate >= 1 && self.intent_rate >= 1,
            "query-rate and intent-rate must be >= 1".into(),
        );
        self.intents.check(problems);
        self.incidents.check(problems);
    }
}

impl kplane_runtime::Listeners for Config {
    fn set_http(&mut self, http: kplane_runtime::HttpConfig) {
        self.http = http;
    }

    fn validate_listeners(&self, problems: &mut Vec<String>) {
        self.http
            .check_listener("intent-api.listen", self.listen, problems);
        self.http
            .check_listener("intent-api.admin", self.admin, problems);
    }
}
