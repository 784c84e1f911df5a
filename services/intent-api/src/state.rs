//! What every route shares: [`AppState`] (the store, query workers, limits, live views, the
//! control plane), and the time range parameters.

use std::sync::Arc;
use std::time::Duration;

use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use futures_util::Stream;
use kplane_runtime::Shutdown;
use kplane_store::layout::date_filter;
use kplane_store::query::{register_store, register_udfs};
use kplane_store::rollup::{Resolution, source_sql};
use serde::Deserialize;
use serde_json::Value;

use crate::auth::Limits;
use crate::config::Config;
use crate::error::ApiError;
use crate::live::Live;
use crate::query_worker::{QueryWorkers, WorkerSpec};
use crate::rows::{replanned_while_compacted, to_json};

/// Shared by every handler.
#[derive(Clone)]
pub struct AppState {
    pub cfg: Arc<Config>,
    /// Fixed queries of the routes (with `query-memory` and `query-timeout` too).
    pub store: SessionContext,
    /// The store's files (`store-dir`: a directory or `s3://bucket/prefix`), for what the
    /// routes list rather than query (rollup coverage).
    pub files: kplane_store::Store,
    /// `POST /v1/query`: user SQL in worker processes.
    pub queries: Arc<QueryWorkers>,
    /// Per-token rate and concurrency limits.
    pub limits: Limits,
    pub live: Live,
    /// Intents and the switch drivers (the reconcile loop runs beside the server).
    pub intents: kplane_control_plane::Intents,
    /// Ends the live streams when the API stops.
    pub shutdown: Shutdown,
    pub metrics: crate::metrics::ApiMetrics,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").finish_non_exhaustive()
    }
}

impl AppState {
    pub async fn new(cfg: Config, live: Live, shutdown: Shutdown) -> Result<Self, ApiError> {
        let files = kplane_store::Store::open(&cfg.store_dir)
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        // The processor adds and compacts files all the time: DataFusion's directory listing
        // cache (infinite TTL by default) would freeze the API's view of the store.
        let store = SessionContext::new_with_config_rt(
            SessionConfig::new(),
            RuntimeEnvBuilder::new()
                .with_memory_limit(cfg.query_memory, 1.0)
                .with_object_list_cache_limit(0)
                .build_arc()?,
        );
        register_udfs(&store);
        register_store(&store, &files)
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        let program = match &cfg.query_worker {
            Some(p) => p.clone(),
            None => std::env::current_exe().map_err(|e| {
                ApiError::Internal(format!(
                    "cannot find this executable for query workers: {e}"
                ))
            })?,
        };
        let metrics = crate::metrics::ApiMetrics::default();
        let queries = Arc::new(QueryWorkers::new(
            WorkerSpec {
                program,
                store_dir: cfg.store_dir.clone(),
                memory: cfg.query_memory,
                address_space: cfg.query_worker_memory,
            },
            cfg.query_workers,
            metrics.clone(),
        ));
        let (read, bad) = live.findings.load_history(&store).await?;
        if read + bad > 0 {
            tracing::info!(
                read,
                undecodable = bad,
                "anomaly history read from the store"
            );
        }
        let intents =
            kplane_control_plane::Intents::open(cfg.intents.clone(), Arc::new(live.clone()))
                .map_err(|e| {
                    ApiError::Internal(format!(
                        "intents state in {}: {e}",
                        cfg.intents.state_dir.display()
                    ))
                })?;
        Ok(Self {
            cfg: Arc::new(cfg),
            store,
            files,
            queries,
            limits: Limits::default(),
            live,
            intents,
            shutdown,
            metrics,
        })
    }

    /// `stream` until the API stops: open event streams do not hold up its shutdown.
    pub(crate) fn until_shutdown<S: Stream>(
        &self,
        stream: S,
    ) -> impl Stream<Item = S::Item> + use<S> {
        use futures_util::StreamExt;
        let stop = self.shutdown.clone();
        stream.take_until(async move { stop.wait().await })
    }

