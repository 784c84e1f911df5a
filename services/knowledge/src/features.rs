//! From the stream processor's window results to entity-windows: one feature vector per
//! (entity, window) for sources, destinations, (node, queue)s and links.
//!
//! Source and destination features are computed from the window's `flows` rows, not from the
//! per-partition `sources` / `destinations` tables, so that distinct counts stay exact when
//! several partitions (processors) contribute to one window. Queues and links are merged
//! across partitions (max of maxima, sample-weighted means).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float64Type, Int64Type, TimestampNanosecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use kplane_model::ip_from_16;
use kplane_model::results::{EntityKind, FlowRef, QueueKey, queue_entity};

/// The entity kinds a detector model is learnt for.
pub const MODELLED: [EntityKind; 4] = [
    EntityKind::Source,
    EntityKind::Destination,
    EntityKind::Queue,
    EntityKind::Link,
];

/// What a window measures per entity kind, in vector order (the leading part of
/// [`names`]). Counts are `log1p`-scaled (heavy tails).
pub fn measured(kind: EntityKind) -> &'static [&'static str] {
    let all = names(kind);
    let n = all
        .iter()
        .take_while(|n| !HISTORY.contains(n) && !n.starts_with("vs_usual_"))
        .count();
    &all[..n]
}

/// The features an entity's history gives ([`crate::baseline`]), appended after the measured
/// ones and before the deviations from the usual.
const HISTORY: [&str; 3] = [
    "silence_surprise",
    "reverse_silence_surprise",
    "congested_run",
];

/// Whether an entity of `kind` that stops showing up is news: a switch-to-switch link
/// carries many hosts' traffic (the engine expects only those, not links towards a host); a
/// host that sends nothing, or a queue that drains, is not an anomaly.
pub const fn tracks_silence(kind: EntityKind) -> bool {
    matches!(kind, EntityKind::Link)
}

/// Every feature a model sees per entity kind, in vector order: what the window measured;
/// for switch-to-switch links, how surprising their current silence is and their opposite
/// direction's; for queues, how long and how far they have been congested beyond their usual;
/// then how far each measure is from the entity's own usual value (`vs_usual_…`,
/// see [`crate::baseline`]). The models weigh every one but [`TYPING_ONLY`].
pub fn names(kind: EntityKind) -> &'static [&'static str] {
    match kind {
        EntityKind::Source => &[
            "log_flows",
            "log_destinations",
            "log_dst_ports",
            "log_reports",
            "log_bytes",
            "log_packet_bytes",
            "log_bytes_other_way",
            "answered_share",
            "late_flow_share",
            "vs_usual_log_flows",
            "vs_usual_log_destinations",
            "vs_usual_log_dst_ports",
            "vs_usual_log_reports",
            "vs_usual_log_bytes",
            "vs_usual_log_packet_bytes",
            "vs_usual_log_bytes_other_way",
            "vs_usual_answered_share",
            "vs_usual_late_flow_share",
        ],
        EntityKind::Destination => &[
            "log_flows",
            "log_sources",
            "log_dst_ports",
            "log_reports",
            "log_bytes",
            "log_packet_bytes",
            "log_transit_us",
            "log_bytes_other_way",
            "answered_share",
            "late_flow_share",
            "vs_usual_log_flows",
            "vs_usual_log_sources",
            "vs_usual_log_dst_ports",
            "vs_usual_log_reports",
            "vs_usual_log_bytes",
            "vs_usual_log_packet_bytes",
            "vs_usual_log_transit_us",
            "vs_usual_log_bytes_other_way",
            "vs_usual_answered_share",
            "vs_usual_late_flow_share",
        ],
        EntityKind::Queue => &[
            "occupancy_mean",
            "occupancy_max",
            "congested_fraction",
            "log_samples",
            "congested_run",
            "vs_usual_occupancy_mean",
            "vs_usual_occupancy_max",
            "vs_usual_congested_fraction",
            "vs_usual_log_samples",
        ],
        EntityKind::Link => &[
            "utilization_mean",
            "utilization_max",
            "log_samples",
            "silence_surprise",
            "reverse_silence_surprise",
            "vs_usual_utilization_mean",
            "vs_usual_utilization_max",
            "vs_usual_log_samples",
        ],
        EntityKind::Flow => &[],
    }
}

/// Features a window is typed by but not detected by:
/// * the queueing a destination's flows met on their way (`log_transit_us`, the reports' mean
///   transit — the sum of their hop latencies — in µs). It swings with the background: in clean
///   runs a destination's transit is 4× its usual in 0–27 % of windows, by fabric, so a
///   detector weighing it would raise them. Once a window is raised for what else it shows, it
///   tells an incast (queueing up) from a crowd of clients;
/// * the share of an address's flows that began in the window's last quarter
///   (`late_flow_share`): flows that young carry little whether they are probes or the start of
///   transfers, so their volume cannot yet tell a scan from a fan-out, nor a flood's first
///   moments (its packets queued, few counted yet) from congestion;
/// * the bytes the address moved the other way (`log_bytes_other_way`: what a destination
///   sent, what a source received) and the share of its reports in flows answered the other
///   way in the window (`answered_share`: the flow with addresses and ports swapped had
///   traffic too): a host whose traffic is mostly the other half of its own flows, and whose
///   sending grew far more than what it gets, is being acknowledged or asked — the return half
///   of its own transfers — not flooded, however small and many those packets are.
///
/// See docs/knowledge.md, "Anomaly types".
pub const TYPING_ONLY: [&str; 8] = [
    "log_transit_us",
    "vs_usual_log_transit_us",
    "log_bytes_other_way",
    "vs_usual_log_bytes_other_way",
    "answered_share",
    "vs_usual_answered_share",
    "late_flow_share",
    "vs_usual_late_flow_share",
];

