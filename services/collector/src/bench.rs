//! Benchmarks the repo ships (`kplane bench …`): data reduction on INTCollector's example
//! scenario and memory per tracked metric key. Deterministic (seeded), virtual time.

use std::net::{IpAddr, Ipv4Addr};

use kplane_model::rng::Rng;
use kplane_model::{FlowKey, HopField, HopRecord, ReportEnvelope, ReportRecord};

use crate::detect::{Detection, EventConfig, StateConfig};
use crate::metrics::CollectorMetrics;
use crate::pipeline::{Pipeline, SharedWatchlist};
use crate::publish::Publisher;
use crate::watchlist::Watchlist;

/// A k=4 fat-tree: 4 core, 8 aggregation, 8 edge switches (ids 1..=20), 16 hosts. Returns the
/// 5-hop (switch, egress port) path between hosts in different pods, chosen by ECMP `hash`.
pub fn fat_tree_path(src_host: u32, dst_host: u32, hash: u64) -> [(u32, u32); 5] {
    // Pods 0..4, each with 2 edge (ids 13+2p, 14+2p) and 2 aggregation switches (5+2p, 6+2p);
    // hosts 0..16, 4 per pod, 2 per edge switch. Core switches 1..=4.
    let pod = |h: u32| h / 4;
    let edge = |h: u32| 13 + 2 * pod(h) + (h % 4) / 2;
    let (sp, dp) = (pod(src_host), pod(dst_host));
    let a = (hash & 1) as u32;
    let c = ((hash >> 1) & 1) as u32;
    let agg_up = 5 + 2 * sp + a;
    let core = 1 + 2 * a + c;
    let agg_down = 5 + 2 * dp + a;
    [
        (edge(src_host), 2 + a),
        (agg_up, 2 + c),
        (core, dp),
        (agg_down, (dst_host % 4) / 2),
        (edge(dst_host), dst_host % 2),
    ]
}

/// One 5-hop TR v2.0 report per flow (bitmap 0xFF00, every field, plus the sink's own
/// metadata) over fat-tree paths between hosts in different pods; flow `i` comes from
/// 10.0.0.0 + i. Deterministic. Used by `kplane bench ingest|kafka` and the pipeline benchmark.
pub fn fat_tree_reports(flows: u32) -> Vec<Vec<u8>> {
    use kplane_wire::build::{
        Encap, FlowSpec, IndividualSpec, IntSpec, PacketSpec, report_v20, sample_hop,
    };
    use kplane_wire::int::IntVersion;
    use kplane_wire::report::v20::GroupHeader;
    let mut rng = Rng::new(7);
    (0..flows)
        .map(|i| {
            let (s, d) = (rng.below(16) as u32, rng.below(16) as u32);
            let d = if d / 4 == s / 4 { (d + 4) % 16 } else { d };
            let path = fat_tree_path(s, d, rng.next_u64());
            let hops = path
                .iter()
                .map(|&(sw, port)| {
                    let mut h = sample_hop(sw, 5_000, 100);
                    h.set(HopField::L1EgressPort, port.into());
                    h
                })
                .collect();
            let src = Ipv4Addr::from(0x0A00_0000 + i);
            let flow = FlowSpec::udp(src.into(), Ipv4Addr::new(10, 255, 0, 1).into(), 1000, 80);
            let inner = PacketSpec {
                ethernet: false,
                ..PacketSpec::new(flow).with_int(
                    IntSpec::new(IntVersion::V2, 0xFF00, hops),
                    Encap::UdpPort { port: 0x4568 },
                )
            }
            .build();
            let sink = path[4].0;
            report_v20(
                GroupHeader {
                    node_id: sink,
                    sequence: i & 0x3F_FFFF,
                    ..GroupHeader::default()
                },
                &[IndividualSpec::int(
                    0x7C00,
                    sample_hop(sink, 5_000, 100),
                    4,
                    inner,
                )],
            )
        })
        .collect()
}

/// The v2.0 per-hop fields in bitmap order (bits 15..7): node id, L1 ports, hop latency,
/// queue, ingress and egress timestamps, L2 ports, egress tx utilisation, buffer.
pub const HOP_FIELD_BITS: [u16; 9] = [
    0x8000, 0x4000, 0x2000, 0x1000, 0x0800, 0x0400, 0x0200, 0x0100, 0x0080,
];

