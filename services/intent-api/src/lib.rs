//! # kplane intent-api
//!
//! The northbound analytics API (axum) and the web console: flows, trajectories, switches,
//! queues, links and events over HTTP — history from the stream processor's Parquet store
//! through DataFusion, live views from its result topics (`int.windows`, `int.alerts`) —
//! read-only SQL, an OpenAPI 3 document, bearer tokens with roles. It mounts the control
//! plane's routes ([`kplane_control_plane`]: intents, switch drivers, INT-label Pro, probe
//! plans), runs its loops beside the server, and gives it the live views to verify against.
//! See `docs/api.md` and `docs/intents.md`.

// The OpenAPI document is one `json!` literal, deeper than the default limit.
#![recursion_limit = "256"]

mod api;
pub mod auth;
mod config;
mod console;
mod error;
mod findings;
pub mod incidents;
mod incidents_api;
mod int_label_api;
mod knowledge_api;
pub mod live;
mod metrics;
pub mod openapi;
pub mod query_worker;
mod rows;
pub mod state;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Json;
use axum::routing::get;
use kplane_bus::{BusConfig, Consumer, headers, topics};
use kplane_runtime::{AdminState, Metrics, ServiceResult, Shutdown, serve_admin};

pub use config::Config;

use crate::live::Live;
use crate::state::AppState;

/// The service's name: its config section, metric prefix and subcommand.
pub const NAME: &str = "intent-api";

/// The whole HTTP surface: API, `/openapi.json`, console.
pub fn app(state: AppState, auth: auth::Auth) -> axum::Router {
    let metrics = state.metrics.clone();
    api::router(state, auth)
        .route("/openapi.json", get(|| async { Json(openapi::document()) }))
        .merge(console::router())
        .layer(axum::middleware::from_fn_with_state(
            metrics,
            metrics::ApiMetrics::count,
        ))
}

/// A running API.
#[derive(Debug)]
pub struct Running {
    /// Where the API and console listen.
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    pub live: Live,
    task: tokio::task::JoinHandle<ServiceResult>,
}

impl Running {
    /// Waits until the server has stopped (after `shutdown`).
    pub async fn wait(self) -> ServiceResult {
        self.task.await??;
        tracing::info!(service = NAME, "stopped");
        Ok(())
    }
}

/// Binds the API and the admin listener and serves until `shutdown`.
pub async fn start(
    cfg: Config,
    live: Live,
    shutdown: Shutdown,
) -> Result<Running, kplane_runtime::BoxError> {
    if !cfg.http.no_auth && cfg.http.tokens.is_empty() {
        return Err(
            "intent-api: no tokens configured ([[http.tokens]]) and http.no-auth is off: \
             nobody could use the API"
                .into(),
        );
    }
    let mut problems = Vec::new();
    kplane_runtime::Listeners::validate_listeners(&cfg, &mut problems);
    if !problems.is_empty() {
        return Err(problems.join("; ").into());
    }
    let registry = Metrics::new(NAME);
    let admin_state = AdminState::new(registry.clone());
    let http = cfg.http.clone();
    let (admin, admin_task) =
        serve_admin(cfg.admin, admin_state.clone(), &http, shutdown.clone()).await?;
    let auth = http.auth();
    let listen = cfg.listen;
    let mut incidents_cfg = cfg.incidents.clone();
    let state = AppState::new(cfg, live.clone(), shutdown.clone())
        .await
        .map_err(|e| format!("cannot open the analytics store: {e:?}"))?;
    registry.register(|r| state.metrics.register(r));
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let addr = listener.local_addr()?;
    if incidents_cfg.console_url.is_empty() {
        incidents_cfg.console_url = format!("http://{addr}");
    }
    let incident_store = incidents_cfg.store.then(|| state.files.clone());
    live.incidents.configure(&incidents_cfg, incident_store);
    registry.register(|r| live.incidents.register(r));
    let ticker = tokio::spawn(incidents::tick_until(
        live.incidents.clone(),
        shutdown.clone(),
    ));
    tracing::info!(%addr, %admin, "API and console listening");
    let engine = kplane_control_plane::start(
        &state.intents,
        state.live.int_label.clone(),
        shutdown.clone(),
    )
    .await;
    let app = kplane_runtime::http::guard_hosts(app(state, auth), &http);
    let sd = shutdown.clone();
    admin_state.set_ready(true);
    let task = tokio::spawn(async move {
        kplane_runtime::http::serve(listener, app, &http, sd).await?;
        admin_state.set_ready(false);
        let _ = engine.await;
        let _ = ticker.await;
        admin_task.await??;
        Ok(())
    });
    Ok(Running {
        addr,
        admin,
        live,
        task,
    })
}

/// The topics the live views follow: the processor's results and the knowledge service's.
pub const FOLLOWED: [&str; 4] = [
    topics::WINDOWS,
    topics::ALERTS,
    topics::ANOMALIES,
    topics::FORECASTS,
];

/// Reads the result topics into `live` until `stop` (a thread of its own: bus consumers
/// block).
pub fn follow(
    mut consumer: Box<dyn Consumer>,
    live: Live,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut warned: Option<std::time::Instant> = None;
        while !stop.load(Ordering::Acquire) {
            match consumer.poll(Duration::from_millis(100)) {
                Ok(Some(m)) => {
                    live::apply(&live, &m.topic, m.header(headers::SCHEMA), &m.payload);
                    // Live views need no replay: what was read may be forgotten.
                    consumer.mark_durable(&m.topic, m.partition, m.offset);
                }
                Ok(None) => {
                    let _ = consumer.commit();
                }
                Err(e) => {
                    // E.g. int.anomalies before the knowledge service created it: the other
                    // topics go on.
                    if warned.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                        tracing::warn!(error = %e, "result topics: consume error; retrying");
                        warned = Some(std::time::Instant::now());
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        let _ = consumer.commit();
        consumer.close();
    })
}

/// Runs on the configured bus: with Kafka the live views follow [`FOLLOWED`] as consumer group `<bus.kafka.group-id>-intent-api`; on its own with the embedded bus only
/// the store (history) is served.
pub async fn run(cfg: Config, bus: BusConfig, shutdown: Shutdown) -> ServiceResult {
    let live = Live::new(cfg.live_alerts);
    let stop = Arc::new(AtomicBool::new(false));
    let bus = kplane_bus::open(&bus)?;
    let reader = if bus.is_embedded() {
        tracing::warn!(
            "bus = embedded: no stream processor in this process, so the live views stay \
             empty (history from the store is served); run `kplane up` for everything in \
             one process, or set bus.kind = \"kafka\""
        );
        None
    } else {
        let consumer = bus.consumer(NAME, &FOLLOWED)?;
        Some(follow(consumer, live.clone(), stop.clone()))
    };
    let running = start(cfg, live, shutdown).await?;
    let r = running.wait().await;
    stop.store(true, Ordering::Release);
    if let Some(h) = reader {
        let _ = h.join();
    }
    r
}