/// Flows that began in this last part of their window are young ([`TYPING_ONLY`]).
const LATE_PART: f64 = 0.25;

/// One entity in one window.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub kind: EntityKind,
    pub entity: String,
    pub window_end_ns: i64,
    pub x: Vec<f64>,
    /// For switch-to-switch links: how many chances the link had to be seen.
    pub exposure: Exposure,
    /// For switch-to-switch links: the link of the opposite direction, when this window shows
    /// it (a cut cable silences both).
    pub reverse: Option<String>,
}

/// Where a flow entered the fabric (its path's first switch) and where it went: the unit of a
/// link's evidence. A route, not a flow: a switch that routes by destination sends all of one
/// destination's flows one way, so a flood or a scan — hundreds of flows, one routing decision —
/// is one piece of evidence. (Under per-flow ECMP a route crosses several links, and each link's
/// habit says how often.) Not the destination alone: a failure that the switches upstream route
/// around — an aggregation switch's only uplink to a core, a spine's only link down to a leaf —
/// leaves the link's own switch no other way to its destinations, but the edges still reach them.
pub type Route = (u32, IpAddr);

/// A switch-to-switch link's evidence in a window: the routes seen in it (`reached`, one set
/// shared by every link) and those of them that crossed the link (`crossed`). A link's silence
/// is judged by the routes it usually carries that still reached their destination another way
/// — what a failed link with rerouting looks like — not by the fabric's other traffic (empty
/// for other kinds).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exposure {
    pub reached: Arc<FastSet<Route>>,
    pub crossed: Vec<Route>,
}

/// One flow row of a window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowRow {
    pub src: Option<IpAddr>,
    pub dst: Option<IpAddr>,
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    pub protocol: Option<u8>,
    pub reports: f64,
    pub bytes: f64,
    /// The mean transit of the flow's reports (the sum of their hop latencies), ns, if known.
    pub transit_ns: Option<f64>,
    /// When the flow's first report of the window was stamped, ns, if known.
    pub first_seen_ns: Option<f64>,
    /// When its last report of the window was stamped, ns, if known.
    pub last_seen_ns: Option<f64>,
    pub path: Vec<u32>,
}

impl FlowRow {
    pub fn flow_ref(&self) -> FlowRef {
        FlowRef {
            src_ip: self.src,
            dst_ip: self.dst,
            src_port: self.src_port,
            dst_port: self.dst_port,
            protocol: self.protocol,
            path: self.path.clone(),
        }
    }
}

/// (node, queue) → (samples, occupancy sum, occupancy max, congested samples).
type QueueAcc = (f64, f64, f64, f64);
/// A link's window, merged over the partitions that saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkAcc {
    pub samples: f64,
    /// Utilisation (‰) summed over the samples.
    pub sum: f64,
    pub max: f64,
    /// The switch its port leads to (none towards a host).
    pub next: Option<u32>,
    /// The samples of the window's last tenth, and their utilisation summed.
    pub end_samples: f64,
    pub end_sum: f64,
}

impl LinkAcc {
    pub fn mean(&self) -> f64 {
        if self.samples > 0.0 {
            self.sum / self.samples
        } else {
            0.0
        }
    }

    /// Where the link stood as the window closed: the mean of its last tenth's samples, or the
    /// window's mean when it had none there (or the processor did not say: an older store).
    pub fn end_mean(&self) -> f64 {
        if self.end_samples > 0.0 {
            self.end_sum / self.end_samples
        } else {
            self.mean()
        }
    }
}

/// Per address: (flows, distinct other ends, distinct destination ports, reports, bytes,
/// (transit ns summed over the reports that know it, those reports), flows that began late).
type AddrAcc = (f64, f64, f64, f64, f64, (f64, f64), f64);

/// The value of an entity `key` in `map`, made by `new` if absent. Looked up by reference: the
/// entity's name is copied once, when it is new, not every window.
pub fn by_entity<'m, V>(
    map: &'m mut FastMap<String, V>,
    key: &str,
    new: impl FnOnce() -> V,
) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.to_string(), new());
    }
    map.get_mut(key).expect("inserted above")
}

/// The per-window maps: keyed (a process-random seed), faster than SipHash.
/// Hash maps and sets keyed for speed (foldhash): the per-window maps are the scoring's cost.
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
pub type FastSet<K> = HashSet<K, foldhash::fast::RandomState>;

fn map_with_capacity<K, V>(n: usize) -> FastMap<K, V> {
    FastMap::with_capacity_and_hasher(n, Default::default())
}

fn set_with_capacity<K>(n: usize) -> FastSet<K> {
    FastSet::with_capacity_and_hasher(n, Default::default())
}

/// Everything of one window (end time), merged over the partitions that reported it.
#[derive(Clone, Debug, Default)]
pub struct Window {
    pub end_ns: i64,
    /// The window's start, from its flows' rows (none yet: no flow is judged late).
    pub start_ns: Option<i64>,
    pub flows: Vec<FlowRow>,
    pub queues: BTreeMap<QueueKey, QueueAcc>,
    pub links: BTreeMap<(u32, u16), LinkAcc>,
}