/// The shape of synthetic reports (the experiments' sweeps over hops, flows and fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportShape {
    pub flows: u32,
    /// Hops in each report's INT stack (the sink's own metadata is in the report header).
    pub hops: u32,
    /// Per-hop fields: the first `fields` of [`HOP_FIELD_BITS`] (1..=9).
    pub fields: u32,
    /// Flow `i` comes from 10.0.0.0 + `first_source` + i.
    pub first_source: u32,
    /// Added to the first hop's latency (ns): a changed copy of the same reports.
    pub latency_step: u32,
}

/// One TR v2.0 report per flow of `shape` over a path of switches 1..=20 (cycling), the
/// last of them the sink (its own metadata in the report header), hop latency 5 µs (plus
/// `latency_step` at the first hop). Deterministic.
pub fn shaped_reports(shape: &ReportShape) -> Vec<Vec<u8>> {
    use kplane_wire::build::{
        Encap, FlowSpec, IndividualSpec, IntSpec, PacketSpec, report_v20, sample_hop,
    };
    use kplane_wire::int::IntVersion;
    use kplane_wire::report::v20::GroupHeader;
    let bitmap = HOP_FIELD_BITS[..shape.fields.clamp(1, 9) as usize]
        .iter()
        .fold(0u16, |b, f| b | f);
    (0..shape.flows)
        .map(|i| {
            let node = |h: u32| (i + h) % 20 + 1;
            let hops = (0..shape.hops.max(1))
                .map(|h| {
                    let step = if h == 0 { shape.latency_step } else { 0 };
                    sample_hop(node(h), 5_000 + step, 100)
                })
                .collect();
            let src = Ipv4Addr::from(0x0A00_0000 + shape.first_source + i);
            let flow = FlowSpec::udp(src.into(), Ipv4Addr::new(10, 255, 0, 1).into(), 1000, 80);
            let inner = PacketSpec {
                ethernet: false,
                ..PacketSpec::new(flow).with_int(
                    IntSpec::new(IntVersion::V2, bitmap, hops),
                    Encap::UdpPort { port: 0x4568 },
                )
            }
            .build();
            // The sink is the stack's last hop: its own metadata merges into it.
            let sink = node(shape.hops.max(1) - 1);
            report_v20(
                GroupHeader {
                    node_id: sink,
                    sequence: 0,
                    ..GroupHeader::default()
                },
                &[IndividualSpec::int(
                    0x7C00,
                    sample_hop(sink, 5_000, 100),
                    4,
                    inner,
                )],
            )
        })
        .collect()
}

/// A bus that accepts and forgets: benchmarks measure the collector, not a bus.
#[derive(Debug)]
struct NullBus;

impl kplane_bus::Producer for NullBus {
    fn send(&self, _: kplane_bus::Message) -> Result<(), kplane_bus::BusError> {
        Ok(())
    }
    fn partitions(&self, _: &str) -> Result<u32, kplane_bus::BusError> {
        Ok(8)
    }
}

/// Reports through a whole [`Pipeline`] publishing every report (`publish-reports`) to a
/// null bus, to see how they spread over the partitions: `kplane bench skew`.
#[derive(Debug)]
pub struct PartitionSpread {
    pipeline: Pipeline,
    metrics: CollectorMetrics,
    partitions: u32,
}

impl PartitionSpread {
    pub fn new(partitions: u32, hot_sources: crate::config::HotSourceConfig) -> Self {
        let cfg = crate::Config {
            partitions,
            hot_sources,
            publish_reports: true,
            ..crate::Config::default()
        };
        let metrics = CollectorMetrics::default();
        let publisher = Publisher::new(
            std::sync::Arc::new(NullBus),
            metrics.clone(),
            partitions,
            cfg.encoding,
            cfg.batch_size,
            cfg.linger,
            true,
            "bench".into(),
        );
        Self {
            pipeline: Pipeline::new(&cfg, publisher, metrics.clone(), SharedWatchlist::default()),
            metrics,
            partitions,
        }
    }

    /// One report datagram, received at `received_ns`.
    pub fn datagram(&mut self, payload: &[u8], exporter: std::net::SocketAddr, received_ns: u64) {
        self.pipeline
            .datagram(payload, exporter, received_ns, false);
    }

