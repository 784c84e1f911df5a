//! Per-partition micro-batches, flushed by size or linger, encoded (Arrow IPC stream or JSON
//! lines) and handed to the bus. A refused batch is counted (`stage="publish"`), never
//! silently dropped.
//!
//! Every message says how far the collector had got (the latest report timestamp and receive
//! time it had processed, [`headers::REPORT_TIME_THROUGH`] / [`headers::RECEIVED_THROUGH`]);
//! a partition that had nothing to send for a linger while time moved on gets an empty
//! heartbeat saying so. Consumers close a quiet partition's windows on it instead of waiting
//! for its next record.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_ipc::writer::StreamWriter;
use bytes::Bytes;
use kplane_bus::{Message, Producer, content_types, headers, topics};
use kplane_model::batch::{EventBatchBuilder, ReportBatchBuilder};
use kplane_model::{EventRow, ReportRecord};

use crate::config::Encoding;
use crate::error::CollectorError;
use crate::metrics::{CollectorMetrics, TopicPartition};

/// Schema names and versions carried in the `kplane-schema` header.
pub const EVENTS_SCHEMA: &str = "events/v1";
pub const REPORTS_SCHEMA: &str = "reports/v1";

/// Rows of one kind, in one encoding.
enum Rows<A> {
    Arrow(A),
    Json { buf: Vec<u8>, n: usize },
}

trait ArrowRows {
    fn rows(&self) -> usize;
    fn encode(&mut self) -> Result<Vec<u8>, CollectorError>;
}

fn ipc(batch: arrow_array::RecordBatch) -> Result<Vec<u8>, CollectorError> {
    let mut w = StreamWriter::try_new(Vec::new(), &batch.schema())?;
    w.write(&batch)?;
    w.finish()?;
    Ok(w.into_inner()?)
}

impl ArrowRows for EventBatchBuilder {
    fn rows(&self) -> usize {
        self.len()
    }
    fn encode(&mut self) -> Result<Vec<u8>, CollectorError> {
        ipc(self.finish()?)
    }
}

impl ArrowRows for ReportBatchBuilder {
    fn rows(&self) -> usize {
        self.len()
    }
    fn encode(&mut self) -> Result<Vec<u8>, CollectorError> {
        ipc(self.finish()?)
    }
}

impl<A: ArrowRows> Rows<A> {
    fn len(&self) -> usize {
        match self {
            Self::Arrow(a) => a.rows(),
            Self::Json { n, .. } => *n,
        }
    }

    fn json(&mut self, row: &impl serde::Serialize) -> Result<(), CollectorError> {
        if let Self::Json { buf, n } = self {
            serde_json::to_writer(&mut *buf, row)?;
            buf.push(b'\n');
            *n += 1;
        }
        Ok(())
    }