/// A numeric column as f64 whatever its integer or float type (null: `None`).
pub fn f64s(b: &RecordBatch, name: &str) -> Vec<Option<f64>> {
    let Some(c) = b.column_by_name(name) else {
        return vec![None; b.num_rows()];
    };
    macro_rules! prim {
        ($t:ty) => {
            c.as_primitive::<$t>()
                .iter()
                .map(|v| v.map(|v| v as f64))
                .collect()
        };
    }
    match c.data_type() {
        DataType::Float64 => c.as_primitive::<Float64Type>().iter().collect(),
        DataType::Int64 => prim!(Int64Type),
        DataType::UInt64 => prim!(UInt64Type),
        DataType::UInt32 => prim!(UInt32Type),
        DataType::UInt16 => prim!(UInt16Type),
        DataType::UInt8 => prim!(UInt8Type),
        DataType::Timestamp(_, _) => prim!(TimestampNanosecondType),
        _ => vec![None; b.num_rows()],
    }
}

fn ips(b: &RecordBatch, name: &str) -> Vec<Option<IpAddr>> {
    let Some(c) = b
        .column_by_name(name)
        .and_then(|c| c.as_fixed_size_binary_opt())
    else {
        return vec![None; b.num_rows()];
    };
    (0..c.len())
        .map(|i| {
            (c.is_valid(i) && c.value_length() == 16).then(|| {
                let mut a = [0u8; 16];
                a.copy_from_slice(c.value(i));
                ip_from_16(a)
            })
        })
        .collect()
}

fn paths(b: &RecordBatch) -> Vec<Vec<u32>> {
    let Some(c) = b
        .column_by_name("path")
        .and_then(|c| c.as_list_opt::<i32>())
    else {
        return vec![Vec::new(); b.num_rows()];
    };
    (0..c.len())
        .map(|i| {
            if c.is_null(i) {
                return Vec::new();
            }
            c.value(i)
                .as_primitive_opt::<UInt32Type>()
                .map(|v| v.iter().flatten().collect())
                .unwrap_or_default()
        })
        .collect()
}

fn as_u<T: TryFrom<u64>>(v: Option<f64>) -> Option<T> {
    v.and_then(|v| T::try_from(v as u64).ok())
}

/// The largest `window_end` of a result batch (ns).
pub fn window_end(b: &RecordBatch) -> Option<i64> {
    f64s(b, "window_end")
        .into_iter()
        .flatten()
        .map(|v| v as i64)
        .max()
}

impl Window {
    pub fn new(end_ns: i64) -> Self {
        Self {
            end_ns,
            ..Self::default()
        }
    }

    /// Moves the window `by_ns` in time — its end, its start and its flows' report stamps — as
    /// a replay or a repeated window set does: where a flow sits in its window (late, crossing
    /// an edge) is read from those times together.
    pub fn shift(&mut self, by_ns: i64) {
        self.end_ns += by_ns;
        self.start_ns = self.start_ns.map(|s| s + by_ns);
        for f in &mut self.flows {
            for t in [&mut f.first_seen_ns, &mut f.last_seen_ns] {
                *t = t.map(|t| t + by_ns as f64);
            }
        }
    }

    /// Adds one result batch of `table` (rows of other tables are ignored).
    pub fn add(&mut self, table: &str, b: &RecordBatch) {
        match table {
            "flows" => {
                let (src, dst) = (ips(b, "src_ip"), ips(b, "dst_ip"));
                let (sp, dp, pr) = (
                    f64s(b, "src_port"),
                    f64s(b, "dst_port"),
                    f64s(b, "protocol"),
                );
                let (reports, bytes, path) = (f64s(b, "reports"), f64s(b, "bytes"), paths(b));
                // The sum of the hop latencies, not the timestamps' difference: each switch
                // measures its own latency, while a difference across switches needs clocks
                // that agree (BMv2's are each process's own: on the lab 38 % of the
                // differences came out negative, the rest averaged 159 ms).
                let transit = f64s(b, "e2e_latency_mean_ns");
                let (first_seen, last_seen) = (f64s(b, "first_seen"), f64s(b, "last_seen"));
                if let Some(start) = f64s(b, "window_start")
                    .into_iter()
                    .flatten()
                    .reduce(f64::min)
                {
                    let start = start as i64;
                    self.start_ns = Some(self.start_ns.map_or(start, |s| s.min(start)));
                }
                for i in 0..b.num_rows() {
                    self.flows.push(FlowRow {
                        src: src[i],
                        dst: dst[i],
                        src_port: as_u(sp[i]),
                        dst_port: as_u(dp[i]),
                        protocol: as_u(pr[i]),
                        reports: reports[i].unwrap_or(0.0),
                        bytes: bytes[i].unwrap_or(0.0),
                        transit_ns: transit[i],
                        first_seen_ns: first_seen[i],
                        last_seen_ns: last_seen[i],
                        path: path[i].clone(),
                    });
                }
            }
            "queues" => {
                let (node, port, queue) = (
                    f64s(b, "node_id"),
                    f64s(b, "egress_port"),
                    f64s(b, "queue_id"),
                );
                let (n, mean, max, cong) = (
                    f64s(b, "samples"),
                    f64s(b, "occupancy_mean"),
                    f64s(b, "occupancy_max"),
                    f64s(b, "congested_samples"),
                );
                for i in 0..b.num_rows() {
                    let (Some(node), Some(queue)) = (as_u(node[i]), as_u(queue[i])) else {
                        continue;
                    };
                    let n = n[i].unwrap_or(0.0);
                    let e = self.queues.entry((node, as_u(port[i]), queue)).or_default();
                    e.0 += n;
                    e.1 += mean[i].unwrap_or(0.0) * n;
                    e.2 = e.2.max(max[i].unwrap_or(0.0));
                    e.3 += cong[i].unwrap_or(0.0);
                }
            }
            "links" => {
                let (node, port, next) = (
                    f64s(b, "node_id"),
                    f64s(b, "egress_port"),
                    f64s(b, "next_node_id"),
                );
                let (n, mean, max) = (
                    f64s(b, "samples"),
                    f64s(b, "tx_utilization_mean"),
                    f64s(b, "tx_utilization_max"),
                );
                let (end_n, end_mean) =
                    (f64s(b, "end_samples"), f64s(b, "tx_utilization_end_mean"));
                for i in 0..b.num_rows() {
                    let (Some(node), Some(port)) = (as_u(node[i]), as_u(port[i])) else {
                        continue;
                    };
                    let (n, end_n) = (n[i].unwrap_or(0.0), end_n[i].unwrap_or(0.0));
                    let e = self.links.entry((node, port)).or_default();
                    e.samples += n;
                    e.sum += mean[i].unwrap_or(0.0) * n;
                    e.max = e.max.max(max[i].unwrap_or(0.0));
                    e.next = e.next.or(as_u(next[i]));
                    e.end_samples += end_n;
                    e.end_sum += end_mean[i].unwrap_or(0.0) * end_n;
                }
            }
            _ => {}
        }
    }

