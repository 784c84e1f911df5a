//! Per-partition micro-batches, flushed by size or linger, encoded (Arrow IPC stream or JSON
//! lines) and handed to the bus. A refused batch is counted (`stage="publish"`), never
//! silently dropped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_ipc::writer::StreamWriter;
use bytes::Bytes;
use kplane_bus::{Message, Producer, content_types, headers, topics};
use kplane_model::batch::{EventBatchBuilder, ReportBatchBuilder};
use kplane_model::{EventRow, ReportRecord};

use crate::config::Encoding;
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
    fn encode(&mut self) -> Result<Vec<u8>, String>;
}

fn ipc(batch: arrow_array::RecordBatch) -> Result<Vec<u8>, String> {
    let mut w = StreamWriter::try_new(Vec::new(), &batch.schema()).map_err(|e| e.to_string())?;
    w.write(&batch).map_err(|e| e.to_string())?;
    w.finish().map_err(|e| e.to_string())?;
    w.into_inner().map_err(|e| e.to_string())
}

impl ArrowRows for EventBatchBuilder {
    fn rows(&self) -> usize {
        self.len()
    }
    fn encode(&mut self) -> Result<Vec<u8>, String> {
        ipc(self.finish().map_err(|e| e.to_string())?)
    }
}

impl ArrowRows for ReportBatchBuilder {
    fn rows(&self) -> usize {
        self.len()
    }
    fn encode(&mut self) -> Result<Vec<u8>, String> {
        ipc(self.finish().map_err(|e| e.to_string())?)
    }
}

impl<A: ArrowRows> Rows<A> {
    fn len(&self) -> usize {
        match self {
            Self::Arrow(a) => a.rows(),
            Self::Json { n, .. } => *n,
        }
    }

    fn json(&mut self, row: &impl serde::Serialize) -> Result<(), String> {
        if let Self::Json { buf, n } = self {
            serde_json::to_writer(&mut *buf, row).map_err(|e| e.to_string())?;
            buf.push(b'\n');
            *n += 1;
        }
        Ok(())
    }

    fn take(&mut self) -> Result<(Vec<u8>, &'static str), String> {
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
) -> Result<bool, String> {
    match &mut open.rows {
        Rows::Arrow(b) => arrow(b).map_err(|e| e.to_string())?,
        rows => rows.json(row)?,
    }
    open.since.get_or_insert_with(Instant::now);
    Ok(open.rows.len() >= batch_size)
}

/// Takes a batch's rows, encoded, and its row count.
type Taken = (usize, Result<(Vec<u8>, &'static str), String>);

fn take<A: ArrowRows>(open: &mut Open<A>) -> Taken {
    open.since = None;
    let rows = open.rows.len();
    if rows == 0 {
        return (0, Ok((Vec::new(), "")));
    }
    (rows, open.rows.take())
}

/// The partial batch of one (topic, partition).
struct Open<A> {
    rows: Rows<A>,
    since: Option<Instant>,
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
            published_records: 0,
        }
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
    fn appended(&mut self, topic: Topic, partition: u32, full: Option<Result<bool, String>>) {
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
        encoded: Result<(Vec<u8>, &'static str), String>,
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

    fn flush(&mut self, topic: Topic, partition: u32) {
        let p = partition as usize;
        let taken = match topic {
            Topic::Events => self.events.get_mut(p).map(take),
            Topic::Reports => self.reports.as_mut().and_then(|r| r.get_mut(p)).map(take),
        };
        if let Some((rows, encoded)) = taken.filter(|(rows, _)| *rows > 0) {
            let (name, schema) = match topic {
                Topic::Events => (topics::EVENTS, EVENTS_SCHEMA),
                Topic::Reports => (topics::REPORTS, REPORTS_SCHEMA),
            };
            self.send(name, schema, partition, rows, encoded);
        }
    }

    /// Flushes batches older than the linger time (all of them when `all`).
    pub fn flush_due(&mut self, all: bool) {
        let linger = self.linger;
        let due = |since: Option<Instant>| since.is_some_and(|t| all || t.elapsed() >= linger);
        for p in 0..self.events.len() {
            if due(self.events[p].since) {
                self.flush(Topic::Events, p as u32);
            }
        }
        let n = self.reports.as_ref().map_or(0, Vec::len);
        for p in 0..n {
            let since = self
                .reports
                .as_ref()
                .and_then(|r| r.get(p))
                .and_then(|o| o.since);
            if due(since) {
                self.flush(Topic::Reports, p as u32);
            }
        }
    }
}
