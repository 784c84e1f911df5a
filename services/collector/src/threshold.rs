//! State of INTCollector's threshold detector, laid out for one lookup per flow and one
//! array index per switch instead of one hash-table lookup per metric key.
//!
//! A 5-hop report touches about 20 metric keys: the flow's path and latency, a hop latency
//! per node, and per hop a queue occupancy, a queue congestion and a link utilisation. As
//! separate keys in one table of tens of thousands that is 20 cache-missing lookups. Here the
//! flow's keys live together in one [`FlowState`] (INTCollector's per-flow info table), and a
//! switch's queue and link keys in one [`NodeState`] found by indexing with the node id. The
//! keys — and so the events — are exactly those of the flat table: a flow's per-hop slots
//! are keyed by node id (found at the hop's own index while the path is unchanged, by search
//! otherwise), a switch's slots by egress port, and a port's queues by queue id.
//!
//! A key remembers its last *reported* value and the second its refresh falls due; due
//! second 0 marks a slot that was never reported (a new key). The common case — no change,
//! not due — is two comparisons; deciding which event it is happens out of line.

use kplane_model::EventKind;

use kplane_model::id_table::{Evictions, IdTable, Limits};

use crate::by_node::ByNode;

/// An event the threshold detector decided: its kind and the previously reported value.
pub type Decision = Option<(EventKind, Option<u64>)>;

/// Due second of a slot that was never reported.
const NEVER: u32 = 0;

/// Now and when a key reported now falls due, computed once per report.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub now_s: u32,
    /// When a key reported now falls due: `now_s` + 1 + the period rounded up to seconds —
    /// never before the period has passed (`now_s` truncates now), at most a second after it
    /// for a whole-second period; `u32::MAX` (never, before 2106) when refresh is off.
    due_s: u32,
}

/// The refresh period in whole seconds, rounded up; 0 when refresh is off. Computed once, not
/// per report.
#[derive(Clone, Copy, Debug)]
pub struct Refresh(u32);

impl Refresh {
    pub fn from_ns(refresh_ns: u64) -> Self {
        Self(u32::try_from(refresh_ns.div_ceil(1_000_000_000)).unwrap_or(u32::MAX))
    }
}

impl Clock {
    #[inline]
    pub fn new(now_ns: u64, refresh: Refresh) -> Self {
        let now_s = (now_ns / 1_000_000_000) as u32;
        let due_s = match refresh.0 {
            0 => u32::MAX,
            r => now_s.saturating_add(r).saturating_add(1),
        };
        // Never `NEVER`: off is u32::MAX, on is at least now + 1.
        Self { now_s, due_s }
    }
}

/// A threshold T(m) with its quiet band's width 2T (saturating), computed once: the read-only
/// checks compare against both.
#[derive(Clone, Copy, Debug)]
pub struct Threshold {
    t: u64,
    span: u64,
}

impl Threshold {
    pub const fn new(t: u64) -> Self {
        Self {
            t,
            span: t.saturating_mul(2),
        }
    }
}

/// A value width a slot stores: hop latency and switch metrics fit 32 bits, path hashes and
/// latency sums need 64.
pub trait SlotValue: Copy + Default {
    fn get(self) -> u64;
    fn from_u64(v: u64) -> Self;

    /// |`value` − `self`| ≤ `th.t`.
    #[inline(always)]
    fn within(self, value: u64, th: Threshold) -> bool {
        value.abs_diff(self.get()) <= th.t
    }
}

impl SlotValue for u64 {
    #[inline(always)]
    fn get(self) -> u64 {
        self
    }
    #[inline(always)]
    fn from_u64(v: u64) -> Self {
        v
    }
}

impl SlotValue for u32 {
    #[inline(always)]
    fn get(self) -> u64 {
        self.into()
    }
    /// Callers only store values that came from 32-bit fields.
    #[inline(always)]
    fn from_u64(v: u64) -> Self {
        v as u32
    }

    /// As a band: |d| ≤ t ⟺ (d + t) mod 2⁶⁴ ≤ 2t, one compare where |d| takes three.
    /// Exact for |d| < 2³² (both values are 32-bit): with t < 2⁶³ the sum wraps only for
    /// negative d, landing above 2t exactly when d < −t; a larger t (2t saturates) holds
    /// every 32-bit difference anyway.
    #[inline(always)]
    fn within(self, value: u64, th: Threshold) -> bool {
        value.wrapping_sub(self.get()).wrapping_add(th.t) <= th.span
    }
}

