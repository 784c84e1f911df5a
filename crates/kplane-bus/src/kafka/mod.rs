//! The Kafka implementation of the bus (feature `kafka`), on rdkafka (bundled librdkafka):
//!
//! * [`KafkaProducer`] — implements [`crate::Producer`]: idempotent, `acks=all`,
//!   compressed, the partition chosen by the caller (the collector's source-IP hash); every
//!   delivery report is checked and failures are counted by reason.
//! * [`KafkaConsumer`] — implements [`crate::Consumer`]: a consumer group member (cooperative-sticky): offsets are committed
//!   only for what the application marked durable; assignments and revocations are handed to
//!   the application as [`PartitionEvent`]s, and durable offsets of revoked partitions are
//!   committed inside the revoke callback, before the partitions move.
//! * [`ensure_topics`] — creates missing topics and checks partition counts.
//!
//! Only this module links librdkafka. See `docs/bus.md`.

mod error;
pub use error::KafkaBusError;

mod admin;
mod client;
mod consumer;
mod metrics;
mod producer;

pub use admin::ensure_topics;
pub use client::{consumer_config, producer_config};
pub use consumer::KafkaConsumer;
pub use metrics::KafkaMetrics;
pub use producer::KafkaProducer;
pub use rdkafka::error::KafkaError;
