//! kplane's librdkafka settings, then the user's passthrough `options` (which win).

use crate::KafkaConfig;
use rdkafka::ClientConfig;

fn base(cfg: &KafkaConfig, role: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &cfg.bootstrap_servers)
        .set("client.id", format!("{}-{role}", cfg.client_id));
    c
}

fn passthrough(mut c: ClientConfig, cfg: &KafkaConfig) -> ClientConfig {
    for (k, v) in &cfg.options {
        c.set(k, v);
    }
    c
}

/// Idempotent, `acks=all`, compressed, bounded in memory.
pub fn producer_config(cfg: &KafkaConfig) -> ClientConfig {
    let mut c = base(cfg, "producer");
    c.set("enable.idempotence", "true")
        .set("acks", "all")
        .set("compression.type", cfg.compression.as_librdkafka())
        .set("linger.ms", cfg.linger.as_millis().to_string())
        .set("batch.size", cfg.batch_bytes.to_string())
        .set(
            "queue.buffering.max.kbytes",
            (cfg.max_in_flight_bytes / 1024).max(1).to_string(),
        )
        .set(
            "message.max.bytes",
            (cfg.batch_bytes.max(1 << 20) * 2).to_string(),
        )
        .set(
            "message.timeout.ms",
            cfg.delivery_timeout.as_millis().to_string(),
        );
    passthrough(c, cfg)
}

/// A consumer group member that commits by hand and starts from the earliest offset when the
/// group has none.
pub fn consumer_config(cfg: &KafkaConfig, group: &str) -> ClientConfig {
    let mut c = base(cfg, "consumer");
    c.set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("partition.assignment.strategy", "cooperative-sticky")
        // A subscribed topic that does not exist yet (no collector has created it) is picked up
        // within a second of its creation instead of librdkafka's default five minutes.
        .set("topic.metadata.refresh.interval.ms", "1000")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "1000")
        // When the prefetch queue is over its limits, fetch again as soon as it drains rather
        // than librdkafka's default full second: a consumer that processes slower than it
        // fetches otherwise sits idle for most of each second while its lag grows.
        .set("fetch.queue.backoff.ms", "10");
    passthrough(c, cfg)
}

/// For the admin client.
pub(crate) fn admin_config(cfg: &KafkaConfig) -> ClientConfig {
    passthrough(base(cfg, "admin"), cfg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::producer::BaseProducer;

    #[test]
    fn passthrough_options_win_and_bad_ones_are_rejected_by_librdkafka() {
        let mut cfg = KafkaConfig::default();
        cfg.options.insert("linger.ms".into(), "50".into());
        assert_eq!(producer_config(&cfg).get("linger.ms"), Some("50"));
        assert_eq!(producer_config(&cfg).get("acks"), Some("all"));
        // Creating a client does not connect; an unknown key fails right here.
        assert!(producer_config(&cfg).create::<BaseProducer>().is_ok());
        cfg.options.insert("no.such.option".into(), "1".into());
        let Err(err) = producer_config(&cfg).create::<BaseProducer>() else {
            panic!("an unknown option is accepted");
        };
        assert!(err.to_string().contains("no.such.option"), "{err}");
    }
}