    /// Reports published so far per partition of `int.reports` (batches still open are
    /// not counted yet).
    pub fn published(&self) -> Vec<u64> {
        (0..self.partitions)
            .map(|p| {
                self.metrics
                    .partition_records
                    .get_or_create(&crate::metrics::TopicPartition {
                        topic: kplane_bus::topics::REPORTS,
                        partition: p.to_string(),
                    })
                    .get()
            })
            .collect()
    }

    /// Reports published per partition of `int.reports`, and the records of hot sources
    /// (keyed by flow).
    pub fn finish(mut self) -> (Vec<u64>, u64) {
        self.pipeline.finish();
        self.pipeline.flush_metrics();
        (self.published(), self.metrics.hot_source_records.get())
    }
}

/// The from-memory pipeline benchmark: [`fat_tree_reports`] replayed through a whole
/// [`Pipeline`] (decode → loss → detection → Arrow batches to a null bus), each exporter's
/// sequence numbers in order as a switch sends them, time advancing 1 µs per report. Shared
/// by `benches/pipeline.rs` and `examples/pipeline_loop.rs` (for profilers).
#[derive(Debug)]
pub struct PipelineFixture {
    pipeline: Pipeline,
    reports: Vec<Vec<u8>>,
    /// By sink node id modulo 64 (a power of two: no division in the loop).
    next_seq: [u32; 64],
    /// The next report, cycling (no division in the loop either: two divisions per report
    /// were ~10 ns of the harness counted as pipeline time).
    next: usize,
    now_ns: u64,
    exporter: std::net::SocketAddr,
}

impl PipelineFixture {
    /// `flows` flows, each report sent once to warm up (every key exists afterwards).
    pub fn new(flows: u32) -> Self {
        let cfg = crate::Config::default();
        let metrics = CollectorMetrics::default();
        let publisher = Publisher::new(
            std::sync::Arc::new(NullBus),
            metrics.clone(),
            8,
            cfg.encoding,
            cfg.batch_size,
            cfg.linger,
            false,
            "bench".into(),
        );
        let mut f = Self {
            pipeline: Pipeline::new(&cfg, publisher, metrics, SharedWatchlist::default()),
            reports: fat_tree_reports(flows),
            next_seq: [0; 64],
            next: 0,
            now_ns: 1_000_000_000,
            exporter: std::net::SocketAddr::from(([10, 255, 0, 9], 5000)),
        };
        for _ in 0..f.reports.len() {
            f.step();
        }
        f
    }

    /// One report through the pipeline.
    #[inline]
    pub fn step(&mut self) {
        let i = self.next;
        self.next = if i + 1 == self.reports.len() {
            0
        } else {
            i + 1
        };
        let r = &mut self.reports[i];
        self.now_ns += 1_000;
        // The sink's next sequence number into the group header (22 bits).
        let node = u32::from_be_bytes([r[4], r[5], r[6], r[7]]) as usize % self.next_seq.len();
        let seq = self.next_seq[node] & 0x3F_FFFF;
        self.next_seq[node] += 1;
        let w = (u32::from_be_bytes([r[0], r[1], r[2], r[3]]) & !0x3F_FFFF) | seq;
        r[..4].copy_from_slice(&w.to_be_bytes());
        self.pipeline
            .datagram(std::hint::black_box(r), self.exporter, self.now_ns, false);
    }

    /// Flushes the pipeline's batches.
    pub fn finish(mut self) {
        self.pipeline.finish();
    }
}

/// Parameters of the reduction scenario (defaults: INTCollector §V-B2).
#[derive(Clone, Debug)]
pub struct ReductionParams {
    pub flows: u32,
    /// Reports per second of virtual time.
    pub rate: u64,
    pub seconds: u64,
    /// Real (above-threshold) changes per second.
    pub changes: u64,
    pub events: EventConfig,
}

impl Default for ReductionParams {
    fn default() -> Self {
        Self {
            flows: 5000,
            rate: 1_000_000,
            seconds: 10,
            changes: 1000,
            events: EventConfig::default(),
        }
    }
}

