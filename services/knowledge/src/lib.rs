//! # kplane knowledge
//!
//! The knowledge plane of the KDN paper: it learns the network's normal behaviour from the
//! stream processor's window results and hands knowledge to operators and the control plane.
//!
//! * In: `int.windows` (flows, queues, links) and `int.alerts` from the bus — a Kafka consumer
//!   group, or the in-process bus in `kplane up` — and, at a cold start, the history in the
//!   processor's Parquet store.
//! * Models (linfa, pure Rust): per entity kind (source, destination, queue, link) a model of
//!   normal behaviour (`detectors/`, k-means distance) with a threshold calibrated on held-out
//!   windows; a decision tree that types anomalies (DDoS, port scan, congestion, link
//!   failure), trained on the emulator's ground truth; loops and black holes merged from the
//!   processor's alerts; per link and destination a linear forecast of the next window.
//! * Out: anomaly episodes with an explanation (features, blast radius) and recommended
//!   intents on `int.anomalies`; forecasts on `int.forecasts`; both also in the Parquet store
//!   (tables `anomalies` and `forecasts`, see `store`); the model registry in
//!   `<state-dir>/models.json`.
//!
//! See `docs/knowledge.md`.

mod baseline;
/// Benchmark fixtures for `kplane bench` and criterion, not part of the service (feature
/// `bench`).
#[cfg(feature = "bench")]
pub mod bench;
mod collateral;
mod config;
mod detectors;
mod engine;
mod error;
mod explain;
pub mod features;
mod forecast;
pub mod history;
mod metrics;
mod model;
pub mod registry;
mod store;
pub mod typer;

pub use error::KnowledgeError;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kplane_bus::{
    Bus, BusConfig, Consumer, EmbeddedBus, Message, Producer, Received, content_types, headers,
    topics,
};
use kplane_model::results::{Alert, AnomalyPhase};
use kplane_runtime::{AdminState, Metrics, ServiceResult, Shutdown, run_worker};
use serde::Serialize;

pub use config::Config;
pub use engine::{Engine, EngineConfig, Output};

use crate::metrics::{KnowledgeMetrics, ResultLabel, TypeLabel};
use crate::model::TrainParams;

/// The service's name: its config section, metric prefix and subcommand.
pub const NAME: &str = "knowledge";

/// The topics the service reads.
pub const INPUTS: [&str; 2] = [topics::WINDOWS, topics::ALERTS];

/// The topics the service publishes, with their partitions (one each: anomalies and
/// forecasts are few). `kplane topics create` creates them too.
pub const OUTPUT_TOPICS: [(&str, u32); 2] = [(topics::ANOMALIES, 1), (topics::FORECASTS, 1)];

impl Config {
    pub fn engine(&self) -> EngineConfig {
        EngineConfig {
            state_dir: self.state_dir.clone(),
            min_windows: self.min_windows,
            training_windows: self.training_windows,
            retrain_every: self.retrain_every,
            close_after: self.close_after,
            unknown_after: self.unknown_after,
            settle_after_ns: self.settle_after.as_nanos() as i64,
            train: TrainParams {
                detector: self.detector.clone(),
                clusters: self.clusters,
                folds: self.calibration_folds,
                false_alarms_per_hour: self.false_alarms_per_hour,
                window_ns: self.window.as_nanos() as i64,
            },
        }
    }
}

/// Creates the output topics on an in-process bus (kept if they exist).
pub fn create_topics(bus: &EmbeddedBus, capacity: usize) {
    for (t, partitions) in OUTPUT_TOPICS {
        bus.create_topic(t, partitions, capacity);
    }
}

/// Runs on the configured bus (Kafka: consumer group `<bus.kafka.group-id>-knowledge`).
pub async fn run(cfg: Config, bus: BusConfig, shutdown: Shutdown) -> ServiceResult {
    let bus = kplane_bus::open(&bus)?;
    if bus.is_embedded() {
        tracing::warn!(
            "bus = embedded: a stand-alone knowledge service has no stream processor in \
             its process, so nothing arrives; run `kplane up` for everything in one \
             process, or set bus.kind = \"kafka\""
        );
        let inputs: Vec<(&str, u32)> = INPUTS.iter().map(|t| (*t, 1)).collect();
        bus.ensure_topics(&inputs, 1).await?;
    }
    serve_on(cfg, bus, shutdown).await
}

/// Runs on an in-process bus shared with the stream processor (`kplane up`, tests).
pub async fn run_embedded(cfg: Config, bus: EmbeddedBus, shutdown: Shutdown) -> ServiceResult {
    serve_on(cfg, Bus::Embedded(bus), shutdown).await
}