/// One key: the last reported value and when it falls due for refresh. Packed to 4-byte
/// alignment: a 64-bit slot is 12 bytes, not 16 (fields are only ever copied, never
/// borrowed).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, packed(4))]
pub struct Slot<V> {
    value: V,
    due_s: u32,
}

impl<V: SlotValue> Slot<V> {
    fn reported(value: u64, clock: Clock) -> Self {
        Self {
            value: V::from_u64(value),
            due_s: clock.due_s,
        }
    }

    fn is_live(&self) -> bool {
        self.due_s != NEVER
    }

    /// True when `check` would decide no event (and so change nothing): a reported key,
    /// within `t` of its last reported value, not due.
    #[inline(always)]
    fn quiet(&self, value: u64, th: Threshold, clock: Clock) -> bool {
        self.value.within(value, th) && clock.now_s < self.due_s
    }

    /// An event is a new key, |new − last reported| > `t`, or a live key due for refresh;
    /// on an event the value is reported (and `keys` counts a new key).
    #[inline(always)]
    fn check(&mut self, value: u64, t: u64, clock: Clock, keys: &mut usize) -> Decision {
        if self.quiet(value, Threshold::new(t), clock) {
            return None;
        }
        self.event(value, t, clock, keys)
    }

    #[cold]
    #[inline(never)]
    fn event(&mut self, value: u64, t: u64, clock: Clock, keys: &mut usize) -> Decision {
        let prev = self.value.get();
        let decision = if self.due_s == NEVER {
            *keys += 1;
            (EventKind::New, None)
        } else if value.abs_diff(prev) > t {
            (EventKind::Change, Some(prev))
        } else {
            (EventKind::Refresh, Some(prev))
        };
        *self = Self::reported(value, clock);
        Some(decision)
    }
}

/// One hop-latency key of a flow (12 bytes).
#[derive(Clone, Copy, Debug)]
struct HopSlot {
    node: u32,
    slot: Slot<u32>,
}

/// A flow's keys: path, end-to-end latency, and hop latency per node — 40 bytes and the
/// hop slots, packed since a collector tracks millions of flows.
#[derive(Clone, Debug, Default)]
pub struct FlowState {
    path: Slot<u64>,
    latency: Slot<u64>,
    /// Grown one slot at a time: paths change rarely, and a boxed slice is 8 bytes smaller
    /// than a `Vec`.
    hops: Box<[HopSlot]>,
}

impl FlowState {
    /// Per-hop slots a flow keeps: a report carries at most this many hops.
    pub const MAX_HOP_SLOTS: usize = kplane_model::MAX_HOPS;

    /// Keys this flow holds (its path is one as soon as the flow is).
    fn keys(&self) -> usize {
        1 + usize::from(self.latency.is_live()) + self.hops.len()
    }

    /// [`FlowState::path`]'s, [`FlowState::latency`]'s and [`FlowState::hop`]'s "no
    /// event" without changing anything ([`Detection`](crate::detect::Detection)'s read-only
    /// first look). A hop whose node is not at its own index is not quiet: the full path
    /// searches for it.
    #[inline(always)]
    pub fn path_quiet(&self, path_hash: u64, clock: Clock) -> bool {
        self.path.quiet(path_hash, Threshold::new(0), clock)
    }

    #[inline(always)]
    pub fn latency_quiet(&self, sum: u64, th: Threshold, clock: Clock) -> bool {
        self.latency.quiet(sum, th, clock)
    }

    #[inline(always)]
    pub fn hop_quiet(
        &self,
        index: usize,
        node: u32,
        value: u32,
        th: Threshold,
        clock: Clock,
    ) -> bool {
        matches!(self.hops.get(index), Some(h) if h.node == node && h.slot.quiet(value.into(), th, clock))
    }

    #[inline(always)]
    pub fn latency(&mut self, sum: u64, t: u64, clock: Clock, keys: &mut usize) -> Decision {
        self.latency.check(sum, t, clock, keys)
    }

