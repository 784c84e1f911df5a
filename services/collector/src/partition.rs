//! Which partition a record goes to: Kafka's default partitioner, so any Kafka client that
//! keys messages by the same bytes lands on the same partition.
//!
//! `partition = (murmur2(key) & 0x7fffffff) % partitions`, where `murmur2` is Kafka's
//! (`org.apache.kafka.common.utils.Utils.murmur2`, seed 0x9747b28c) and `key` is the flow's
//! **source IP as 16 bytes** (IPv4 as IPv4-mapped IPv6, `::ffff:a.b.c.d`). Records without a
//! flow use the exporter's address. So every record of one source lands in one partition.
//! Events of a switch's metrics (queue occupancy and congestion, link utilisation) are keyed
//! by the switch instead ([`partition_of_switch`]).
//!
//! **Hot sources.** One source can carry a large share of the traffic (a heavy hitter, a
//! backup, an attack) and would put all of it on one partition. A [`Partitioner`] samples the
//! sources it sees (one record in [`SAMPLE_EVERY`], Space-Saving over [`COUNTERS`] counters,
//! which finds every source above 1/[`COUNTERS`] of the sample) and, each second, marks the
//! sources whose guaranteed share is at least `hot-sources.share` hot for `hot-sources.hold`.
//! A hot source's records are keyed by their **flow**: the 5-tuple as 37 bytes (source and
//! destination as 16 bytes each, source port, destination port big-endian, protocol), so its
//! flows spread over every partition while each flow stays in one. A flow moves once when its
//! source turns hot and once when it cools down (after `hold`).

use std::net::IpAddr;

use kplane_model::{FlowKey, ip_to_16};

use crate::config::HotSourceConfig;

/// Kafka's murmur2 (32-bit).
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        if tail.len() >= 3 {
            h ^= u32::from(tail[2]) << 16;
        }
        if tail.len() >= 2 {
            h ^= u32::from(tail[1]) << 8;
        }
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of `key` among `partitions` (≥ 1).
pub fn partition_of_key(key: &[u8], partitions: u32) -> u32 {
    ((murmur2(key) as u32) & 0x7fff_ffff) % partitions.max(1)
}

/// The partition of a source address.
pub fn partition_of(source: IpAddr, partitions: u32) -> u32 {
    partition_of_key(&ip_to_16(source), partitions)
}

/// The partition of a switch's metric events: its node id as 4 bytes, big-endian. One
/// switch's queue and port series is in one partition whichever flows carried its samples.
pub fn partition_of_switch(node_id: u32, partitions: u32) -> u32 {
    partition_of_key(&node_id.to_be_bytes(), partitions)
}

/// The partition key of a flow: its 5-tuple as 37 bytes.
pub fn flow_key_bytes(f: &FlowKey) -> [u8; 37] {
    let mut k = [0u8; 37];
    k[..16].copy_from_slice(&ip_to_16(f.src_ip));
    k[16..32].copy_from_slice(&ip_to_16(f.dst_ip));
    k[32..34].copy_from_slice(&f.src_port.to_be_bytes());
    k[34..36].copy_from_slice(&f.dst_port.to_be_bytes());
    k[36] = f.protocol;
    k
}

/// One record in this many (on average; the gap is drawn at random, so traffic that
/// alternates sources with a period cannot hide from the sample) is counted towards its
/// source's share.
pub const SAMPLE_EVERY: u32 = 16;
/// Space-Saving counters: every source above 1/`COUNTERS` of the sample is among them.
pub const COUNTERS: usize = 32;
/// Shares are judged over this much receive time.
const INTERVAL_NS: u64 = 1_000_000_000;
/// Fewer samples than this in an interval decide nothing (too little traffic to overload a
/// partition).
const MIN_SAMPLES: u64 = 64;

/// A Space-Saving counter: a source, its count, and how much of it may belong to the
/// sources it replaced.
#[derive(Clone, Copy, Debug)]
struct Counter {
    source: IpAddr,
    count: u64,
    error: u64,
}