/// What the reduction run measured.
#[derive(Clone, Debug, Default)]
pub struct ReductionResult {
    pub reports: u64,
    /// Metric values in the reports (M_all): 22 per 5-hop report with all fields.
    pub metric_values: u64,
    /// Event rows out (M_event).
    pub events: u64,
    pub keys: usize,
    pub ratio: f64,
    /// The paper's formula for the same R, k, K, P and E: R·k / (E + K/P).
    pub paper_ratio: f64,
}

/// Runs `p.rate × p.seconds` 5-hop reports with every INT field through event detection.
pub fn reduction(p: &ReductionParams) -> ReductionResult {
    let mut rng = Rng::new(0x5EED);
    let flows: Vec<(FlowKey, [(u32, u32); 5])> = (0..p.flows)
        .map(|i| {
            let src = (rng.below(16)) as u32;
            let mut dst = (rng.below(16)) as u32;
            if dst / 4 == src / 4 {
                dst = (dst + 4) % 16;
            }
            let key = FlowKey {
                src_ip: IpAddr::V4(Ipv4Addr::new(10, 0, (src / 4) as u8, (src % 4) as u8 + 1)),
                dst_ip: IpAddr::V4(Ipv4Addr::new(10, 0, (dst / 4) as u8, (dst % 4) as u8 + 1)),
                src_port: 10_000 + (i % 50_000) as u16,
                dst_port: 80,
                protocol: 6,
            };
            (key, fat_tree_path(src, dst, rng.next_u64()))
        })
        .collect();
    let th = &p.events;
    // Per (flow, hop) latency level and per (switch, port) queue/utilisation levels; noise
    // stays under a third of each threshold, changes step by twice the threshold.
    let mut lat = vec![[5_000u64; 5]; flows.len()];
    let mut queue = vec![[100u64; 5]; 21];
    let mut util = vec![[1_000u64; 5]; 21];
    let noise = |rng: &mut Rng, t: u64| rng.below((t / 3).max(1));
    let total = p.rate * p.seconds;
    let step_every = (p.rate / p.changes.max(1)).max(1);
    let mut det = Detection::new(p.events.clone(), &StateConfig::default());
    let wl = Watchlist::default();
    let mut rec = ReportRecord {
        envelope: ReportEnvelope::default(),
        flow: None,
        hops: Vec::with_capacity(5),
    };
    let mut events = 0u64;
    for n in 0..total {
        let now = n * 1_000_000_000 / p.rate;
        if n % step_every == 0 {
            // One real change: a latency step on some hop, or a queue / link level step.
            let f = rng.below(flows.len() as u64) as usize;
            let h = rng.below(5) as usize;
            let (sw, port) = flows[f].1[h];
            match rng.below(3) {
                0 => {
                    lat[f][h] = if lat[f][h] > 5_000 {
                        5_000
                    } else {
                        5_000 + 2 * th.hop_latency.max(th.flow_latency)
                    }
                }
                1 => {
                    queue[sw as usize][port as usize] = if queue[sw as usize][port as usize] > 100 {
                        100
                    } else {
                        100 + 2 * th.queue_occupancy
                    }
                }
                _ => {
                    util[sw as usize][port as usize] = if util[sw as usize][port as usize] > 1_000 {
                        1_000
                    } else {
                        1_000 + 2 * th.link_utilization
                    }
                }
            }
        }
        let f = (n % flows.len() as u64) as usize;
        let (key, path) = &flows[f];
        rec.envelope.received_ns = now;
        rec.flow = Some(*key);
        rec.hops.clear();
        for (h, &(sw, port)) in path.iter().enumerate() {
            let mut hop = HopRecord::default();
            hop.set(HopField::NodeId, sw.into());
            hop.set(HopField::L1IngressPort, 0);
            hop.set(HopField::L1EgressPort, port.into());
            hop.set(
                HopField::HopLatency,
                lat[f][h] + noise(&mut rng, th.hop_latency / 5),
            );
            hop.set(HopField::QueueId, port.into());
            hop.set(
                HopField::QueueOccupancy,
                queue[sw as usize][port as usize] + noise(&mut rng, th.queue_occupancy),
            );
            hop.set(HopField::QueueCongestion, 0);
            hop.set(
                HopField::TxUtilization,
                util[sw as usize][port as usize] + noise(&mut rng, th.link_utilization),
            );
            hop.set(HopField::IngressTimestamp, now);
            hop.set(HopField::EgressTimestamp, now + lat[f][h]);
            rec.hops.push(hop);
        }
        det.process(&rec, &wl, |_| events += 1);
    }
    let keys = det.keys();
    let k = 22.0;
    let refresh = p.events.refresh.as_secs_f64().max(1e-9);
    ReductionResult {
        reports: total,
        metric_values: total * 22,
        events,
        keys,
        ratio: (total * 22) as f64 / events.max(1) as f64,
        paper_ratio: p.rate as f64 * k / (p.changes as f64 + keys as f64 / refresh),
    }
}