    /// The hop latency of `node`, the `index`-th hop of the path; `replaced` counts a slot
    /// given to it by the flow's least recently reported node (at [`FlowState::MAX_HOP_SLOTS`]).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn hop(
        &mut self,
        index: usize,
        node: u32,
        value: u32,
        t: u64,
        clock: Clock,
        keys: &mut usize,
        replaced: &mut u64,
    ) -> Decision {
        // While the path is unchanged the node's slot sits at the hop's index.
        match self.hops.get_mut(index) {
            Some(h) if h.node == node => h.slot.check(value.into(), t, clock, keys),
            _ => self.hop_elsewhere(node, value, t, clock, keys, replaced),
        }
    }

    #[cold]
    #[inline(never)]
    fn hop_elsewhere(
        &mut self,
        node: u32,
        value: u32,
        t: u64,
        clock: Clock,
        keys: &mut usize,
        replaced: &mut u64,
    ) -> Decision {
        if let Some(h) = self.hops.iter_mut().find(|h| h.node == node) {
            return h.slot.check(value.into(), t, clock, keys);
        }
        let slot = HopSlot {
            node,
            slot: Slot::reported(value.into(), clock),
        };
        if self.hops.len() >= Self::MAX_HOP_SLOTS {
            // Nodes come from the wire: the one reported longest ago makes room.
            if let Some(oldest) = self.hops.iter_mut().min_by_key(|h| h.slot.due_s) {
                *oldest = slot;
            }
            *replaced += 1;
            return Some((EventKind::New, None));
        }
        *keys += 1;
        // Allocated at its exact size: no spare capacity, no shrinking reallocation.
        let mut hops = Vec::with_capacity(self.hops.len() + 1);
        hops.extend_from_slice(&self.hops);
        hops.push(slot);
        self.hops = hops.into_boxed_slice();
        Some((EventKind::New, None))
    }
}

/// Every flow's keys, by keyed 64-bit flow hash, in a bounded [`IdTable`]: a flow not
/// reported for `flow-idle` is forgotten (its next report is a new flow), and at `max-flows`
/// the least recently seen make room. The table's first probe is one cache line, which the
/// pipeline prefetches ([`Flows::prefetch`]) before loss accounting runs.
#[derive(Debug)]
pub struct Flows(IdTable<FlowState>);

impl Flows {
    pub fn new(limits: Limits) -> Self {
        Self(IdTable::new(limits))
    }

    /// Starts loading the flow's first slot into cache.
    #[inline]
    pub fn prefetch(&self, flow_hash: u64) {
        self.0.prefetch(flow_hash);
    }

    /// The flow's state, if the flow is known (and not idle).
    #[inline]
    pub fn find(&self, flow_hash: u64, clock: Clock) -> Option<&FlowState> {
        self.0.get(flow_hash, clock.now_s)
    }

    /// The flow's state and its path decision: a new flow's path is a new key. `keys` loses
    /// the keys of flows evicted to make room.
    #[inline]
    pub fn path(
        &mut self,
        flow_hash: u64,
        path_hash: u64,
        clock: Clock,
        keys: &mut usize,
    ) -> (&mut FlowState, Decision) {
        let (state, _) =
            self.0
                .get_or_insert_with(flow_hash, clock.now_s, FlowState::default, |gone| {
                    *keys -= gone.keys()
                });
        // The path key's threshold is 0: any other path is a change (a new flow's is new).
        let d = state.path.check(path_hash, 0, clock, keys);
        (state, d)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn evictions(&self) -> Evictions {
        self.0.evictions()
    }

    /// Keys held, counted (the detector keeps a running count; tests compare the two).
    #[cfg(test)]
    pub fn keys(&self) -> usize {
        self.0.iter().map(|(_, s)| s.keys()).sum()
    }

    /// Bytes held: the slot array and the hop slots.
    pub fn bytes(&self) -> usize {
        self.0.slot_bytes()
            + self
                .0
                .iter()
                .map(|(_, s)| std::mem::size_of_val(&*s.hops))
                .sum::<usize>()
    }
}

/// A queue's keys: occupancy and congestion.
#[derive(Clone, Copy, Debug, Default)]
struct QueueSlots {
    occupancy: Slot<u32>,
    congestion: Slot<u32>,
}

/// An egress port's keys: its link utilisation and its queues' (indexed by queue id — INT's
/// queue id numbers the queues of one port, and a switch may stamp 0 on every port). Slots
/// not yet reported are `NEVER` due; they are not keys.
#[derive(Clone, Debug, Default)]
struct PortSlots {
    link: Slot<u32>,
    queues: Vec<QueueSlots>,
}

impl PortSlots {
    fn keys(&self) -> usize {
        usize::from(self.link.is_live())
            + self
                .queues
                .iter()
                .map(|q| usize::from(q.occupancy.is_live()) + usize::from(q.congestion.is_live()))
                .sum::<usize>()
    }

    /// When the port's most recently reported key falls due.
    fn last_due(&self) -> u32 {
        let link = self.link.due_s;
        self.queues.iter().fold(link, |due, q| {
            let (o, c) = (q.occupancy.due_s, q.congestion.due_s);
            due.max(o).max(c)
        })
    }

    #[inline(always)]
    fn queue_slot(&self, queue: u8, metric: QueueMetric) -> Option<&Slot<u32>> {
        let q = self.queues.get(usize::from(queue))?;
        Some(match metric {
            QueueMetric::Occupancy => &q.occupancy,
            QueueMetric::Congestion => &q.congestion,
        })
    }