/// Chooses each record's partition: by source, or by flow for hot sources.
#[derive(Debug)]
pub struct Partitioner {
    partitions: u32,
    share: f64,
    hold_ns: u64,
    countdown: u32,
    /// xorshift state of the sampling gaps.
    rng: u64,
    sampled: u64,
    counters: Vec<Counter>,
    interval_end: u64,
    /// Hot sources and until when (receive time, ns).
    hot: Vec<(IpAddr, u64)>,
    /// Records keyed by flow because their source was hot.
    pub spread_records: u64,
}

impl Partitioner {
    pub fn new(partitions: u32, cfg: &HotSourceConfig) -> Self {
        Self {
            partitions: partitions.max(1),
            share: cfg.share,
            hold_ns: cfg.hold.as_nanos() as u64,
            countdown: SAMPLE_EVERY,
            rng: 0x9e37_79b9_7f4a_7c15,
            sampled: 0,
            counters: Vec::with_capacity(COUNTERS),
            interval_end: 0,
            hot: Vec::new(),
            spread_records: 0,
        }
    }

    /// Counts a record of `source` received at `now_ns` (one in [`SAMPLE_EVERY`] is
    /// sampled), and judges the shares once a second.
    #[inline]
    pub fn observe(&mut self, source: IpAddr, now_ns: u64) {
        if self.share <= 0.0 || self.partitions == 1 {
            return;
        }
        if now_ns >= self.interval_end {
            self.judge(now_ns);
        }
        self.countdown -= 1;
        if self.countdown == 0 {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            // 1 ..= 2·SAMPLE_EVERY − 1: SAMPLE_EVERY on average.
            self.countdown = 1 + (self.rng % u64::from(2 * SAMPLE_EVERY - 1)) as u32;
            self.sample(source);
        }
    }

    fn sample(&mut self, source: IpAddr) {
        self.sampled += 1;
        if let Some(c) = self.counters.iter_mut().find(|c| c.source == source) {
            c.count += 1;
        } else if self.counters.len() < COUNTERS {
            self.counters.push(Counter {
                source,
                count: 1,
                error: 0,
            });
        } else if let Some(min) = self.counters.iter_mut().min_by_key(|c| c.count) {
            // Space-Saving: the newcomer takes the smallest counter over.
            *min = Counter {
                source,
                count: min.count + 1,
                error: min.count,
            };
        }
    }

    /// Marks the sources above the share hot, forgets those whose hold has passed, and
    /// starts a new interval.
    fn judge(&mut self, now_ns: u64) {
        if self.sampled >= MIN_SAMPLES {
            let floor = self.share * self.sampled as f64;
            for c in &self.counters {
                if (c.count - c.error) as f64 >= floor {
                    let until = now_ns + self.hold_ns;
                    match self.hot.iter_mut().find(|h| h.0 == c.source) {
                        Some(h) => h.1 = until,
                        None => {
                            tracing::info!(source = %c.source, share = c.count as f64 / self.sampled as f64, "hot source: its flows are spread over every partition");
                            self.hot.push((c.source, until));
                        }
                    }
                }
            }
        }
        self.hot.retain(|h| {
            let keep = h.1 > now_ns;
            if !keep {
                tracing::info!(source = %h.0, "source no longer hot: keyed by source again");
            }
            keep
        });
        self.counters.clear();
        self.sampled = 0;
        self.interval_end = now_ns + INTERVAL_NS;
    }

    /// The partition of a record from `source`, of `flow` if it has one.
    #[inline]
    pub fn partition(&mut self, source: IpAddr, flow: Option<&FlowKey>) -> u32 {
        if let Some(f) = flow
            && !self.hot.is_empty()
            && self.hot.iter().any(|h| h.0 == source)
        {
            self.spread_records += 1;
            return partition_of_key(&flow_key_bytes(f), self.partitions);
        }
        partition_of(source, self.partitions)
    }

