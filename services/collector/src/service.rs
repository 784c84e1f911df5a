//! Running the collector: admin routes, input threads, the pipeline thread, shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, sync_channel};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use kplane_bus::{EmbeddedBus, Producer, topics};
use kplane_runtime::{AdminState, AdminTask, Metrics, Shutdown, Validate, serve_admin_with};
use serde::{Deserialize, Serialize};

use crate::config::{Config, Input};
use crate::error::CollectorError;
use crate::input::{RecvBatch, af_xdp, pcap, udp};
use crate::metrics::{CollectorMetrics, XskLabels};
use crate::pipeline::{Pipeline, SharedWatchlist};
use crate::publish::Publisher;
use crate::watchlist::{Rule, Watchlist};

/// `GET`/`PUT /v1/watchlist` body.
#[derive(Debug, Deserialize, Serialize)]
pub struct WatchlistBody {
    pub rules: Vec<Rule>,
    #[serde(default, skip_deserializing)]
    pub version: u64,
}

async fn get_watchlist(State(w): State<SharedWatchlist>) -> Json<WatchlistBody> {
    let (version, table) = w.current();
    Json(WatchlistBody {
        rules: table.rules(),
        version,
    })
}

async fn put_watchlist(
    State(w): State<SharedWatchlist>,
    body: Result<Json<WatchlistBody>, axum::extract::rejection::JsonRejection>,
) -> (StatusCode, Json<serde_json::Value>) {
    let Json(body) = match body {
        Ok(b) => b,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(serde_json::json!({ "error": e.body_text() })),
            );
        }
    };
    let mut problems = Vec::new();
    Watchlist::validate(&body.rules, &mut problems);
    if !problems.is_empty() {
        return (
            StatusCode::BAD_REQUEST,
            Json(serde_json::json!({ "error": problems.join("; ") })),
        );
    }
    let n = body.rules.len();
    w.replace(body.rules);
    tracing::info!(rules = n, "watchlist replaced through the admin API");
    (
        StatusCode::OK,
        Json(serde_json::json!({ "version": w.current().0, "rules": n })),
    )
}

/// The internal API (mounted on the admin listener).
pub fn api(watchlist: SharedWatchlist) -> Router {
    Router::new()
        .route("/v1/watchlist", get(get_watchlist).put(put_watchlist))
        .with_state(watchlist)
}

/// A running collector.
pub struct Collector {
    /// Bound UDP addresses (resolved when the config said port 0).
    pub udp: Vec<SocketAddr>,
    /// Bound admin address.
    pub admin: SocketAddr,
    pub metrics: CollectorMetrics,
    pub watchlist: SharedWatchlist,
    admin_state: AdminState,
    admin_task: AdminTask,
    worker: std::thread::JoinHandle<Summary>,
    receivers: Vec<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    shutdown: Shutdown,
}

impl std::fmt::Debug for Collector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collector")
            .field("udp", &self.udp)
            .field("admin", &self.admin)
            .finish_non_exhaustive()
    }
}

/// What a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Frames replayed (pcap mode).
    pub frames: u64,
    /// Records handed to the bus.
    pub published_records: u64,
}

/// Creates the collector's topics on an embedded bus.
pub fn embedded_bus(cfg: &Config) -> EmbeddedBus {
    let bus = EmbeddedBus::new();
    bus.create_topic(topics::EVENTS, cfg.partitions, cfg.bus_capacity);
    bus.create_topic(topics::REPORTS, cfg.partitions, cfg.bus_capacity);
    bus
}

/// Binds everything and starts the threads. In pcap mode the collector stops by itself once
/// the capture is replayed (and triggers `shutdown`).
pub async fn start(
    cfg: Config,
    producer: Arc<dyn Producer>,
    shutdown: Shutdown,
) -> Result<Collector, CollectorError> {
    start_with_metrics(cfg, producer, shutdown, |_| {}).await
}

