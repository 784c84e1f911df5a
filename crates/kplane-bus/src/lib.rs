//! # kplane-bus
//!
//! How kplane services hand batches to each other: topics split into partitions, messages
//! with a key, headers and an opaque payload (an Arrow IPC stream or JSON lines, see
//! `docs/bus.md`). Two interfaces, [`Producer`] and [`Consumer`]; implementations:
//!
//! * [`EmbeddedBus`] / [`EmbeddedGroup`] — in-process, bounded, partitioned; the default when
//!   everything runs in one process. A full partition refuses the message
//!   ([`BusError::Full`]) so the producer counts it: nothing is dropped silently.
//! * Kafka — [`kafka`] (feature `kafka`: rdkafka), chosen with `bus = "kafka"` and
//!   configured by [`KafkaConfig`]; that module alone links librdkafka.
//!
//! A service opens the configured one with [`open`] and never matches on the kind.
//!
//! Every topic name is in [`topics`]; the JSON messages of the result topics are typed in
//! `kplane_model::results`, the Arrow ones by their `kplane-schema` header.

mod error;
pub use error::BusError;

mod config;
mod consumer;
mod embedded;
#[cfg(feature = "kafka")]
pub mod kafka;
mod open;

use bytes::Bytes;

pub use config::{BusConfig, BusKind, Compression, KafkaConfig};
pub use consumer::{Consumer, EmbeddedGroup, PartitionEvent, Received, TopicPartition};
pub use embedded::{Delivery, EmbeddedBus, EmbeddedConsumer, TopicStats};
pub use open::{Bus, open};

/// Topic names, defined once.
pub mod topics {
    /// Filtered events from the collector (INTCollector event detection): Arrow IPC.
    pub const EVENTS: &str = "int.events";
    /// Every decoded report (optional): Arrow IPC.
    pub const REPORTS: &str = "int.reports";
    /// The stream processor's window results: Arrow IPC, `kplane-schema: <table>/v1`.
    pub const WINDOWS: &str = "int.windows";
    /// The stream processor's immediate events: JSON lines (`kplane_model::results::Alert`).
    pub const ALERTS: &str = "int.alerts";
    /// The knowledge service's anomalies: JSON lines (`kplane_model::results::Anomaly`).
    pub const ANOMALIES: &str = "int.anomalies";
    /// The knowledge service's forecasts: JSON lines (`kplane_model::results::Forecast`).
    pub const FORECASTS: &str = "int.forecasts";
}

/// `content-type` values, defined once.
pub mod content_types {
    /// One Arrow IPC stream: schema and one record batch.
    pub const ARROW: &str = "application/vnd.apache.arrow.stream";
    /// One JSON object per line.
    pub const JSON_LINES: &str = "application/x-ndjson";
}

/// Header names, defined once.
pub mod headers {
    /// `application/vnd.apache.arrow.stream` or `application/x-ndjson`.
    pub const CONTENT_TYPE: &str = "content-type";
    /// `<schema name>/v<version>`, e.g. `events/v1`.
    pub const SCHEMA: &str = "kplane-schema";
    /// Producer-unique batch id (`<producer>-<partition>-<sequence>`), for idempotent consumers.
    pub const BATCH_ID: &str = "kplane-batch-id";
    /// Number of records in the batch.
    pub const RECORDS: &str = "kplane-records";
    /// `int.windows`: the processor lane a result comes from (`reports-p3`: input topic, partition).
    pub const LANE: &str = "kplane-lane";
    /// `int.windows`: on a lane's last message of a commit, the end (ns) of the latest window
    /// it closed — every result of that lane up to there is published, so a consumer need not
    /// wait for a later window to know a window is complete.
    pub const LANE_THROUGH: &str = "kplane-lane-through-ns";
    /// `int.reports`, `int.events`: the latest report timestamp (ns) the producer had processed
    /// when it sent the message — every record it processed before is in this message or an
    /// earlier one of the partition. A partition with nothing to send gets this on an empty
    /// heartbeat message (`kplane-records: 0`), so its windows close as time moves on
    /// elsewhere instead of waiting for its own next record.
    pub const REPORT_TIME_THROUGH: &str = "kplane-report-time-through-ns";
    /// The same for the producer's receive clock (the latest receive time processed).
    pub const RECEIVED_THROUGH: &str = "kplane-received-through-ns";
}

/// One message on the bus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub topic: &'static str,
    pub partition: u32,
    pub key: Option<Bytes>,
    pub headers: Vec<(&'static str, String)>,
    pub payload: Bytes,
    /// Producer timestamp, ns since the Unix epoch.
    pub timestamp_ns: u64,
}

impl Message {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends messages. Implementations are shared between threads.
pub trait Producer: Send + Sync {
    /// Hands one message to the bus; an error means it was *not* accepted.
    fn send(&self, msg: Message) -> Result<(), BusError>;

    /// Partitions of `topic`.
    fn partitions(&self, topic: &str) -> Result<u32, BusError>;

    /// Waits until everything sent has been acknowledged (or `timeout`); returns how many
    /// messages are still unacknowledged. In-process buses have nothing in flight.
    fn flush(&self, _timeout: std::time::Duration) -> usize {
        0
    }
}
