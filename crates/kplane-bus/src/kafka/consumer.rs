//! The bus's consumer-group member on Kafka.
//!
//! Commit protocol (at-least-once, made exact downstream by batch ids): the application calls
//! [`KafkaConsumer::mark_durable`] once a message's results are durable; [`KafkaConsumer::commit`]
//! commits those offsets. On revocation the durable offsets of the revoked partitions are
//! committed inside the rebalance callback — before another member can be assigned them — and
//! the application is told ([`PartitionEvent::Revoked`]) to drop their in-memory state;
//! anything it had not made durable is read again by the next owner.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::{BusError, KafkaConfig, PartitionEvent, Received, TopicPartition};
use bytes::Bytes;
use rdkafka::ClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{Headers, Message};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::KafkaBusError;
use super::client::consumer_config;
use super::metrics::{KafkaMetrics, KindLabel, PartitionLabel, TopicLabel};

#[derive(Default)]
struct Shared {
    events: VecDeque<PartitionEvent>,
    /// Next offset to commit, per partition, for results already durable.
    durable: BTreeMap<TopicPartition, i64>,
}

struct Group {
    shared: Mutex<Shared>,
    metrics: KafkaMetrics,
}

impl Group {
    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn partitions(tpl: &TopicPartitionList) -> Vec<TopicPartition> {
    tpl.elements()
        .iter()
        .map(|e| (e.topic().to_string(), e.partition() as u32))
        .collect()
}

impl ClientContext for Group {}

impl ConsumerContext for Group {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(tpl) = rebalance else {
            return;
        };
        let revoked = partitions(tpl);
        let mut offsets = TopicPartitionList::new();
        {
            let mut s = self.lock();
            for tp in &revoked {
                if let Some(next) = s.durable.remove(tp) {
                    let _ = offsets.add_partition_offset(&tp.0, tp.1 as i32, Offset::Offset(next));
                }
            }
            s.events.push_back(PartitionEvent::Revoked(revoked.clone()));
        }
        if offsets.count() > 0 {
            match consumer.commit(&offsets, CommitMode::Sync) {
                Ok(()) => {
                    self.metrics.commits.inc();
                }
                Err(e) => {
                    self.metrics.commit_errors.inc();
                    tracing::warn!(error = %e, "commit on revoke failed; the next owner re-reads");
                }
            };
        }
        self.metrics
            .rebalances
            .get_or_create(&KindLabel { kind: "revoke" })
            .inc();
        for (topic, partition) in revoked {
            self.metrics
                .consumer_lag
                .remove(&PartitionLabel { topic, partition });
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                self.lock()
                    .events
                    .push_back(PartitionEvent::Assigned(partitions(tpl)));
                self.metrics
                    .rebalances
                    .get_or_create(&KindLabel { kind: "assign" })
                    .inc();
            }
            Rebalance::Error(e) => tracing::warn!(error = %e, "rebalance error"),
            Rebalance::Revoke(_) => {}
        }
    }
}

/// A member of a consumer group (cooperative-sticky assignment, manual commits).
pub struct KafkaConsumer {
    inner: BaseConsumer<Group>,
    metrics: KafkaMetrics,
    /// The assigned partition whose lag the next [`Self::update_lag`] refreshes.
    lag_turn: usize,
}

impl std::fmt::Debug for KafkaConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaConsumer").finish_non_exhaustive()
    }
}

impl KafkaConsumer {
    /// Joins `group` and subscribes to `topics`; partitions arrive through [`Self::poll`].
    pub fn subscribe(
        cfg: &KafkaConfig,
        group: &str,
        topics: &[&str],
        metrics: KafkaMetrics,
    ) -> Result<Self, KafkaBusError> {
        let inner: BaseConsumer<Group> =
            consumer_config(cfg, group).create_with_context(Group {
                shared: Mutex::default(),
                metrics: metrics.clone(),
            })?;
        inner.subscribe(topics)?;
        Ok(Self {
            inner,
            metrics,
            lag_turn: 0,
        })
    }

