//! The bus's producer on Kafka.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use crate::{BusError, KafkaConfig, Message, Producer, headers};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Message as _, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, ProducerContext, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientConfig, ClientContext};

use super::client::producer_config;
use super::metrics::{ErrorLabel, KafkaMetrics, TopicLabel};

/// Counts every delivery report: acknowledged, or failed after librdkafka's retries.
struct Deliveries {
    metrics: KafkaMetrics,
    /// Set when the producer should be replaced (see [`KafkaProducer`]).
    replace: Arc<AtomicBool>,
}

impl ClientContext for Deliveries {
    fn error(&self, error: KafkaError, reason: &str) {
        tracing::warn!(%error, reason, "librdkafka");
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::Fatal) {
            self.replace.store(true, Ordering::Release);
        }
    }
}

impl ProducerContext for Deliveries {
    /// Records in the message (its `kplane-records` header), so a failure counts them.
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, records: usize) {
        match result {
            Ok(m) => {
                self.metrics
                    .delivered
                    .get_or_create(&TopicLabel {
                        topic: m.topic().to_string(),
                    })
                    .inc();
            }
            Err((e, m)) => {
                if e.rdkafka_error_code() == Some(RDKafkaErrorCode::MessageTimedOut) {
                    self.replace.store(true, Ordering::Release);
                }
                let topic = m.topic().to_string();
                let reason = reason(e);
                tracing::error!(topic, partition = m.partition(), error = %e, records, "delivery failed after retries");
                self.metrics
                    .delivery_errors
                    .get_or_create(&ErrorLabel {
                        topic: topic.clone(),
                        reason,
                    })
                    .inc();
                self.metrics
                    .undelivered_records
                    .get_or_create(&TopicLabel { topic })
                    .inc_by(records as u64);
            }
        }
    }
}

/// A bounded metric label for an error.
fn reason(e: &KafkaError) -> String {
    e.rdkafka_error_code()
        .map_or_else(|| "client".to_string(), |c| format!("{c:?}"))
        .to_lowercase()
}

type Inner = Arc<ThreadedProducer<Deliveries>>;

/// Implements [`Producer`] on an idempotent rdkafka producer polled by its own thread.
///
/// Self-healing: when a batch times out (`delivery-timeout`) or librdkafka reports a fatal
/// error, the next `send` replaces the client with a fresh one (new producer id). An
/// idempotent producer whose broker lost its sequence state — a broker restarted without its
/// log — otherwise stays stuck retrying forever. The old client's remaining messages are purged
/// and counted as undelivered; the replacement is counted in `kplane_bus_producer_resets_total`.
pub struct KafkaProducer {
    inner: RwLock<Inner>,
    config: ClientConfig,
    replace: Arc<AtomicBool>,
    partitions: HashMap<String, u32>,
    send_timeout: Duration,
    metrics: KafkaMetrics,
}

impl std::fmt::Debug for KafkaProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaProducer")
            .field("partitions", &self.partitions)
            .finish_non_exhaustive()
    }
}

impl KafkaProducer {
    /// `topics` are the topics it may send to with their partition counts (as checked by
    /// [`super::ensure_topics`]).
    pub fn new(
        cfg: &KafkaConfig,
        topics: &[(&str, u32)],
        metrics: KafkaMetrics,
    ) -> Result<Self, KafkaError> {
        let config = producer_config(cfg);
        let replace = Arc::new(AtomicBool::new(false));
        let inner = Self::client(&config, &metrics, &replace)?;
        Ok(Self {
            inner: RwLock::new(inner),
            config,
            replace,
            partitions: topics.iter().map(|&(t, n)| (t.to_string(), n)).collect(),
            send_timeout: cfg.send_timeout,
            metrics,
        })
    }

    fn client(
        config: &ClientConfig,
        metrics: &KafkaMetrics,
        replace: &Arc<AtomicBool>,
    ) -> Result<Inner, KafkaError> {
        Ok(Arc::new(config.create_with_context(Deliveries {
            metrics: metrics.clone(),
            replace: replace.clone(),
        })?))
    }

    /// The client to send with, replaced first if it has failed.
    fn current(&self) -> Inner {
        if self.replace.swap(false, Ordering::AcqRel) {
            match Self::client(&self.config, &self.metrics, &self.replace) {
                Ok(fresh) => {
                    tracing::warn!("replacing the Kafka producer after undeliverable batches");
                    self.metrics.producer_resets.inc();
                    let old = std::mem::replace(
                        &mut *self.inner.write().unwrap_or_else(PoisonError::into_inner),
                        fresh,
                    );
                    // Dropping purges what it still holds; each purged message is counted.
                    drop(old);
                }
                Err(e) => tracing::error!(error = %e, "cannot create a new Kafka producer"),
            }
        }
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn refused(&self, topic: &str, reason: &str) {
        self.metrics
            .send_refused
            .get_or_create(&ErrorLabel {
                topic: topic.to_string(),
                reason: reason.to_string(),
            })
            .inc();
    }
}

impl Producer for KafkaProducer {
    fn send(&self, msg: Message) -> Result<(), BusError> {
        let partitions = self.partitions(msg.topic)?;
        if msg.partition >= partitions {
            return Err(BusError::UnknownPartition {
                topic: msg.topic.to_string(),
                partition: msg.partition,
                partitions,
            });
        }
        let records = msg
            .header(headers::RECORDS)
            .and_then(|v| v.parse().ok())
            .unwrap_or(1usize);
        let mut hdrs = OwnedHeaders::new_with_capacity(msg.headers.len());
        for (key, value) in &msg.headers {
            hdrs = hdrs.insert(Header {
                key,
                value: Some(value.as_bytes()),
            });
        }
        let mut record = BaseRecord::with_opaque_to(msg.topic, records)
            .partition(msg.partition as i32)
            .payload(&msg.payload[..])
            .headers(hdrs);
        // Without one, librdkafka stamps the message with its own send time.
        if msg.timestamp_ns > 0 {
            record = record.timestamp((msg.timestamp_ns / 1_000_000) as i64);
        }
        if let Some(k) = &msg.key {
            record = record.key(&k[..]);
        }
        let deadline = Instant::now() + self.send_timeout;
        let inner = self.current();
        loop {
            match inner.send(record) {
                Ok(()) => {
                    let topic = TopicLabel {
                        topic: msg.topic.to_string(),
                    };
                    self.metrics.produced.get_or_create(&topic).inc();
                    self.metrics
                        .produced_bytes
                        .get_or_create(&topic)
                        .inc_by(msg.payload.len() as u64);
                    return Ok(());
                }
                // Backpressure: wait for acknowledgements to make room, up to send-timeout.
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r))
                    if Instant::now() < deadline =>
                {
                    record = r;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err((e, _)) => {
                    let reason = reason(&e);
                    self.refused(msg.topic, &reason);
                    return Err(match e {
                        KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull) => {
                            BusError::Full {
                                topic: msg.topic.to_string(),
                                partition: msg.partition,
                                capacity: 0,
                            }
                        }
                        e => BusError::Kafka(e.to_string()),
                    });
                }
            }
        }
    }

    fn partitions(&self, topic: &str) -> Result<u32, BusError> {
        self.partitions
            .get(topic)
            .copied()
            .ok_or_else(|| BusError::UnknownTopic(topic.to_string()))
    }

    fn flush(&self, timeout: Duration) -> usize {
        use rdkafka::producer::Producer as _;
        let inner = self.current();
        let _ = inner.flush(timeout);
        inner.in_flight_count().max(0) as usize
    }
}
