//! The in-process bus: per partition a bounded log with offsets; consumers read from a
//! position and commit; a message leaves memory once every consumer group has committed it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::{BusError, Message, Producer};

#[derive(Debug, Default)]
struct Log {
    /// Offset of `messages[0]`.
    base: u64,
    messages: VecDeque<Message>,
    /// Committed offset (next to read) per consumer group.
    committed: BTreeMap<String, u64>,
}

impl Log {
    fn end(&self) -> u64 {
        self.base + self.messages.len() as u64
    }

    /// Drops what every group has committed.
    fn trim(&mut self) {
        let Some(&low) = self.committed.values().min() else {
            return;
        };
        while self.base < low && self.messages.pop_front().is_some() {
            self.base += 1;
        }
    }
}

#[derive(Debug)]
struct Partition {
    log: Mutex<Log>,
    arrived: Condvar,
}

#[derive(Debug)]
struct Topic {
    partitions: Vec<Partition>,
    capacity: usize,
}

/// Message counts of one topic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicStats {
    /// Per partition: messages ever appended (the end offset).
    pub end_offsets: Vec<u64>,
    /// Per partition: messages held in memory.
    pub held: Vec<usize>,
}

/// In-process bus. Cloning shares it.
#[derive(Clone, Debug, Default)]
pub struct EmbeddedBus {
    topics: Arc<Mutex<HashMap<String, Arc<Topic>>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl EmbeddedBus {
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates `topic` with `partitions` partitions of at most `capacity` unconsumed messages
    /// each; an existing topic is kept (like Kafka's create-if-missing).
    pub fn create_topic(&self, topic: &str, partitions: u32, capacity: usize) {
        let mut topics = lock(&self.topics);
        topics.entry(topic.to_string()).or_insert_with(|| {
            Arc::new(Topic {
                partitions: (0..partitions.max(1))
                    .map(|_| Partition {
                        log: Mutex::new(Log::default()),
                        arrived: Condvar::new(),
                    })
                    .collect(),
                capacity: capacity.max(1),
            })
        });
    }

    fn topic(&self, name: &str) -> Result<Arc<Topic>, BusError> {
        lock(&self.topics)
            .get(name)
            .cloned()
            .ok_or_else(|| BusError::UnknownTopic(name.to_string()))
    }

    /// A consumer in `group` reading every partition of `topic` from the group's committed
    /// offsets (or the start).
    pub fn consumer(&self, topic: &str, group: &str) -> Result<EmbeddedConsumer, BusError> {
        let t = self.topic(topic)?;
        let positions = t
            .partitions
            .iter()
            .map(|p| {
                let mut log = lock(&p.log);
                let base = log.base;
                *log.committed.entry(group.to_string()).or_insert(base)
            })
            .collect();
        Ok(EmbeddedConsumer {
            topic: t,
            group: group.to_string(),
            positions,
            next_partition: 0,
        })
    }

    pub fn stats(&self, topic: &str) -> Result<TopicStats, BusError> {
        let t = self.topic(topic)?;
        let mut s = TopicStats::default();
        for p in &t.partitions {
            let log = lock(&p.log);
            s.end_offsets.push(log.end());
            s.held.push(log.messages.len());
        }
        Ok(s)
    }
}

impl Producer for EmbeddedBus {
    fn send(&self, msg: Message) -> Result<(), BusError> {
        let t = self.topic(msg.topic)?;
        let partitions = t.partitions.len() as u32;
        let p =
            t.partitions
                .get(msg.partition as usize)
                .ok_or_else(|| BusError::UnknownPartition {
                    topic: msg.topic.to_string(),
                    partition: msg.partition,
                    partitions,
                })?;
        let mut log = lock(&p.log);
        if log.messages.len() >= t.capacity {
            return Err(BusError::Full {
                topic: msg.topic.to_string(),
                partition: msg.partition,
                capacity: t.capacity,
            });
        }
        log.messages.push_back(msg);
        drop(log);
        p.arrived.notify_all();
        Ok(())
    }

    fn partitions(&self, topic: &str) -> Result<u32, BusError> {
        Ok(self.topic(topic)?.partitions.len() as u32)
    }
}

/// A message read from the bus, with where it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub partition: u32,
    pub offset: u64,
    pub message: Message,
}

/// Reads a topic for one consumer group.
#[derive(Debug)]
pub struct EmbeddedConsumer {
    topic: Arc<Topic>,
    group: String,
    /// Next offset to read, per partition.
    positions: Vec<u64>,
    next_partition: usize,
}

