//! Event detection over normalised records.
//!
//! * **Threshold** (INTCollector §III-C/D): six metric keys per report — flow path, flow
//!   latency, flow per-hop latency, queue occupancy, queue congestion, link utilisation. An
//!   event is a new key or |new − last reported| > T(m); a live key is re-sent every
//!   `refresh` (when a report touches it after that long, so a key that stops being reported
//!   stops being refreshed — which is how INTCollector tells "unchanged" from "gone").
//! * **Watchlist algorithms** (event-detection paper §III-C): for a flow matched by a rule,
//!   the rule's per-hop / per-flow / EWMA / noop algorithm replaces the threshold detector
//!   for the flow's numeric metrics (latency by default); path events and the switch metrics
//!   (queues, links) keep the threshold detector.
//!
//! Threshold state is kept per flow (found by a keyed 64-bit flow hash,
//! [`kplane_model::FlowHashKey`]: a tenant cannot make two flows collide) and per switch
//! (found by node id), see [`crate::threshold`]; the watchlist algorithms' state is keyed by
//! a 64-bit hash of (metric, flow hash, ids). See `docs/collector.md`.

use std::time::Duration;

use kplane_model::id_table::{self, Evictions, IdTable};
use kplane_model::{
    Detector, EventKind, EventRow, FlowHashKey, FlowKey, HopField, Metric, ReportRecord,
};
use serde::{Deserialize, Serialize};

use crate::threshold::{Clock, Decision, FlowState, Flows, Nodes, QueueMetric, Refresh, Threshold};
use crate::watchlist::{Algorithm, Measurement, Rule, Watchlist};

#[inline]
fn mix(h: u64, w: u64) -> u64 {
    let x = (h ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^ (x >> 29)
}

/// splitmix64's finaliser: full avalanche.
#[inline]
fn finish(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Seed of the path hash (over the node ids in hop order).
const PATH_SEED: u64 = 0x5851_F42D_4C95_7F2D;

#[inline]
fn key(metric: Metric, base: u64, ids: u64) -> u64 {
    finish(mix(mix(base, metric as u64 + 1), ids))
}

/// `[collector.events]`: thresholds T(m) per measurement and the refresh period.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct EventConfig {
    /// Re-send a live value after this long without an event; 0 disables refresh.
    #[serde(with = "humantime_serde")]
    pub refresh: std::time::Duration,
    /// End-to-end flow latency change (ns).
    pub flow_latency: u64,
    /// Per-hop latency change (ns).
    pub hop_latency: u64,
    /// Queue occupancy change (cells/bytes, as the switch reports).
    pub queue_occupancy: u64,
    /// Queue congestion status change.
    pub queue_congestion: u64,
    /// Egress tx utilisation change (as the switch reports).
    pub link_utilization: u64,
}

impl Default for EventConfig {
    fn default() -> Self {
        Self {
            refresh: std::time::Duration::from_secs(10),
            flow_latency: 20_000,
            hop_latency: 10_000,
            queue_occupancy: 64,
            queue_congestion: 0,
            link_utilization: 100,
        }
    }
}

/// `[collector.state]`: bounds of the detection state that grows with traffic (see
/// [`kplane_model::id_table`]): an entry idle for longer than `idle` is forgotten, and at
/// `max` entries the least recently seen make room; evictions are counted by reason.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct StateConfig {
    /// Threshold state per flow (path, latency, hop latencies).
    pub flows: id_table::Limits,
    /// Switch state (queues, ports) and loss streams of switches with ids from 4096 up
    /// (smaller ids are array slots, at most 4096, kept).
    pub nodes: id_table::Limits,
    /// Each watchlist algorithm's state (per-hop, per-flow, EWMA).
    pub algorithms: id_table::Limits,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            flows: id_table::Limits {
                idle: Duration::from_secs(300),
                max: 1_000_000,
            },
            nodes: id_table::Limits {
                idle: Duration::from_secs(3600),
                max: 65_536,
            },
            algorithms: id_table::Limits {
                idle: Duration::from_secs(300),
                max: 1_000_000,
            },
        }
    }
}

/// Entries and evictions of one table of detection state, for metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableState {
    pub table: &'static str,
    pub entries: usize,
    pub evicted: Evictions,
}

#[derive(Clone, Copy, Debug)]
struct Ewma {
    avg: f64,
    reported: f64,
}

/// Events counted by kind (for metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub by_kind: [u64; EventKind::ALL.len()],
}

#[derive(Debug)]
pub struct Detection {
    cfg: EventConfig,
    /// `cfg.refresh` in whole seconds.
    refresh: Refresh,
    /// The thresholds as the read-only check uses them.
    limits: Limits,
    /// This process's secret flow-hash key.
    flow_key: FlowHashKey,
    flows: Flows,
    nodes: Nodes,
    /// Threshold keys held (flows' and switches').
    keys: usize,
    /// Flows' hop slots handed to another node at the cap.
    hop_slots_replaced: u64,
    /// The watchlist algorithms' state (per-hop: by rule and switch ids; per-flow and EWMA:
    /// by rule and flow).
    per_hop: IdTable<u64>,
    per_flow: IdTable<u64>,
    ewma: IdTable<Ewma>,
    path: Vec<u32>,
    pub counts: Counts,
}

/// The thresholds of [`EventConfig`] for [`Detection::quiet`].
#[derive(Clone, Copy, Debug)]
struct Limits {
    flow_latency: Threshold,
    hop_latency: Threshold,
    queue_occupancy: Threshold,
    queue_congestion: Threshold,
    link_utilization: Threshold,
}

impl Limits {
    fn of(cfg: &EventConfig) -> Self {
        Self {
            flow_latency: Threshold::new(cfg.flow_latency),
            hop_latency: Threshold::new(cfg.hop_latency),
            queue_occupancy: Threshold::new(cfg.queue_occupancy),
            queue_congestion: Threshold::new(cfg.queue_congestion),
            link_utilization: Threshold::new(cfg.link_utilization),
        }
    }
}

/// The path hash and latency sum [`Detection::quiet`] folds hop by hop.
struct PathSum {
    hash: u64,
    latency: u64,
    any_latency: bool,
}

fn measure_field(m: Measurement) -> (HopField, Metric, Metric) {
    let (hop, flow) = match m {
        Measurement::HopLatency => (Metric::FlowHopLatency, Metric::FlowLatency),
        Measurement::QueueOccupancy => (Metric::QueueOccupancy, Metric::QueueOccupancy),
        Measurement::TxUtilization => (Metric::LinkUtilization, Metric::LinkUtilization),
        Measurement::QueueCongestion => (Metric::QueueCongestion, Metric::QueueCongestion),
    };
    (m.hop_field(), hop, flow)
}

/// The per-hop ids a metric is about, for event rows, from the hop's queue id and egress
/// port: a queue is its port's (INT's queue id numbers the queues of one port).
fn hop_ids(metric: Metric, queue: Option<u8>, port: Option<u32>) -> (Option<u8>, Option<u32>) {
    match metric {
        Metric::QueueOccupancy | Metric::QueueCongestion => (queue, port),
        Metric::LinkUtilization => (None, port),
        _ => (None, None),
    }
}

