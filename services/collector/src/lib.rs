//! # kplane collector
//!
//! Turns telemetry reports into a few meaningful records: UDP (recvmmsg, SO_REUSEPORT) or
//! pcap input → decode ([`kplane_wire`]) → loss accounting per (node, hw_id) → event
//! detection (INTCollector thresholds, watchlist algorithms) → per-partition micro-batches
//! (Arrow IPC or JSON lines) → the bus (`int.events`, optionally `int.reports`).
//! See `docs/collector.md`.

/// Benchmark fixtures for `kplane bench` and criterion, not part of the service (feature
/// `bench`).
#[cfg(feature = "bench")]
pub mod bench;
mod by_node;
pub mod config;
pub mod detect;
mod error;
pub mod input;
pub mod label_db;
mod loss;
pub mod metrics;
pub mod partition;
pub mod pipeline;
pub mod publish;
pub mod watchlist;

pub use config::Config;
pub use error::CollectorError;
pub use service::{Collector, Summary, embedded_bus, start, start_with_metrics};

use std::sync::Arc;

use kplane_bus::BusConfig;
use kplane_runtime::{ServiceResult, Shutdown};

pub mod service;
mod threshold;

/// The service's name: its config section, metric prefix and subcommand.
pub const NAME: &str = "collector";

/// Runs the collector and prints what it publishes (JSON lines) to stdout: the standalone
/// `kplane collector --print` mode.
pub async fn run_printing(mut cfg: Config, shutdown: Shutdown) -> ServiceResult {
    use std::io::Write;
    cfg.encoding = config::Encoding::Json;
    let bus = embedded_bus(&cfg);
    let mut consumers = vec![bus.consumer(kplane_bus::topics::EVENTS, "print")?];
    if cfg.publish_reports {
        consumers.push(bus.consumer(kplane_bus::topics::REPORTS, "print")?);
    }
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done2 = done.clone();
    let printer = std::thread::spawn(move || {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        loop {
            let finished = done2.load(std::sync::atomic::Ordering::Acquire);
            let mut any = false;
            for c in &mut consumers {
                while let Some(d) = c.poll(std::time::Duration::from_millis(5)) {
                    any = true;
                    if out.write_all(&d.message.payload).is_err() {
                        return;
                    }
                }
                c.commit();
            }
            let _ = out.flush();
            if finished && !any {
                return;
            }
        }
    });
    let collector = start(cfg, Arc::new(bus), shutdown).await?;
    let result = collector.wait().await;
    done.store(true, std::sync::atomic::Ordering::Release);
    let _ = printer.join();
    result?;
    Ok(())
}

/// The topics the collector publishes, with their partitions: `int.events`, and
/// `int.reports` (used with `publish-reports`). `kplane topics create` creates them too.
pub fn output_topics(cfg: &Config) -> [(&'static str, u32); 2] {
    [
        (kplane_bus::topics::EVENTS, cfg.partitions),
        (kplane_bus::topics::REPORTS, cfg.partitions),
    ]
}

/// Runs the collector on the configured bus until `shutdown` (or, replaying a capture, until
/// the capture ends). Topics are checked (and created) first; on stop, it waits for every
/// acknowledgement and fails if any batch is still unacknowledged after `delivery-timeout`.
pub async fn run(cfg: Config, bus: BusConfig, shutdown: Shutdown) -> ServiceResult {
    use kplane_bus::topics;
    let delivery_timeout = bus.kafka.delivery_timeout;
    let bus = kplane_bus::open(&bus)?;
    if bus.is_embedded() {
        tracing::warn!(
            "bus = embedded: nothing consumes it in this process, so batches accumulate up to \
             bus-capacity and are then counted as dropped (stage=publish, reason=full)"
        );
    }
    let wanted: Vec<(&str, u32)> = output_topics(&cfg)
        .into_iter()
        .filter(|&(t, _)| cfg.publish_reports || t != topics::REPORTS)
        .collect();
    bus.ensure_topics(&wanted, cfg.bus_capacity).await?;
    let producer = bus.producer(&wanted)?;
    let metrics = bus.kafka_metrics().cloned();
    let collector = start_with_metrics(cfg, producer.clone(), shutdown, |r| {
        if let Some(m) = &metrics {
            m.register(r);
        }
    })
    .await?;
    collector.wait().await?;
    let unacknowledged =
        tokio::task::spawn_blocking(move || producer.flush(delivery_timeout)).await?;
    if unacknowledged > 0 {
        return Err(format!(
            "{unacknowledged} messages still unacknowledged by the bus after {delivery_timeout:?}"
        )
        .into());
    }
    Ok(())
}