/// Reads the processor's results from `bus` and publishes anomalies and forecasts on it.
async fn serve_on(cfg: Config, bus: Bus, shutdown: Shutdown) -> ServiceResult {
    let wanted = OUTPUT_TOPICS;
    bus.ensure_topics(&wanted, 4_096).await?;
    let producer = bus.producer(&wanted)?;
    let bus_metrics = bus.kafka_metrics().cloned();
    let consumer = move || -> Result<Box<dyn Consumer>, kplane_runtime::BoxError> {
        Ok(bus.consumer(NAME, &INPUTS)?)
    };
    serve(cfg, consumer, producer, bus_metrics, shutdown).await
}

async fn serve(
    cfg: Config,
    consumer: impl FnOnce() -> Result<Box<dyn Consumer>, kplane_runtime::BoxError> + Send + 'static,
    producer: Arc<dyn Producer>,
    bus_metrics: Option<kplane_bus::kafka::KafkaMetrics>,
    shutdown: Shutdown,
) -> ServiceResult {
    let registry = Metrics::new(NAME);
    let metrics = KnowledgeMetrics::default();
    registry.register(|r| {
        metrics.register(r);
        if let Some(m) = &bus_metrics {
            m.register(r);
        }
    });
    tracing::info!(state_dir = %cfg.state_dir.display(), "model state");
    let (admin, http) = (cfg.admin, cfg.http.clone());
    run_worker(
        NAME,
        admin,
        &http,
        registry,
        shutdown,
        move |admin_state, stop| {
            let mut engine = Engine::new(cfg.engine())?;
            let store = kplane_store::Store::open(&cfg.store_dir)?;
            // A cold start trains on the store's history; a restart with models picks up the
            // habits, forecast lags and training history where they were.
            let (windows, unreadable) = history::windows(&store, cfg.training_windows);
            tracing::info!(
                windows = windows.len(),
                unreadable,
                "history read from the store"
            );
            engine.seed_history(windows);
            let mut svc = Service {
                results: store::ResultStore::new(store, cfg.store_every),
                cfg,
                engine,
                producer,
                metrics,
                admin_state,
                last_result: None,
            };
            svc.publish_status();
            svc.run(consumer()?, stop)
        },
    )
    .await
}

struct Service {
    cfg: Config,
    engine: Engine,
    producer: Arc<dyn Producer>,
    metrics: KnowledgeMetrics,
    admin_state: AdminState,
    last_result: Option<Instant>,
    results: store::ResultStore,
}