impl Detection {
    pub fn new(cfg: EventConfig, state: &StateConfig) -> Self {
        Self {
            refresh: Refresh::from_ns(cfg.refresh.as_nanos().try_into().unwrap_or(u64::MAX)),
            limits: Limits::of(&cfg),
            cfg,
            flow_key: FlowHashKey::random(),
            flows: Flows::new(state.flows),
            nodes: Nodes::new(state.nodes),
            keys: 0,
            hop_slots_replaced: 0,
            per_hop: IdTable::new(state.algorithms),
            per_flow: IdTable::new(state.algorithms),
            ewma: IdTable::new(state.algorithms),
            path: Vec::with_capacity(16),
            counts: Counts::default(),
        }
    }

    /// Tracked threshold keys.
    pub fn keys(&self) -> usize {
        self.keys
    }

    /// Bytes the threshold state holds: the flow table (buckets × entry + control bytes),
    /// the flows' hop slots and the switches' slots.
    pub fn key_table_bytes(&self) -> usize {
        self.flows.bytes() + self.nodes.bytes()
    }

    /// Entries and evictions per table (the switch table counts ids from 4096 up; `ports`
    /// is switches' high ports, capped per switch; `flow-hops` a flow's hop slots, capped per
    /// flow).
    pub fn tables(&self) -> [TableState; 7] {
        let (nodes, ports) = self.nodes.evictions();
        let table = |table, entries, evicted| TableState {
            table,
            entries,
            evicted,
        };
        [
            table("flows", self.flows.len(), self.flows.evictions()),
            table("nodes", self.nodes.len(), nodes),
            table(
                "ports",
                0,
                Evictions {
                    capacity: ports,
                    ..Evictions::default()
                },
            ),
            table(
                "flow-hops",
                0,
                Evictions {
                    capacity: self.hop_slots_replaced,
                    ..Evictions::default()
                },
            ),
            table("per-hop", self.per_hop.len(), self.per_hop.evictions()),
            table("per-flow", self.per_flow.len(), self.per_flow.evictions()),
            table("ewma", self.ewma.len(), self.ewma.evictions()),
        ]
    }

    /// Forgets the watchlist algorithms' state (the rules changed).
    pub fn reset_algorithms(&mut self) {
        self.per_hop.clear();
        self.per_flow.clear();
        self.ewma.clear();
    }

    /// The 64-bit hash a record's flow state is found by.
    #[inline]
    pub fn flow_hash(&self, rec: &ReportRecord) -> Option<u64> {
        rec.flow.as_ref().map(|f| self.flow_key_hash(f))
    }

    /// [`Detection::flow_hash`] of a flow.
    #[inline]
    pub fn flow_key_hash(&self, flow: &FlowKey) -> u64 {
        self.flow_key.hash(flow)
    }

    /// Starts loading the flow's state into cache: call it as early as the record is known
    /// and pass the hash to [`Detection::process_hashed`] — the work in between hides the
    /// miss.
    #[inline]
    pub fn prefetch(&self, flow_hash: Option<u64>) {
        if let Some(h) = flow_hash {
            self.flows.prefetch(h);
        }
    }

