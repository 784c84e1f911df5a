//! The consume loop: bus partitions → event-time windows → durable commits → offset commits.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::types::TimestampNanosecondType;
use kplane_bus::{KafkaConfig, content_types, headers, topics};
use kplane_kafka::{
    KafkaBusError, KafkaConsumer, KafkaError, KafkaMetrics, PartitionEvent, Received,
};
use kplane_model::schema::col;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::config::Config;
use crate::store::PartitionStore;
use crate::windows::{Offered, PartitionWindows};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    pub outcome: &'static str,
}

/// `kplane_stream_processor_*`.
#[derive(Clone, Debug, Default)]
pub struct ProcessorMetrics {
    pub records: Family<Outcome, Counter>,
    pub undecodable: Counter,
    pub unowned: Counter,
    pub consume_errors: Counter,
    pub windows_written: Counter,
    pub open_windows: Gauge,
    pub partitions: Gauge,
}

impl ProcessorMetrics {
    pub fn register(&self, root: &mut Registry) {
        let r = root.sub_registry_with_prefix("stream_processor");
        r.register(
            "records",
            "Event rows read, by outcome: added to a window, late (window already closed; \
             counted, not added), replayed (already in written results after a restart)",
            self.records.clone(),
        );
        r.register(
            "undecodable_messages",
            "Bus messages whose payload could not be decoded (counted, skipped, committed)",
            self.undecodable.clone(),
        );
        r.register(
            "unowned_messages",
            "Messages of a partition this member does not own (left to its owner)",
            self.unowned.clone(),
        );
        r.register(
            "consume_errors",
            "Transient consume errors (e.g. unknown topic before the collector created it), retried",
            self.consume_errors.clone(),
        );
        r.register(
            "windows_written",
            "Window counts written durably",
            self.windows_written.clone(),
        );
        r.register(
            "open_windows",
            "Windows open across assigned partitions",
            self.open_windows.clone(),
        );
        r.register(
            "assigned_partitions",
            "Bus partitions this member owns",
            self.partitions.clone(),
        );
    }

    fn offered(&self, o: Offered) {
        for (outcome, n) in [
            ("added", o.added),
            ("late", o.late),
            ("replayed", o.replayed),
        ] {
            if n > 0 {
                self.records.get_or_create(&Outcome { outcome }).inc_by(n);
            }
        }
    }
}

/// Offers one message's event rows (event time, metric, kind) to its partition's windows.
/// The whole message is decoded before any row is offered, so a bad message adds nothing.
fn offer(m: &Received, windows: &mut PartitionWindows) -> Result<Offered, String> {
    if m.header(headers::CONTENT_TYPE) == Some(content_types::JSON_LINES) {
        let mut rows = Vec::new();
        for line in m.payload.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let v: serde_json::Value = serde_json::from_slice(line).map_err(|e| e.to_string())?;
            let t = v["received_ns"].as_i64().ok_or("no received_ns")?;
            let metric = v["metric"].as_str().ok_or("no metric")?.to_string();
            let kind = v["kind"].as_str().ok_or("no kind")?.to_string();
            rows.push((t, metric, kind));
        }
        let rows = rows.iter().map(|(t, me, k)| (*t, me.as_str(), k.as_str()));
        return Ok(windows.offer(m.offset, rows));
    }
    let batches =
        arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(&m.payload[..]), None)
            .and_then(|r| r.collect::<Result<Vec<_>, _>>())
            .map_err(|e| e.to_string())?;
    let mut columns = Vec::with_capacity(batches.len());
    for batch in &batches {
        let column = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or(format!("no {name} column"))
        };
        let received = column(col::RECEIVED)?
            .as_primitive_opt::<TimestampNanosecondType>()
            .ok_or("received is not a ns timestamp")?;
        let metric = column(col::METRIC)?
            .as_string_opt::<i32>()
            .ok_or("metric is not Utf8")?;
        let kind = column(col::KIND)?
            .as_string_opt::<i32>()
            .ok_or("kind is not Utf8")?;
        columns.push((received, metric, kind));
    }
    let rows = columns.iter().flat_map(|(received, metric, kind)| {
        (0..received.len()).map(move |i| (received.value(i), metric.value(i), kind.value(i)))
    });
    Ok(windows.offer(m.offset, rows))
}

struct Owned {
    windows: PartitionWindows,
    store: PartitionStore,
    last_data: Instant,
}

