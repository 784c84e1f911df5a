//! Where messages come from: a Kafka consumer-group member, or the in-process bus. Both give
//! the processor the same view — messages with (topic, partition, offset), partition
//! assignment and revocation events, and "durable up to" offsets to commit.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kplane_bus::{EmbeddedBus, EmbeddedConsumer, KafkaConfig, headers};
use kplane_kafka::{KafkaBusError, KafkaConsumer, KafkaError, KafkaMetrics, PartitionEvent};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One message read.
#[derive(Clone, Debug)]
pub struct Msg {
    pub topic: String,
    pub partition: u32,
    pub offset: i64,
    pub content_type: Option<String>,
    pub payload: Bytes,
}

/// The processor's input.
pub trait Source: Send {
    /// The next message, waiting up to `timeout`; transient errors are counted in
    /// `transient` and yield `Ok(None)`.
    fn poll(&mut self, timeout: Duration, transient: &dyn Fn()) -> Result<Option<Msg>, BoxError>;
    /// Assignment changes since the last call.
    fn partition_events(&mut self) -> Vec<PartitionEvent>;
    /// Everything up to `offset` of (topic, partition) is in durable results.
    fn mark_durable(&mut self, topic: &str, partition: u32, offset: i64);
    /// Commits the durable offsets.
    fn commit(&mut self);
    /// Refreshes lag gauges (Kafka only).
    fn update_lag(&mut self) {}
    /// Whether unwritten windows can be rebuilt from this source after a stop (Kafka keeps
    /// the messages; the in-process bus does not, so the processor flushes them on stop).
    fn replayable(&self) -> bool {
        true
    }
    fn close(self: Box<Self>) {}
}

/// A Kafka consumer-group member (cooperative-sticky assignment, manual commits).
#[allow(missing_debug_implementations)] // the consumer is not Debug
pub struct KafkaSource {
    consumer: KafkaConsumer,
    last_warned: Option<Instant>,
}

impl KafkaSource {
    pub fn subscribe(
        kafka: &KafkaConfig,
        topics: &[&str],
        metrics: KafkaMetrics,
    ) -> Result<Self, BoxError> {
        Ok(Self {
            consumer: KafkaConsumer::subscribe(kafka, &kafka.group_id, topics, metrics)?,
            last_warned: None,
        })
    }
}

impl Source for KafkaSource {
    fn poll(&mut self, timeout: Duration, transient: &dyn Fn()) -> Result<Option<Msg>, BoxError> {
        match self.consumer.poll(timeout) {
            Ok(m) => Ok(m.map(|m| Msg {
                content_type: m.header(headers::CONTENT_TYPE).map(str::to_string),
                topic: m.topic,
                partition: m.partition,
                offset: m.offset,
                payload: m.payload,
            })),
            // Transient (e.g. the topic does not exist yet because no collector has started):
            // counted, logged at most every 10 s, retried.
            Err(KafkaBusError::Client(KafkaError::MessageConsumption(code))) => {
                transient();
                if self
                    .last_warned
                    .is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
                {
                    tracing::warn!(error = %code, "consume error; retrying");
                    self.last_warned = Some(Instant::now());
                }
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn partition_events(&mut self) -> Vec<PartitionEvent> {
        self.consumer.partition_events()
    }

    fn mark_durable(&mut self, topic: &str, partition: u32, offset: i64) {
        self.consumer.mark_durable(topic, partition, offset);
    }

    fn commit(&mut self) {
        if let Err(e) = self.consumer.commit() {
            tracing::warn!(error = %e, "offset commit failed; results stay exact, the next owner re-reads more");
        }
    }

    fn update_lag(&mut self) {
        self.consumer.update_lag(Duration::from_secs(1));
    }

    fn close(self: Box<Self>) {
        self.consumer.close();
    }
}

/// The in-process bus: this process owns every partition of the topics.
#[derive(Debug)]
pub struct EmbeddedSource {
    consumers: Vec<(String, EmbeddedConsumer)>,
    assigned: Option<Vec<(String, u32)>>,
    next: usize,
}

impl EmbeddedSource {
    /// Reads `topics` as group `group`; the topics must exist on `bus`.
    pub fn new(bus: &EmbeddedBus, topics: &[&str], group: &str) -> Result<Self, BoxError> {
        use kplane_bus::Producer as _;
        let mut consumers = Vec::new();
        let mut assigned = Vec::new();
        for &t in topics {
            consumers.push((t.to_string(), bus.consumer(t, group)?));
            for p in 0..bus.partitions(t)? {
                assigned.push((t.to_string(), p));
            }
        }
        Ok(Self {
            consumers,
            assigned: Some(assigned),
            next: 0,
        })
    }
}

impl Source for EmbeddedSource {
    fn poll(&mut self, timeout: Duration, _: &dyn Fn()) -> Result<Option<Msg>, BoxError> {
        let n = self.consumers.len();
        // Non-blocking round over the topics first, then wait on one of them.
        for i in 0..n {
            let k = (self.next + i) % n;
            let (topic, c) = &mut self.consumers[k];
            if let Some(d) = c.poll(Duration::ZERO) {
                self.next = (k + 1) % n;
                return Ok(Some(msg(topic, d)));
            }
        }
        let k = self.next % n.max(1);
        self.next = (k + 1) % n.max(1);
        let Some((topic, c)) = self.consumers.get_mut(k) else {
            std::thread::sleep(timeout);
            return Ok(None);
        };
        Ok(c.poll(timeout / n.max(1) as u32).map(|d| msg(topic, d)))
    }

    fn partition_events(&mut self) -> Vec<PartitionEvent> {
        self.assigned
            .take()
            .map(|a| vec![PartitionEvent::Assigned(a)])
            .unwrap_or_default()
    }

    fn mark_durable(&mut self, _: &str, _: u32, _: i64) {}

    fn replayable(&self) -> bool {
        false
    }

    /// The in-process bus does not outlive the process, so there is nothing to resume: what
    /// was read may be forgotten (which frees its memory).
    fn commit(&mut self) {
        for (_, c) in &mut self.consumers {
            c.commit();
        }
    }
}

fn msg(topic: &str, d: kplane_bus::Delivery) -> Msg {
    Msg {
        topic: topic.to_string(),
        partition: d.partition,
        offset: d.offset as i64,
        content_type: d.message.header(headers::CONTENT_TYPE).map(str::to_string),
        payload: d.message.payload,
    }
}
