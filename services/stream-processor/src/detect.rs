//! Immediate events ("alerts"): raised while rows arrive, not at window end.
//!
//! Per flow (all of a flow's reports are in one partition — the collector partitions by
//! source address): path change between consecutive sink reports, a loop (a node twice in one
//! path), a black hole (a flow seen at its sink whose upstream/intermediate reports continue
//! while its sink reports have stopped for `black-hole-after`). Per (flow, node) and per
//! (node, queue): a threshold breach with hysteresis ([`Breach`]): raised once the value has
//! been above the threshold for `min-duration`, each later crossing back above the threshold
//! raised again (so consumers count crossings and see the peak), and cleared —
//! `threshold_cleared`, with the peak — only once the value falls below the clear level. Per
//! reporting node: a report-loss burst from the collector's `report_loss` events, and its end.
//! Per switch key (events lanes): the collectors' views merged into one change log
//! ([`crate::switch_view`]).
//!
//! These are stateful per-row checks over Arrow columns — a keyed state machine, which a
//! window query cannot express. The state is bounded (`[stream-processor.state]`: per-flow
//! and per-switch tables with an idle timeout on event time and a cap, evictions counted).

use std::collections::VecDeque;
use std::sync::Arc;

use arrow_array::builder::{
    FixedSizeBinaryBuilder, ListBuilder, StringBuilder, TimestampNanosecondBuilder, UInt8Builder,
    UInt16Builder, UInt32Builder, UInt64Builder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{TimestampNanosecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, BooleanArray, FixedSizeBinaryArray, ListArray,
    PrimitiveArray, RecordBatch, StringArray,
};
use arrow_buffer::{ArrowNativeType, NullBuffer};
use arrow_schema::{ArrowError, DataType, Field};
use kplane_model::id_table::{Evictions, IdTable};
use kplane_model::schema::col;
use kplane_model::{FlowHashKey, HopField, Metric, ip_from_16, ip_to_16};

use crate::config::{Band, StateConfig, Thresholds};
use crate::error::ProcessorError;
use crate::frame::{col_of, pcol};
use crate::snapshot::{Reader, Writer};
use crate::switch_view::{SwitchChange, SwitchViews, ViewTally};

pub use kplane_model::results::{Alert, AlertKind};

type FlowId = [u8; 37];

/// How many reports ahead a flow's state is prefetched: about the reports checked while one
/// cache miss is served.
const PREFETCH_DISTANCE: usize = 8;

/// One (entity, metric)'s breach of a threshold band.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Breach {
    /// Event time of the first sample above the threshold.
    since_ns: i64,
    /// Raised (held for `min-duration`); before, it is pending.
    raised: bool,
    /// Fell below the threshold (not below the clear level) since the last crossing.
    below: bool,
    peak: u64,
}

/// What a sample does to a breach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Nothing,
    /// Raised, or crossed above the threshold again while raised: a `threshold` alert.
    Raise,
    /// Ended: a `threshold_cleared` alert with the peak; the breach is forgotten.
    Clear(u64),
    /// A pending breach that did not last: forgotten silently.
    Forget,
}

impl Step {
    /// Whether the breach is over (its state is dropped).
    fn ends(self) -> bool {
        matches!(self, Self::Clear(_) | Self::Forget)
    }

    /// The alert it raises for sample value `v`: `(kind, value)`.
    fn alert(self, v: u64) -> Option<(AlertKind, u64)> {
        match self {
            Self::Raise => Some((AlertKind::Threshold, v)),
            Self::Clear(peak) => Some((AlertKind::ThresholdCleared, peak)),
            Self::Nothing | Self::Forget => None,
        }
    }
}

impl Breach {
    fn new(t: i64) -> Self {
        Self {
            since_ns: t,
            ..Self::default()
        }
    }

    fn step(&mut self, v: u64, t: i64, band: Band) -> Step {
        if v > band.raise {
            self.peak = self.peak.max(v);
            if self.raised {
                return if std::mem::take(&mut self.below) {
                    Step::Raise
                } else {
                    Step::Nothing
                };
            }
            if t - self.since_ns >= band.min_ns {
                self.raised = true;
                return Step::Raise;
            }
            return Step::Nothing;
        }
        match (self.raised, v >= band.clear) {
            (true, true) => {
                self.below = true;
                Step::Nothing
            }
            (true, false) => Step::Clear(self.peak),
            (false, _) => Step::Forget,
        }
    }
}

#[derive(Debug, Default)]
struct FlowState {
    path: Vec<u32>,
    /// `path_id` of `path` (the frame's hash of the node ids): compared instead of the list.
    path_id: u64,
    last_sink_ns: Option<i64>,
    black_hole: bool,
    looping: bool,
    /// Nodes whose hop latency is in breach (pending or raised).
    above: Vec<(u32, Breach)>,
}

/// Version of [`Detector::snapshot`]'s encoding (1: breaches without their state, read as
/// raised; 2: without the merged switch views).
const SNAPSHOT_VERSION: u8 = 3;

/// Per reporting node: recent (time, lost) loss events, their sum, and whether a burst is on.
type LossWindow = (VecDeque<(i64, u64)>, u64, bool);

/// Detector state of one bus partition.
#[derive(Debug)]
pub struct Detector {
    partition: u32,
    t: Thresholds,
    /// By `flow_id` (the frame's keyed 64-bit hash of the 5-tuple, the key the analytics
    /// group by too); the 5-tuple itself is read from the batch only when an alert names it.
    flows: IdTable<FlowState>,
    /// Queues in breach of the occupancy band, by keyed hash of (node, queue).
    queues_above: IdTable<Breach>,
    /// By keyed hash of the reporting node.
    loss: IdTable<LossWindow>,
    /// The collectors' views of each switch key, merged (events lanes).
    switches: SwitchViews,
    /// Keys the node and queue ids (wire values) of the tables above.
    key: FlowHashKey,
}

