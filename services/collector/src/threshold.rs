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
//! otherwise), a switch's slots by queue id and egress port.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use kplane_model::EventKind;

use crate::detect::{MixHasher, PassThrough};

/// What the detector remembers per key: the last *reported* value and when.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    value: u64,
    /// Seconds since the Unix epoch (wraps in 2106).
    sent_s: u32,
}

/// An event the threshold detector decided: its kind and the previously reported value.
pub type Decision = Option<(EventKind, Option<u64>)>;

/// Now and the refresh period, computed once per report.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub now_s: u32,
    /// Whole seconds after which a live key is re-sent (the period rounded up: a key is due
    /// when `elapsed s × 10⁹ ≥ refresh ns`); 0 disables refresh.
    refresh_s: u64,
}

impl Clock {
    pub fn new(now_ns: u64, refresh_ns: u64) -> Self {
        Self {
            now_s: (now_ns / 1_000_000_000) as u32,
            refresh_s: refresh_ns.div_ceil(1_000_000_000),
        }
    }
}

impl Slot {
    fn new(value: u64, clock: Clock) -> Self {
        Self {
            value,
            sent_s: clock.now_s,
        }
    }

    #[inline(always)]
    fn check(&mut self, value: u64, t: u64, clock: Clock) -> Decision {
        decide(&mut self.value, &mut self.sent_s, value, t, clock)
    }
}

/// An event is |new − last reported| > `t`, or a live key unreported for `refresh`; on an
/// event the key's reported value and time are updated.
#[inline(always)]
fn decide(reported: &mut u64, sent_s: &mut u32, value: u64, t: u64, clock: Clock) -> Decision {
    let prev = *reported;
    let kind = if value.abs_diff(prev) > t {
        EventKind::Change
    } else if clock.refresh_s > 0 && u64::from(clock.now_s.wrapping_sub(*sent_s)) >= clock.refresh_s
    {
        EventKind::Refresh
    } else {
        return None;
    };
    *reported = value;
    *sent_s = clock.now_s;
    Some((kind, Some(prev)))
}

/// Checks an optional slot: a missing one is created (a new key).
#[inline(always)]
fn check_or_insert(slot: &mut Option<Slot>, value: u64, t: u64, clock: Clock) -> Decision {
    match slot {
        Some(s) => s.check(value, t, clock),
        None => {
            *slot = Some(Slot::new(value, clock));
            Some((EventKind::New, None))
        }
    }
}

/// One hop-latency key of a flow (16 bytes).
#[derive(Clone, Copy, Debug)]
struct HopSlot {
    value: u64,
    node: u32,
    sent_s: u32,
}

/// A flow's keys: path, end-to-end latency, and hop latency per node — packed (40 bytes and
/// the hop slots), since a collector tracks millions of flows.
#[derive(Clone, Debug)]
pub struct FlowState {
    path: u64,
    latency: u64,
    path_sent_s: u32,
    latency_sent_s: u32,
    has_latency: bool,
    /// Grown one slot at a time: paths change rarely, and a boxed slice is 8 bytes smaller
    /// than a `Vec`.
    hops: Box<[HopSlot]>,
}

impl FlowState {
    /// Keys this flow holds.
    #[cfg(test)]
    fn keys(&self) -> usize {
        1 + usize::from(self.has_latency) + self.hops.len()
    }

    pub fn path(&mut self, hash: u64, clock: Clock) -> Decision {
        decide(&mut self.path, &mut self.path_sent_s, hash, 0, clock)
    }

    pub fn latency(&mut self, sum: u64, t: u64, clock: Clock, keys: &mut usize) -> Decision {
        if self.has_latency {
            return decide(&mut self.latency, &mut self.latency_sent_s, sum, t, clock);
        }
        *keys += 1;
        self.has_latency = true;
        self.latency = sum;
        self.latency_sent_s = clock.now_s;
        Some((EventKind::New, None))
    }

    /// The hop latency of `node`, the `index`-th hop of the path.
    #[inline(always)]
    pub fn hop(
        &mut self,
        index: usize,
        node: u32,
        value: u64,
        t: u64,
        clock: Clock,
        keys: &mut usize,
    ) -> Decision {
        // While the path is unchanged the node's slot sits at the hop's index.
        let at = match self.hops.get(index) {
            Some(h) if h.node == node => Some(index),
            _ => self.hops.iter().position(|h| h.node == node),
        };
        match at {
            Some(i) => {
                let h = &mut self.hops[i];
                decide(&mut h.value, &mut h.sent_s, value, t, clock)
            }
            None => {
                *keys += 1;
                // Allocated at its exact size: no spare capacity, no shrinking reallocation.
                let mut hops = Vec::with_capacity(self.hops.len() + 1);
                hops.extend_from_slice(&self.hops);
                hops.push(HopSlot {
                    value,
                    node,
                    sent_s: clock.now_s,
                });
                self.hops = hops.into_boxed_slice();
                Some((EventKind::New, None))
            }
        }
    }
}

type FlowMap = HashMap<u64, FlowState, BuildHasherDefault<PassThrough>>;

/// Every flow's keys, by flow hash.
#[derive(Debug, Default)]
pub struct Flows {
    map: FlowMap,
}

