//! The consumer side of the bus: one interface, [`Consumer`], for every service that reads
//! topics (the stream processor, the knowledge service, the intent API), with the in-process
//! implementation [`EmbeddedGroup`] here and the Kafka one in `kafka` (feature `kafka`).
//!
//! Commit protocol (at-least-once, made exact downstream where it matters): the application
//! marks a message durable once its results are durable ([`Consumer::mark_durable`]) and
//! [`Consumer::commit`] commits those offsets; partitions arrive and leave as
//! [`PartitionEvent`]s.

use std::time::Duration;

use bytes::Bytes;

use crate::{BusError, EmbeddedBus, EmbeddedConsumer, Producer};

/// A partition of a topic.
pub type TopicPartition = (String, u32);

/// A change in what this member owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartitionEvent {
    /// Build state for these; reading resumes at their committed offsets.
    Assigned(Vec<TopicPartition>),
    /// Drop state for these; their durable offsets are already committed.
    Revoked(Vec<TopicPartition>),
}

/// One message read, with where it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    pub topic: String,
    pub partition: u32,
    pub offset: i64,
    pub key: Option<Bytes>,
    pub headers: Vec<(String, String)>,
    pub payload: Bytes,
    /// Producer timestamp, ms since the Unix epoch.
    pub timestamp_ms: Option<i64>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads topics as a member of a consumer group.
pub trait Consumer: Send {
    /// The next message, waiting up to `timeout`. A retryable error
    /// ([`BusError::is_retryable`], e.g. a topic not created yet) means "try again".
    fn poll(&mut self, timeout: Duration) -> Result<Option<Received>, BusError>;
    /// Assignment changes since the last call, in order.
    fn partition_events(&mut self) -> Vec<PartitionEvent>;
    /// Everything up to and including `offset` of (topic, partition) has durable results.
    fn mark_durable(&mut self, topic: &str, partition: u32, offset: i64);
    /// Commits the durable offsets; an error is retryable (the next owner re-reads more).
    fn commit(&mut self) -> Result<(), BusError>;
    /// Refreshes a consumer-lag gauge, one partition per call in turn (Kafka only; call about
    /// once a second).
    fn update_lag(&mut self) {}
    /// Whether what was read but not committed can be read again after a stop (Kafka keeps
    /// the messages; the in-process bus does not).
    fn replayable(&self) -> bool {
        true
    }
    /// Leaves the group cleanly.
    fn close(self: Box<Self>) {}
}

/// A consumer group member on the in-process bus: it owns every partition of its topics
/// (announced as one [`PartitionEvent::Assigned`]). `commit` frees what was read; marking
/// durable has nothing to do, since nothing outlives the process.
#[derive(Debug)]
pub struct EmbeddedGroup {
    consumers: Vec<(String, EmbeddedConsumer)>,
    assigned: Option<Vec<TopicPartition>>,
    next: usize,
}

impl EmbeddedGroup {
    /// Reads `topics` as `group`; the topics must exist on `bus`.
    pub fn subscribe(bus: &EmbeddedBus, topics: &[&str], group: &str) -> Result<Self, BusError> {
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

impl Consumer for EmbeddedGroup {
    fn poll(&mut self, timeout: Duration) -> Result<Option<Received>, BusError> {
        let n = self.consumers.len();
        // A non-blocking round over the topics first, then wait on one of them.
        for i in 0..n {
            let k = (self.next + i) % n;
            let (topic, c) = &mut self.consumers[k];
            if let Some(d) = c.poll(Duration::ZERO) {
                self.next = (k + 1) % n;
                return Ok(Some(received(topic, d)));
            }
        }
        let k = self.next % n.max(1);
        self.next = (k + 1) % n.max(1);
        let Some((topic, c)) = self.consumers.get_mut(k) else {
            std::thread::sleep(timeout);
            return Ok(None);
        };
        Ok(c.poll(timeout / n.max(1) as u32)
            .map(|d| received(topic, d)))
    }

    fn partition_events(&mut self) -> Vec<PartitionEvent> {
        self.assigned
            .take()
            .map(|a| vec![PartitionEvent::Assigned(a)])
            .unwrap_or_default()
    }

    fn mark_durable(&mut self, _: &str, _: u32, _: i64) {}

    fn commit(&mut self) -> Result<(), BusError> {
        for (_, c) in &mut self.consumers {
            c.commit();
        }
        Ok(())
    }

    fn replayable(&self) -> bool {
        false
    }
}

fn received(topic: &str, d: crate::Delivery) -> Received {
    Received {
        topic: topic.to_string(),
        partition: d.partition,
        offset: d.offset as i64,
        key: d.message.key,
        headers: d
            .message
            .headers
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        payload: d.message.payload,
        timestamp_ms: Some((d.message.timestamp_ns / 1_000_000) as i64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Message;

    #[test]
    fn an_embedded_group_owns_every_partition_and_reads_every_topic() {
        let bus = EmbeddedBus::new();
        bus.create_topic("a", 2, 8);
        bus.create_topic("b", 1, 8);
        let mut g = EmbeddedGroup::subscribe(&bus, &["a", "b"], "g").unwrap();
        assert_eq!(
            g.partition_events(),
            vec![PartitionEvent::Assigned(vec![
                ("a".into(), 0),
                ("a".into(), 1),
                ("b".into(), 0)
            ])]
        );
        assert!(g.partition_events().is_empty());
        for (topic, partition) in [("a", 1), ("b", 0)] {
            bus.send(Message {
                topic,
                partition,
                key: None,
                headers: vec![("kplane-schema", "x/v1".into())],
                payload: Bytes::from_static(b"p"),
                timestamp_ns: 5_000_000,
            })
            .unwrap();
        }
        let mut got = Vec::new();
        while let Some(r) = g.poll(Duration::from_millis(20)).unwrap() {
            got.push((
                r.topic.clone(),
                r.partition,
                r.header("kplane-schema").map(str::to_string),
            ));
            assert_eq!(r.timestamp_ms, Some(5));
        }
        got.sort();
        assert_eq!(
            got,
            vec![
                ("a".into(), 1, Some("x/v1".into())),
                ("b".into(), 0, Some("x/v1".into()))
            ]
        );
        g.commit().unwrap();
        assert_eq!(bus.stats("a").unwrap().held, vec![0, 0]);
    }

    #[test]
    fn subscribing_to_a_missing_topic_is_an_error() {
        let bus = EmbeddedBus::new();
        let err = EmbeddedGroup::subscribe(&bus, &["nope"], "g").unwrap_err();
        assert_eq!(err.reason(), "unknown_topic");
    }
}