/// Whole seconds of an event time, the clock of the state's idle timeouts.
fn seconds(t_ns: i64) -> u32 {
    (t_ns.max(0) / 1_000_000_000) as u32
}

struct FlowCols<'a> {
    src: &'a FixedSizeBinaryArray,
    dst: &'a FixedSizeBinaryArray,
    sport: &'a PrimitiveArray<UInt16Type>,
    dport: &'a PrimitiveArray<UInt16Type>,
    proto: &'a PrimitiveArray<UInt8Type>,
}

impl<'a> FlowCols<'a> {
    fn of(b: &'a RecordBatch) -> Result<Self, ArrowError> {
        Ok(Self {
            src: col_of(b, col::SRC_IP)?,
            dst: col_of(b, col::DST_IP)?,
            sport: col_of(b, col::SRC_PORT)?,
            dport: col_of(b, col::DST_PORT)?,
            proto: col_of(b, col::PROTOCOL)?,
        })
    }

    fn id(&self, i: usize) -> Option<FlowId> {
        if self.src.is_null(i) || self.dst.is_null(i) {
            return None;
        }
        let mut id = [0u8; 37];
        id[..16].copy_from_slice(self.src.value(i));
        id[16..32].copy_from_slice(self.dst.value(i));
        id[32..34].copy_from_slice(&self.sport.value(i).to_be_bytes());
        id[34..36].copy_from_slice(&self.dport.value(i).to_be_bytes());
        id[36] = self.proto.value(i);
        Some(id)
    }
}

/// The `hops` columns the detectors read.
struct HopCols<'a> {
    time: &'a [i64],
    node: Column<'a, u32>,
    latency: Column<'a, u32>,
    queue: Column<'a, u8>,
    port: Column<'a, u16>,
    occupancy: Column<'a, u32>,
}

/// A primitive column's values and validity, read per hop without a call per check (the
/// `Array::is_null` calls were a third of the detectors' time).
#[derive(Clone, Copy)]
struct Column<'a, T> {
    values: &'a [T],
    nulls: Option<&'a NullBuffer>,
}

impl<'a, T: ArrowNativeType> Column<'a, T> {
    fn of<A: ArrowPrimitiveType<Native = T>>(a: &'a PrimitiveArray<A>) -> Self {
        Self {
            values: a.values(),
            nulls: a.nulls(),
        }
    }

    /// The value at `j`, `None` if null.
    #[inline]
    fn get(&self, j: usize) -> Option<T> {
        if self.nulls.is_none_or(|n| n.is_valid(j)) {
            Some(self.values[j])
        } else {
            None
        }
    }
}

impl<'a> HopCols<'a> {
    fn of(hops: &'a RecordBatch) -> Result<Self, ArrowError> {
        let time: &PrimitiveArray<TimestampNanosecondType> = col_of(hops, pcol::EVENT_TIME)?;
        let node: &PrimitiveArray<UInt32Type> = col_of(hops, HopField::NodeId.name())?;
        let latency: &PrimitiveArray<UInt32Type> = col_of(hops, HopField::HopLatency.name())?;
        let queue: &PrimitiveArray<UInt8Type> = col_of(hops, HopField::QueueId.name())?;
        let port: &PrimitiveArray<UInt16Type> = col_of(hops, HopField::L1EgressPort.name())?;
        let occupancy: &PrimitiveArray<UInt32Type> = col_of(hops, HopField::QueueOccupancy.name())?;
        Ok(Self {
            time: time.values(),
            node: Column::of(node),
            latency: Column::of(latency),
            queue: Column::of(queue),
            port: Column::of(port),
            occupancy: Column::of(occupancy),
        })
    }

    /// A flow's hop latency at a node against the band.
    fn latency_threshold(
        &self,
        j: usize,
        id: &impl Fn() -> FlowId,
        st: &mut FlowState,
        partition: u32,
        band: Band,
        out: &mut Vec<Alert>,
    ) {
        let (Some(n), Some(v)) = (self.node.get(j), self.latency.get(j)) else {
            return;
        };
        let (v, t) = (u64::from(v), self.time[j]);
        let k = match st.above.iter().position(|(x, _)| *x == n) {
            Some(k) => k,
            None if v > band.raise => {
                st.above.push((n, Breach::new(t)));
                st.above.len() - 1
            }
            None => return,
        };
        let step = st.above[k].1.step(v, t, band);
        if step.ends() {
            st.above.swap_remove(k);
        }
        let Some((kind, value)) = step.alert(v) else {
            return;
        };
        let mut al = flow_alert(&id(), partition, t, kind);
        al.node_id = Some(n);
        // The flow's latest path from its sink: what an incident shows as affected.
        al.path.clone_from(&st.path);
        al.metric = Some("hop_latency_ns".into());
        al.value = Some(value);
        al.threshold = Some(band.raise);
        out.push(al);
    }
}

fn flow_alert(id: &FlowId, partition: u32, time_ns: i64, kind: AlertKind) -> Alert {
    let ip = |b: &[u8]| {
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        Some(ip_from_16(a))
    };
    Alert {
        time_ns,
        detected_ns: kplane_model::unix_time_ns() as i64,
        kind: Some(kind),
        partition,
        src_ip: ip(&id[..16]),
        dst_ip: ip(&id[16..32]),
        src_port: Some(u16::from_be_bytes([id[32], id[33]])),
        dst_port: Some(u16::from_be_bytes([id[34], id[35]])),
        protocol: Some(id[36]),
        ..Alert::default()
    }
}

fn write_breach(w: &mut Writer, b: &Breach) {
    w.i64(b.since_ns);
    w.u8(u8::from(b.raised) | u8::from(b.below) << 1);
    w.u64(b.peak);
}

fn read_breach(r: &mut Reader<'_>) -> Result<Breach, String> {
    let since_ns = r.i64("a breach")?;
    let flags = r.u8("a breach")?;
    Ok(Breach {
        since_ns,
        raised: flags & 1 != 0,
        below: flags & 2 != 0,
        peak: r.u64("a breach")?,
    })
}