impl Flows {
    /// The flow's state and its path decision: a new flow's path is a new key.
    #[inline]
    pub fn path(
        &mut self,
        flow_hash: u64,
        path_hash: u64,
        clock: Clock,
        keys: &mut usize,
    ) -> (&mut FlowState, Decision) {
        use std::collections::hash_map::Entry;
        match self.map.entry(flow_hash) {
            Entry::Occupied(o) => {
                let state = o.into_mut();
                let d = state.path(path_hash, clock);
                (state, d)
            }
            Entry::Vacant(v) => {
                *keys += 1;
                let state = v.insert(FlowState {
                    path: path_hash,
                    latency: 0,
                    path_sent_s: clock.now_s,
                    latency_sent_s: 0,
                    has_latency: false,
                    hops: Box::default(),
                });
                (state, Some((EventKind::New, None)))
            }
        }
    }

    /// Keys held, counted (the detector keeps a running count; tests compare the two).
    #[cfg(test)]
    pub fn keys(&self) -> usize {
        self.map.values().map(FlowState::keys).sum()
    }

    /// Bytes held: the table (buckets × (entry + control byte)) and the hop slots.
    pub fn bytes(&self) -> usize {
        self.map.capacity() * (std::mem::size_of::<(u64, FlowState)>() + 1)
            + self
                .map
                .values()
                .map(|f| std::mem::size_of_val(&*f.hops))
                .sum::<usize>()
    }
}

/// A queue's keys: occupancy and congestion.
#[derive(Clone, Copy, Debug, Default)]
struct QueueSlots {
    occupancy: Option<Slot>,
    congestion: Option<Slot>,
}

/// A switch's keys: per queue (indexed by queue id), and link utilisation per egress port
/// (indexed by port below [`NodeState::DIRECT_PORTS`], searched above).
#[derive(Clone, Debug, Default)]
pub struct NodeState {
    queues: Vec<QueueSlots>,
    ports: Vec<Option<Slot>>,
    high_ports: Vec<(u32, Slot)>,
}

/// Which queue metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueMetric {
    Occupancy,
    Congestion,
}

impl NodeState {
    const DIRECT_PORTS: u32 = 256;

    #[cfg(test)]
    fn keys(&self) -> usize {
        self.queues
            .iter()
            .map(|q| usize::from(q.occupancy.is_some()) + usize::from(q.congestion.is_some()))
            .sum::<usize>()
            + self.ports.iter().filter(|p| p.is_some()).count()
            + self.high_ports.len()
    }

    #[inline(always)]
    pub fn queue(
        &mut self,
        queue: u8,
        metric: QueueMetric,
        value: u64,
        t: u64,
        clock: Clock,
        keys: &mut usize,
    ) -> Decision {
        let i = usize::from(queue);
        if i >= self.queues.len() {
            self.queues.resize(i + 1, QueueSlots::default());
        }
        let q = &mut self.queues[i];
        let slot = match metric {
            QueueMetric::Occupancy => &mut q.occupancy,
            QueueMetric::Congestion => &mut q.congestion,
        };
        *keys += usize::from(slot.is_none());
        check_or_insert(slot, value, t, clock)
    }

    #[inline(always)]
    pub fn link(
        &mut self,
        port: u32,
        value: u64,
        t: u64,
        clock: Clock,
        keys: &mut usize,
    ) -> Decision {
        if port < Self::DIRECT_PORTS {
            let i = port as usize;
            if i >= self.ports.len() {
                self.ports.resize(i + 1, None);
            }
            let slot = &mut self.ports[i];
            *keys += usize::from(slot.is_none());
            return check_or_insert(slot, value, t, clock);
        }
        match self.high_ports.iter_mut().find(|(p, _)| *p == port) {
            Some((_, s)) => s.check(value, t, clock),
            None => {
                *keys += 1;
                self.high_ports.push((port, Slot::new(value, clock)));
                Some((EventKind::New, None))
            }
        }
    }
}

/// Switches by node id: indexed directly for the small ids fabrics use, hashed above.
#[derive(Debug, Default)]
pub struct Nodes {
    direct: Vec<NodeState>,
    other: HashMap<u32, NodeState, BuildHasherDefault<MixHasher>>,
}

impl Nodes {
    /// Node ids below this are array indices (the array grows to the largest seen).
    const DIRECT: u32 = 4096;

    #[inline(always)]
    pub fn get(&mut self, node: u32) -> &mut NodeState {
        if node < Self::DIRECT {
            let i = node as usize;
            if i >= self.direct.len() {
                self.direct.resize_with(i + 1, NodeState::default);
            }
            &mut self.direct[i]
        } else {
            self.other.entry(node).or_default()
        }
    }

    #[cfg(test)]
    pub fn keys(&self) -> usize {
        self.direct
            .iter()
            .chain(self.other.values())
            .map(NodeState::keys)
            .sum()
    }

    pub fn bytes(&self) -> usize {
        let node = |n: &NodeState| {
            n.queues.capacity() * std::mem::size_of::<QueueSlots>()
                + n.ports.capacity() * std::mem::size_of::<Option<Slot>>()
                + n.high_ports.capacity() * std::mem::size_of::<(u32, Slot)>()
        };
        self.direct.capacity() * std::mem::size_of::<NodeState>()
            + self.other.capacity() * (std::mem::size_of::<(u32, NodeState)>() + 1)
            + self
                .direct
                .iter()
                .chain(self.other.values())
                .map(node)
                .sum::<usize>()
    }
}