impl Service {
    fn run(&mut self, mut consumer: Box<dyn Consumer>, stop: &AtomicBool) -> ServiceResult {
        let mut last_any = Instant::now();
        let mut last_commit = Instant::now();
        let mut last_warned: Option<Instant> = None;
        while !stop.load(Ordering::Acquire) {
            let _ = consumer.partition_events();
            match consumer.poll(Duration::from_millis(100)) {
                Ok(Some(m)) => {
                    last_any = Instant::now();
                    let out = self.apply(&m);
                    self.emit(out);
                    // Results are acted on at once; models and open episodes are rebuilt
                    // from the registry and the next windows after a restart.
                    consumer.mark_durable(&m.topic, m.partition, m.offset);
                }
                Ok(None) => {}
                Err(e) if e.is_retryable() => {
                    self.metrics.consume_errors.inc();
                    if last_warned.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                        tracing::warn!(error = %e, "consume error; retrying");
                        last_warned = Some(Instant::now());
                    }
                }
                Err(e) => return Err(e.into()),
            }
            let out = self.engine.tick(last_any.elapsed() >= self.cfg.idle_close);
            self.emit(out);
            if last_commit.elapsed() >= Duration::from_secs(1) {
                if let Err(e) = consumer.commit() {
                    tracing::warn!(error = %e, "offset commit failed; a restart re-reads more");
                }
                last_commit = Instant::now();
                consumer.update_lag();
                self.publish_status();
            }
            if self.results.due() {
                self.store();
            }
        }
        self.store();
        let _ = consumer.commit();
        consumer.close();
        Ok(())
    }

    /// One message of `int.windows` or `int.alerts`.
    fn apply(&mut self, m: &Received) -> Output {
        let (topic, schema, payload) =
            (m.topic.as_str(), m.header(headers::SCHEMA), &m.payload[..]);
        if topic == topics::ALERTS {
            let mut alerts = Vec::new();
            for line in payload.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                match serde_json::from_slice::<Alert>(line) {
                    Ok(a) => alerts.push(a),
                    Err(e) => {
                        self.metrics.undecodable.inc();
                        tracing::warn!(error = %e, "undecodable alert skipped");
                    }
                }
            }
            return self.engine.add_alerts(&alerts);
        }
        let Some(table) = schema.and_then(|s| s.strip_suffix("/v1")) else {
            self.metrics.undecodable.inc();
            tracing::warn!(
                ?schema,
                "window result without a known schema header skipped"
            );
            return Output::default();
        };
        // Only the per-report tables feed the models: a processor that publishes event
        // counts alone (a collector without `publish-reports`) leaves the service stale.
        if history::TABLES.contains(&table) || self.last_result.is_none() {
            self.last_result = Some(Instant::now());
        }
        let lane = m.header(headers::LANE);
        if history::TABLES.contains(&table) {
            match arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(payload), None)
                .and_then(|r| r.collect::<Result<Vec<_>, _>>())
            {
                Ok(batches) => {
                    for b in &batches {
                        self.engine.add_result(table, b, lane);
                    }
                }
                Err(e) => {
                    self.metrics.undecodable.inc();
                    tracing::warn!(error = %e, table, "undecodable window result skipped");
                }
            }
        }
        if let (Some(lane), Some(through)) = (
            lane,
            m.header(headers::LANE_THROUGH)
                .and_then(|t| t.parse::<i64>().ok()),
        ) {
            self.engine.lane_published(lane, through);
        }
        Output::default()
    }

    fn emit(&mut self, out: Output) {
        if out.anomalies.is_empty() && out.forecasts.is_empty() {
            return;
        }
        for a in &out.anomalies {
            if a.phase == AnomalyPhase::Start {
                self.metrics
                    .anomalies
                    .get_or_create(&TypeLabel {
                        r#type: a.anomaly_type.as_str(),
                    })
                    .inc();
                tracing::info!(id = %a.id, r#type = a.anomaly_type.as_str(), score = a.score, "{}", a.explanation.summary);
            }
        }
        self.metrics.forecasts.inc_by(out.forecasts.len() as u64);
        self.results.add(&out.anomalies, &out.forecasts);
        if self.cfg.publish {
            self.publish(topics::ANOMALIES, "anomalies/v1", &out.anomalies);
            self.publish(topics::FORECASTS, "forecasts/v1", &out.forecasts);
        }
    }

    fn store(&mut self) {
        if let Err(e) = self.results.flush() {
            self.metrics.store_failures.inc();
            tracing::warn!(error = %e, "knowledge results not stored; kept to try again");
        }
    }

    fn publish<T: Serialize>(&self, topic: &'static str, schema: &str, rows: &[T]) {
        if rows.is_empty() {
            return;
        }
        let mut payload = Vec::new();
        for r in rows {
            if serde_json::to_writer(&mut payload, r).is_ok() {
                payload.push(b'\n');
            }
        }
        let msg = Message {
            topic,
            partition: 0,
            key: None,
            headers: vec![
                (headers::CONTENT_TYPE, content_types::JSON_LINES.to_string()),
                (headers::SCHEMA, schema.to_string()),
                (headers::RECORDS, rows.len().to_string()),
            ],
            payload: Bytes::from(payload),
            timestamp_ns: kplane_model::unix_time_ns(),
        };
        if let Err(e) = self.producer.send(msg) {
            self.metrics.publish_failures.inc();
            tracing::warn!(error = %e, topic, "not published");
        }
    }

    /// Gauges and readiness: not ready while window results have stopped arriving.
    fn publish_status(&self) {
        let c = &self.engine.counts;
        let m = &self.metrics;
        m.windows.inc_by(c.windows.saturating_sub(m.windows.get()));
        m.entity_windows
            .inc_by(c.entity_windows.saturating_sub(m.entity_windows.get()));
        m.late_results
            .inc_by(c.late_results.saturating_sub(m.late_results.get()));
        m.telemetry_gaps
            .inc_by(c.telemetry_gaps.saturating_sub(m.telemetry_gaps.get()));
        m.unknown_not_raised.inc_by(
            c.unknown_not_raised
                .saturating_sub(m.unknown_not_raised.get()),
        );
        for (result, n) in [("ok", c.trainings_ok), ("failed", c.trainings_failed)] {
            let counter = m.trainings.get_or_create(&ResultLabel { result });
            counter.inc_by(n.saturating_sub(counter.get()));
        }
        let r = self.engine.registry();
        m.model_version.set(r.version as i64);
        m.learning
            .set(i64::from(r.status == registry::Status::Learning));
        m.open_anomalies.set(self.engine.open().len() as i64);
        let age = self.last_result.map(|t| t.elapsed());
        m.last_result_age_seconds
            .set(age.map_or(-1, |a| a.as_secs() as i64));
        let stale = age.is_some_and(|a| a > self.cfg.stale_after);
        if stale {
            tracing::warn!(
                seconds = age.map_or(0, |a| a.as_secs()),
                "no flows, queues or links window result from the stream processor (is the \
                 collector's publish-reports on?): not ready"
            );
        }
        self.admin_state.set_ready(!stale);
    }
}