impl EmbeddedConsumer {
    /// The next message of any partition (round robin), waiting up to `timeout`.
    pub fn poll(&mut self, timeout: Duration) -> Option<Delivery> {
        let deadline = Instant::now() + timeout;
        loop {
            let n = self.topic.partitions.len();
            for i in 0..n {
                let idx = (self.next_partition + i) % n;
                if let Some(d) = self.take(idx) {
                    self.next_partition = (idx + 1) % n;
                    return Some(d);
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            // Wait on one partition for a bounded slice, then look at all again.
            let p = &self.topic.partitions[self.next_partition % n];
            let log = lock(&p.log);
            let wait = (deadline - now).min(Duration::from_millis(10));
            let _ = p.arrived.wait_timeout(log, wait);
        }
    }

    fn take(&mut self, idx: usize) -> Option<Delivery> {
        let p = &self.topic.partitions[idx];
        let log = lock(&p.log);
        let pos = self.positions[idx].max(log.base);
        let msg = log.messages.get((pos - log.base) as usize)?.clone();
        self.positions[idx] = pos + 1;
        Some(Delivery {
            partition: idx as u32,
            offset: pos,
            message: msg,
        })
    }

    /// Commits everything read so far: the bus may now forget it.
    pub fn commit(&mut self) {
        for (idx, p) in self.topic.partitions.iter().enumerate() {
            let mut log = lock(&p.log);
            log.committed
                .insert(self.group.clone(), self.positions[idx]);
            log.trim();
        }
    }

    /// Reads everything currently available (for tests and tools).
    pub fn drain(&mut self, timeout: Duration) -> Vec<Delivery> {
        let mut out = Vec::new();
        while let Some(d) = self.poll(if out.is_empty() {
            timeout
        } else {
            Duration::ZERO
        }) {
            out.push(d);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn msg(partition: u32, payload: &'static str) -> Message {
        Message {
            topic: "t",
            partition,
            key: None,
            headers: vec![],
            payload: Bytes::from_static(payload.as_bytes()),
            timestamp_ns: 0,
        }
    }

    #[test]
    fn partitions_keep_order_and_offsets() {
        let bus = EmbeddedBus::new();
        bus.create_topic("t", 2, 10);
        for (p, s) in [(0, "a"), (1, "b"), (0, "c")] {
            bus.send(msg(p, s)).unwrap();
        }
        let mut c = bus.consumer("t", "g").unwrap();
        let got = c.drain(Duration::from_millis(10));
        let p0: Vec<_> = got
            .iter()
            .filter(|d| d.partition == 0)
            .map(|d| (d.offset, d.message.payload.clone()))
            .collect();
        assert_eq!(p0, vec![(0, Bytes::from("a")), (1, Bytes::from("c"))]);
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn full_partitions_refuse_and_commits_free_space() {
        let bus = EmbeddedBus::new();
        bus.create_topic("t", 1, 2);
        let mut c = bus.consumer("t", "g").unwrap();
        bus.send(msg(0, "a")).unwrap();
        bus.send(msg(0, "b")).unwrap();
        let err = bus.send(msg(0, "c")).unwrap_err();
        assert_eq!(err.reason(), "full");
        assert_eq!(c.drain(Duration::from_millis(10)).len(), 2);
        bus.send(msg(0, "c")).unwrap_err(); // read but not committed: still held
        c.commit();
        bus.send(msg(0, "c")).unwrap();
        assert_eq!(bus.stats("t").unwrap().held, vec![1]);
        // A new consumer of the same group resumes after the commit.
        let mut again = bus.consumer("t", "g").unwrap();
        let d = again.drain(Duration::from_millis(10));
        assert_eq!(d[0].offset, 2);
    }

    #[test]
    fn unknown_topics_and_partitions_are_errors() {
        let bus = EmbeddedBus::new();
        bus.create_topic("t", 2, 2);
        assert_eq!(
            bus.send(Message {
                topic: "x",
                ..msg(0, "a")
            })
            .unwrap_err()
            .reason(),
            "unknown_topic"
        );
        assert_eq!(
            bus.send(msg(5, "a")).unwrap_err().reason(),
            "unknown_partition"
        );
        assert_eq!(bus.partitions("t").unwrap(), 2);
    }

    #[test]
    fn poll_wakes_on_arrival() {
        let bus = EmbeddedBus::new();
        bus.create_topic("t", 1, 10);
        let mut c = bus.consumer("t", "g").unwrap();
        let b = bus.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            b.send(msg(0, "late")).unwrap();
        });
        let d = c.poll(Duration::from_secs(5)).expect("delivered");
        assert_eq!(d.message.payload, Bytes::from("late"));
        h.join().unwrap();
    }
}