    fn take(&mut self) -> Result<(Vec<u8>, &'static str), CollectorError> {
        match self {
            Self::Arrow(a) => Ok((a.encode()?, content_types::ARROW)),
            Self::Json { buf, n } => {
                *n = 0;
                Ok((std::mem::take(buf), content_types::JSON_LINES))
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Topic {
    Events,
    Reports,
}

impl Topic {
    fn name(self) -> &'static str {
        match self {
            Self::Events => "event",
            Self::Reports => "report",
        }
    }
}

/// Appends one row (Arrow through `arrow`, else as a JSON line); true when the batch is full.
fn append<A: ArrowRows, R: serde::Serialize>(
    open: &mut Open<A>,
    row: &R,
    arrow: impl FnOnce(&mut A) -> Result<(), arrow_schema::ArrowError>,
    batch_size: usize,
) -> Result<bool, CollectorError> {
    match &mut open.rows {
        Rows::Arrow(b) => arrow(b)?,
        rows => rows.json(row)?,
    }
    open.since.get_or_insert_with(Instant::now);
    Ok(open.rows.len() >= batch_size)
}

/// Takes a batch's rows, encoded, and its row count (none: an empty heartbeat payload).
type Taken = (usize, Result<(Vec<u8>, &'static str), CollectorError>);

fn take<A: ArrowRows>(open: &mut Open<A>, received_through: u64) -> Taken {
    open.since = None;
    open.sent_at = Some(Instant::now());
    open.sent_through = received_through;
    match &open.rows {
        Rows::Arrow(a) if a.rows() == 0 => (0, Ok((Vec::new(), content_types::ARROW))),
        Rows::Json { n: 0, .. } => (0, Ok((Vec::new(), content_types::JSON_LINES))),
        rows => (rows.len(), open.rows.take()),
    }
}

/// The partial batch of one (topic, partition), and when its last message went out.
struct Open<A> {
    rows: Rows<A>,
    since: Option<Instant>,
    sent_at: Option<Instant>,
    /// The receive time the last message said the collector was through.
    sent_through: u64,
}

impl<A> Open<A> {
    /// Nothing to send for a linger while the collector got further: time for a heartbeat.
    fn heartbeat_due(&self, linger: Duration, received_through: u64) -> bool {
        self.since.is_none()
            && self.sent_through < received_through
            && self.sent_at.is_none_or(|t| t.elapsed() >= linger)
    }
}

/// One empty batch per partition, in `encoding` (`arrow` builds an Arrow builder).
fn open_batches<A>(partitions: u32, encoding: Encoding, arrow: impl Fn() -> A) -> Vec<Open<A>> {
    (0..partitions)
        .map(|_| Open {
            rows: match encoding {
                Encoding::Arrow => Rows::Arrow(arrow()),
                Encoding::Json => Rows::Json {
                    buf: Vec::new(),
                    n: 0,
                },
            },
            since: None,
            sent_at: None,
            sent_through: 0,
        })
        .collect()
}

/// Batches and publishes events (and optionally reports).
pub struct Publisher {
    producer: Arc<dyn Producer>,
    metrics: CollectorMetrics,
    batch_size: usize,
    linger: Duration,
    producer_id: String,
    sequence: u64,
    events: Vec<Open<EventBatchBuilder>>,
    reports: Option<Vec<Open<ReportBatchBuilder>>>,
    /// The latest report timestamp and receive time processed (see the module's doc).
    report_time_through: u64,
    received_through: u64,
    /// Records appended since the last flush, for accounting.
    pub published_records: u64,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("producer_id", &self.producer_id)
            .field("sequence", &self.sequence)
            .finish_non_exhaustive()
    }
}

impl Publisher {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        producer: Arc<dyn Producer>,
        metrics: CollectorMetrics,
        partitions: u32,
        encoding: Encoding,
        batch_size: usize,
        linger: Duration,
        publish_reports: bool,
        producer_id: String,
    ) -> Self {
        let cap = batch_size.min(8192);
        let events = open_batches(partitions, encoding, || EventBatchBuilder::new(cap));
        let reports = publish_reports
            .then(|| open_batches(partitions, encoding, || ReportBatchBuilder::new(cap)));
        Self {
            producer,
            metrics,
            batch_size,
            linger,
            producer_id,
            sequence: 0,
            events,
            reports,
            report_time_through: 0,
            received_through: 0,
            published_records: 0,
        }
    }

    /// A record was processed (published or not): how far the collector has got.
    #[inline]
    pub fn processed(&mut self, report_time_ns: Option<u64>, received_ns: u64) {
        self.received_through = self.received_through.max(received_ns);
        self.report_time_through = self
            .report_time_through
            .max(report_time_ns.unwrap_or(received_ns));
    }

    pub fn event(&mut self, partition: u32, row: &EventRow<'_>) {
        let full = self
            .events
            .get_mut(partition as usize)
            .map(|open| append(open, row, |b| b.append(row), self.batch_size));
        self.appended(Topic::Events, partition, full);
    }

    pub fn report(&mut self, partition: u32, rec: &ReportRecord) {
        let full = self
            .reports
            .as_mut()
            .and_then(|r| r.get_mut(partition as usize))
            .map(|open| append(open, rec, |b| b.append(rec), self.batch_size));
        self.appended(Topic::Reports, partition, full);
    }

    /// After an append: flush a full batch, count a row that could not be encoded.
    fn appended(
        &mut self,
        topic: Topic,
        partition: u32,
        full: Option<Result<bool, CollectorError>>,
    ) {
        match full {
            Some(Ok(true)) => self.flush(topic, partition),
            Some(Err(e)) => {
                tracing::warn!(error = %e, ?topic, "row not encodable");
                self.metrics.drop("encode", topic.name(), 1);
            }
            _ => {}
        }
    }

    fn send(
        &mut self,
        topic: &'static str,
        schema: &'static str,
        partition: u32,
        rows: usize,
        encoded: Result<(Vec<u8>, &'static str), CollectorError>,
    ) {
        let (payload, content_type) = match encoded {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(error = %e, topic, "batch not encodable");
                self.metrics.drop("encode", "batch", rows as u64);
                return;
            }
        };
        self.sequence += 1;
        let msg = Message {
            topic,
            partition,
            key: None,
            headers: vec![
                (headers::CONTENT_TYPE, content_type.to_string()),
                (headers::SCHEMA, schema.to_string()),
                (
                    headers::BATCH_ID,
                    format!("{}-{partition}-{}", self.producer_id, self.sequence),
                ),
                (headers::RECORDS, rows.to_string()),
                (
                    headers::REPORT_TIME_THROUGH,
                    self.report_time_through.to_string(),
                ),
                (headers::RECEIVED_THROUGH, self.received_through.to_string()),
            ],
            payload: Bytes::from(payload),
            timestamp_ns: kplane_model::unix_time_ns(),
        };
        let started = Instant::now();
        let sent = self.producer.send(msg);
        self.metrics
            .publish_seconds
            .observe(started.elapsed().as_secs_f64());
        match sent {
            Ok(()) if rows == 0 => {
                self.metrics.heartbeats.inc();
            }
            Ok(()) => {
                self.metrics.batch_records.observe(rows as f64);
                self.metrics
                    .partition_records
                    .get_or_create(&TopicPartition {
                        topic,
                        partition: partition.to_string(),
                    })
                    .inc_by(rows as u64);
                self.published_records += rows as u64;
            }
            Err(e) => {
                tracing::debug!(error = %e, topic, partition, rows, "bus refused a batch");
                self.metrics.drop("publish", e.reason(), rows as u64);
            }
        }
    }

    /// Sends the batch of (topic, partition), or a heartbeat when it holds no row.
    fn flush(&mut self, topic: Topic, partition: u32) {
        let (p, through) = (partition as usize, self.received_through);
        let taken = match topic {
            Topic::Events => self.events.get_mut(p).map(|o| take(o, through)),
            Topic::Reports => self
                .reports
                .as_mut()
                .and_then(|r| r.get_mut(p))
                .map(|o| take(o, through)),
        };
        if let Some((rows, encoded)) = taken {
            let (name, schema) = match topic {
                Topic::Events => (topics::EVENTS, EVENTS_SCHEMA),
                Topic::Reports => (topics::REPORTS, REPORTS_SCHEMA),
            };
            self.send(name, schema, partition, rows, encoded);
        }
    }

    /// Flushes batches older than the linger time (all of them when `all`), and sends the
    /// heartbeats that are due.
    pub fn flush_due(&mut self, all: bool) {
        let (linger, through) = (self.linger, self.received_through);
        let due = |since: Option<Instant>| since.is_some_and(|t| all || t.elapsed() >= linger);
        for p in 0..self.events.len() {
            let o = &self.events[p];
            if due(o.since) || o.heartbeat_due(linger, through) {
                self.flush(Topic::Events, p as u32);
            }
        }
        let n = self.reports.as_ref().map_or(0, Vec::len);
        for p in 0..n {
            let o = self.reports.as_ref().and_then(|r| r.get(p));
            if o.is_some_and(|o| due(o.since) || o.heartbeat_due(linger, through)) {
                self.flush(Topic::Reports, p as u32);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use kplane_bus::BusError;
    use kplane_model::{Detector, EventKind, Metric};

    use super::*;

    #[derive(Default)]
    struct Sent(Mutex<Vec<Message>>);

    impl Producer for Sent {
        fn send(&self, msg: Message) -> Result<(), BusError> {
            self.0.lock().unwrap().push(msg);
            Ok(())
        }
        fn partitions(&self, _: &str) -> Result<u32, BusError> {
            Ok(2)
        }
    }

    fn event(received_ns: u64) -> EventRow<'static> {
        EventRow {
            received_ns,
            kind: EventKind::Change,
            metric: Metric::FlowHopLatency,
            detector: Detector::Threshold,
            flow: None,
            node_id: Some(1),
            queue_id: None,
            egress_port: None,
            hw_id: None,
            value: Some(1),
            previous: None,
            threshold: None,
            path: &[],
            exporter: None,
        }
    }

    #[test]
    fn a_quiet_partition_hears_how_far_the_collector_got() {
        let sent = Arc::new(Sent::default());
        let linger = Duration::from_millis(5);
        let metrics = CollectorMetrics::default();
        let mut p = Publisher::new(
            sent.clone(),
            metrics.clone(),
            2,
            Encoding::Arrow,
            1_000,
            linger,
            false,
            "t".into(),
        );
        // Partition 0 gets an event; partition 1 nothing, while reports move time on.
        p.processed(Some(1_000), 2_000);
        p.event(0, &event(2_000));
        p.processed(Some(5_000), 6_000);
        std::thread::sleep(linger * 2);
        p.flush_due(false);
        let msgs = std::mem::take(&mut *sent.0.lock().unwrap());
        let through = |m: &Message| {
            (
                m.header(headers::REPORT_TIME_THROUGH).unwrap().to_string(),
                m.header(headers::RECEIVED_THROUGH).unwrap().to_string(),
            )
        };
        assert_eq!(
            msgs.len(),
            2,
            "the batch of partition 0 and a heartbeat for 1"
        );
        let (batch, beat) = (&msgs[0], &msgs[1]);
        assert_eq!(
            (batch.partition, batch.header(headers::RECORDS)),
            (0, Some("1"))
        );
        assert_eq!(
            (beat.partition, beat.header(headers::RECORDS)),
            (1, Some("0"))
        );
        assert!(beat.payload.is_empty());
        for m in [batch, beat] {
            assert_eq!(through(m), ("5000".into(), "6000".into()));
        }
        assert_eq!(metrics.heartbeats.get(), 1);

        // Nothing new processed: no more heartbeats, however long it stays quiet.
        std::thread::sleep(linger * 2);
        p.flush_due(false);
        assert!(sent.0.lock().unwrap().is_empty());
        // Time moves on: one heartbeat per partition, not before the linger has passed.
        p.processed(None, 9_000);
        p.flush_due(false);
        p.flush_due(false);
        let beats = std::mem::take(&mut *sent.0.lock().unwrap());
        assert_eq!(beats.len(), 2);
        assert!(
            beats
                .iter()
                .all(|m| through(m) == ("9000".into(), "9000".into()))
        );
    }
}
