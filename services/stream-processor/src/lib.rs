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
mod analytics;
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
mod stages;
pub mod store;
pub mod switch_view;

use std::sync::Arc;

use kplane_bus::{Bus, BusConfig, Consumer, EmbeddedBus, Producer, topics};
use kplane_runtime::{Metrics, ServiceResult, Shutdown, run_worker};

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

/// The topics the processor publishes, with their partitions (`result-partitions`).
/// `kplane topics create` creates them too.
pub fn output_topics(cfg: &Config) -> [(&'static str, u32); 2] {
    [
        (topics::WINDOWS, cfg.result_partitions),
        (topics::ALERTS, cfg.result_partitions),
    ]
}

/// Creates the result topics on an in-process bus (kept if they exist).
pub fn create_result_topics(bus: &EmbeddedBus, cfg: &Config, capacity: usize) {
    for (t, partitions) in output_topics(cfg) {
        bus.create_topic(t, partitions, capacity);
    }
}

/// Runs until `shutdown` fires, on the configured bus. With `bus.kind = "embedded"` there is
/// nothing to read in a process of its own: use [`run_embedded`] (what `kplane up` does).
pub async fn run(cfg: Config, bus: BusConfig, shutdown: Shutdown) -> ServiceResult {
    let bus = kplane_bus::open(&bus)?;
    if bus.is_embedded() {
        tracing::warn!(
            "bus = embedded: a stand-alone stream processor has no collector in its \
             process; run `kplane up` for the all-in-one pipeline, or set bus.kind = \"kafka\""
        );
        let inputs: Vec<(&str, u32)> = inputs(&cfg).into_iter().map(|t| (t, 1)).collect();
        bus.ensure_topics(&inputs, 1).await?;
    }
    serve_on(cfg, bus, ProcessorMetrics::default(), shutdown).await
}

/// Runs on an in-process bus shared with a collector (`kplane up`, tests): reads its
/// `int.reports` / `int.events`, publishes on its `int.windows` / `int.alerts` (created here).
pub async fn run_embedded(cfg: Config, bus: EmbeddedBus, shutdown: Shutdown) -> ServiceResult {
    run_embedded_counted(cfg, bus, ProcessorMetrics::default(), shutdown).await
}

/// [`run_embedded`], counting into `metrics`, which the caller keeps to read (an evaluation
/// reads how many rows came too late for their window).
pub async fn run_embedded_counted(
    cfg: Config,
    bus: EmbeddedBus,
    metrics: ProcessorMetrics,
    shutdown: Shutdown,
) -> ServiceResult {
    create_result_topics(&bus, &cfg, 1_024);
    serve_on(cfg, Bus::Embedded(bus), metrics, shutdown).await
}

/// Reads the inputs from `bus` and publishes the results on it.
async fn serve_on(
    cfg: Config,
    bus: Bus,
    metrics: ProcessorMetrics,
    shutdown: Shutdown,
) -> ServiceResult {
    let results: Option<Arc<dyn Producer>> = if cfg.publish {
        let wanted = output_topics(&cfg);
        bus.ensure_topics(&wanted, 1_024).await?;
        Some(bus.producer(&wanted)?)
    } else {
        None
    };
    let topics = inputs(&cfg);
    let bus_metrics = bus.kafka_metrics().cloned();
    let source = move || -> Result<Box<dyn Consumer>, kplane_runtime::BoxError> {
        Ok(bus.consumer(NAME, &topics)?)
    };
    serve(cfg, source, results, metrics, bus_metrics, shutdown).await
}

async fn serve(
    cfg: Config,
    source: impl FnOnce() -> Result<Box<dyn Consumer>, kplane_runtime::BoxError> + Send + 'static,
    results: Option<Arc<dyn Producer>>,
    metrics: ProcessorMetrics,
    bus_metrics: Option<kplane_bus::kafka::KafkaMetrics>,
    shutdown: Shutdown,
) -> ServiceResult {
    let registry = Metrics::new(NAME);
    registry.register(|r| {
        metrics.register(r);
        if let Some(m) = &bus_metrics {
            m.register(r);
        }
    });
    tracing::info!(data_dir = %cfg.data_dir.display(), "store");
    let (admin, http) = (cfg.admin, cfg.http.clone());
    run_worker(
        NAME,
        admin,
        &http,
        registry,
        shutdown,
        move |ready, stop| {
            ready.set_ready(true);
            let mut p = Processor::new(cfg, metrics, results.clone())?;
            p.run(source()?, stop)?;
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
        },
    )
    .await
}