fn has_repeat(path: &[u32]) -> bool {
    path.iter().enumerate().any(|(i, n)| path[..i].contains(n))
}

impl Detector {
    /// `key` keys node and queue ids (the flows' ids come keyed already).
    pub fn new(partition: u32, t: Thresholds, state: &StateConfig, key: FlowHashKey) -> Self {
        Self {
            partition,
            t,
            flows: IdTable::new(state.flows),
            queues_above: IdTable::new(state.nodes),
            loss: IdTable::new(state.nodes),
            switches: SwitchViews::new(state.nodes, key),
            key,
        }
    }

    /// The detectors' state as bytes ([`Detector::restore`] reads them back): saved with
    /// every commit, so a path change or black hole that spans a restart is still raised.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(SNAPSHOT_VERSION);
        w.u32(self.flows.len() as u32);
        for (id, seen, f) in self.flows.entries() {
            w.u64(id);
            w.u32(seen);
            w.u64(f.path_id);
            w.u8(u8::from(f.black_hole)
                | u8::from(f.looping) << 1
                | u8::from(f.last_sink_ns.is_some()) << 2);
            w.i64(f.last_sink_ns.unwrap_or(0));
            w.u32s(&f.path);
            w.u32(f.above.len() as u32);
            for (node, b) in &f.above {
                w.u32(*node);
                write_breach(&mut w, b);
            }
        }
        w.u32(self.queues_above.len() as u32);
        for (id, seen, b) in self.queues_above.entries() {
            w.u64(id);
            w.u32(seen);
            write_breach(&mut w, b);
        }
        w.u32(self.loss.len() as u32);
        for (id, seen, (events, sum, bursting)) in self.loss.entries() {
            w.u64(id);
            w.u32(seen);
            w.u64(*sum);
            w.u8(u8::from(*bursting));
            w.u32(events.len() as u32);
            for &(t, lost) in events {
                w.i64(t);
                w.u64(lost);
            }
        }
        self.switches.save(&mut w);
        w.0
    }

    /// Puts back the state of a [`Detector::snapshot`] (into a new detector).
    pub fn restore(&mut self, bytes: &[u8]) -> Result<(), ProcessorError> {
        self.read_snapshot(bytes)
            .map_err(ProcessorError::Undecodable)
    }

    fn read_snapshot(&mut self, bytes: &[u8]) -> Result<(), String> {
        let mut r = Reader(bytes);
        let version = r.u8("the version")?;
        if !(1..=SNAPSHOT_VERSION).contains(&version) {
            return Err(format!(
                "detector state version {version}, expected at most {SNAPSHOT_VERSION}"
            ));
        }
        // Version 1 kept which breaches were raised, not their state.
        let read_breach = |r: &mut Reader<'_>| {
            if version == 1 {
                Ok(Breach {
                    raised: true,
                    ..Breach::default()
                })
            } else {
                read_breach(r)
            }
        };
        for _ in 0..r.u32("the flow count")? {
            let (id, seen) = (r.u64("a flow")?, r.u32("a flow")?);
            let path_id = r.u64("a flow")?;
            let flags = r.u8("a flow")?;
            let last_sink = r.i64("a flow")?;
            let state = FlowState {
                path_id,
                black_hole: flags & 1 != 0,
                looping: flags & 2 != 0,
                last_sink_ns: (flags & 4 != 0).then_some(last_sink),
                path: r.u32s("a flow's path")?,
                above: if version == 1 {
                    r.u32s("a flow's nodes above")?
                        .into_iter()
                        .map(|n| (n, read_breach(&mut r).unwrap_or_default()))
                        .collect()
                } else {
                    (0..r.u32("a flow's breaches")?)
                        .map(|_| Ok((r.u32("a breach")?, read_breach(&mut r)?)))
                        .collect::<Result<Vec<_>, String>>()?
                },
            };
            self.flows.restore(id, seen, state);
        }
        for _ in 0..r.u32("the queue count")? {
            let (id, seen) = (r.u64("a queue")?, r.u32("a queue")?);
            let b = read_breach(&mut r)?;
            self.queues_above.restore(id, seen, b);
        }
        for _ in 0..r.u32("the loss-window count")? {
            let (id, seen) = (r.u64("a loss window")?, r.u32("a loss window")?);
            let sum = r.u64("a loss window")?;
            let bursting = r.u8("a loss window")? != 0;
            let events = (0..r.u32("a loss window")?)
                .map(|_| Ok((r.i64("a loss event")?, r.u64("a loss event")?)))
                .collect::<Result<VecDeque<_>, String>>()?;
            self.loss.restore(id, seen, (events, sum, bursting));
        }
        // Version 2 had no merged switch views.
        if version >= 3 {
            self.switches.restore(&mut r)?;
        }
        if !r.is_empty() {
            return Err("detector state has trailing bytes".into());
        }
        Ok(())
    }

    /// Bytes the state holds: the tables' slots and the flows' path and node lists.
    pub fn state_bytes(&self) -> usize {
        let lists: usize = self
            .flows
            .iter()
            .map(|(_, f)| (f.path.capacity() + f.above.capacity()) * 4)
            .sum();
        let windows: usize = self.loss.iter().map(|(_, w)| w.0.capacity() * 16).sum();
        self.flows.slot_bytes()
            + self.queues_above.slot_bytes()
            + self.loss.slot_bytes()
            + self.switches.slot_bytes()
            + lists
            + windows
    }

    /// (table, entries, evictions) of each state table, for metrics.
    pub fn tables(&self) -> [(&'static str, usize, Evictions); 4] {
        [
            ("flows", self.flows.len(), self.flows.evictions()),
            (
                "queues-above",
                self.queues_above.len(),
                self.queues_above.evictions(),
            ),
            ("loss-nodes", self.loss.len(), self.loss.evictions()),
            (
                "switch-keys",
                self.switches.keys(),
                self.switches.evictions(),
            ),
        ]
    }

    /// Checks one message's `reports` and `hops` rows (see `frame.rs`; report `i`'s hops
    /// are rows `hop_offsets[i]..hop_offsets[i + 1]`): per report, its flow's state is
    /// looked up once for the report and all its hops.
    pub fn reports(
        &mut self,
        reports: &RecordBatch,
        hops: &RecordBatch,
        hop_offsets: &[u32],
        out: &mut Vec<Alert>,
    ) -> Result<(), ArrowError> {
        let hop_cols = HopCols::of(hops)?;
        let hops_of = |i: usize| -> std::ops::Range<usize> {
            match (hop_offsets.get(i), hop_offsets.get(i + 1)) {
                (Some(&a), Some(&z)) => a as usize..z as usize,
                _ => 0..0,
            }
        };
        let time = col_of::<PrimitiveArray<TimestampNanosecondType>>(reports, pcol::EVENT_TIME)?;
        let inter = col_of::<BooleanArray>(reports, pcol::INTERMEDIATE)?;
        let node = col_of::<PrimitiveArray<UInt32Type>>(reports, col::NODE_ID)?;
        let paths = col_of::<ListArray>(reports, col::PATH)?;
        let path_nodes = paths.values().as_primitive::<UInt32Type>();
        let flows = FlowCols::of(reports)?;
        let flow_ids = col_of::<PrimitiveArray<UInt64Type>>(reports, pcol::FLOW_ID)?;
        let path_ids = col_of::<PrimitiveArray<UInt64Type>>(reports, pcol::PATH_ID)?;
        let received = col_of::<PrimitiveArray<TimestampNanosecondType>>(reports, col::RECEIVED)?;
        let arrived = received.values().iter().copied().max().unwrap_or(0);
        let raised = out.len();
        let black_hole_after = self.t.black_hole_after.as_nanos() as i64;
        let mut max_t = i64::MIN;
        let (lat_band, queue_band) = (self.t.hop_latency(), self.t.queue());
        let ids = flow_ids.values();
        for i in 0..reports.num_rows() {
            // The flow a few reports on starts loading now (most lookups missed the cache).
            if let Some(&ahead) = ids.get(i + PREFETCH_DISTANCE) {
                self.flows.prefetch(ahead);
            }
            // Queue thresholds are per switch, whatever the flow.
            for j in hops_of(i) {
                self.queue_threshold(&hop_cols, j, queue_band, out);
            }
            if flow_ids.is_null(i) {
                continue;
            }
            let id = || flows.id(i).unwrap_or([0; 37]);
            let t = time.value(i);
            max_t = max_t.max(t);
            let offsets = paths.value_offsets();
            let (a, z) = (offsets[i] as usize, offsets[i + 1] as usize);
            let path = &path_nodes.values()[a..z];
            let path_id = path_ids.value(i);
            let (st, _) =
                self.flows
                    .get_or_insert_with(ids[i], seconds(t), FlowState::default, drop);
            if path.len() >= 2 && has_repeat(path) {
                if !st.looping {
                    st.looping = true;
                    let mut al = flow_alert(&id(), self.partition, t, AlertKind::Loop);
                    al.path = path.to_vec();
                    al.node_id = node.is_valid(i).then(|| node.value(i));
                    out.push(al);
                }
            } else if !path.is_empty() {
                st.looping = false;
            }
            if !inter.value(i) && !path.is_empty() {
                // A sink report: the packet got through.
                st.last_sink_ns = Some(st.last_sink_ns.map_or(t, |s| s.max(t)));
                if st.black_hole {
                    st.black_hole = false;
                    let mut al = flow_alert(&id(), self.partition, t, AlertKind::BlackHoleCleared);
                    al.path = path.to_vec();
                    out.push(al);
                }
                if st.path_id != path_id || st.path.is_empty() {
                    if !st.path.is_empty() {
                        let mut al = flow_alert(&id(), self.partition, t, AlertKind::PathChange);
                        al.path = path.to_vec();
                        al.previous_path = std::mem::take(&mut st.path);
                        out.push(al);
                    }
                    st.path.clear();
                    st.path.extend_from_slice(path);
                    st.path_id = path_id;
                }
            } else if let Some(sink) = st.last_sink_ns
                && !st.black_hole
                && t - sink > black_hole_after
            {
                // Upstream still reports the flow, its sink has not for too long.
                st.black_hole = true;
                let mut al = flow_alert(&id(), self.partition, t, AlertKind::BlackHole);
                al.node_id = node.is_valid(i).then(|| node.value(i));
                al.value = Some((t - sink) as u64);
                al.threshold = Some(black_hole_after as u64);
                al.path = st.path.clone();
                out.push(al);
            }
            for j in hops_of(i) {
                hop_cols.latency_threshold(j, &id, st, self.partition, lat_band, out);
            }
        }
        for a in &mut out[raised..] {
            a.received_ns = arrived;
        }
        Ok(())
    }

    /// A queue's occupancy against the band (per switch's port's queue, whatever the flow).
    fn queue_threshold(&mut self, h: &HopCols<'_>, j: usize, band: Band, out: &mut Vec<Alert>) {
        let (Some(node), Some(queue), Some(v)) =
            (h.node.get(j), h.queue.get(j), h.occupancy.get(j))
        else {
            return;
        };
        let (v, t) = (u64::from(v), h.time[j]);
        if v <= band.raise && self.queues_above.is_empty() {
            // The usual case: nothing in breach, no hash lookup per hop.
            return;
        }
        let port = h.port.get(j).map(u32::from);
        // A hop without a port is its own queue (`1 << 40` is no port id).
        let id = self.key.hash_words(&[
            u64::from(node),
            port.map_or(1 << 40, u64::from),
            u64::from(queue),
        ]);
        let now_s = seconds(t);
        let step = if v > band.raise {
            let (b, _) = self
                .queues_above
                .get_or_insert_with(id, now_s, || Breach::new(t), drop);
            b.step(v, t, band)
        } else {
            match self.queues_above.get_mut(id, now_s, drop) {
                Some(b) => b.step(v, t, band),
                None => return,
            }
        };
        if step.ends() {
            self.queues_above.remove(id);
        }
        let Some((kind, value)) = step.alert(v) else {
            return;
        };
        out.push(Alert {
            time_ns: t,
            detected_ns: kplane_model::unix_time_ns() as i64,
            kind: Some(kind),
            partition: self.partition,
            node_id: Some(node),
            queue_id: Some(queue),
            egress_port: port,
            metric: Some("queue_occupancy".into()),
            value: Some(value),
            threshold: Some(band.raise),
            ..Alert::default()
        });
    }

    /// Checks one message's `events/v1` rows for report-loss bursts (into `out`) and folds
    /// its switch metrics into the merged switch views (into `changes`).
    pub fn events(
        &mut self,
        events: &RecordBatch,
        out: &mut Vec<Alert>,
        changes: &mut Vec<SwitchChange>,
        tally: &mut ViewTally,
    ) -> Result<(), ArrowError> {
        self.switches.apply(events, changes, tally)?;
        let time = col_of::<PrimitiveArray<TimestampNanosecondType>>(events, col::RECEIVED)?;
        let metric = col_of::<StringArray>(events, col::METRIC)?;
        let node = col_of::<PrimitiveArray<UInt32Type>>(events, col::NODE_ID)?;
        let value = col_of::<PrimitiveArray<UInt64Type>>(events, col::VALUE)?;
        let interval = self.t.loss_burst_interval.as_nanos() as i64;
        let threshold = self.t.loss_burst_reports;
        for i in 0..events.num_rows() {
            if metric.value(i) != Metric::ReportLoss.as_str() || node.is_null(i) || value.is_null(i)
            {
                continue;
            }
            let (n, t, lost) = (node.value(i), time.value(i), value.value(i));
            let id = self.key.hash_words(&[u64::from(n)]);
            let (window, sum, bursting) = self
                .loss
                .get_or_insert_with(id, seconds(t), Default::default, drop)
                .0;
            window.push_back((t, lost));
            *sum += lost;
            while let Some(&(t0, l0)) = window.front() {
                if t - t0 <= interval {
                    break;
                }
                window.pop_front();
                *sum -= l0;
            }
            // A burst starts at the threshold and ends below it.
            let kind = if *sum >= threshold && !*bursting {
                AlertKind::ReportLossBurst
            } else if *sum < threshold && *bursting {
                AlertKind::ReportLossBurstCleared
            } else {
                continue;
            };
            *bursting = kind == AlertKind::ReportLossBurst;
            out.push(Alert {
                time_ns: t,
                received_ns: t,
                detected_ns: kplane_model::unix_time_ns() as i64,
                kind: Some(kind),
                partition: self.partition,
                node_id: Some(n),
                value: Some(*sum),
                threshold: Some(threshold),
                ..Alert::default()
            });
        }
        Ok(())
    }
}

