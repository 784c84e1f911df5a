//! # kplane stream-processor
//!
//! Today: the ingest layer of the stream processor. It consumes the collector's `int.events`
//! from Kafka as a consumer-group member and counts events per (metric, kind) in tumbling
//! event-time windows with a watermark and bounded lateness, writing closed windows and a
//! checkpoint durably before committing offsets — exactly-once window results across crashes
//! and rebalances (see `docs/stream-processor.md`). The analytics of issue 6 (trajectories,
//! hop latency, congestion on Arrow + DataFusion) are not built yet.

pub mod config;
pub mod ingest;
pub mod store;
pub mod windows;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kplane_bus::{BusConfig, BusKind};
use kplane_runtime::{AdminState, Metrics, ServiceResult, Shutdown, serve_admin_with};

pub use config::Config;

/// The service's name: its config section, metric prefix and subcommand.
pub const NAME: &str = "stream-processor";

/// Runs until `shutdown` fires.
pub async fn run(cfg: Config, bus: BusConfig, shutdown: Shutdown) -> ServiceResult {
    let registry = Metrics::new(NAME);
    let metrics = ingest::ProcessorMetrics::default();
    let bus_metrics = kplane_kafka::KafkaMetrics::default();
    registry.register(|r| {
        metrics.register(r);
        bus_metrics.register(r);
    });
    let admin_state = AdminState::new(registry);
    let (admin, admin_task) = serve_admin_with(
        cfg.admin,
        admin_state.clone(),
        axum::Router::new(),
        shutdown.clone(),
    )
    .await?;
    tracing::info!(%admin, "admin listening (/metrics /healthz /readyz)");
    let stop = Arc::new(AtomicBool::new(false));
    let worker = match bus.kind {
        BusKind::Embedded => {
            tracing::warn!(
                "bus = embedded: the stream processor reads from Kafka only (bus.kind = \
                 \"kafka\"); nothing to consume in this process"
            );
            None
        }
        BusKind::Kafka => {
            let (stop, kafka) = (stop.clone(), bus.kafka.clone());
            Some(tokio::task::spawn_blocking(move || {
                ingest::consume_kafka(&cfg, &kafka, &metrics, bus_metrics, &stop)
            }))
        }
    };
    admin_state.set_ready(true);
    let result = match worker {
        Some(mut w) => {
            tokio::select! {
                r = &mut w => r?,
                () = shutdown.wait() => {
                    stop.store(true, Ordering::Release);
                    w.await?
                }
            }
        }
        None => {
            shutdown.wait().await;
            Ok(())
        }
    };
    admin_state.set_ready(false);
    shutdown.trigger();
    admin_task.await??;
    tracing::info!(service = NAME, "stopped");
    result
}