    #[inline(always)]
    fn queue_slot_mut(&mut self, queue: u8, metric: QueueMetric) -> &mut Slot<u32> {
        let i = usize::from(queue);
        if i >= self.queues.len() {
            self.grow_queues(i);
        }
        let q = &mut self.queues[i];
        match metric {
            QueueMetric::Occupancy => &mut q.occupancy,
            QueueMetric::Congestion => &mut q.congestion,
        }
    }

    #[cold]
    #[inline(never)]
    fn grow_queues(&mut self, i: usize) {
        self.queues.resize(i + 1, QueueSlots::default());
    }
}

/// A switch's keys per egress port (indexed by port below [`NodeState::DIRECT_PORTS`],
/// searched above), and the queues of hops that name no egress port.
#[derive(Clone, Debug, Default)]
pub struct NodeState {
    ports: Vec<PortSlots>,
    /// At most [`NodeState::MAX_HIGH_PORTS`], searched.
    high_ports: Vec<(u32, PortSlots)>,
    /// Queues of hops without an egress port (its link slot is never used).
    portless: PortSlots,
    /// High ports that made room for another.
    ports_evicted: u64,
}

/// Which queue metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueMetric {
    Occupancy,
    Congestion,
}

impl NodeState {
    const DIRECT_PORTS: u32 = 256;
    /// Ports from `DIRECT_PORTS` up tracked per switch (ports are 32-bit wire values).
    pub(crate) const MAX_HIGH_PORTS: usize = 64;

    fn keys(&self) -> usize {
        self.ports.iter().map(PortSlots::keys).sum::<usize>()
            + self.high_ports.iter().map(|(_, p)| p.keys()).sum::<usize>()
            + self.portless.keys()
    }

    /// A port's keys, if it has any (`None`: the queues of hops without a port).
    #[inline(always)]
    fn port(&self, port: Option<u32>) -> Option<&PortSlots> {
        let Some(port) = port else {
            return Some(&self.portless);
        };
        match self.ports.get(port as usize) {
            Some(slots) => Some(slots),
            None => self
                .high_ports
                .iter()
                .find(|(p, _)| *p == port)
                .map(|(_, slots)| slots),
        }
    }

    /// A port's keys, made if new; `keys` loses those of a high port evicted to make room.
    #[inline(always)]
    fn port_mut(&mut self, port: Option<u32>, keys: &mut usize) -> &mut PortSlots {
        match port {
            None => &mut self.portless,
            Some(p) if (p as usize) < self.ports.len() => &mut self.ports[p as usize],
            Some(p) => self.port_elsewhere(p, keys),
        }
    }

    #[cold]
    #[inline(never)]
    fn port_elsewhere(&mut self, port: u32, keys: &mut usize) -> &mut PortSlots {
        if port < Self::DIRECT_PORTS {
            let i = port as usize;
            self.ports.resize_with(i + 1, PortSlots::default);
            return &mut self.ports[i];
        }
        let i = match self.high_ports.iter().position(|(p, _)| *p == port) {
            Some(i) => i,
            None if self.high_ports.len() < Self::MAX_HIGH_PORTS => {
                self.high_ports.push((port, PortSlots::default()));
                self.high_ports.len() - 1
            }
            None => {
                // Full: the port reported longest ago (earliest due) makes room.
                let (i, _) = self
                    .high_ports
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, (_, slots))| slots.last_due())
                    .expect("a full table has entries");
                *keys -= self.high_ports[i].1.keys();
                self.high_ports[i] = (port, PortSlots::default());
                self.ports_evicted += 1;
                i
            }
        };
        &mut self.high_ports[i].1
    }

    /// [`NodeState::queue`]'s "no event", changing nothing (a queue not yet seen is not
    /// quiet).
    #[inline(always)]
    pub fn queue_quiet(
        &self,
        port: Option<u32>,
        queue: u8,
        metric: QueueMetric,
        value: u32,
        th: Threshold,
        clock: Clock,
    ) -> bool {
        self.port(port)
            .and_then(|p| p.queue_slot(queue, metric))
            .is_some_and(|slot| slot.quiet(value.into(), th, clock))
    }

    /// [`NodeState::link`]'s "no event", changing nothing.
    #[inline(always)]
    pub fn link_quiet(&self, port: u32, value: u32, th: Threshold, clock: Clock) -> bool {
        self.port(Some(port))
            .is_some_and(|p| p.link.quiet(value.into(), th, clock))
    }

    /// A queue's metric, the queue keyed by (egress port, queue id).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn queue(
        &mut self,
        port: Option<u32>,
        queue: u8,
        metric: QueueMetric,
        value: u32,
        t: u64,
        clock: Clock,
        keys: &mut usize,
    ) -> Decision {
        self.port_mut(port, keys)
            .queue_slot_mut(queue, metric)
            .check(value.into(), t, clock, keys)
    }

    #[inline(always)]
    pub fn link(
        &mut self,
        port: u32,
        value: u32,
        t: u64,
        clock: Clock,
        keys: &mut usize,
    ) -> Decision {
        self.port_mut(Some(port), keys)
            .link
            .check(value.into(), t, clock, keys)
    }
}

