//! `[intent-api]`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use kplane_runtime::Validate;
use serde::{Deserialize, Serialize};

use crate::auth::Role;

/// A bearer token, stored as the SHA-256 of its value (hex) — never the token itself.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TokenConfig {
    /// Who holds it (logged, never the token).
    pub name: String,
    pub role: Role,
    /// `sha256(token)` in hex: `printf %s "$TOKEN" | sha256sum`.
    pub sha256: String,
}

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
    /// Serve without authentication — only allowed when `listen` is a loopback address.
    pub no_auth: bool,
    pub tokens: Vec<TokenConfig>,
    /// `POST /v1/query`: longest a query may run.
    #[serde(with = "humantime_serde")]
    pub query_timeout: Duration,
    /// `POST /v1/query`: most rows returned (the rest is cut, and the answer says so).
    pub query_max_rows: usize,
    /// `POST /v1/query`: memory a query may use (bytes) — huge scans and joins fail cleanly.
    pub query_memory: usize,
    /// Live alerts kept in memory for `GET /v1/events?live=true` and the SSE stream.
    pub live_alerts: usize,
    /// Intents, their state directory and the switch drivers (`[intent-api.intents]`).
    pub intents: crate::intents::IntentsConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            admin: SocketAddr::from(([127, 0, 0, 1], 9104)),
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            store_dir: PathBuf::from("kplane-data/stream-processor"),
            knowledge_dir: PathBuf::from("kplane-data/knowledge"),
            no_auth: false,
            tokens: Vec::new(),
            query_timeout: Duration::from_secs(10),
            query_max_rows: 10_000,
            query_memory: 256 << 20,
            live_alerts: 1_000,
            intents: crate::intents::IntentsConfig::default(),
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
            !self.no_auth || self.listen.ip().is_loopback(),
            format!(
                "no-auth is only allowed on a loopback listener, not {}",
                self.listen
            ),
        );
        for t in &self.tokens {
            need(
                t.sha256.len() == 64 && t.sha256.bytes().all(|b| b.is_ascii_hexdigit()),
                format!("token {:?}: sha256 must be 64 hex digits", t.name),
            );
        }
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
        self.intents.check(problems);
    }
}