/// Consumes `int.events` as a member of `kafka.group-id` until `stop`.
pub fn consume_kafka(
    cfg: &Config,
    kafka: &KafkaConfig,
    metrics: &ProcessorMetrics,
    bus_metrics: KafkaMetrics,
    stop: &Arc<AtomicBool>,
) -> Result<(), BoxError> {
    std::fs::create_dir_all(&cfg.data_dir)?;
    let consumer =
        KafkaConsumer::subscribe(kafka, &kafka.group_id, &[topics::EVENTS], bus_metrics)?;
    let (window, lateness) = (cfg.window.as_nanos() as i64, cfg.lateness.as_nanos() as i64);
    let mut owned: HashMap<u32, Owned> = HashMap::new();
    let mut last_lag = Instant::now();
    let mut last_any = Instant::now();
    let mut last_warned: Option<Instant> = None;
    while !stop.load(Ordering::Acquire) {
        let message = match consumer.poll(Duration::from_millis(100)) {
            Ok(m) => m,
            // Transient (e.g. the topic does not exist yet because no collector has started):
            // counted, logged at most every 10 s, retried.
            Err(KafkaBusError::Client(KafkaError::MessageConsumption(code))) => {
                metrics.consume_errors.inc();
                if last_warned.is_none_or(|t: Instant| t.elapsed() >= Duration::from_secs(10)) {
                    tracing::warn!(error = %code, "consume error; retrying");
                    last_warned = Some(Instant::now());
                }
                None
            }
            Err(e) => return Err(e.into()),
        };
        rebalance(
            &consumer,
            &cfg.data_dir,
            window,
            lateness,
            &mut owned,
            metrics,
        )?;
        let message = message.and_then(|m| {
            if owned.contains_key(&m.partition) {
                return Some(m);
            }
            // Not ours (a message delivered across a revocation): its owner reads it; counted.
            tracing::warn!(
                partition = m.partition,
                offset = m.offset,
                "message of an unowned partition skipped"
            );
            metrics.unowned.inc();
            None
        });
        if let Some(m) = message
            && let Some(p) = owned.get_mut(&m.partition)
        {
            p.last_data = Instant::now();
            last_any = p.last_data;
            match offer(&m, &mut p.windows) {
                Ok(o) => metrics.offered(o),
                Err(e) => {
                    tracing::warn!(partition = m.partition, offset = m.offset, error = %e, "undecodable message skipped");
                    metrics.undecodable.inc();
                    p.windows.offer(m.offset, std::iter::empty());
                }
            }
        }
        let mut committed = false;
        for (&partition, p) in &mut owned {
            // Idle only when nothing at all arrived for a while: a partition that merely looks
            // quiet while the consumer works through other partitions' backlog may still
            // have records queued for the window it would close.
            let idle =
                last_any.elapsed() >= cfg.idle_close && p.last_data.elapsed() >= cfg.idle_close;
            if let Some((windows, checkpoint)) = p.windows.close(idle) {
                let n = windows.len() as u64;
                p.store.commit(windows, checkpoint)?;
                metrics.windows_written.inc_by(n);
                consumer.mark_durable(topics::EVENTS, partition, checkpoint.through_offset);
                committed = true;
            }
        }
        if committed && let Err(e) = consumer.commit() {
            tracing::warn!(error = %e, "offset commit failed; results stay exact, the next owner re-reads more");
        }
        metrics.open_windows.set(
            owned
                .values()
                .map(|p| p.windows.open_windows() as i64)
                .sum(),
        );
        if last_lag.elapsed() >= Duration::from_secs(5) {
            consumer.update_lag(Duration::from_secs(1));
            last_lag = Instant::now();
        }
    }
    // Open windows are not written: their messages are read again by whoever owns the
    // partition next (this process after a restart, or another member).
    consumer.close();
    Ok(())
}

/// Builds state for assigned partitions from their last checkpoint; drops revoked ones (their
/// durable offsets were committed inside the revoke callback).
fn rebalance(
    consumer: &KafkaConsumer,
    dir: &Path,
    window: i64,
    lateness: i64,
    owned: &mut HashMap<u32, Owned>,
    metrics: &ProcessorMetrics,
) -> Result<(), BoxError> {
    for event in consumer.partition_events() {
        match event {
            PartitionEvent::Assigned(ps) => {
                for (_, partition) in ps {
                    let (store, checkpoint) = PartitionStore::open(dir, partition)?;
                    tracing::info!(partition, ?checkpoint, "partition assigned");
                    owned.insert(
                        partition,
                        Owned {
                            windows: PartitionWindows::new(window, lateness, checkpoint),
                            store,
                            last_data: Instant::now(),
                        },
                    );
                }
            }
            PartitionEvent::Revoked(ps) => {
                for (_, partition) in ps {
                    tracing::info!(partition, "partition revoked");
                    owned.remove(&partition);
                }
            }
        }
    }
    metrics.partitions.set(owned.len() as i64);
    Ok(())
}