/// Resident set size of this process, bytes (Linux).
pub fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * page.max(0) as u64)
}

/// Memory of event-detection state with `flows` flows (one hop each: a path, a flow latency
/// and a per-hop latency key per flow). Returns (keys, resident bytes added, table bytes).
pub fn memory(flows: u32) -> (usize, u64, usize) {
    let mut det = Detection::new(EventConfig::default(), &StateConfig::default());
    let wl = Watchlist::default();
    let before = rss_bytes().unwrap_or(0);
    let mut rec = ReportRecord::default();
    let mut hop = HopRecord::default();
    hop.set(HopField::NodeId, 1);
    hop.set(HopField::HopLatency, 1000);
    rec.hops.push(hop);
    for i in 0..flows {
        rec.flow = Some(FlowKey {
            src_ip: IpAddr::V4(Ipv4Addr::from(0x0A00_0000 + i)),
            dst_ip: IpAddr::V4(Ipv4Addr::new(10, 255, 0, 1)),
            src_port: 1000,
            dst_port: 80,
            protocol: 17,
        });
        det.process(&rec, &wl, |_| {});
    }
    let after = rss_bytes().unwrap_or(0);
    (
        det.keys(),
        after.saturating_sub(before),
        det.key_table_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fat_tree_paths_are_five_distinct_switches() {
        for (s, d) in [(0, 5), (3, 15), (8, 1)] {
            let p = fat_tree_path(s, d, 3);
            let mut ids: Vec<_> = p.iter().map(|x| x.0).collect();
            ids.sort();
            ids.dedup();
            assert_eq!(ids.len(), 5, "{p:?}");
            assert!(p.iter().all(|x| (1..=20).contains(&x.0) && x.1 < 4));
        }
    }

    #[test]
    fn shaped_reports_decode_with_their_hops_and_fields() {
        use kplane_wire::{DecodeOptions, Decoder, RecordMeta};
        let shape = ReportShape {
            flows: 3,
            hops: 4,
            fields: 3,
            first_source: 100,
            latency_step: 0,
        };
        let changed = shaped_reports(&ReportShape {
            latency_step: 20_000,
            ..shape
        });
        let mut dec = Decoder::new(DecodeOptions::default());
        for (i, (r, c)) in shaped_reports(&shape).iter().zip(&changed).enumerate() {
            // A changed report is the same length: senders batch them together.
            assert_eq!(r.len(), c.len());
            let mut got = Vec::new();
            dec.decode_report(c, RecordMeta::default(), |rec| got.push(rec.clone()));
            let rec = &got[0];
            assert_eq!(rec.hops.len(), 4);
            assert_eq!(
                rec.flow.unwrap().src_ip,
                IpAddr::V4(Ipv4Addr::from(0x0A00_0000 + 100 + i as u32))
            );
            assert_eq!(rec.hops[0].get(HopField::HopLatency), Some(25_000));
            assert_eq!(rec.hops[1].get(HopField::HopLatency), Some(5_000));
            assert_eq!(rec.hops[0].get(HopField::QueueOccupancy), None);
        }
    }

    #[test]
    fn reduction_counts_values_and_events() {
        let r = reduction(&ReductionParams {
            flows: 50,
            rate: 10_000,
            seconds: 2,
            changes: 10,
            ..ReductionParams::default()
        });
        assert_eq!(r.metric_values, r.reports * 22);
        // Every key is new once; then only changes (and no refresh within 2 s).
        assert!(r.events >= r.keys as u64, "{r:?}");
        assert!(r.ratio > 10.0, "{r:?}");
    }
}
