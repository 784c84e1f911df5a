//! `kplane_bus_*` self-metrics of the Kafka clients.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TopicLabel {
    pub topic: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabel {
    pub topic: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PartitionLabel {
    pub topic: String,
    pub partition: u32,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: &'static str,
}

/// Cloning shares the counters.
#[derive(Clone, Debug, Default)]
pub struct KafkaMetrics {
    pub produced: Family<TopicLabel, Counter>,
    pub produced_bytes: Family<TopicLabel, Counter>,
    pub delivered: Family<TopicLabel, Counter>,
    pub delivery_errors: Family<ErrorLabel, Counter>,
    pub undelivered_records: Family<TopicLabel, Counter>,
    pub send_refused: Family<ErrorLabel, Counter>,
    pub producer_resets: Counter,
    pub consumed: Family<TopicLabel, Counter>,
    pub consumed_bytes: Family<TopicLabel, Counter>,
    pub consumer_lag: Family<PartitionLabel, Gauge>,
    pub rebalances: Family<KindLabel, Counter>,
    pub commits: Counter,
    pub commit_errors: Counter,
}

impl KafkaMetrics {
    pub fn register(&self, root: &mut Registry) {
        let r = root.sub_registry_with_prefix("bus");
        r.register(
            "produced_messages",
            "Messages handed to the Kafka producer",
            self.produced.clone(),
        );
        r.register(
            "produced_bytes",
            "Payload bytes handed to the Kafka producer",
            self.produced_bytes.clone(),
        );
        r.register(
            "delivered_messages",
            "Messages acknowledged by the brokers (acks=all)",
            self.delivered.clone(),
        );
        r.register(
            "delivery_errors",
            "Messages that failed delivery after librdkafka's retries, by reason",
            self.delivery_errors.clone(),
        );
        r.register(
            "undelivered_records",
            "Records (kplane-records header) inside messages that failed delivery",
            self.undelivered_records.clone(),
        );
        r.register(
            "send_refused",
            "Messages the producer refused at send (queue full past send-timeout, or an error)",
            self.send_refused.clone(),
        );
        r.register(
            "producer_resets",
            "Kafka producers replaced after undeliverable batches or a fatal error",
            self.producer_resets.clone(),
        );
        r.register(
            "consumed_messages",
            "Messages read by the consumer",
            self.consumed.clone(),
        );
        r.register(
            "consumed_bytes",
            "Payload bytes read by the consumer",
            self.consumed_bytes.clone(),
        );
        r.register(
            "consumer_lag",
            "High watermark minus the consumer's position, per assigned partition",
            self.consumer_lag.clone(),
        );
        r.register(
            "rebalances",
            "Partition assignments and revocations seen by the consumer",
            self.rebalances.clone(),
        );
        r.register("commits", "Successful offset commits", self.commits.clone());
        r.register(
            "commit_errors",
            "Failed offset commits",
            self.commit_errors.clone(),
        );
    }

    /// Sum of a topic-labelled family, for tests and summaries.
    pub fn total(family: &Family<TopicLabel, Counter>, topic: &str) -> u64 {
        family
            .get_or_create(&TopicLabel {
                topic: topic.to_string(),
            })
            .get()
    }
}