    /// Runs detection on one record, passing each event to `emit`.
    pub fn process(
        &mut self,
        rec: &ReportRecord,
        watchlist: &Watchlist,
        emit: impl FnMut(&EventRow<'_>),
    ) {
        self.process_hashed(rec, self.flow_hash(rec), watchlist, emit);
    }

    /// [`Detection::process`] with the record's [`Detection::flow_hash`] already computed.
    #[inline]
    pub fn process_hashed(
        &mut self,
        rec: &ReportRecord,
        flow_hash: Option<u64>,
        watchlist: &Watchlist,
        emit: impl FnMut(&EventRow<'_>),
    ) {
        let clock = Clock::new(rec.envelope.received_ns, self.refresh);
        let rule = rec.flow.as_ref().and_then(|f| watchlist.lookup(f));
        // Most reports change nothing: a read-only look decides that without the event
        // plumbing, which then runs only for reports with an event.
        // (Its lookups mark the flow and switches seen.)
        if rule.is_none() && self.quiet(rec, flow_hash, clock) {
            return;
        }
        self.events(rec, flow_hash, rule, clock, emit);
    }

    /// The detectors' full path: decisions, state updates and events.
    #[inline(never)]
    fn events(
        &mut self,
        rec: &ReportRecord,
        flow_hash: Option<u64>,
        rule: Option<(usize, &Rule)>,
        clock: Clock,
        mut emit: impl FnMut(&EventRow<'_>),
    ) {
        let now = rec.envelope.received_ns;
        let th = &self.cfg;
        let keys = &mut self.keys;
        let hop_slots_replaced = &mut self.hop_slots_replaced;
        let base = EventRow {
            received_ns: now,
            kind: EventKind::New,
            metric: Metric::FlowPath,
            detector: Detector::Threshold,
            flow: rec.flow,
            node_id: None,
            queue_id: None,
            egress_port: None,
            hw_id: None,
            value: None,
            previous: None,
            threshold: None,
            path: &[],
            exporter: rec.envelope.exporter,
        };
        let counts = &mut self.counts;
        let mut out = |row: &EventRow<'_>| {
            counts.by_kind[row.kind as usize] += 1;
            emit(row);
        };

        if let (Some(fh), false) = (flow_hash, rec.hops.is_empty()) {
            // One pass for the path (a missing node id is u32::MAX, which no node can
            // report: it is the field's "unavailable" value) and the latency sum.
            self.path.clear();
            let mut ph = PATH_SEED;
            let (mut sum, mut any_latency) = (0u64, false);
            for hop in &rec.hops {
                let node = hop.node_id().unwrap_or(u32::MAX);
                self.path.push(node);
                ph = mix(ph, node.into());
                let l = hop.hop_latency_ns();
                sum += u64::from(l.unwrap_or(0));
                any_latency |= l.is_some();
            }
            let (state, path) = self.flows.path(fh, ph, clock, keys);
            if let Some((kind, _)) = path {
                out(&EventRow {
                    kind,
                    path: &self.path,
                    ..base
                });
            }
            match rule {
                Some((idx, r)) => Self::algorithm(
                    idx,
                    r,
                    fh,
                    rec,
                    &self.path,
                    &mut self.per_hop,
                    &mut self.per_flow,
                    &mut self.ewma,
                    clock.now_s,
                    &base,
                    &mut out,
                ),
                None => {
                    if any_latency
                        && let Some((kind, previous)) =
                            state.latency(sum, th.flow_latency, clock, keys)
                    {
                        out(&EventRow {
                            kind,
                            metric: Metric::FlowLatency,
                            value: Some(sum),
                            previous,
                            threshold: Some(th.flow_latency),
                            ..base
                        });
                    }
                    for (i, (hop, &node)) in rec.hops.iter().zip(&self.path).enumerate() {
                        let Some(l) = hop.hop_latency_ns() else {
                            continue;
                        };
                        if node == u32::MAX {
                            continue;
                        }
                        if let Some((kind, previous)) =
                            state.hop(i, node, l, th.hop_latency, clock, keys, hop_slots_replaced)
                        {
                            out(&EventRow {
                                kind,
                                metric: Metric::FlowHopLatency,
                                node_id: Some(node),
                                value: Some(l.into()),
                                previous,
                                threshold: Some(th.hop_latency),
                                ..base
                            });
                        }
                    }
                }
            }
        }

        // Switch metrics, whatever the flow: queue occupancy and congestion per (node, egress
        // port, queue), link utilisation per (node, egress port). Each field is read once.
        for hop in &rec.hops {
            let Some(node) = hop.node_id() else { continue };
            let (q, port) = (hop.queue_id(), hop.egress_port());
            let occupancy = q.and(hop.queue_occupancy());
            // 24 bits on the wire.
            let congestion = q.and(hop.get(HopField::QueueCongestion)).map(|v| v as u32);
            let utilization = port.and(hop.tx_utilization());
            if occupancy.is_none() && congestion.is_none() && utilization.is_none() {
                continue;
            }
            let state = self.nodes.get(node, clock, keys);
            let mut report = |metric: Metric, value: u32, threshold: u64, decision: Decision| {
                if let Some((kind, previous)) = decision {
                    let (queue_id, egress_port) = hop_ids(metric, q, port);
                    out(&EventRow {
                        kind,
                        metric,
                        flow: None,
                        node_id: Some(node),
                        queue_id,
                        egress_port,
                        value: Some(value.into()),
                        previous,
                        threshold: Some(threshold),
                        ..base
                    });
                }
            };
            let queue = q.unwrap_or(0);
            if let Some(v) = occupancy {
                let d = state.queue(
                    port,
                    queue,
                    QueueMetric::Occupancy,
                    v,
                    th.queue_occupancy,
                    clock,
                    keys,
                );
                report(Metric::QueueOccupancy, v, th.queue_occupancy, d);
            }
            if let Some(v) = congestion {
                let d = state.queue(
                    port,
                    queue,
                    QueueMetric::Congestion,
                    v,
                    th.queue_congestion,
                    clock,
                    keys,
                );
                report(Metric::QueueCongestion, v, th.queue_congestion, d);
            }
            if let Some(v) = utilization {
                let d = state.link(port.unwrap_or(0), v, th.link_utilization, clock, keys);
                report(Metric::LinkUtilization, v, th.link_utilization, d);
            }
        }
    }

    /// True when the threshold detector would decide no event for `rec` — and so change no
    /// state: every check of [`Detection::process_hashed`] without a watchlist rule, read
    /// only. Anything it does not know (a new flow, node, queue, port, a hop off its index)
    /// is not quiet, and the full path decides.
    #[inline(never)]
    fn quiet(&self, rec: &ReportRecord, flow_hash: Option<u64>, clock: Clock) -> bool {
        let th = &self.limits;
        // A pure predicate: its checks can run in any order, so one pass over the hops reads
        // each field once. The flow's checks apply when the full path makes them.
        let flow = match (flow_hash, rec.hops.is_empty()) {
            (Some(fh), false) => match self.flows.find(fh, clock) {
                Some(state) => Some(state),
                None => return false,
            },
            _ => None,
        };
        const NODE: u16 = HopField::NodeId.bit();
        const LATENCY: u16 = HopField::HopLatency.bit();
        const QUEUE: u16 = HopField::QueueId.bit();
        const OCCUPANCY: u16 = QUEUE | HopField::QueueOccupancy.bit();
        const CONGESTION: u16 = QUEUE | HopField::QueueCongestion.bit();
        const PORT: u16 = HopField::L1EgressPort.bit();
        const UTILIZATION: u16 = PORT | HopField::TxUtilization.bit();
        // Fields of the common case: every one the checks read, congestion aside.
        const FULL: u16 = NODE | LATENCY | OCCUPANCY | UTILIZATION;
        let mut path = PathSum {
            hash: PATH_SEED,
            latency: 0,
            any_latency: false,
        };
        for (i, hop) in rec.hops.iter().enumerate() {
            // Every field's presence and "unavailable" test at once; values read raw.
            let valid = hop.valid_of(FULL | CONGESTION);
            let has = |fields: u16| valid & fields == fields;
            let raw = |f: HopField| hop.raw(f) as u32;
            let queue = raw(HopField::QueueId) as u8;
            let congestion = has(CONGESTION).then(|| (queue, raw(HopField::QueueCongestion)));
            // The same checks twice: with every field known present (the common case, its
            // tests folded away) and for any other hop.
            let quiet = if has(FULL) {
                self.hop_quiet(
                    flow,
                    i,
                    Some(raw(HopField::NodeId)),
                    Some(raw(HopField::HopLatency)),
                    Some(raw(HopField::L1EgressPort)),
                    Some((queue, raw(HopField::QueueOccupancy))),
                    congestion,
                    Some(raw(HopField::TxUtilization)),
                    &mut path,
                    clock,
                )
            } else {
                self.hop_quiet(
                    flow,
                    i,
                    has(NODE).then(|| raw(HopField::NodeId)),
                    has(LATENCY).then(|| raw(HopField::HopLatency)),
                    has(PORT).then(|| raw(HopField::L1EgressPort)),
                    has(OCCUPANCY).then(|| (queue, raw(HopField::QueueOccupancy))),
                    congestion,
                    has(UTILIZATION).then(|| raw(HopField::TxUtilization)),
                    &mut path,
                    clock,
                )
            };
            if !quiet {
                return false;
            }
        }
        let PathSum {
            hash: ph,
            latency: sum,
            any_latency,
        } = path;
        flow.is_none_or(|state| {
            state.path_quiet(ph, clock)
                && (!any_latency || state.latency_quiet(sum, th.flow_latency, clock))
        })
    }

    /// One hop of [`Detection::quiet`]: its flow checks (with `flow`) and its switch checks;
    /// folds the hop into the path hash and latency sum. Fields are `None` when missing or
    /// unavailable; occupancy and congestion come with the queue id, and a queue is keyed by
    /// `port` too; utilisation comes only with `port`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn hop_quiet(
        &self,
        flow: Option<&FlowState>,
        index: usize,
        node: Option<u32>,
        latency: Option<u32>,
        port: Option<u32>,
        occupancy: Option<(u8, u32)>,
        congestion: Option<(u8, u32)>,
        utilization: Option<u32>,
        path: &mut PathSum,
        clock: Clock,
    ) -> bool {
        let th = &self.limits;
        if let Some(state) = flow {
            // A missing node id is u32::MAX, as in the full path.
            path.hash = mix(path.hash, node.unwrap_or(u32::MAX).into());
            if let Some(l) = latency {
                path.latency += u64::from(l);
                path.any_latency = true;
                if let Some(node) = node
                    && !state.hop_quiet(index, node, l, th.hop_latency, clock)
                {
                    return false;
                }
            }
        }
        // Switch metrics, whatever the flow.
        let Some(node) = node else { return true };
        if occupancy.is_none() && congestion.is_none() && utilization.is_none() {
            return true;
        }
        let Some(state) = self.nodes.find(node, clock) else {
            return false;
        };
        occupancy.is_none_or(|(q, v)| {
            state.queue_quiet(
                port,
                q,
                QueueMetric::Occupancy,
                v,
                th.queue_occupancy,
                clock,
            )
        }) && congestion.is_none_or(|(q, v)| {
            state.queue_quiet(
                port,
                q,
                QueueMetric::Congestion,
                v,
                th.queue_congestion,
                clock,
            )
        }) && utilization.is_none_or(|v| {
            port.is_some_and(|port| state.link_quiet(port, v, th.link_utilization, clock))
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn algorithm(
        idx: usize,
        rule: &Rule,
        fh: u64,
        rec: &ReportRecord,
        path: &[u32],
        per_hop: &mut IdTable<u64>,
        per_flow: &mut IdTable<u64>,
        ewma: &mut IdTable<Ewma>,
        now_s: u32,
        base: &EventRow<'_>,
        out: &mut impl FnMut(&EventRow<'_>),
    ) {
        let (field, hop_metric, flow_metric) = measure_field(rule.measurement);
        let t = rule.threshold;
        let sum = || -> Option<u64> {
            rec.hops
                .iter()
                .filter_map(|h| h.get(field))
                .reduce(|a, b| a + b)
        };
        let rule_id = idx as u64 + 1;
        let detector = Detector::from(rule.algorithm);
        match rule.algorithm {
            Algorithm::Noop => out(&EventRow {
                kind: EventKind::Report,
                metric: flow_metric,
                detector,
                value: sum(),
                path,
                ..*base
            }),
            Algorithm::PerHop => {
                for hop in &rec.hops {
                    let (Some(node), Some(v)) = (hop.node_id(), hop.get(field)) else {
                        continue;
                    };
                    let (queue_id, egress_port) =
                        hop_ids(hop_metric, hop.queue_id(), hop.egress_port());
                    let ids = (u64::from(node) << 32)
                        | u64::from(queue_id.unwrap_or(0))
                        | u64::from(egress_port.unwrap_or(0));
                    let k = key(hop_metric, rule_id, ids);
                    let event = match per_hop.get_or_insert_with(k, now_s, || v, drop) {
                        (_, true) => Some((EventKind::New, None)),
                        (last, false) if v.abs_diff(*last) > t => {
                            Some((EventKind::Change, Some(std::mem::replace(last, v))))
                        }
                        _ => None,
                    };
                    if let Some((kind, previous)) = event {
                        out(&EventRow {
                            kind,
                            metric: hop_metric,
                            detector,
                            node_id: Some(node),
                            queue_id,
                            egress_port,
                            value: Some(v),
                            previous,
                            ..*base
                        });
                    }
                }
            }
            Algorithm::PerFlow => {
                let Some(s) = sum() else { return };
                let k = key(flow_metric, mix(fh, rule_id), 1);
                let event = match per_flow.get_or_insert_with(k, now_s, || s, drop) {
                    (_, true) => Some((EventKind::New, None)),
                    (last, false) if s.abs_diff(*last) > t => {
                        Some((EventKind::Change, Some(std::mem::replace(last, s))))
                    }
                    _ => None,
                };
                if let Some((kind, previous)) = event {
                    out(&EventRow {
                        kind,
                        metric: flow_metric,
                        detector,
                        value: Some(s),
                        previous,
                        path,
                        ..*base
                    });
                }
            }
            Algorithm::Complex => {
                // Every condition is evaluated: each keeps the flow's previous value (in the
                // per-flow table under its own key) current. A flow new to the rule is an
                // event whatever the conditions, as the switch reports a new flow.
                let mut all = true;
                let mut new = false;
                let mut first = None;
                for (i, c) in rule.when.iter().enumerate() {
                    let (field, _, _) = measure_field(c.measurement);
                    let v = rec
                        .hops
                        .iter()
                        .filter_map(|h| h.get(field))
                        .max()
                        .unwrap_or(0);
                    let k = key(flow_metric, mix(fh, rule_id), 3 + i as u64);
                    // A new flow's previous value is 0, as in the switch's registers.
                    let (last, inserted) = per_flow.get_or_insert_with(k, now_s, || 0, drop);
                    all &= c.holds(v, std::mem::replace(last, v));
                    new |= inserted;
                    first.get_or_insert(v);
                }
                if all || new {
                    out(&EventRow {
                        kind: if new {
                            EventKind::New
                        } else {
                            EventKind::Report
                        },
                        metric: flow_metric,
                        detector,
                        value: first,
                        path,
                        ..*base
                    });
                }
            }
            Algorithm::Ewma => {
                let Some(s) = sum() else { return };
                let w = rule.weight.unwrap_or(1.0);
                let k = key(flow_metric, mix(fh, rule_id), 2);
                let x = s as f64;
                let first = || Ewma {
                    avg: x,
                    reported: x,
                };
                let event = match ewma.get_or_insert_with(k, now_s, first, drop) {
                    (_, true) => Some((EventKind::New, x, None)),
                    (st, false) => {
                        st.avg = w * x + (1.0 - w) * st.avg;
                        if (st.avg - st.reported).abs() > t as f64 {
                            let prev = st.reported;
                            st.reported = st.avg;
                            Some((EventKind::Change, st.avg, Some(prev)))
                        } else {
                            None
                        }
                    }
                };
                if let Some((kind, avg, previous)) = event {
                    out(&EventRow {
                        kind,
                        metric: flow_metric,
                        detector,
                        value: Some(avg.round() as u64),
                        previous: previous.map(|p: f64| p.round() as u64),
                        path,
                        ..*base
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use kplane_model::{FlowKey, HopRecord, ReportEnvelope};

    use super::*;

    const S: u64 = 1_000_000_000;

    fn flow(src: &str) -> FlowKey {
        FlowKey {
            src_ip: src.parse().unwrap(),
            dst_ip: "10.0.9.9".parse().unwrap(),
            src_port: 1000,
            dst_port: 80,
            protocol: 6,
        }
    }

    /// A report of `flow` over nodes 1..=hops, with hop latency `lat` at every hop and
    /// queue occupancy `occ` at node 2.
    fn report(f: FlowKey, hops: u32, lat: u64, occ: u64, now: u64) -> ReportRecord {
        let mut r = ReportRecord {
            envelope: ReportEnvelope {
                received_ns: now,
                ..ReportEnvelope::default()
            },
            flow: Some(f),
            hops: Vec::new(),
        };
        for n in 1..=hops {
            let mut h = HopRecord::default();
            h.set(HopField::NodeId, n.into());
            h.set(HopField::HopLatency, lat);
            if n == 2 {
                h.set(HopField::QueueId, 0);
                h.set(HopField::QueueOccupancy, occ);
            }
            r.hops.push(h);
        }
        r
    }

    fn events(
        d: &mut Detection,
        wl: &Watchlist,
        r: &ReportRecord,
    ) -> Vec<(EventKind, Metric, Detector, Option<u64>)> {
        let mut v = Vec::new();
        d.process(r, wl, |e| v.push((e.kind, e.metric, e.detector, e.value)));
        v
    }

    fn cfg() -> EventConfig {
        EventConfig {
            refresh: std::time::Duration::from_secs(10),
            flow_latency: 1_000,
            hop_latency: 500,
            queue_occupancy: 10,
            queue_congestion: 0,
            link_utilization: 10,
        }
    }

    #[test]
    fn new_keys_then_silence_then_exactly_one_event_per_step() {
        let wl = Watchlist::default();
        let mut d = Detection::new(cfg(), &StateConfig::default());
        let f = flow("10.0.0.1");
        let first = events(&mut d, &wl, &report(f, 3, 100, 5, S));
        // path, flow latency, 3 per-hop latencies, 1 queue: all new.
        assert_eq!(first.len(), 6, "{first:?}");
        assert!(first.iter().all(|e| e.0 == EventKind::New));
        // Noise below every threshold: nothing.
        for i in 0..20 {
            let e = events(
                &mut d,
                &wl,
                &report(f, 3, 100 + (i % 3) * 50, 5 + i % 4, S + i),
            );
            assert!(e.is_empty(), "noise at {i}: {e:?}");
        }
        // A step above the hop-latency threshold at every hop: the three hops and the sum.
        let step = events(&mut d, &wl, &report(f, 3, 900, 5, 2 * S));
        assert_eq!(
            step.iter()
                .filter(|e| e.1 == Metric::FlowHopLatency)
                .count(),
            3,
            "{step:?}"
        );
        assert_eq!(
            step.iter().filter(|e| e.1 == Metric::FlowLatency).count(),
            1
        );
        assert!(step.iter().all(|e| e.0 == EventKind::Change));
        // Staying at the new level: nothing more.
        assert!(events(&mut d, &wl, &report(f, 3, 900, 5, 2 * S + 1)).is_empty());
        assert_eq!(d.keys(), 6);
    }

    /// A 5-hop report with every field detection reads (the quiet check's common case):
    /// queue 1 at every hop, egress port 3, congestion 0.
    fn full_report(f: FlowKey, now: u64) -> ReportRecord {
        let mut r = report(f, 5, 2_000, 100, now);
        for h in &mut r.hops {
            h.set(HopField::QueueId, 1);
            h.set(HopField::QueueOccupancy, 100);
            h.set(HopField::QueueCongestion, 0);
            h.set(HopField::L1EgressPort, 3);
            h.set(HopField::TxUtilization, 500);
        }
        r
    }

    #[test]
    fn after_a_steady_state_each_single_change_is_exactly_its_event() {
        let wl = Watchlist::default();
        let f = flow("10.0.0.9");
        use {HopField as F, Metric as M};
        // (what, hop index, field, new value or None for "unavailable", the event's metric)
        let changes = [
            (
                "hop latency",
                3,
                F::HopLatency,
                Some(5_000),
                M::FlowHopLatency,
            ),
            (
                "occupancy",
                4,
                F::QueueOccupancy,
                Some(900),
                M::QueueOccupancy,
            ),
            (
                "congestion",
                0,
                F::QueueCongestion,
                Some(7),
                M::QueueCongestion,
            ),
            (
                "utilisation",
                2,
                F::TxUtilization,
                Some(9_000),
                M::LinkUtilization,
            ),
            ("path", 2, F::NodeId, Some(42), M::FlowPath),
            (
                "latency unavailable",
                1,
                F::HopLatency,
                None,
                M::FlowLatency,
            ),
        ];
        for (name, hop, field, value, metric) in changes {
            let mut d = Detection::new(cfg(), &StateConfig::default());
            assert!(!events(&mut d, &wl, &full_report(f, S)).is_empty());
            for i in 1..50 {
                let e = events(&mut d, &wl, &full_report(f, S + i));
                assert!(e.is_empty(), "{name}: steady report {i}: {e:?}");
            }
            let mut r = full_report(f, 2 * S);
            match value {
                Some(v) => r.hops[hop].set(field, v),
                None => r.hops[hop].set_unavailable(field),
            }
            let e = events(&mut d, &wl, &r);
            assert!(e.iter().any(|e| e.1 == metric), "{name}: {e:?}");
            match metric {
                // A new node on the path brings its own new keys; a missing latency moves
                // the sum.
                Metric::FlowPath | Metric::FlowLatency => {}
                Metric::FlowHopLatency => assert_eq!(e.len(), 2, "{name}: hop and sum: {e:?}"),
                _ => assert_eq!(e.len(), 1, "{name}: {e:?}"),
            }
        }
    }

    #[test]
    fn a_refresh_never_comes_before_its_period() {
        let wl = Watchlist::default();
        let mut d = Detection::new(cfg(), &StateConfig::default()); // refresh 10 s
        let f = flow("10.0.0.2");
        events(&mut d, &wl, &report(f, 2, 100, 5, 2 * S - 1));
        let early = events(&mut d, &wl, &report(f, 2, 100, 5, 11 * S + S / 2));
        assert!(early.is_empty(), "9.5 s after the event: {early:?}");
        let due = events(&mut d, &wl, &report(f, 2, 100, 5, 12 * S));
        assert_eq!(due.len(), 5, "10 s after the event: {due:?}");
    }

    #[test]
    fn periodic_refresh_fires_for_live_keys() {
        let wl = Watchlist::default();
        let mut d = Detection::new(cfg(), &StateConfig::default());
        let f = flow("10.0.0.2");
        events(&mut d, &wl, &report(f, 2, 100, 5, S));
        assert!(events(&mut d, &wl, &report(f, 2, 100, 5, 5 * S)).is_empty());
        let later = events(&mut d, &wl, &report(f, 2, 100, 5, 12 * S));
        assert_eq!(later.len(), 5, "every live key refreshed: {later:?}");
        assert!(later.iter().all(|e| e.0 == EventKind::Refresh));
        assert!(events(&mut d, &wl, &report(f, 2, 100, 5, 13 * S)).is_empty());
    }

    #[test]
    fn a_path_change_is_an_event() {
        let wl = Watchlist::default();
        let mut d = Detection::new(cfg(), &StateConfig::default());
        let f = flow("10.0.0.3");
        events(&mut d, &wl, &report(f, 3, 100, 5, S));
        let mut r = report(f, 3, 100, 5, S + 1);
        r.hops[1].set(HopField::NodeId, 7);
        let e = events(&mut d, &wl, &r);
        assert!(
            e.iter()
                .any(|e| e.1 == Metric::FlowPath && e.0 == EventKind::Change),
            "{e:?}"
        );
    }

    fn watch(json: &str) -> Watchlist {
        Watchlist::new(vec![serde_json::from_str(json).unwrap()])
    }

    #[test]
    fn noop_reports_everything() {
        let wl = watch(r#"{"algorithm":"noop"}"#);
        let mut d = Detection::new(cfg(), &StateConfig::default());
        let f = flow("10.0.0.4");
        for i in 0..5 {
            let e = events(&mut d, &wl, &report(f, 3, 100, 5, S + i));
            assert_eq!(e.iter().filter(|e| e.2 == Detector::Noop).count(), 1);
            assert!(e.iter().any(|e| e.3 == Some(300)), "sum of hop latencies");
        }
    }

    #[test]
    fn complex_reports_while_every_condition_holds() {
        // "Hop latency above 150 and the queue risen by more than 20 since the flow's
        // previous report" (the paper's example, scaled): hand-computed per report.
        let wl = watch(
            r#"{"algorithm":"complex","when":[{"measurement":"hop-latency","above":150},{"measurement":"queue-occupancy","rises-by":20}]}"#,
        );
        let mut d = Detection::new(cfg(), &StateConfig::default());
        let f = flow("10.0.0.6");
        // (latency, queue at node 2, expected): the first report rises from 0.
        let steps = [
            (200, 30, true),   // 200 > 150, 30 − 0 > 20
            (200, 40, false),  // rose 10
            (100, 90, false),  // rose 50 but latency 100
            (300, 100, false), // rose 10 (the previous report's value is kept either way)
            (300, 130, true),  // rose 30
            (300, 10, false),  // fell
        ];
        for (i, (lat, occ, expect)) in steps.into_iter().enumerate() {
            let e = events(&mut d, &wl, &report(f, 3, lat, occ, S + i as u64));
            let hits: Vec<_> = e.iter().filter(|e| e.2 == Detector::Complex).collect();
            assert_eq!(hits.len(), usize::from(expect), "step {i}: {e:?}");
            if expect {
                // The flow's first report is `new`, the others `report`.
                let kind = if i == 0 {
                    EventKind::New
                } else {
                    EventKind::Report
                };
                assert_eq!(hits[0].0, kind);
                assert_eq!(hits[0].3, Some(lat), "the first condition's value");
            }
        }
        // A second flow has its own previous values: 25 rose by more than 20.
        let e = events(&mut d, &wl, &report(flow("10.0.0.7"), 3, 200, 25, 9 * S));
        assert_eq!(e.iter().filter(|e| e.2 == Detector::Complex).count(), 1);
        // A new flow is an event even when the conditions do not hold (as the switch reports
        // it), and only its first report.
        let quiet = flow("10.0.0.8");
        for (i, want) in [(0, 1), (1, 0)] {
            let e = events(&mut d, &wl, &report(quiet, 3, 100, 5, 10 * S + i));
            let hits: Vec<_> = e.iter().filter(|e| e.2 == Detector::Complex).collect();
            assert_eq!(hits.len(), want, "report {i}: {e:?}");
            assert!(hits.iter().all(|h| h.0 == EventKind::New));
        }
    }

    #[test]
    fn per_hop_and_per_flow_follow_their_threshold() {
        for (alg, expect_detector) in [
            ("per-hop", Detector::PerHop),
            ("per-flow", Detector::PerFlow),
        ] {
            let wl = watch(&format!(r#"{{"algorithm":"{alg}","threshold":200}}"#));
            let mut d = Detection::new(cfg(), &StateConfig::default());
            let f = flow("10.0.0.5");
            let first = events(&mut d, &wl, &report(f, 3, 100, 5, S));
            assert!(
                first
                    .iter()
                    .any(|e| e.2 == expect_detector && e.0 == EventKind::New)
            );
            // Per hop +150 is under 200; per flow the sum moves 450: only per-flow fires.
            let e = events(&mut d, &wl, &report(f, 3, 250, 5, S + 1));
            let fired = e.iter().filter(|e| e.2 == expect_detector).count();
            match expect_detector {
                Detector::PerHop => assert_eq!(fired, 0, "{e:?}"),
                _ => assert_eq!(fired, 1, "{e:?}"),
            }
            // Threshold detection of flow latency is replaced for watched flows.
            assert!(
                e.iter()
                    .all(|e| e.1 != Metric::FlowHopLatency || e.2 != Detector::Threshold)
            );
        }
    }

    #[test]
    fn ewma_smooths_a_short_burst() {
        let wl = watch(r#"{"algorithm":"ewma","weight":0.25,"threshold":300}"#);
        let mut d = Detection::new(cfg(), &StateConfig::default());
        let f = flow("10.0.0.6");
        let mut fired = 0;
        // Sum 300 steady, one burst to 1200, back to 300: EWMA moves 225, under 300.
        for (i, lat) in [100, 100, 400, 100, 100].into_iter().enumerate() {
            let e = events(&mut d, &wl, &report(f, 3, lat, 5, S + i as u64));
            fired += e
                .iter()
                .filter(|e| e.2 == Detector::Ewma && e.0 == EventKind::Change)
                .count();
        }
        assert_eq!(fired, 0, "a single burst is smoothed out");
        // A sustained rise of 450 (sum 300 → 750) crosses it once.
        for i in 0..6 {
            let e = events(&mut d, &wl, &report(f, 3, 250, 5, 2 * S + i));
            fired += e
                .iter()
                .filter(|e| e.2 == Detector::Ewma && e.0 == EventKind::Change)
                .count();
        }
        assert_eq!(fired, 1, "a sustained change fires once");
    }

    /// The threshold detector as one flat table of (metric, flow, ids) keys — the reference
    /// the per-flow / per-switch layout must agree with event for event.
    #[derive(Default)]
    struct FlatReference {
        keys: HashMap<(Metric, Option<FlowKey>, u64), (u64, u32)>,
    }

    type Ev = (
        EventKind,
        Metric,
        Option<u32>,
        Option<u8>,
        Option<u32>,
        Option<u64>,
        Option<u64>,
    );

    impl FlatReference {
        fn check(
            &mut self,
            k: (Metric, Option<FlowKey>, u64),
            v: u64,
            t: u64,
            now: u64,
            refresh: u64,
        ) -> Option<(EventKind, Option<u64>)> {
            let now_s = (now / S) as u32;
            match self.keys.get_mut(&k) {
                None => {
                    self.keys.insert(k, (v, now_s));
                    Some((EventKind::New, None))
                }
                Some(slot) => {
                    let prev = slot.0;
                    let kind = if v.abs_diff(prev) > t {
                        EventKind::Change
                    } else if refresh > 0
                        // Whole seconds, never early: a second after `refresh` has passed.
                        && u64::from(now_s.wrapping_sub(slot.1)) * S >= refresh + S
                    {
                        EventKind::Refresh
                    } else {
                        return None;
                    };
                    *slot = (v, now_s);
                    Some((kind, Some(prev)))
                }
            }
        }

        fn process(&mut self, r: &ReportRecord, c: &EventConfig) -> Vec<Ev> {
            let (now, refresh) = (r.envelope.received_ns, c.refresh.as_nanos() as u64);
            let mut out = Vec::new();
            if let (Some(f), false) = (r.flow, r.hops.is_empty()) {
                let path: Vec<u32> = r
                    .hops
                    .iter()
                    .map(|h| h.node_id().unwrap_or(u32::MAX))
                    .collect();
                let ph = path
                    .iter()
                    .fold(0x5851_F42D_4C95_7F2D, |h, &n| mix(h, n.into()));
                if let Some((kind, _)) =
                    self.check((Metric::FlowPath, Some(f), 0), ph, 0, now, refresh)
                {
                    out.push((kind, Metric::FlowPath, None, None, None, None, None));
                }
                let lat = r
                    .hops
                    .iter()
                    .filter_map(HopRecord::hop_latency_ns)
                    .map(u64::from)
                    .reduce(|a, b| a + b);
                if let Some(sum) = lat
                    && let Some((kind, prev)) = self.check(
                        (Metric::FlowLatency, Some(f), 0),
                        sum,
                        c.flow_latency,
                        now,
                        refresh,
                    )
                {
                    out.push((kind, Metric::FlowLatency, None, None, None, Some(sum), prev));
                }
                for h in &r.hops {
                    let (Some(n), Some(l)) = (h.node_id(), h.hop_latency_ns()) else {
                        continue;
                    };
                    if let Some((kind, prev)) = self.check(
                        (Metric::FlowHopLatency, Some(f), n.into()),
                        l.into(),
                        c.hop_latency,
                        now,
                        refresh,
                    ) {
                        out.push((
                            kind,
                            Metric::FlowHopLatency,
                            Some(n),
                            None,
                            None,
                            Some(l.into()),
                            prev,
                        ));
                    }
                }
            }
            for h in &r.hops {
                let Some(n) = h.node_id() else { continue };
                // A queue is its port's: (port or none, queue id) in the key's low 32 bits.
                let port_key = h.egress_port().map_or(1 << 30, |p| u64::from(p) << 8);
                let q = h.queue_id().map(|q| port_key | u64::from(q));
                for (m, id, v, t) in [
                    (
                        Metric::QueueOccupancy,
                        q,
                        h.queue_occupancy().map(u64::from),
                        c.queue_occupancy,
                    ),
                    (
                        Metric::QueueCongestion,
                        q,
                        h.get(HopField::QueueCongestion),
                        c.queue_congestion,
                    ),
                    (
                        Metric::LinkUtilization,
                        h.egress_port().map(u64::from),
                        h.tx_utilization().map(u64::from),
                        c.link_utilization,
                    ),
                ] {
                    let (Some(id), Some(v)) = (id, v) else {
                        continue;
                    };
                    if let Some((kind, prev)) =
                        self.check((m, None, (u64::from(n) << 32) | id), v, t, now, refresh)
                    {
                        let (qid, port) = hop_ids(m, h.queue_id(), h.egress_port());
                        out.push((kind, m, Some(n), qid, port, Some(v), prev));
                    }
                }
            }
            out
        }
    }

    #[test]
    fn per_flow_and_per_switch_state_matches_a_flat_key_table() {
        let c = cfg();
        for seed in 1..=40u64 {
            let mut rng = kplane_model::rng::Rng::new(seed);
            let mut rnd = |n: u64| rng.below(n);
            let flows: Vec<FlowKey> = (0..4).map(|i| flow(&format!("10.0.1.{i}"))).collect();
            let wl = Watchlist::default();
            let mut d = Detection::new(c.clone(), &StateConfig::default());
            let mut reference = FlatReference::default();
            let mut now = S;
            for _ in 0..400 {
                now += rnd(3) * S + rnd(S);
                let f = flows[rnd(4) as usize];
                let mut r = report(f, 0, 0, 0, now);
                // Mostly one stable path per flow; sometimes another, a loop, or missing ids.
                let hops = 1 + rnd(6) as u32;
                for i in 0..hops {
                    let mut h = HopRecord::default();
                    let node = match rnd(10) {
                        0 => rnd(8) as u32 + 1,
                        1 => 5000 + rnd(3) as u32,
                        _ => i + 1,
                    };
                    if rnd(20) != 0 {
                        h.set(HopField::NodeId, node.into());
                    }
                    if rnd(10) != 0 {
                        h.set(HopField::HopLatency, 1000 + rnd(4) * 400);
                    }
                    if rnd(3) != 0 {
                        h.set(HopField::QueueId, rnd(3));
                        h.set(HopField::QueueOccupancy, 100 + rnd(4) * 8);
                    }
                    if rnd(4) == 0 {
                        h.set(HopField::QueueCongestion, rnd(2));
                    }
                    if rnd(3) != 0 {
                        let port = if rnd(10) == 0 { 300 + rnd(2) } else { rnd(4) };
                        h.set(HopField::L1EgressPort, port);
                        h.set(HopField::TxUtilization, 500 + rnd(3) * 8);
                    }
                    r.hops.push(h);
                }
                if rnd(30) == 0 {
                    r.flow = None;
                }
                let mut got = Vec::new();
                d.process(&r, &wl, |e| {
                    got.push((
                        e.kind,
                        e.metric,
                        e.node_id,
                        e.queue_id,
                        e.egress_port,
                        e.value,
                        e.previous,
                    ));
                });
                assert_eq!(got, reference.process(&r, &c), "seed {seed}");
            }
            assert_eq!(d.keys(), reference.keys.len(), "seed {seed}");
            assert_eq!(d.keys(), d.flows.keys() + d.nodes.keys());
        }
    }

    /// The flow hash kplane used before it was keyed: a seeded multiply–xorshift fold over
    /// the 5-tuple's words.
    fn unkeyed_flow_hash(f: &FlowKey) -> u64 {
        let bits = |ip| u128::from_be_bytes(kplane_model::ip_to_16(ip));
        let (s, d) = (bits(f.src_ip), bits(f.dst_ip));
        let ports =
            (u64::from(f.src_port) << 24) | (u64::from(f.dst_port) << 8) | u64::from(f.protocol);
        [
            (s >> 64) as u64,
            s as u64,
            (d >> 64) as u64,
            d as u64,
            ports,
        ]
        .into_iter()
        .fold(0x243F_6A88_85A3_08D3, mix)
    }

    #[test]
    fn flows_a_tenant_makes_collide_under_an_unkeyed_hash_keep_their_own_state() {
        // Flipping the top bit of one word flips bits 63 and 34 after `mix`, whatever came
        // before; flipping those in the next word cancels it. Two flows a tenant can send.
        let a = FlowKey {
            src_ip: "2001:db8::1".parse().unwrap(),
            dst_ip: "2001:db8:ffff::2".parse().unwrap(),
            src_port: 1000,
            dst_port: 80,
            protocol: 6,
        };
        let flip = |ip: std::net::IpAddr, hi: u64, lo: u64| {
            let v = u128::from_be_bytes(kplane_model::ip_to_16(ip));
            std::net::IpAddr::V6((v ^ (u128::from(hi) << 64 | u128::from(lo))).into())
        };
        let b = FlowKey {
            src_ip: flip(a.src_ip, 0, 1 << 63),
            dst_ip: flip(a.dst_ip, (1 << 63) | (1 << 34), 0),
            ..a
        };
        assert_ne!(a, b);
        assert_eq!(
            unkeyed_flow_hash(&a),
            unkeyed_flow_hash(&b),
            "the constructed pair"
        );

        let wl = Watchlist::default();
        let mut d = Detection::new(cfg(), &StateConfig::default());
        assert_ne!(d.flow_key_hash(&a), d.flow_key_hash(&b));
        events(&mut d, &wl, &report(a, 3, 100, 5, S));
        // Under the unkeyed hash `b` found `a`'s state: same path and latency, no event.
        let e = events(&mut d, &wl, &report(b, 3, 100, 5, S));
        for m in [
            Metric::FlowPath,
            Metric::FlowLatency,
            Metric::FlowHopLatency,
        ] {
            assert!(
                e.iter().any(|e| e.0 == EventKind::New && e.1 == m),
                "{m:?} of the second flow is a new key: {e:?}"
            );
        }
        // And `a` still has its own: a change of `b` is not seen as `a`'s.
        events(&mut d, &wl, &report(b, 3, 5000, 5, S + 1));
        let e = events(&mut d, &wl, &report(a, 3, 100, 5, S + 1));
        assert!(e.iter().all(|e| e.1 != Metric::FlowLatency), "{e:?}");
    }

    #[test]
    fn a_flow_forgotten_when_idle_or_for_room_is_new_when_seen_again() {
        let state = StateConfig {
            flows: id_table::Limits {
                idle: Duration::from_secs(30),
                max: 2,
            },
            ..StateConfig::default()
        };
        let wl = Watchlist::default();
        let mut d = Detection::new(cfg(), &state);
        let new_path = |e: &[(EventKind, Metric, Detector, Option<u64>)]| {
            e.iter()
                .any(|e| e.0 == EventKind::New && e.1 == Metric::FlowPath)
        };
        let (a, b, c) = (flow("10.0.0.1"), flow("10.0.0.2"), flow("10.0.0.3"));
        assert!(new_path(&events(&mut d, &wl, &report(a, 3, 100, 5, S))));
        // Reported within the idle time (quiet reports count): still known.
        assert!(!new_path(&events(
            &mut d,
            &wl,
            &report(a, 3, 100, 5, 25 * S)
        )));
        assert!(!new_path(&events(
            &mut d,
            &wl,
            &report(a, 3, 100, 5, 50 * S)
        )));
        // Silent for more than 30 s: a new flow again, its old keys gone from the count.
        let keys = d.keys();
        assert!(new_path(&events(
            &mut d,
            &wl,
            &report(a, 3, 100, 5, 81 * S)
        )));
        assert_eq!(d.keys(), keys, "the same keys, forgotten and made again");
        assert_eq!(d.tables()[0].evicted.idle, 1);
        // Two flows fill the table; a third evicts the least recently seen (a).
        events(&mut d, &wl, &report(b, 3, 100, 5, 82 * S));
        events(&mut d, &wl, &report(c, 3, 100, 5, 83 * S));
        assert_eq!(d.tables()[0].evicted.capacity, 1);
        assert_eq!(d.tables()[0].entries, 2);
        assert!(!new_path(&events(
            &mut d,
            &wl,
            &report(b, 3, 100, 5, 84 * S)
        )));
        assert!(new_path(&events(
            &mut d,
            &wl,
            &report(a, 3, 100, 5, 85 * S)
        )));
        assert_eq!(d.keys(), d.flows.keys() + d.nodes.keys());
    }

    #[test]
    fn a_flow_keeps_at_most_64_hop_slots() {
        let wl = Watchlist::default();
        let mut d = Detection::new(cfg(), &StateConfig::default());
        let f = flow("10.0.0.9");
        // 100 one-hop reports of the flow, each through another node.
        for n in 0..100u64 {
            let mut r = report(f, 1, 100, 5, S + n);
            r.hops[0].set(HopField::NodeId, 1000 + n);
            events(&mut d, &wl, &r);
        }
        let hops = d
            .tables()
            .into_iter()
            .find(|t| t.table == "flow-hops")
            .unwrap();
        assert_eq!(hops.evicted.capacity, 36);
        assert_eq!(d.keys(), d.flows.keys() + d.nodes.keys());
        assert!(d.flows.keys() <= 2 + FlowState::MAX_HOP_SLOTS);
    }

    #[test]
    fn switch_metrics_are_shared_across_flows() {
        let wl = Watchlist::default();
        let mut d = Detection::new(cfg(), &StateConfig::default());
        events(&mut d, &wl, &report(flow("10.0.0.7"), 3, 100, 5, S));
        let e = events(&mut d, &wl, &report(flow("10.0.0.8"), 3, 100, 5, S));
        assert!(
            e.iter().all(|e| e.1 != Metric::QueueOccupancy),
            "same queue, same value: {e:?}"
        );
    }

    #[test]
    fn a_queue_is_its_ports_queue() {
        let wl = Watchlist::default();
        let mut d = Detection::new(cfg(), &StateConfig::default());
        // Queue id 0 of switch 2 (a switch that stamps 0 on every port), out of `port`.
        let through = |port: Option<u64>, occ: u64, now: u64| {
            let mut r = report(flow("10.0.0.7"), 3, 100, occ, now);
            if let Some(p) = port {
                r.hops[1].set(HopField::L1EgressPort, p);
            }
            r
        };
        let queue_events = |d: &mut Detection, r: &ReportRecord| {
            let mut v = Vec::new();
            d.process(r, &wl, |e| {
                if e.metric == Metric::QueueOccupancy {
                    v.push((e.kind, e.node_id, e.egress_port, e.queue_id, e.value));
                }
            });
            v
        };
        let new = |port, value| (EventKind::New, Some(2), port, Some(0), Some(value));
        assert_eq!(
            queue_events(&mut d, &through(Some(1), 5, S)),
            [new(Some(1), 5)]
        );
        // Port 2's queue 0 is another queue, however much fuller: a key of its own, and port
        // 1's does not change for it.
        assert_eq!(
            queue_events(&mut d, &through(Some(2), 90, S)),
            [new(Some(2), 90)]
        );
        assert_eq!(queue_events(&mut d, &through(Some(1), 6, S + 1)), []);
        // A hop without a port has queues of its own; a high port's queue is its port's too.
        assert_eq!(
            queue_events(&mut d, &through(None, 40, S + 2)),
            [new(None, 40)]
        );
        assert_eq!(
            queue_events(&mut d, &through(Some(70_000), 7, S + 3)),
            [new(Some(70_000), 7)]
        );
        assert_eq!(
            queue_events(&mut d, &through(Some(2), 20, S + 4)),
            [(EventKind::Change, Some(2), Some(2), Some(0), Some(20))]
        );
        assert_eq!(d.keys(), d.flows.keys() + d.nodes.keys());
    }

    #[test]
    fn a_high_port_evicted_takes_its_queues_keys_with_it() {
        let wl = Watchlist::default();
        let mut d = Detection::new(cfg(), &StateConfig::default());
        // More high ports than a switch keeps, each with a queue and a link.
        for p in 0..(crate::threshold::NodeState::MAX_HIGH_PORTS as u64 + 10) {
            let mut r = report(flow("10.0.0.7"), 3, 100, 5, S + p);
            r.hops[1].set(HopField::L1EgressPort, 1000 + p);
            r.hops[1].set(HopField::TxUtilization, 50);
            events(&mut d, &wl, &r);
        }
        assert_eq!(d.keys(), d.flows.keys() + d.nodes.keys());
        assert_eq!(d.nodes.evictions().1, 10);
    }
}