/// Alerts as an Arrow batch of the store's `alerts` schema.
pub fn alerts_batch(alerts: &[Alert]) -> Result<RecordBatch, ArrowError> {
    let n = alerts.len();
    let mut time = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut detected = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut partition = UInt32Builder::with_capacity(n);
    let mut kind = StringBuilder::new();
    let mut src = FixedSizeBinaryBuilder::with_capacity(n, 16);
    let mut dst = FixedSizeBinaryBuilder::with_capacity(n, 16);
    let mut sport = UInt16Builder::with_capacity(n);
    let mut dport = UInt16Builder::with_capacity(n);
    let mut proto = UInt8Builder::with_capacity(n);
    let mut node = UInt32Builder::with_capacity(n);
    let mut queue = UInt8Builder::with_capacity(n);
    let mut port = UInt32Builder::with_capacity(n);
    let mut metric = StringBuilder::new();
    let mut value = UInt64Builder::with_capacity(n);
    let mut threshold = UInt64Builder::with_capacity(n);
    let item = Arc::new(Field::new("item", DataType::UInt32, true));
    let mut path = ListBuilder::new(UInt32Builder::new()).with_field(item.clone());
    let mut prev = ListBuilder::new(UInt32Builder::new()).with_field(item);
    for a in alerts {
        time.append_value(a.time_ns);
        detected.append_value(a.detected_ns);
        partition.append_value(a.partition);
        kind.append_value(a.kind.map_or("unknown", AlertKind::as_str));
        for (b, ip) in [(&mut src, a.src_ip), (&mut dst, a.dst_ip)] {
            match ip {
                Some(ip) => b.append_value(ip_to_16(ip))?,
                None => b.append_null(),
            }
        }
        sport.append_option(a.src_port);
        dport.append_option(a.dst_port);
        proto.append_option(a.protocol);
        node.append_option(a.node_id);
        queue.append_option(a.queue_id);
        port.append_option(a.egress_port);
        metric.append_option(a.metric.as_deref());
        value.append_option(a.value);
        threshold.append_option(a.threshold);
        path.values().append_slice(&a.path);
        path.append(true);
        prev.values().append_slice(&a.previous_path);
        prev.append(true);
    }
    let cols: Vec<ArrayRef> = vec![
        Arc::new(time.finish()),
        Arc::new(detected.finish()),
        Arc::new(partition.finish()),
        Arc::new(kind.finish()),
        Arc::new(src.finish()),
        Arc::new(dst.finish()),
        Arc::new(sport.finish()),
        Arc::new(dport.finish()),
        Arc::new(proto.finish()),
        Arc::new(node.finish()),
        Arc::new(queue.finish()),
        Arc::new(port.finish()),
        Arc::new(metric.finish()),
        Arc::new(value.finish()),
        Arc::new(threshold.finish()),
        Arc::new(path.finish()),
        Arc::new(prev.finish()),
    ];
    RecordBatch::try_new(kplane_store::tables::alerts_schema(), cols)
}