/// Switches by node id.
#[derive(Debug)]
pub struct Nodes(ByNode<NodeState>);

impl Nodes {
    pub fn new(limits: Limits) -> Self {
        Self(ByNode::new(limits))
    }

    /// The switch's state; `keys` loses the keys of switches evicted to make room.
    #[inline(always)]
    pub fn get(&mut self, node: u32, clock: Clock, keys: &mut usize) -> &mut NodeState {
        self.0
            .get_or_default(node, clock.now_s, |gone| *keys -= gone.keys())
    }

    /// The switch's state, if it has any.
    #[inline(always)]
    pub fn find(&self, node: u32, clock: Clock) -> Option<&NodeState> {
        self.0.get(node, clock.now_s)
    }

    /// Switches held in the bounded table (ids from [`ByNode::DIRECT`] up).
    pub fn len(&self) -> usize {
        self.0.other_len()
    }

    #[cfg(test)]
    pub fn keys(&self) -> usize {
        self.0.values().map(NodeState::keys).sum()
    }

    /// Switches (ids from [`ByNode::DIRECT`] up) evicted, and high ports evicted.
    pub fn evictions(&self) -> (Evictions, u64) {
        let ports = self.0.values().map(|n| n.ports_evicted).sum();
        (self.0.evictions(), ports)
    }

    pub fn bytes(&self) -> usize {
        let port = |p: &PortSlots| p.queues.capacity() * std::mem::size_of::<QueueSlots>();
        let node = |n: &NodeState| {
            n.ports.capacity() * std::mem::size_of::<PortSlots>()
                + n.high_ports.capacity() * std::mem::size_of::<(u32, PortSlots)>()
                + n.ports.iter().map(port).sum::<usize>()
                + n.high_ports.iter().map(|(_, p)| port(p)).sum::<usize>()
                + port(&n.portless)
        };
        self.0.table_bytes() + self.0.values().map(node).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_32_bit_band_is_abs_diff() {
        let edges = [
            0u64,
            1,
            2,
            100,
            1 << 31,
            u32::MAX as u64 - 1,
            u32::MAX as u64,
        ];
        let ts = [
            0u64,
            1,
            99,
            100,
            1 << 32,
            1 << 62,
            (1 << 63) - 1,
            1 << 63,
            u64::MAX,
        ];
        for &last in &edges {
            for &v in &edges {
                for &t in &ts {
                    assert_eq!(
                        (last as u32).within(v, Threshold::new(t)),
                        v.abs_diff(last) <= t,
                        "last {last} v {v} t {t}"
                    );
                }
            }
        }
    }

    #[test]
    fn slots_are_packed() {
        assert_eq!(std::mem::size_of::<Slot<u64>>(), 12);
        assert_eq!(std::mem::size_of::<HopSlot>(), 12);
        assert_eq!(std::mem::size_of::<FlowState>(), 40);
    }

    #[test]
    fn the_flow_table_grows_and_finds_every_flow() {
        let clock = Clock::new(5_000_000_000, Refresh::from_ns(0));
        let mut flows = Flows::new(Limits {
            idle: std::time::Duration::from_secs(60),
            max: 1 << 20,
        });
        let mut keys = 0;
        // Hashes that collide in the low bits probe past each other.
        let hashes: Vec<u64> = (0..5000u64).map(|i| (i % 7) << 40 | i << 3).collect();
        for &h in &hashes {
            let (_, d) = flows.path(h, h, clock, &mut keys);
            assert_eq!(d, Some((EventKind::New, None)));
        }
        assert_eq!(keys, hashes.len());
        for &h in &hashes {
            flows.prefetch(h);
            let (_, d) = flows.path(h, h, clock, &mut keys);
            assert_eq!(d, None, "{h:#x} found, same path");
        }
        assert_eq!(flows.keys(), hashes.len());
        assert_eq!(flows.len(), hashes.len());
    }
}