    /// The sources keyed by flow now.
    pub fn hot_sources(&self) -> usize {
        self.hot.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Kafka's own test vectors (UtilsTest.testMurmur2).
    #[test]
    fn matches_kafka() {
        let cases: [(&str, i32); 6] = [
            ("21", -973932308),
            ("foobar", -790332482),
            ("a-little-bit-long-string", -985981536),
            ("a-little-bit-longer-string", -1486304829),
            (
                "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
            ("abc", 479470107),
        ];
        for (s, want) in cases {
            assert_eq!(murmur2(s.as_bytes()), want, "{s}");
        }
    }

    #[test]
    fn one_source_one_partition_and_spread() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(partition_of(a, 8), partition_of(a, 8));
        let mut seen = [0u32; 8];
        for i in 0..1000u32 {
            let ip = IpAddr::from([10, (i >> 16) as u8, (i >> 8) as u8, i as u8]);
            seen[partition_of(ip, 8) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 60), "{seen:?}");
        assert_eq!(partition_of(a, 1), 0);
    }

    fn flow(src: [u8; 4], sport: u16) -> FlowKey {
        FlowKey {
            src_ip: IpAddr::from(src),
            dst_ip: IpAddr::from([10, 9, 9, 9]),
            src_port: sport,
            dst_port: 80,
            protocol: 17,
        }
    }

    #[test]
    fn a_heavy_source_is_spread_by_flow_and_each_flow_stays_in_one_partition() {
        let cfg = HotSourceConfig {
            share: 0.2,
            hold: Duration::from_secs(5),
        };
        let mut p = Partitioner::new(8, &cfg);
        let heavy = [10, 0, 0, 1];
        let mut now = 0;
        // Second 0: the heavy source sends half of the records, 100 others the rest.
        let send = |p: &mut Partitioner, now: u64, i: u32| {
            let src = if i.is_multiple_of(2) {
                heavy
            } else {
                [10, 1, (i >> 8) as u8 % 100, i as u8]
            };
            let f = flow(src, 1000 + (i % 64) as u16);
            p.observe(f.src_ip, now);
            (f.src_ip, f.src_port, p.partition(f.src_ip, Some(&f)))
        };
        let before: Vec<_> = (0..20_000)
            .map(|i| {
                now += 50_000;
                send(&mut p, now, i)
            })
            .collect();
        let heavy_ip = IpAddr::from(heavy);
        let partitions = |rows: &[(IpAddr, u16, u32)]| {
            let mut seen: Vec<u32> = rows
                .iter()
                .filter(|r| r.0 == heavy_ip)
                .map(|r| r.2)
                .collect();
            seen.sort_unstable();
            seen.dedup();
            seen
        };
        assert_eq!(
            partitions(&before),
            [partition_of(heavy_ip, 8)],
            "not hot before the first second is judged"
        );
        let after: Vec<_> = (20_000..40_000)
            .map(|i| {
                now += 50_000;
                send(&mut p, now, i)
            })
            .collect();
        assert_eq!(p.hot_sources(), 1);
        assert_eq!(partitions(&after).len(), 8, "spread over every partition");
        // Each of its flows is in exactly one partition while it is hot.
        for port in (1000..1064).step_by(2) {
            let mut parts: Vec<u32> = after
                .iter()
                .filter(|r| r.0 == heavy_ip && r.1 == port)
                .map(|r| r.2)
                .collect();
            parts.dedup();
            assert_eq!(parts.len(), 1, "flow {port}");
        }
        // Light sources stay keyed by source.
        assert!(
            after
                .iter()
                .filter(|r| r.0 != heavy_ip)
                .all(|r| r.2 == partition_of(r.0, 8))
        );
        // The heavy source stops: it cools down once the hold has passed.
        for _ in 0..10 {
            now += 1_000_000_000;
            p.observe(IpAddr::from([10, 1, 0, 1]), now);
        }
        assert_eq!(p.hot_sources(), 0);
        assert!(p.spread_records > 0);
    }

    #[test]
    fn spreading_off_keys_by_source() {
        let cfg = HotSourceConfig {
            share: 0.0,
            hold: Duration::from_secs(5),
        };
        let mut p = Partitioner::new(8, &cfg);
        let f = flow([10, 0, 0, 1], 1);
        for i in 0..100_000 {
            p.observe(f.src_ip, i * 1_000_000);
        }
        assert_eq!(p.partition(f.src_ip, Some(&f)), partition_of(f.src_ip, 8));
        assert_eq!(p.hot_sources(), 0);
    }

    #[test]
    fn flow_keys_are_the_5_tuple_in_37_bytes() {
        let k = flow_key_bytes(&flow([10, 0, 0, 1], 0x1234));
        assert_eq!(&k[10..16], &[0xff, 0xff, 10, 0, 0, 1]);
        assert_eq!(&k[32..], &[0x12, 0x34, 0, 80, 17]);
    }
}
