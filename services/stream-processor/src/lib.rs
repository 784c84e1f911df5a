//! # kplane stream-processor
//!
//! The management plane of the KDN paper: per-flow and per-switch analytics on Arrow +
//! DataFusion. It reads the collector's `int.reports` (and `int.events`) from the bus — a
//! Kafka consumer-group member or the in-process bus — into event-time tumbling or sliding
//! windows with watermarks and bounded lateness; at window close it runs one SQL query per
//! result table (flows and trajectories, hop latency percentiles, queues, links, sources,
//! destinations, event counts), writes the results to a Parquet store with a checkpoint
//! (exactly-once window results across crashes and rebalances) and publishes them on
//! `int.windows`; immediate events (path change, loop, black hole, threshold, report-loss
//! burst) go out on `int.alerts` as soon as they are seen. The store's layout, writer,
//! compaction, schemas and read side live in `kplane-store`; this crate keeps what a lane has
//! committed. See `docs/stream-processor.md`.

mod alloc;
pub mod analytics;
/// Benchmark fixtures for `kplane bench` and criterion, not part of the service (feature
/// `bench`).
#[cfg(feature = "bench")]
pub mod bench;
pub mod config;
pub mod detect;
mod error;
pub mod frame;
pub mod input;
pub mod metrics;
pub mod panes;
pub mod processor;
pub(crate) mod snapshot;
pub mod stages;
pub mod store;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kplane_bus::{BusConfig, BusKind, Consumer, EmbeddedBus, EmbeddedGroup, Producer, topics};
use kplane_runtime::{AdminState, Metrics, ServiceResult, Shutdown, serve_admin};

pub use config::Config;
pub use error::ProcessorError;

use crate::metrics::ProcessorMetrics;
use crate::processor::Processor;

/// The service's name: its config section, metric prefix and subcommand.
pub const NAME: &str = "stream-processor";

/// Input topics for `cfg`.
fn inputs(cfg: &Config) -> Vec<&'static str> {
    let mut t = Vec::new();
    if cfg.consume_reports {
        t.push(topics::REPORTS);
    }
    if cfg.consume_events {
        t.push(topics::EVENTS);
    }
    t
}

/// Creates the result topics on an in-process bus (kept if they exist).
pub fn create_result_topics(bus: &EmbeddedBus, cfg: &Config, capacity: usize) {
    for t in [topics::WINDOWS, topics::ALERTS] {
        bus.create_topic(t, cfg.result_partitions, capacity);
    }
}

/// Runs until `shutdown` fires, on the configured bus. With `bus.kind = "embedded"` there is
/// nothing to read in a process of its own: use [`run_embedded`] (what `kplane up` does).
pub async fn run(cfg: Config, bus: BusConfig, shutdown: Shutdown) -> ServiceResult {
    match bus.kind {
        BusKind::Embedded => {
            tracing::warn!(
                "bus = embedded: a stand-alone stream processor has no collector in its \
                 process; run `kplane up` for the all-in-one pipeline, or set bus.kind = \"kafka\""
            );
            let bus = EmbeddedBus::new();
            for t in inputs(&cfg) {
                bus.create_topic(t, 1, 1);
            }
            run_embedded(cfg, bus, shutdown).await
        }
        BusKind::Kafka => {
            let kafka = bus.kafka.clone();
            let bus_metrics = kplane_kafka::KafkaMetrics::default();
            let results: Option<Arc<dyn Producer>> = if cfg.publish {
                let wanted = [
                    (topics::WINDOWS, cfg.result_partitions),
                    (topics::ALERTS, cfg.result_partitions),
                ];
                kplane_kafka::ensure_topics(&kafka, &wanted).await?;
                Some(Arc::new(kplane_kafka::KafkaProducer::new(
                    &kafka,
                    &wanted,
                    bus_metrics.clone(),
                )?))
            } else {
                None
            };
            let topics = inputs(&cfg);
            let m = bus_metrics.clone();
            let source = move || -> Result<Box<dyn Consumer>, kplane_runtime::BoxError> {
                let c =
                    kplane_kafka::KafkaConsumer::subscribe(&kafka, &kafka.group_id, &topics, m)?;
                Ok(Box::new(c))
            };
            serve(cfg, source, results, Some(bus_metrics), shutdown).await
        }
    }
}

/// Runs on an in-process bus shared with a collector (`kplane up`, tests): reads its
/// `int.reports` / `int.events`, publishes on its `int.windows` / `int.alerts` (created here).
pub async fn run_embedded(cfg: Config, bus: EmbeddedBus, shutdown: Shutdown) -> ServiceResult {
    create_result_topics(&bus, &cfg, 1_024);
    let results: Option<Arc<dyn Producer>> = cfg
        .publish
        .then(|| Arc::new(bus.clone()) as Arc<dyn Producer>);
    let topics = inputs(&cfg);
    let source = move || -> Result<Box<dyn Consumer>, kplane_runtime::BoxError> {
        Ok(Box::new(EmbeddedGroup::subscribe(&bus, &topics, NAME)?))
    };
    serve(cfg, source, results, None, shutdown).await
}

async fn serve(
    cfg: Config,
    source: impl FnOnce() -> Result<Box<dyn Consumer>, kplane_runtime::BoxError> + Send + 'static,
    results: Option<Arc<dyn Producer>>,
    bus_metrics: Option<kplane_kafka::KafkaMetrics>,
    shutdown: Shutdown,
) -> ServiceResult {
    let registry = Metrics::new(NAME);
    let metrics = ProcessorMetrics::default();
    registry.register(|r| {
        metrics.register(r);
        if let Some(m) = &bus_metrics {
            m.register(r);
        }
    });
    let admin_state = AdminState::new(registry);
    let (admin, admin_task) =
        serve_admin(cfg.admin, admin_state.clone(), &cfg.http, shutdown.clone()).await?;
    tracing::info!(%admin, data_dir = %cfg.data_dir.display(), "admin listening (/metrics /healthz /readyz)");
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let stop = stop.clone();
        tokio::task::spawn_blocking(move || -> ServiceResult {
            let mut p = Processor::new(cfg, metrics, results.clone())?;
            p.run(source()?, &stop)?;
            // Results and alerts handed to Kafka are acknowledged before the process ends.
            if let Some(r) = results {
                let left = r.flush(std::time::Duration::from_secs(10));
                if left > 0 {
                    tracing::warn!(
                        left,
                        "result messages unacknowledged at stop (the store has them)"
                    );
                }
            }
            Ok(())
        })
    };
    admin_state.set_ready(true);
    tokio::pin!(worker);
    let result = tokio::select! {
        r = &mut worker => r?,
        () = shutdown.wait() => {
            stop.store(true, Ordering::Release);
            worker.await?
        }
    };
    admin_state.set_ready(false);
    shutdown.trigger();
    admin_task.await??;
    tracing::info!(service = NAME, "stopped");
    result
}