    /// The next message, if one arrives within `timeout`. Rebalance callbacks run inside this
    /// call; collect their outcome with [`Self::partition_events`].
    pub fn poll(&self, timeout: Duration) -> Result<Option<Received>, KafkaBusError> {
        let Some(result) = self.inner.poll(timeout) else {
            return Ok(None);
        };
        let m = result?;
        let payload = Bytes::copy_from_slice(m.payload().unwrap_or_default());
        let topic = m.topic().to_string();
        let label = TopicLabel {
            topic: topic.clone(),
        };
        self.metrics.consumed.get_or_create(&label).inc();
        self.metrics
            .consumed_bytes
            .get_or_create(&label)
            .inc_by(payload.len() as u64);
        let headers = m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| {
                        let v = h.value.map(String::from_utf8_lossy).unwrap_or_default();
                        (h.key.to_string(), v.into_owned())
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Some(Received {
            topic,
            partition: m.partition() as u32,
            offset: m.offset(),
            key: m.key().map(Bytes::copy_from_slice),
            headers,
            payload,
            timestamp_ms: m.timestamp().to_millis(),
        }))
    }

    /// Assignments and revocations since the last call, in order.
    pub fn partition_events(&self) -> Vec<PartitionEvent> {
        self.inner.context().lock().events.drain(..).collect()
    }

    /// The results of everything up to and including `offset` in this partition are durable.
    pub fn mark_durable(&self, topic: &str, partition: u32, offset: i64) {
        let mut s = self.inner.context().lock();
        let next = s.durable.entry((topic.to_string(), partition)).or_insert(0);
        *next = (*next).max(offset + 1);
    }

    /// Commits every durable offset (synchronously).
    pub fn commit(&self) -> KafkaResult<()> {
        let offsets = {
            let s = self.inner.context().lock();
            let mut tpl = TopicPartitionList::new();
            for ((topic, partition), &next) in &s.durable {
                tpl.add_partition_offset(topic, *partition as i32, Offset::Offset(next))?;
            }
            tpl
        };
        if offsets.count() == 0 {
            return Ok(());
        }
        let r = self.inner.commit(&offsets, CommitMode::Sync);
        let counter = if r.is_ok() {
            &self.metrics.commits
        } else {
            &self.metrics.commit_errors
        };
        counter.inc();
        r
    }

    /// Refreshes `kplane_bus_consumer_lag` for one assigned partition, each in turn: a
    /// watermark query is a round trip that can take its whole `timeout` (a broker slow to
    /// answer for an empty partition), and the consumer's loop must not stall on statistics —
    /// with eight partitions each one's gauge is at most eight calls old.
    pub fn update_lag(&mut self, timeout: Duration) {
        let Ok(position) = self.inner.position() else {
            return;
        };
        let elements = position.elements();
        if elements.is_empty() {
            return;
        }
        let e = &elements[self.lag_turn % elements.len()];
        self.lag_turn = self.lag_turn.wrapping_add(1);
        let Ok((_, high)) = self
            .inner
            .fetch_watermarks(e.topic(), e.partition(), timeout)
        else {
            return;
        };
        let lag = match e.offset() {
            Offset::Offset(pos) => (high - pos).max(0),
            _ => high,
        };
        self.metrics
            .consumer_lag
            .get_or_create(&PartitionLabel {
                topic: e.topic().to_string(),
                partition: e.partition() as u32,
            })
            .set(lag);
    }

    /// Leaves the group cleanly (revokes, so durable offsets are committed first).
    pub fn close(self) {
        self.inner.unsubscribe();
        // Serve the revoke callback.
        for _ in 0..10 {
            let _ = self.inner.poll(Duration::from_millis(50));
        }
    }
}

impl crate::Consumer for KafkaConsumer {
    fn poll(&mut self, timeout: Duration) -> Result<Option<Received>, BusError> {
        KafkaConsumer::poll(self, timeout).map_err(|e| match e {
            // E.g. the topic does not exist yet because no producer has started.
            KafkaBusError::Client(KafkaError::MessageConsumption(code)) => {
                BusError::Unavailable(code.to_string())
            }
            e => BusError::Kafka(e.to_string()),
        })
    }

    fn partition_events(&mut self) -> Vec<PartitionEvent> {
        KafkaConsumer::partition_events(self)
    }

    fn mark_durable(&mut self, topic: &str, partition: u32, offset: i64) {
        KafkaConsumer::mark_durable(self, topic, partition, offset);
    }

    fn commit(&mut self) -> Result<(), BusError> {
        KafkaConsumer::commit(self).map_err(|e| BusError::Unavailable(e.to_string()))
    }

    fn update_lag(&mut self) {
        KafkaConsumer::update_lag(self, Duration::from_millis(200));
    }

    fn close(self: Box<Self>) {
        KafkaConsumer::close(*self);
    }
}