    /// The window's entity-windows. `expected` names links and queues seen recently: those
    /// missing from this window get an all-zero sample (a failed link carries nothing).
    pub fn samples(&self, expected: &FastSet<(EntityKind, &str)>) -> Vec<Sample> {
        let mut out = Vec::new();
        // Sized up front: growing them is a good part of a window's cost.
        let n = self.flows.len();
        let mut per_src: FastMap<IpAddr, AddrAcc> = map_with_capacity(64);
        let mut per_dst: FastMap<IpAddr, AddrAcc> = map_with_capacity(64);
        // (source, destination) pairs and (address, destination port) of each side seen.
        let mut pairs: FastSet<(IpAddr, IpAddr)> = set_with_capacity(n);
        let mut src_ports: FastSet<(IpAddr, u16)> = set_with_capacity(n);
        let mut dst_ports: FastSet<(IpAddr, u16)> = set_with_capacity(n);
        let late_from = self
            .start_ns
            .map(|s| self.end_ns as f64 - LATE_PART * (self.end_ns - s) as f64);
        for f in &self.flows {
            let (Some(s), Some(d)) = (f.src, f.dst) else {
                continue;
            };
            let new_pair = pairs.insert((s, d));
            for (map, key, ports) in [
                (&mut per_src, s, &mut src_ports),
                (&mut per_dst, d, &mut dst_ports),
            ] {
                let e = map.entry(key).or_default();
                e.0 += 1.0;
                e.1 += f64::from(u8::from(new_pair));
                if let Some(p) = f.dst_port {
                    e.2 += f64::from(u8::from(ports.insert((key, p))));
                }
                e.3 += f.reports;
                e.4 += f.bytes;
                if let Some(t) = f.transit_ns {
                    e.5.0 += t * f.reports;
                    e.5.1 += f.reports;
                }
                if let (Some(at), Some(late)) = (f.first_seen_ns, late_from) {
                    e.6 += f64::from(u8::from(at >= late));
                }
            }
        }
        // What each address moved the other way: a source's received bytes, a destination's sent.
        let bytes_of = |m: &FastMap<IpAddr, AddrAcc>| -> FastMap<IpAddr, f64> {
            m.iter().map(|(ip, a)| (*ip, a.4)).collect()
        };
        let (sent, received) = (bytes_of(&per_src), bytes_of(&per_dst));
        // Reports of flows whose reverse (addresses and ports swapped) also had traffic in the
        // window, per address and side: a conversation's, not a one-way stream's. Flows, not
        // address pairs: in a small fabric every host has traffic with every other, and a
        // flood's sources would pass for a victim's peers.
        let five_tuple = |f: &FlowRow| (f.src, f.dst, f.src_port, f.dst_port, f.protocol);
        let seen: FastSet<_> = self.flows.iter().map(five_tuple).collect();
        let mut answered_src: FastMap<IpAddr, f64> = FastMap::default();
        let mut answered_dst: FastMap<IpAddr, f64> = FastMap::default();
        for f in &self.flows {
            if let (Some(s), Some(d)) = (f.src, f.dst)
                && seen.contains(&(f.dst, f.src, f.dst_port, f.src_port, f.protocol))
            {
                *answered_src.entry(s).or_default() += f.reports;
                *answered_dst.entry(d).or_default() += f.reports;
            }
        }
        for (kind, map, other_way, answered) in [
            (EntityKind::Source, per_src, &received, &answered_src),
            (EntityKind::Destination, per_dst, &sent, &answered_dst),
        ] {
            let mut map: Vec<(IpAddr, AddrAcc)> = map.into_iter().collect();
            map.sort_unstable_by_key(|(ip, _)| *ip);
            for (ip, (flows, others, ports, reports, bytes, transit, late)) in map {
                let mut x = vec![
                    flows.ln_1p(),
                    others.ln_1p(),
                    ports.ln_1p(),
                    reports.ln_1p(),
                    bytes.ln_1p(),
                    mean_packet_bytes(bytes, reports).ln_1p(),
                ];
                if kind == EntityKind::Destination {
                    x.push(mean_transit_us(transit).ln_1p());
                }
                x.push(other_way.get(&ip).copied().unwrap_or(0.0).ln_1p());
                let answered = answered.get(&ip).copied().unwrap_or(0.0);
                x.push(if reports > 0.0 {
                    answered / reports
                } else {
                    0.0
                });
                x.push(late / flows);
                out.push(self.sample(kind, ip.to_string(), x));
            }
        }
        for (&queue, &(n, sum, max, cong)) in &self.queues {
            let mean = if n > 0.0 { sum / n } else { 0.0 };
            let frac = if n > 0.0 { cong / n } else { 0.0 };
            out.push(self.sample(
                EntityKind::Queue,
                queue_entity(queue),
                vec![mean, max, frac, n.ln_1p()],
            ));
        }
        // The routes seen, and per (switch, next switch) those that crossed it. A flow without a
        // destination address can have no habit and is left out, as is one within one switch
        // (it crosses no link).
        let mut crossed: FastMap<(u32, u32), FastSet<Route>> =
            map_with_capacity(4 * self.links.len());
        let mut reached: FastSet<Route> = FastSet::default();
        for f in &self.flows {
            let (Some(d), [from, _, ..]) = (f.dst, f.path.as_slice()) else {
                continue;
            };
            let route = (*from, d);
            reached.insert(route);
            for p in f.path.windows(2) {
                crossed.entry((p[0], p[1])).or_default().insert(route);
            }
        }
        let reached = Arc::new(reached);
        for (&(node, port), l) in &self.links {
            let mut s = self.sample(
                EntityKind::Link,
                link_entity(node, port),
                vec![l.mean(), l.max, l.samples.ln_1p()],
            );
            if let Some(next) = l.next {
                s.exposure = Exposure {
                    reached: reached.clone(),
                    crossed: crossed
                        .get(&(node, next))
                        .map(|d| d.iter().copied().collect())
                        .unwrap_or_default(),
                };
                s.reverse = self
                    .links
                    .range((next, 0)..=(next, u16::MAX))
                    .find(|(_, l)| l.next == Some(node))
                    .map(|(&(n, p), _)| link_entity(n, p));
            }
            out.push(s);
        }
        let present: FastSet<(EntityKind, &str)> =
            out.iter().map(|s| (s.kind, s.entity.as_str())).collect();
        let mut missing: Vec<Sample> = expected
            .iter()
            .filter(|(k, e)| tracks_silence(*k) && !present.contains(&(*k, *e)))
            .map(|(k, e)| {
                let mut s = self.sample(*k, e.to_string(), vec![0.0; measured(*k).len()]);
                s.exposure.reached = reached.clone();
                s
            })
            .collect();
        missing.sort_by(|a, b| a.entity.cmp(&b.entity));
        out.extend(missing);
        out
    }