    /// `table` over `range` as a SQL table expression at the range's resolution: its rollups
    /// where they reach, the windows after ([`source_sql`]).
    pub(crate) async fn table(
        &self,
        table: &'static str,
        range: &Resolved,
    ) -> Result<String, ApiError> {
        let files = self.files.clone();
        let (resolution, from) = (range.resolution, range.from_ns);
        tokio::task::spawn_blocking(move || source_sql(&files, table, resolution, from))
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))
    }

    /// A fixed route's query within `query-memory` (the route's answer is within
    /// `query-timeout`: the router's [`deadline`]).
    pub(crate) async fn rows(&self, sql: &str) -> Result<Vec<Value>, ApiError> {
        let batches = replanned_while_compacted(|| async {
            self.store.sql(sql).await?.collect().await
        })
        .await
        .map_err(|e| {
            let m = e.to_string();
            if m.contains("Resources exhausted") {
                ApiError::Unprocessable(format!(
                    "the answer needs more than the {} MiB a query may use; narrow the time range",
                    self.cfg.query_memory >> 20
                ))
            } else {
                ApiError::Internal(m)
            }
        })?;
        // Rows to JSON is CPU work proportional to the answer: off the async workers.
        tokio::task::spawn_blocking(move || to_json(&batches))
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?
    }
}

/// `from` / `to` (RFC 3339) or `since` (a duration back from now, default 15m).
#[derive(Debug, Default, Deserialize)]
pub struct Range {
    pub from: Option<String>,
    pub to: Option<String>,
    pub since: Option<String>,
}

/// An RFC 3339 time as ns since the Unix epoch; `what` names the parameter in the error.
pub(crate) fn timestamp_ns(s: &str, what: &str) -> Result<i64, ApiError> {
    let t = humantime::parse_rfc3339_weak(s).map_err(|e| {
        ApiError::BadRequest(format!(
            "{what}: {s:?} is not an RFC 3339 time ({e}; e.g. 2026-11-21T13:00:00Z)"
        ))
    })?;
    let ns = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| ApiError::BadRequest(format!("{what}: {s:?} is before 1970")))?
        .as_nanos();
    i64::try_from(ns).map_err(|_| ApiError::BadRequest(format!("{what}: {s:?} is after 2262")))
}

/// A [`Range`] resolved against the clock.
pub(crate) struct Resolved {
    pub sql: String,
    pub from_ns: i64,
    pub resolution: Resolution,
}

impl Range {
    /// `[from, to)` in ns; `to` is `None` for "until now".
    fn bounds(&self) -> Result<(i64, Option<i64>), ApiError> {
        let from = match (&self.from, &self.since) {
            (Some(f), _) => timestamp_ns(f, "from")?,
            (None, s) => {
                let d = match s {
                    Some(s) => humantime::parse_duration(s).map_err(|e| {
                        ApiError::BadRequest(format!("since: {s:?}: {e} (e.g. 15m)"))
                    })?,
                    None => Duration::from_secs(15 * 60),
                };
                kplane_model::unix_time_ns() as i64 - d.as_nanos().min(i64::MAX as u128) as i64
            }
        };
        let to = self
            .to
            .as_deref()
            .map(|t| timestamp_ns(t, "to"))
            .transpose()?;
        Ok((from, to))
    }

    /// `window_start >= … AND window_start < …`, and the store's `date` partitions that can
    /// hold such rows, so that a query lists and opens only those ([`date_filter`]).
    pub(crate) fn sql(&self, column: &str) -> Result<String, ApiError> {
        Ok(self.resolve(column)?.sql)
    }

    /// The range once: its SQL on `column` ([`Range::sql`]), its start, and the store's
    /// resolution for its span ([`Resolution::for_span`]: the windows for up to 6 hours,
    /// minutes up to 7 days, hours beyond).
    pub(crate) fn resolve(&self, column: &str) -> Result<Resolved, ApiError> {
        let (from, to) = self.bounds()?;
        let mut sql = format!("{column} >= to_timestamp_nanos({from})");
        if let Some(t) = to {
            sql += &format!(" AND {column} < to_timestamp_nanos({t})");
        }
        sql = format!("{sql} AND {}", date_filter(from, to));
        let until = to.unwrap_or(kplane_model::unix_time_ns() as i64);
        Ok(Resolved {
            sql,
            from_ns: from,
            resolution: Resolution::for_span(until.saturating_sub(from)),
        })
    }
}
