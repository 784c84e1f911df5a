//! `bus = "embedded" | "kafka"` and the `[kafka]` section, shared by every service. Plain
//! data: the module that talks to Kafka (`kafka`, feature `kafka`) reads it; nothing here
//! links rdkafka.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Which bus the services talk through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BusKind {
    /// In-process ([`crate::EmbeddedBus`]): one process, nothing to install.
    #[default]
    Embedded,
    /// A Kafka cluster (`[kafka]`).
    Kafka,
}

/// `[bus]`: `kind = "embedded" | "kafka"` and, for Kafka, `[bus.kafka]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct BusConfig {
    pub kind: BusKind,
    pub kafka: KafkaConfig,
}

impl BusConfig {
    /// Every problem (the Kafka section is checked only when it is used).
    pub fn validate(&self, problems: &mut Vec<String>) {
        if self.kind == BusKind::Kafka {
            self.kafka.validate(problems);
        }
    }
}

/// Batch compression on the wire (lz4 and zstd are built into kplane's librdkafka).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Compression {
    None,
    #[default]
    Lz4,
    Zstd,
}

impl Compression {
    /// librdkafka's `compression.type` value.
    pub fn as_librdkafka(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Lz4 => "lz4",
            Self::Zstd => "zstd",
        }
    }
}

/// `[kafka]`: how to reach the cluster and how kplane's producers and consumers behave.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct KafkaConfig {
    /// `host:port[,host:port…]`.
    pub bootstrap_servers: String,
    /// Client id prefix; each client appends its role (`-producer`, `-consumer`, `-admin`).
    pub client_id: String,
    pub compression: Compression,
    /// How long the producer waits to fill a batch (`linger.ms`).
    #[serde(with = "humantime_serde")]
    pub linger: Duration,
    /// Upper bound of one produce batch, bytes (`batch.size`).
    pub batch_bytes: usize,
    /// Bytes the producer may hold unacknowledged (`queue.buffering.max.kbytes`); beyond it
    /// `send` waits up to `send-timeout`, which slows the collector's pipeline thread
    /// (backpressure into its socket queues), and then refuses the batch (counted).
    pub max_in_flight_bytes: usize,
    /// How long `send` waits for room in the producer queue before refusing.
    #[serde(with = "humantime_serde")]
    pub send_timeout: Duration,
    /// How long librdkafka keeps retrying a batch before it is counted as undelivered
    /// (`message.timeout.ms`).
    #[serde(with = "humantime_serde")]
    pub delivery_timeout: Duration,
    /// Create missing topics at start-up (admin API).
    pub create_topics: bool,
    /// Replication factor of created topics.
    pub replication_factor: i32,
    /// `retention.ms` of created topics.
    #[serde(with = "humantime_serde")]
    pub retention: Duration,
    /// Consumer group of the stream processor; the other services' are
    /// `<group-id>-<service>` ([`KafkaConfig::group_of`]).
    pub group_id: String,
    /// Passed to librdkafka as-is, after kplane's own settings (so they win): security
    /// (`security.protocol`, `sasl.*`, `ssl.*`) and any other knob.
    pub options: BTreeMap<String, String>,
}

impl KafkaConfig {
    /// The consumer group of `service`: `group-id` for the stream processor (the group that
    /// owns the collector's topics), `<group-id>-<service>` for the others.
    pub fn group_of(&self, service: &str) -> String {
        if service == "stream-processor" {
            self.group_id.clone()
        } else {
            format!("{}-{service}", self.group_id)
        }
    }
}

impl Default for KafkaConfig {
    fn default() -> Self {
        Self {
            bootstrap_servers: "127.0.0.1:9092".into(),
            client_id: "kplane".into(),
            compression: Compression::default(),
            linger: Duration::from_millis(5),
            batch_bytes: 1 << 20,
            max_in_flight_bytes: 256 << 20,
            send_timeout: Duration::from_secs(5),
            delivery_timeout: Duration::from_secs(120),
            create_topics: true,
            replication_factor: 1,
            retention: Duration::from_secs(24 * 3600),
            group_id: "kplane-stream-processor".into(),
            options: BTreeMap::new(),
        }
    }
}

impl KafkaConfig {
    /// Every problem, for the service's start-up validation.
    pub fn validate(&self, problems: &mut Vec<String>) {
        let mut need = |ok: bool, what: &str| {
            if !ok {
                problems.push(format!("bus.kafka: {what}"));
            }
        };
        need(
            self.bootstrap_servers
                .split(',')
                .all(|s| s.trim().contains(':')),
            "bootstrap-servers must be host:port[,host:port…]",
        );
        need(!self.client_id.is_empty(), "client-id must not be empty");
        need(!self.group_id.is_empty(), "group-id must not be empty");
        need(self.batch_bytes >= 1024, "batch-bytes must be >= 1024");
        need(
            self.max_in_flight_bytes >= self.batch_bytes,
            "max-in-flight-bytes must be >= batch-bytes",
        );
        need(
            self.delivery_timeout >= Duration::from_secs(1),
            "delivery-timeout must be >= 1s",
        );
        need(
            self.replication_factor >= 1,
            "replication-factor must be >= 1",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_bad_values_are_named() {
        let mut p = Vec::new();
        KafkaConfig::default().validate(&mut p);
        assert!(p.is_empty(), "{p:?}");
        let bad = KafkaConfig {
            bootstrap_servers: "localhost".into(),
            batch_bytes: 10,
            ..KafkaConfig::default()
        };
        bad.validate(&mut p);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains("bootstrap-servers"));
    }
}