    fn sample(&self, kind: EntityKind, entity: String, measured: Vec<f64>) -> Sample {
        // Room for the history features the baselines append.
        let mut x = Vec::with_capacity(names(kind).len());
        x.extend(measured);
        Sample {
            kind,
            entity,
            window_end_ns: self.end_ns,
            x,
            exposure: Exposure::default(),
            reverse: None,
        }
    }

    /// Links between two switches (their next node known), as entities.
    pub fn inner_links(&self) -> impl Iterator<Item = String> + '_ {
        self.links
            .iter()
            .filter(|(_, l)| l.next.is_some())
            .map(|(&(node, port), _)| link_entity(node, port))
    }

    /// The next node of a link, if the window saw it.
    pub fn next_node(&self, node: u32, port: u16) -> Option<u32> {
        self.links.get(&(node, port)).and_then(|l| l.next)
    }
}

/// Bytes per report: the size of an address's typical packet, which its usual mix of
/// requests, acknowledgements and transfers keeps steady while its counts swing (a flood of
/// small packets moves it; a job starting or a client done does not).
fn mean_packet_bytes(bytes: f64, reports: f64) -> f64 {
    if reports > 0.0 { bytes / reports } else { 0.0 }
}

/// The mean transit of an address's reports that know it (`(sum ns, reports)`), µs:
/// microseconds, so that the `log1p` of a 10 Gb/s fabric's few microseconds still moves with
/// queueing; 0 when none does.
fn mean_transit_us((sum_ns, reports): (f64, f64)) -> f64 {
    if reports > 0.0 {
        sum_ns / reports / 1e3
    } else {
        0.0
    }
}

/// `5:2`: node 5, egress port 2.
pub fn link_entity(node: u32, port: u16) -> String {
    format!("{node}:{port}")
}

/// The inverse of [`link_entity`].
pub fn parse_link(entity: &str) -> Option<(u32, u16)> {
    let (node, port) = entity.split_once(':')?;
    Some((node.parse().ok()?, port.parse().ok()?))
}