/// The alerts of a batch of the store's `alerts` table ([`alerts_batch`]'s inverse), and how
/// many rows did not decode (a row without its time, or a batch of another schema: every row).
pub fn alerts_from_batch(b: &RecordBatch) -> (Vec<Alert>, usize) {
    let column = |name: &str| b.column_by_name(name);
    let stamps =
        |name: &str| column(name).and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>());
    let (Some(time), Some(detected), Some(partition), Some(kind)) = (
        stamps("time"),
        stamps("detected"),
        column("partition").and_then(|c| c.as_primitive_opt::<UInt32Type>()),
        column("kind").and_then(|c| c.as_string_opt::<i32>()),
    ) else {
        return (Vec::new(), b.num_rows());
    };
    let ip = |name: &str, i: usize| {
        let c = column(name)?.as_fixed_size_binary_opt()?;
        let bytes: [u8; 16] = c.is_valid(i).then(|| c.value(i).try_into().ok())??;
        Some(ip_from_16(bytes))
    };
    fn opt<T: ArrowPrimitiveType>(c: Option<&ArrayRef>, i: usize) -> Option<T::Native> {
        let c = c?.as_primitive_opt::<T>()?;
        c.is_valid(i).then(|| c.value(i))
    }
    let nodes = |name: &str, i: usize| -> Vec<u32> {
        column(name)
            .and_then(|c| c.as_list_opt::<i32>())
            .filter(|c| c.is_valid(i))
            .and_then(|c| {
                c.value(i)
                    .as_primitive_opt::<UInt32Type>()
                    .map(|v| v.values().to_vec())
            })
            .unwrap_or_default()
    };
    let metric = column(col::METRIC).and_then(|c| c.as_string_opt::<i32>());
    let mut out = Vec::with_capacity(b.num_rows());
    let mut bad = 0;
    for i in 0..b.num_rows() {
        if !time.is_valid(i) {
            bad += 1;
            continue;
        }
        out.push(Alert {
            time_ns: time.value(i),
            // Not null in the schema, like `time`.
            detected_ns: detected.value(i),
            kind: AlertKind::ALL
                .into_iter()
                .find(|k| k.as_str() == kind.value(i)),
            partition: partition.value(i),
            src_ip: ip(col::SRC_IP, i),
            dst_ip: ip(col::DST_IP, i),
            src_port: opt::<UInt16Type>(column(col::SRC_PORT), i),
            dst_port: opt::<UInt16Type>(column(col::DST_PORT), i),
            protocol: opt::<UInt8Type>(column(col::PROTOCOL), i),
            node_id: opt::<UInt32Type>(column(col::NODE_ID), i),
            queue_id: opt::<UInt8Type>(column(col::QUEUE_ID), i),
            egress_port: opt::<UInt32Type>(column(col::EGRESS_PORT), i),
            metric: metric
                .filter(|m| m.is_valid(i))
                .map(|m| m.value(i).to_string()),
            value: opt::<UInt64Type>(column(col::VALUE), i),
            threshold: opt::<UInt64Type>(column("threshold"), i),
            path: nodes(col::PATH, i),
            previous_path: nodes("previous_path", i),
            ..Alert::default()
        });
    }
    (out, bad)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kplane_model::batch::{EventBatchBuilder, ReportBatchBuilder};
    use kplane_model::{
        Detector as EventDetector, EventKind, EventRow, FlowKey, HopRecord, ReportFlags,
        ReportRecord,
    };

    use super::*;

    #[test]
    fn stored_alerts_read_back_as_they_were_raised() {
        let alerts = [
            Alert {
                time_ns: 5_000,
                detected_ns: 6_000,
                kind: Some(AlertKind::Threshold),
                partition: 3,
                src_ip: Some("10.0.0.1".parse().unwrap()),
                dst_ip: Some("2001:db8::2".parse().unwrap()),
                src_port: Some(40_000),
                dst_port: Some(80),
                protocol: Some(17),
                node_id: Some(7),
                queue_id: Some(1),
                metric: Some("hop_latency_ns".into()),
                value: Some(90_000),
                threshold: Some(50_000),
                path: vec![1, 7, 9],
                previous_path: vec![1, 8, 9],
                ..Alert::default()
            },
            Alert {
                time_ns: 7_000,
                detected_ns: 7_500,
                kind: Some(AlertKind::BlackHole),
                node_id: Some(4),
                ..Alert::default()
            },
        ];
        let b = alerts_batch(&alerts).unwrap();
        assert_eq!(alerts_from_batch(&b), (alerts.to_vec(), 0));
        // Another table's batch: every row counted, none made up.
        let other = b.project(&[2, 3]).unwrap();
        assert_eq!(alerts_from_batch(&other), (Vec::new(), 2));
    }
    use crate::config::StateConfig;
    use crate::frame::report_frame;

    const MS: i64 = 1_000_000;
    const S: u64 = 1_000_000_000;
    const KEY: FlowHashKey = FlowHashKey([1, 2]);

    fn flow(src: u8) -> FlowKey {
        FlowKey {
            src_ip: format!("10.0.0.{src}").parse().unwrap(),
            dst_ip: "10.0.1.1".parse().unwrap(),
            src_port: 1000,
            dst_port: 80,
            protocol: 6,
        }
    }

    /// A report of `f` at `t` along `path` with hop latency `lat` and queue occupancy `occ`
    /// at every hop; `sink` false makes it an intermediate report.
    fn report(t: u64, f: FlowKey, path: &[u32], lat: u64, occ: u64, sink: bool) -> ReportRecord {
        let mut r = ReportRecord::default();
        r.envelope.received_ns = t;
        r.envelope.timestamp_ns = Some(t);
        r.envelope.node_id = path.last().copied();
        r.envelope.flags.set(ReportFlags::INTERMEDIATE, !sink);
        r.flow = Some(f);
        for &n in path {
            let mut h = HopRecord::default();
            h.set(HopField::NodeId, n.into());
            h.set(HopField::HopLatency, lat);
            h.set(HopField::QueueId, 0);
            h.set(HopField::QueueOccupancy, occ);
            r.hops.push(h);
        }
        r
    }

    /// The kinds of the alerts `d` raises for `rows`, in order.
    fn alerts(d: &mut Detector, rows: &[ReportRecord]) -> Vec<AlertKind> {
        let mut b = ReportBatchBuilder::new(rows.len());
        for r in rows {
            b.append(r).unwrap();
        }
        let f = report_frame(&b.finish().unwrap(), true, &KEY).unwrap();
        let mut out = Vec::new();
        d.reports(&f.reports, &f.hops, &f.hop_offsets, &mut out)
            .unwrap();
        out.iter().filter_map(|a| a.kind).collect()
    }

    fn flow_detector(state: StateConfig) -> Detector {
        let t = Thresholds {
            hop_latency_ns: 1_000,
            queue_occupancy: 50,
            black_hole_after: Duration::from_secs(1),
            ..Thresholds::default()
        };
        Detector::new(0, t, &state, KEY)
    }

    #[test]
    fn path_changes_loops_and_black_holes_are_raised_once() {
        use AlertKind::*;
        let mut d = flow_detector(StateConfig::default());
        let a = flow(1);
        assert_eq!(alerts(&mut d, &[report(S, a, &[1, 2, 3], 10, 0, true)]), []);
        assert_eq!(
            alerts(&mut d, &[report(2 * S, a, &[1, 4, 3], 10, 0, true)]),
            [PathChange]
        );
        assert_eq!(
            alerts(&mut d, &[report(3 * S, a, &[1, 4, 3], 10, 0, true)]),
            []
        );
        assert_eq!(
            alerts(&mut d, &[report(4 * S, a, &[1, 4, 1, 3], 10, 0, true)]),
            [Loop, PathChange]
        );
        // Upstream keeps reporting the flow, its sink stopped 2 s ago: a black hole, once.
        let upstream = |t| report(t, a, &[1, 4], 10, 0, false);
        assert_eq!(alerts(&mut d, &[upstream(6 * S + 1)]), [BlackHole]);
        assert_eq!(alerts(&mut d, &[upstream(7 * S)]), []);
        assert_eq!(
            alerts(&mut d, &[report(8 * S, a, &[1, 4, 3], 10, 0, true)]),
            [BlackHoleCleared, PathChange]
        );
    }

    #[test]
    fn thresholds_are_raised_on_crossing_and_cleared_below_the_clear_level() {
        use AlertKind::*;
        let mut d = flow_detector(StateConfig::default());
        let a = flow(1);
        let r = |t, lat, occ| report(t, a, &[1], lat, occ, true);
        // Hop latency 2000 > 1000 and occupancy 60 > 50: one alert each.
        assert_eq!(alerts(&mut d, &[r(S, 2_000, 60)]), [Threshold, Threshold]);
        assert_eq!(alerts(&mut d, &[r(2 * S, 2_000, 60)]), []);
        assert_eq!(
            alerts(&mut d, &[r(3 * S, 10, 0)]),
            [ThresholdCleared, ThresholdCleared]
        );
        assert_eq!(
            alerts(&mut d, &[r(4 * S, 2_000, 60)]),
            [Threshold, Threshold]
        );
    }

    /// Flapping around the threshold (queue 50, clear level 45): one breach, its crossings
    /// raised again while it holds, cleared once with the peak.
    #[test]
    fn hysteresis_holds_a_breach_until_the_clear_level_and_reports_its_peak() {
        let mut d = flow_detector(StateConfig::default());
        let a = flow(1);
        let queue = |d: &mut Detector, t: u64, occ: u64| -> Vec<(AlertKind, u64)> {
            let mut b = ReportBatchBuilder::new(1);
            b.append(&report(t, a, &[1], 10, occ, true)).unwrap();
            let f = report_frame(&b.finish().unwrap(), true, &KEY).unwrap();
            let mut out = Vec::new();
            d.reports(&f.reports, &f.hops, &f.hop_offsets, &mut out)
                .unwrap();
            out.iter()
                .map(|a| (a.kind.unwrap(), a.value.unwrap()))
                .collect()
        };
        use AlertKind::*;
        assert_eq!(queue(&mut d, S, 51), [(Threshold, 51)]);
        assert_eq!(queue(&mut d, 2 * S, 50), [], "at the threshold: holds");
        assert_eq!(queue(&mut d, 3 * S, 58), [(Threshold, 58)], "a crossing");
        assert_eq!(queue(&mut d, 4 * S, 55), [], "still above: no crossing");
        assert_eq!(
            queue(&mut d, 5 * S, 46),
            [],
            "above the clear level (45): holds"
        );
        assert_eq!(queue(&mut d, 6 * S, 44), [(ThresholdCleared, 58)]);
        assert_eq!(queue(&mut d, 7 * S, 44), []);
    }

    #[test]
    fn a_flows_latency_breach_carries_the_flows_path_from_its_sink() {
        let mut d = flow_detector(StateConfig::default());
        let rows = [report(S, flow(1), &[1, 2, 3], 5_000, 0, true)];
        let mut b = ReportBatchBuilder::new(1);
        b.append(&rows[0]).unwrap();
        let f = report_frame(&b.finish().unwrap(), true, &KEY).unwrap();
        let mut out = Vec::new();
        d.reports(&f.reports, &f.hops, &f.hop_offsets, &mut out)
            .unwrap();
        let latency: Vec<&Alert> = out
            .iter()
            .filter(|a| a.metric.as_deref() == Some("hop_latency_ns"))
            .collect();
        assert_eq!(latency.len(), 3, "every hop is above 1 µs: {out:?}");
        assert!(latency.iter().all(|a| a.path == [1, 2, 3]), "{latency:?}");
    }

    #[test]
    fn a_breach_shorter_than_the_minimum_duration_is_not_raised() {
        let t = Thresholds {
            hop_latency_ns: 1_000,
            queue_occupancy: 50,
            min_duration: Duration::from_millis(500),
            ..Thresholds::default()
        };
        let mut d = Detector::new(0, t, &StateConfig::default(), KEY);
        let a = flow(1);
        let r = |t, occ| report(t, a, &[1], 10, occ, true);
        const MS_U: u64 = 1_000_000;
        use AlertKind::*;
        // Above for 200 ms, then below: nothing.
        assert_eq!(alerts(&mut d, &[r(S, 60)]), []);
        assert_eq!(alerts(&mut d, &[r(S + 200 * MS_U, 60)]), []);
        assert_eq!(alerts(&mut d, &[r(S + 300 * MS_U, 40)]), []);
        // Above from 2 s and still above at 2.5 s: raised then.
        assert_eq!(alerts(&mut d, &[r(2 * S, 60)]), []);
        assert_eq!(alerts(&mut d, &[r(2 * S + 499 * MS_U, 60)]), []);
        assert_eq!(alerts(&mut d, &[r(2 * S + 500 * MS_U, 60)]), [Threshold]);
        assert_eq!(alerts(&mut d, &[r(3 * S, 10)]), [ThresholdCleared]);
    }

    #[test]
    fn a_flow_idle_past_its_limit_or_evicted_for_room_starts_afresh() {
        let limits = |max| kplane_model::id_table::Limits {
            idle: Duration::from_secs(10),
            max,
        };
        let mut d = flow_detector(StateConfig {
            flows: limits(2),
            nodes: limits(100),
        });
        let (a, b, c) = (flow(1), flow(2), flow(3));
        alerts(&mut d, &[report(S, a, &[1, 2], 10, 0, true)]);
        // 20 s later on another path: `a` was forgotten, so this is its first path.
        assert!(alerts(&mut d, &[report(21 * S, a, &[1, 3], 10, 0, true)]).is_empty());
        assert_eq!(d.tables()[0].2.idle, 1);
        // A full table: `b` then `c` push out `a`, the least recently seen.
        alerts(&mut d, &[report(22 * S, b, &[1, 2], 10, 0, true)]);
        alerts(&mut d, &[report(23 * S, c, &[1, 2], 10, 0, true)]);
        assert_eq!(d.tables()[0].2.capacity, 1);
        assert!(alerts(&mut d, &[report(24 * S, a, &[1, 2], 10, 0, true)]).is_empty());
        assert_eq!(
            alerts(&mut d, &[report(25 * S, c, &[1, 3], 10, 0, true)]),
            [AlertKind::PathChange],
            "c was kept"
        );
    }

    /// Events of `(time ms, metric, node, value)`.
    fn events(rows: &[(i64, Metric, u32, u64)]) -> RecordBatch {
        let mut b = EventBatchBuilder::new(rows.len());
        for &(t, metric, node, value) in rows {
            b.append(&EventRow {
                received_ns: (t * MS) as u64,
                kind: EventKind::Loss,
                metric,
                detector: EventDetector::Sequence,
                flow: None,
                node_id: Some(node),
                queue_id: None,
                egress_port: None,
                hw_id: Some(0),
                value: Some(value),
                previous: None,
                threshold: None,
                path: &[],
                exporter: None,
            })
            .unwrap();
        }
        b.finish().unwrap()
    }

    fn detector() -> Detector {
        Detector::new(
            3,
            Thresholds {
                loss_burst_reports: 10,
                loss_burst_interval: Duration::from_secs(1),
                ..Thresholds::default()
            },
            &StateConfig::default(),
            KEY,
        )
    }

    fn bursts(d: &mut Detector, rows: &[(i64, Metric, u32, u64)]) -> Vec<Alert> {
        let mut out = Vec::new();
        let (mut changes, mut tally) = (Vec::new(), ViewTally::default());
        d.events(&events(rows), &mut out, &mut changes, &mut tally)
            .unwrap();
        assert!(changes.is_empty(), "loss events are no switch views");
        out
    }

    #[test]
    fn report_loss_within_the_interval_raises_one_burst_per_episode() {
        let mut d = detector();
        let loss = Metric::ReportLoss;
        assert!(
            bursts(&mut d, &[(0, loss, 7, 4), (300, loss, 7, 5)]).is_empty(),
            "9 < 10"
        );
        let got = bursts(&mut d, &[(600, loss, 7, 2)]);
        assert_eq!(got.len(), 1);
        let a = &got[0];
        assert_eq!(a.kind, Some(AlertKind::ReportLossBurst));
        assert_eq!(
            (a.node_id, a.value, a.threshold),
            (Some(7), Some(11), Some(10))
        );
        assert_eq!((a.time_ns, a.partition), (600 * MS, 3));
        // Still bursting: no second alert.
        assert!(bursts(&mut d, &[(900, loss, 7, 20)]).is_empty());
        // The window slides past the loss: the episode ends; a new one raises again.
        let ended = bursts(&mut d, &[(3_000, loss, 7, 1)]);
        assert_eq!(
            ended.iter().map(|a| (a.kind, a.value)).collect::<Vec<_>>(),
            [(Some(AlertKind::ReportLossBurstCleared), Some(1))]
        );
        assert_eq!(bursts(&mut d, &[(3_100, loss, 7, 12)]).len(), 1);
    }

    #[test]
    fn loss_spread_over_time_other_nodes_and_other_metrics_do_not_burst() {
        let mut d = detector();
        let loss = Metric::ReportLoss;
        // 5 + 5 + 5 lost, each 1.1 s apart: never 10 within 1 s.
        let spread = [(0, loss, 1, 5), (1_100, loss, 1, 5), (2_200, loss, 1, 5)];
        assert!(bursts(&mut d, &spread).is_empty());
        // Per node: 6 on one and 6 on another are not a burst of 12.
        assert!(bursts(&mut d, &[(3_300, loss, 1, 6), (3_310, loss, 2, 6)]).is_empty());
        // Other metrics' values are not losses.
        assert!(bursts(&mut d, &[(4_000, Metric::FlowLatency, 1, 1_000)]).is_empty());
    }
}