/// [`start`], with more metrics (the bus's) registered on the collector's `/metrics`.
pub async fn start_with_metrics(
    cfg: Config,
    producer: Arc<dyn Producer>,
    shutdown: Shutdown,
    more_metrics: impl FnOnce(&mut prometheus_client::registry::Registry),
) -> Result<Collector, CollectorError> {
    let mut problems = Vec::new();
    cfg.validate(&mut problems);
    if !problems.is_empty() {
        return Err(CollectorError::Config(problems.join("; ")));
    }
    let registry = Metrics::new(crate::NAME);
    let metrics = CollectorMetrics::default();
    registry.register(|r| metrics.register(r));
    registry.register(more_metrics);
    let admin_state = AdminState::new(registry);
    let watchlist = SharedWatchlist::new(cfg.watchlist.clone());
    let (admin, admin_task) = serve_admin_with(
        cfg.admin,
        admin_state.clone(),
        api(watchlist.clone()),
        &cfg.http,
        shutdown.clone(),
    )
    .await?;

    let publisher = Publisher::new(
        producer,
        metrics.clone(),
        cfg.partitions,
        cfg.encoding,
        cfg.batch_size,
        cfg.linger,
        cfg.publish_reports,
        format!("collector-{}", std::process::id()),
    );
    let pipeline = Pipeline::new(&cfg, publisher, metrics.clone(), watchlist.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let inputs = spawn_inputs(&cfg, pipeline, &metrics, &stop, &shutdown)?;
    admin_state.set_ready(true);
    Ok(Collector {
        udp: inputs.udp,
        admin,
        metrics,
        watchlist,
        admin_state,
        admin_task,
        worker: inputs.worker,
        receivers: inputs.receivers,
        stop,
        shutdown,
    })
}

/// The threads of a running collector.
struct Inputs {
    udp: Vec<SocketAddr>,
    receivers: Vec<std::thread::JoinHandle<()>>,
    worker: std::thread::JoinHandle<Summary>,
}

/// Starts the pcap replay, or the receive threads (UDP, and AF_XDP with `input = "af-xdp"`)
/// and the pipeline thread.
fn spawn_inputs(
    cfg: &Config,
    mut pipeline: Pipeline,
    metrics: &CollectorMetrics,
    stop: &Arc<AtomicBool>,
    shutdown: &Shutdown,
) -> Result<Inputs, CollectorError> {
    if let Some(path) = cfg.pcap.clone() {
        tracing::info!(pcap = %path.display(), speed = ?cfg.speed, "replaying capture");
        let (stop, shutdown) = (stop.clone(), shutdown.clone());
        let speed = cfg.speed;
        let worker = std::thread::Builder::new()
            .name("collector-pcap".into())
            .spawn(move || {
                let frames =
                    pcap::replay(&path, speed, &mut pipeline, || stop.load(Ordering::Acquire))
                        .unwrap_or_else(|e| {
                            tracing::error!(error = %e, "capture replay stopped");
                            0
                        });
                pipeline.finish();
                // The replay is the whole job: stop the service.
                shutdown.trigger();
                Summary {
                    frames,
                    published_records: pipeline.published_records(),
                }
            })
            .map_err(|e| CollectorError::Thread("pcap replay", e))?;
        return Ok(Inputs {
            udp: Vec::new(),
            receivers: Vec::new(),
            worker,
        });
    }

    let (tx, rx) = sync_channel::<RecvBatch>(cfg.queue_capacity);
    let mut udp_addrs = Vec::new();
    let mut receivers = Vec::new();
    for addr in &cfg.listen {
        // With port 0 the first socket picks the port; the others share it (SO_REUSEPORT).
        let mut bound = *addr;
        for i in 0..cfg.sockets_per_listener {
            let listen = |source| CollectorError::Listen {
                addr: bound,
                source,
            };
            let socket = udp::bind(bound, cfg.recv_buffer).map_err(listen)?;
            if i == 0 {
                bound = socket
                    .local_addr()
                    .map_err(listen)?
                    .as_socket()
                    .ok_or_else(|| listen(std::io::ErrorKind::AddrNotAvailable.into()))?;
                udp_addrs.push(bound);
            }
            let receiver = udp::BatchReceiver::new(socket, cfg.recv_batch, cfg.max_datagram);
            let coalesce = cfg.recv_coalesce;
            let (tx, stop, metrics) = (tx.clone(), stop.clone(), metrics.clone());
            receivers.push(
                std::thread::Builder::new()
                    .name(format!("collector-recv-{bound}-{i}"))
                    .spawn(move || udp::receive_loop(receiver, coalesce, tx, stop, metrics))
                    .map_err(|e| CollectorError::Thread("receive", e))?,
            );
        }
    }
    if cfg.input == Input::AfXdp {
        let ports: Vec<u16> = udp_addrs.iter().map(SocketAddr::port).collect();
        let xdp = af_xdp::open(&cfg.af_xdp, &ports)?;
        let attachment = xdp.attachment();
        for (queue, xsk) in xdp.sockets {
            let mode = xsk.mode.name();
            tracing::info!(interface = %xdp.interface, queue, mode, attach = xdp.attach, ?ports, "AF_XDP socket open");
            metrics
                .af_xdp_sockets
                .get_or_create(&XskLabels {
                    interface: xdp.interface.clone(),
                    queue,
                    mode,
                    attach: xdp.attach,
                })
                .set(1);
            let (tx, stop, metrics) = (tx.clone(), stop.clone(), metrics.clone());
            let (max_datagram, attachment) = (cfg.max_datagram, attachment.clone());
            let batching = (cfg.recv_batch, cfg.recv_coalesce);
            receivers.push(
                std::thread::Builder::new()
                    .name(format!("collector-xsk-{queue}"))
                    .spawn(move || {
                        af_xdp::receive_loop(
                            xsk,
                            max_datagram,
                            batching,
                            tx,
                            stop,
                            metrics,
                            attachment,
                        )
                    })
                    .map_err(|e| CollectorError::Thread("AF_XDP receive", e))?,
            );
        }
    }
    drop(tx);
    tracing::info!(
        input = ?cfg.input,
        udp = ?udp_addrs,
        sockets_per_listener = cfg.sockets_per_listener,
        partitions = cfg.partitions,
        encoding = ?cfg.encoding,
        "collector listening"
    );
    let worker = std::thread::Builder::new()
        .name("collector-pipeline".into())
        .spawn(move || {
            let mut last_tick = Instant::now();
            loop {
                match rx.recv_timeout(Duration::from_millis(10)) {
                    Ok(batch) => {
                        for &(off, len, src, truncated) in &batch.datagrams {
                            let payload = batch.data.get(off..off + len).unwrap_or_default();
                            pipeline.datagram(payload, src, batch.received_ns, truncated);
                        }
                        pipeline.flush_counts();
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    // Every receiver stopped and the queue is drained.
                    Err(RecvTimeoutError::Disconnected) => break,
                }
                if last_tick.elapsed() >= Duration::from_millis(10) {
                    pipeline.tick(kplane_model::unix_time_ns());
                    last_tick = Instant::now();
                }
            }
            pipeline.finish();
            Summary {
                frames: 0,
                published_records: pipeline.published_records(),
            }
        })
        .map_err(|e| CollectorError::Thread("pipeline", e))?;
    Ok(Inputs {
        udp: udp_addrs,
        receivers,
        worker,
    })
}

impl Collector {
    /// Waits for shutdown, then stops the inputs, drains the queue, flushes every batch.
    pub async fn wait(self) -> Result<Summary, CollectorError> {
        self.shutdown.wait().await;
        self.admin_state.set_ready(false);
        self.stop.store(true, Ordering::Release);
        let (receivers, worker) = (self.receivers, self.worker);
        let summary = tokio::task::spawn_blocking(move || {
            for r in receivers {
                let _ = r.join();
            }
            worker.join()
        })
        .await
        .map_err(|_| CollectorError::Panicked("stopping"))?
        .map_err(|_| CollectorError::Panicked("pipeline"))?;
        self.admin_task
            .await
            .map_err(|_| CollectorError::Panicked("admin server"))??;
        tracing::info!(
            published_records = summary.published_records,
            frames = summary.frames,
            "collector stopped; every batch flushed"
        );
        Ok(summary)
    }
}