pub use kplane_model::results::node_of;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::builder::{FixedSizeBinaryBuilder, ListBuilder, UInt32Builder};
    use arrow_array::{ArrayRef, Float64Array, Int64Array, UInt8Array, UInt16Array, UInt32Array};
    use kplane_model::ip_to_16;

    use super::*;

    fn flows(rows: &[(&str, &str, u16)]) -> RecordBatch {
        let mut src = FixedSizeBinaryBuilder::new(16);
        let mut dst = FixedSizeBinaryBuilder::new(16);
        let mut path = ListBuilder::new(UInt32Builder::new());
        for (s, d, _) in rows {
            src.append_value(ip_to_16(s.parse().unwrap())).unwrap();
            dst.append_value(ip_to_16(d.parse().unwrap())).unwrap();
            path.values().append_slice(&[1, 2, 3]);
            path.append(true);
        }
        let n = rows.len();
        RecordBatch::try_from_iter(vec![
            ("src_ip", Arc::new(src.finish()) as ArrayRef),
            ("dst_ip", Arc::new(dst.finish())),
            ("src_port", Arc::new(UInt16Array::from(vec![1000; n]))),
            (
                "dst_port",
                Arc::new(UInt16Array::from(
                    rows.iter().map(|r| r.2).collect::<Vec<_>>(),
                )),
            ),
            ("protocol", Arc::new(UInt8Array::from(vec![17; n]))),
            ("reports", Arc::new(Int64Array::from(vec![2; n]))),
            ("bytes", Arc::new(Int64Array::from(vec![100; n]))),
            // The third flow of a batch does not know its transit (its reports carry no hop
            // latency); the timestamps' difference is not read.
            (
                "e2e_latency_mean_ns",
                Arc::new(Float64Array::from_iter(
                    (1..=n).map(|i| (i < 3).then_some(1_000.0 * i as f64)),
                )),
            ),
            (
                "transit_mean_ns",
                Arc::new(Float64Array::from(vec![1e9; n])),
            ),
            ("path", Arc::new(path.finish())),
            // A window from 0 to 10 ns; the third flow of a batch began in its last quarter.
            ("window_start", Arc::new(Int64Array::from(vec![0; n]))),
            (
                "first_seen",
                Arc::new(Int64Array::from_iter_values(
                    (1..=n as i64).map(|i| if i == 3 { 9 } else { i }),
                )),
            ),
        ])
        .unwrap()
    }

    /// A window from 0 to 10 ns: 10.0.0.2 reaches three hosts (the third flow late), 10.0.0.3
    /// one of them.
    fn window_with_a_late_flow() -> Window {
        let mut w = Window::new(10);
        w.add(
            "flows",
            &flows(&[
                ("10.0.0.2", "10.0.0.9", 80),
                ("10.0.0.2", "10.0.0.8", 80),
                ("10.0.0.2", "10.0.0.7", 80),
                ("10.0.0.3", "10.0.0.7", 80),
            ]),
        );
        w
    }

    #[test]
    fn an_addresss_late_flows_are_those_begun_in_the_windows_last_quarter() {
        let s = window_with_a_late_flow().samples(&FastSet::default());
        let late = |kind: EntityKind, ip: &str| {
            let x = &s
                .iter()
                .find(|s| s.kind == kind && s.entity == ip)
                .unwrap()
                .x;
            x[measured(kind)
                .iter()
                .position(|n| *n == "late_flow_share")
                .unwrap()]
        };
        assert!((late(EntityKind::Source, "10.0.0.2") - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(late(EntityKind::Source, "10.0.0.3"), 0.0);
        // 10.0.0.7 is reached by the late flow and by 10.0.0.3's.
        assert_eq!(late(EntityKind::Destination, "10.0.0.7"), 0.5);
        assert_eq!(late(EntityKind::Destination, "10.0.0.9"), 0.0);
    }

    #[test]
    fn a_shifted_window_reads_as_the_window_it_was() {
        let w = window_with_a_late_flow();
        let mut moved = w.clone();
        moved.shift(3_600_000_000_000);
        assert_eq!(moved.end_ns, 3_600_000_000_010);
        assert_eq!(moved.start_ns, Some(3_600_000_000_000));
        let x = |w: &Window| {
            let mut s = w.samples(&FastSet::default());
            s.sort_by(|a, b| (a.kind, &a.entity).cmp(&(b.kind, &b.entity)));
            s.into_iter().map(|s| s.x).collect::<Vec<_>>()
        };
        // The late flow is still late, and nothing else moved either.
        assert_eq!(x(&moved), x(&w));
        assert_eq!(crate::forecast::values(&moved), crate::forecast::values(&w));
    }

    #[test]
    fn only_a_flows_reverse_answers_it_not_other_traffic_between_the_same_hosts() {
        // Every flow the helper writes is from port 1000.
        let flood = [("10.0.0.1", "10.0.0.9", 80), ("10.0.0.1", "10.0.0.9", 81)];
        let share = |rows: &[(&str, &str, u16)]| {
            let mut w = Window::new(10);
            w.add("flows", &flows(rows));
            let s = w.samples(&FastSet::default());
            let kind = EntityKind::Destination;
            let x = &s
                .iter()
                .find(|s| s.kind == kind && s.entity == "10.0.0.9")
                .unwrap()
                .x;
            x[names(kind)
                .iter()
                .position(|n| *n == "answered_share")
                .unwrap()]
        };
        // A flood's flows to a host that sends to the flood's source on its own: no answer.
        assert_eq!(
            share(&[flood[0], flood[1], ("10.0.0.9", "10.0.0.1", 5001)]),
            0.0
        );
        // A conversation beside it (1000 ↔ 1000): its half of the host's reports is answered.
        let talk = [
            ("10.0.0.1", "10.0.0.9", 1000),
            ("10.0.0.9", "10.0.0.1", 1000),
        ];
        assert_eq!(share(&[flood[0], talk[0], talk[1]]), 0.5);
    }

    #[test]
    fn destinations_count_distinct_sources_and_ports_across_partitions_and_mean_their_transit() {
        let mut w = Window::new(10);
        // Two partitions' flows of one window.
        w.add("flows", &flows(&[("10.0.0.1", "10.0.0.9", 1000)]));
        w.add(
            "flows",
            &flows(&[
                ("10.0.0.2", "10.0.0.9", 1000),
                ("10.0.0.2", "10.0.0.9", 81),
                ("10.0.0.2", "10.0.0.9", 82),
            ]),
        );
        // And one answer the other way (every flow is from port 1000: this one's reverse is
        // the first flow).
        w.add("flows", &flows(&[("10.0.0.9", "10.0.0.1", 1000)]));
        let s = w.samples(&FastSet::default());
        let d = s
            .iter()
            .find(|s| s.kind == EntityKind::Destination && s.entity == "10.0.0.9")
            .unwrap();
        // Flows, sources, ports, reports, bytes, 50 bytes per report, and a transit of
        // (1 + 1 + 2) µs over the 2 reports each of the flows that know it (their hop
        // latencies' sum, not the 1 s their timestamps differ by); the 100 bytes it sent;
        // then the share of its flows begun late (the second batch's third).
        let mut expect = [4.0f64, 2.0, 3.0, 8.0, 400.0, 50.0, 4.0 / 3.0, 100.0]
            .map(f64::ln_1p)
            .to_vec();
        // 2 of its 8 reports are the flow from 10.0.0.1 it answered.
        expect.extend([0.25, 0.25]);
        assert_eq!(d.x.len(), expect.len());
        for (got, want) in d.x.iter().zip(expect) {
            assert!((got - want).abs() < 1e-12, "{:?}", d.x);
        }
        // A source's packets go wherever: the queueing on their way is no fact about it; what
        // it received (10.0.0.1: the answer's 100 bytes) and the share of its flows begun late
        // are.
        let s1 = s.iter().find(|s| s.kind == EntityKind::Source).unwrap();
        assert_eq!(s1.entity, "10.0.0.1");
        assert_eq!(s1.x.len(), 9);
        assert!((s1.x[6] - 100f64.ln_1p()).abs() < 1e-12, "{:?}", s1.x);
        // Every report 10.0.0.1 sent is in a flow answered the other way.
        assert_eq!(s1.x[7], 1.0);
        let sources: Vec<_> = s
            .iter()
            .filter(|s| s.kind == EntityKind::Source)
            .map(|s| s.entity.as_str())
            .collect();
        assert_eq!(sources, ["10.0.0.1", "10.0.0.2", "10.0.0.9"]);
    }

    #[test]
    fn queues_merge_partitions_and_missing_links_are_zero() {
        let q = |mean: f64, max: u32, n: i64| {
            RecordBatch::try_from_iter(vec![
                ("node_id", Arc::new(UInt32Array::from(vec![5])) as ArrayRef),
                ("egress_port", Arc::new(UInt16Array::from(vec![2]))),
                ("queue_id", Arc::new(UInt8Array::from(vec![0]))),
                ("samples", Arc::new(Int64Array::from(vec![n]))),
                ("occupancy_mean", Arc::new(Float64Array::from(vec![mean]))),
                ("occupancy_max", Arc::new(UInt32Array::from(vec![max]))),
                ("congested_samples", Arc::new(Int64Array::from(vec![n / 2]))),
            ])
            .unwrap()
        };
        let mut w = Window::new(10);
        w.add("queues", &q(10.0, 20, 10));
        w.add("queues", &q(40.0, 90, 30));
        let expected: FastSet<_> = [(EntityKind::Link, "7:1")].into_iter().collect();
        let s = w.samples(&expected);
        let queue = s.iter().find(|s| s.kind == EntityKind::Queue).unwrap();
        assert_eq!(queue.entity, "5:2/0");
        assert_eq!(queue.x, vec![32.5, 90.0, 20.0 / 40.0, 40f64.ln_1p()]);
        let link = s.iter().find(|s| s.kind == EntityKind::Link).unwrap();
        assert_eq!(
            (link.entity.as_str(), link.x.clone()),
            ("7:1", vec![0.0; 3])
        );
        assert_eq!(parse_link("7:1"), Some((7, 1)));
        assert_eq!(parse_link("5:2/0"), None);
        assert_eq!(node_of("7:1"), Some(7));
        assert_eq!(node_of("5:2/0"), Some(5));
        assert_eq!(node_of("5/0"), Some(5));
    }

    /// Two partitions' rows of one link merge into its samples' mean and its last tenth's; a
    /// store written before the processor reported the last tenth reads the window's mean there.
    #[test]
    fn links_merge_partitions_and_their_end_of_window_level() {
        let l = |mean: f64, n: i64, end: Option<(i64, f64)>| {
            let mut cols = vec![
                ("node_id", Arc::new(UInt32Array::from(vec![7])) as ArrayRef),
                ("egress_port", Arc::new(UInt16Array::from(vec![1]))),
                ("next_node_id", Arc::new(UInt32Array::from(vec![8]))),
                ("samples", Arc::new(Int64Array::from(vec![n]))),
                (
                    "tx_utilization_mean",
                    Arc::new(Float64Array::from(vec![mean])),
                ),
                ("tx_utilization_max", Arc::new(UInt32Array::from(vec![900]))),
            ];
            if let Some((end_n, end_mean)) = end {
                cols.push(("end_samples", Arc::new(Int64Array::from(vec![end_n]))));
                cols.push((
                    "tx_utilization_end_mean",
                    Arc::new(Float64Array::from(vec![end_mean])),
                ));
            }
            RecordBatch::try_from_iter(cols).unwrap()
        };
        let mut w = Window::new(10);
        w.add("links", &l(100.0, 30, Some((3, 500.0))));
        w.add("links", &l(200.0, 10, Some((1, 900.0))));
        let link = w.links[&(7, 1)];
        assert_eq!(
            (link.mean(), link.end_mean(), link.next),
            (125.0, 600.0, Some(8))
        );
        let mut old = Window::new(10);
        old.add("links", &l(100.0, 30, None));
        assert_eq!(old.links[&(7, 1)].end_mean(), 100.0);
    }

    fn link(samples: f64, next: Option<u32>) -> LinkAcc {
        LinkAcc {
            samples,
            next,
            ..LinkAcc::default()
        }
    }

    /// A link's evidence, its routes sorted.
    fn evidence(s: &[Sample], e: &str) -> (Vec<Route>, Vec<Route>) {
        let x = &s.iter().find(|s| s.entity == e).unwrap().exposure;
        let mut reached: Vec<Route> = x.reached.iter().copied().collect();
        let mut crossed = x.crossed.clone();
        reached.sort();
        crossed.sort();
        (reached, crossed)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_links_evidence_is_routes_not_flows() {
        let mut w = Window::new(10);
        // Switch 1: port 1 towards 2, port 2 towards 3.
        w.links.insert((1, 1), link(30.0, Some(2)));
        w.links.insert((1, 2), link(30.0, Some(3)));
        let to = |dst: &str, src_port: u16, path: Vec<u32>| FlowRow {
            dst: Some(ip(dst)),
            src_port: Some(src_port),
            path,
            ..FlowRow::default()
        };
        // A flood: 200 flows to one victim, routed one way; one other destination the other.
        let mut flows: Vec<FlowRow> = (0..200).map(|p| to("10.0.0.9", p, vec![1, 2])).collect();
        flows.push(to("10.0.0.5", 1, vec![1, 3]));
        w.flows = flows;
        let s = w.samples(&FastSet::default());
        let both = vec![(1, ip("10.0.0.5")), (1, ip("10.0.0.9"))];
        assert_eq!(
            evidence(&s, "1:1"),
            (both.clone(), vec![(1, ip("10.0.0.9"))])
        );
        assert_eq!(evidence(&s, "1:2"), (both, vec![(1, ip("10.0.0.5"))]));
    }

    #[test]
    fn a_links_evidence_is_every_route_seen_from_where_it_entered() {
        let mut w = Window::new(10);
        // Switch 1: port 1 towards 2, port 2 towards 3 (silent this window); switch 2's port 5
        // back towards 1.
        w.links.insert((1, 1), link(30.0, Some(2)));
        w.links.insert((2, 5), link(30.0, Some(1)));
        let flow = |dst: &str, path: Vec<u32>| FlowRow {
            dst: Some(ip(dst)),
            path,
            ..FlowRow::default()
        };
        // Two destinations leave switch 1 over 1 → 2, one of them looping back over it; one
        // flow enters at switch 5; one from switch 6 goes around switch 1 altogether (a route
        // its switches upstream moved off a failed link would); one stays within switch 7 and
        // one without an address has no destination: neither is a route.
        w.flows = vec![
            flow("10.0.0.4", vec![1, 2, 4]),
            flow("10.0.0.2", vec![1, 2, 1, 2]),
            flow("10.0.0.1", vec![5, 1]),
            flow("10.0.0.4", vec![6, 3, 4]),
            flow("10.0.0.7", vec![7]),
            FlowRow {
                path: vec![1, 3],
                ..FlowRow::default()
            },
        ];
        let expected: FastSet<_> = [(EntityKind::Link, "1:2")].into_iter().collect();
        let s = w.samples(&expected);
        let reverse = |e: &str| s.iter().find(|s| s.entity == e).unwrap().reverse.clone();
        assert_eq!(reverse("1:1").as_deref(), Some("2:5"));
        assert_eq!(reverse("2:5").as_deref(), Some("1:1"));
        assert_eq!(reverse("1:2"), None);
        let seen = vec![
            (1, ip("10.0.0.2")),
            (1, ip("10.0.0.4")),
            (5, ip("10.0.0.1")),
            (6, ip("10.0.0.4")),
        ];
        let from_1 = vec![(1, ip("10.0.0.2")), (1, ip("10.0.0.4"))];
        assert_eq!(evidence(&s, "1:1"), (seen.clone(), from_1));
        assert_eq!(
            evidence(&s, "2:5"),
            (seen.clone(), vec![(1, ip("10.0.0.2"))])
        );
        assert_eq!(evidence(&s, "1:2"), (seen, vec![]));
    }
}
