//! The sink's event detection (event-detection paper §III-C), computed as
//! `p4/kplane_int.p4`'s `int_sink_detection` computes it, so that the emulator's reports and a
//! BMv2 switch's agree packet for packet (`crates/kplane-cli/tests/e2e/bmv2.rs` holds them to
//! it):
//! * the sink sees its upstream hops only through the metadata the packet carries: a value
//!   the instruction bitmap does not carry counts as 0, and a hop without a node id counts as
//!   node 0; its own hop it knows whole;
//! * per-hop compares every hop with the last value reported for that node; per-flow and EWMA
//!   take the sum over the hops; each `complex` literal the largest value;
//! * EWMA is fixed point with 8 fractional bits, as the switch computes it;
//! * the first packet of a node is always reported, and so is a flow's first packet under
//!   every rule: no rule hides a new flow from the collector. As on the switch, which flow
//!   last passed is kept in [`FLOW_SLOTS`] slots (by a hash of the flow), so a flow whose slot
//!   another took since is new again — and the state stays bounded however many flows pass.
//!
//! Where the switch is smaller: its per-flow state is 4096 slots by a hash of the 5-tuple and
//! its per-hop state 256 node ids, so flows (nodes) that collide share a slot there.

use std::collections::HashMap;

use kplane_model::detection::{
    Algorithm, Condition, LITERAL_PARAMS, Measurement, SWITCH_CONDITIONS,
};

use crate::hop::Hop;
use crate::tables::Rule as TableRule;

/// Instruction bitmap bits (INT v2.x) of the values detection reads.
const NODE_ID: u16 = 0x8000;
const HOP_LATENCY: u16 = 0x2000;
const QUEUE_OCCUPANCY: u16 = 0x1000;
const TX_UTILIZATION: u16 = 0x0100;

/// One `int_sink_detection` entry's rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub algorithm: Algorithm,
    pub measurement: Measurement,
    pub threshold: u64,
    /// EWMA's weight of the new value, in 256ths.
    pub weight_q8: u64,
    /// `complex`'s literals (an empty literal holds).
    pub when: [Condition<u64>; SWITCH_CONDITIONS],
}

impl Rule {
    /// The rule an entry's action and parameters give.
    pub fn of(e: &TableRule) -> Self {
        Self {
            algorithm: Algorithm::from_action(&e.spec.action),
            measurement: Measurement::from_p4_code(e.param("measurement")),
            threshold: e.param("threshold"),
            weight_q8: e.param("weight_q8"),
            when: LITERAL_PARAMS.map(|names| {
                let [m, op, t] = names.map(|p| e.param(p));
                Condition::from_literal(m, op, t)
            }),
        }
    }
}

/// What the sink knows of a hop: its node and the value of `m`, as far as `bitmap` carries
/// them (`None`: the sink's own hop, known whole).
fn seen(h: &Hop, m: Measurement, bitmap: Option<u16>) -> (u32, u64) {
    let carried = |bit: u16| bitmap.is_none_or(|b| b & bit != 0);
    let value = match m {
        Measurement::HopLatency if carried(HOP_LATENCY) => u64::from(h.latency_ns),
        Measurement::QueueOccupancy if carried(QUEUE_OCCUPANCY) => {
            u64::from(h.queue_occupancy & 0xFF_FFFF)
        }
        Measurement::TxUtilization if carried(TX_UTILIZATION) => u64::from(h.tx_utilization),
        _ => 0,
    };
    (if carried(NODE_ID) { h.node } else { 0 }, value)
}

/// Slots that remember which flow last passed (the P4 program's `flow_owner`).
pub const FLOW_SLOTS: usize = 4096;

/// One sink's detection state (the P4 program's registers).
#[derive(Debug, Default)]
pub struct Detection {
    /// Per slot, the flow that last passed under a rule (allocated at the first).
    flow_owner: Vec<Option<u64>>,
    /// Per (node, measurement): the last value reported.
    per_hop: HashMap<(u32, Measurement), u64>,
    /// Per (flow, measurement): the last sum reported.
    per_flow: HashMap<(u64, Measurement), u64>,
    /// Per (flow, measurement): the average (8 fractional bits) and the last one reported.
    ewma: HashMap<(u64, Measurement), (u64, u64)>,
    /// Per flow: each literal's value at the flow's previous packet.
    complex: HashMap<u64, [u64; SWITCH_CONDITIONS]>,
}

impl Detection {
    /// Whether `rule` reports this packet of `flow`: `upstream` are the hops the packet
    /// carries (with `bitmap`), `own` the sink's hop.
    pub fn decide(
        &mut self,
        rule: &Rule,
        flow: u64,
        bitmap: u16,
        upstream: &[Hop],
        own: &Hop,
    ) -> bool {
        let hops = || {
            upstream
                .iter()
                .map(move |h| (h, Some(bitmap)))
                .chain(std::iter::once((own, None)))
        };
        let values = |m: Measurement| hops().map(move |(h, b)| seen(h, m, b));
        let m = rule.measurement;
        let t = rule.threshold;
        // A new flow is reported whatever the rule says.
        let first = rule.algorithm != Algorithm::Noop && self.takes_slot(flow);
        let decided = match rule.algorithm {
            Algorithm::Noop => true,
            Algorithm::PerHop => {
                let mut fire = false;
                for (node, v) in values(m) {
                    let last = self.per_hop.entry((node, m)).or_insert(u64::MAX);
                    if *last == u64::MAX || v.abs_diff(*last) > t {
                        *last = v;
                        fire = true;
                    }
                }
                fire
            }
            Algorithm::PerFlow => {
                let sum: u64 = values(m).map(|(_, v)| v).sum();
                let last = self.per_flow.entry((flow, m)).or_insert(u64::MAX);
                let fire = *last == u64::MAX || sum.abs_diff(*last) > t;
                if fire {
                    *last = sum;
                }
                fire
            }
            Algorithm::Ewma => {
                let sum: u64 = values(m).map(|(_, v)| v).sum();
                let w = rule.weight_q8.min(256);
                match self.ewma.get_mut(&(flow, m)) {
                    None => {
                        self.ewma.insert((flow, m), (sum << 8, sum));
                        true
                    }
                    Some((avg, reported)) => {
                        *avg = (w * (sum << 8) + (256 - w) * *avg) >> 8;
                        let fire = (*avg >> 8).abs_diff(*reported) > t;
                        if fire {
                            *reported = *avg >> 8;
                        }
                        fire
                    }
                }
            }
            Algorithm::Complex => {
                // Every literal is evaluated: each keeps its register current.
                let previous = self.complex.entry(flow).or_default();
                let mut all = true;
                for (c, prev) in rule.when.iter().zip(previous.iter_mut()) {
                    let largest = values(c.measurement).map(|(_, v)| v).max().unwrap_or(0);
                    all &= c.holds(largest, std::mem::replace(prev, largest));
                }
                all
            }
        };
        decided || first
    }

    /// Whether `flow` is new to its slot, which it then holds.
    fn takes_slot(&mut self, flow: u64) -> bool {
        if self.flow_owner.is_empty() {
            self.flow_owner = vec![None; FLOW_SLOTS];
        }
        let slot = (flow.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % FLOW_SLOTS;
        self.flow_owner[slot].replace(flow) != Some(flow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(node: u32, latency_ns: u32, queue_occupancy: u32) -> Hop {
        Hop {
            node,
            latency_ns,
            queue_occupancy,
            ..Default::default()
        }
    }

    fn rule(algorithm: Algorithm, m: Measurement, threshold: u64) -> Rule {
        Rule {
            algorithm,
            measurement: m,
            threshold,
            weight_q8: 64,
            when: [Condition::from_literal(0, 0, 0); SWITCH_CONDITIONS],
        }
    }

    #[test]
    fn per_hop_watches_every_upstream_hop_not_only_the_sinks() {
        let r = rule(Algorithm::PerHop, Measurement::QueueOccupancy, 5);
        let mut d = Detection::default();
        let sink = hop(9, 0, 0);
        assert!(d.decide(&r, 1, 0x9000, &[hop(1, 0, 0)], &sink), "first");
        assert!(!d.decide(&r, 1, 0x9000, &[hop(1, 0, 3)], &sink), "within 5");
        assert!(
            d.decide(&r, 1, 0x9000, &[hop(1, 0, 9)], &sink),
            "hop 1 moved"
        );
        assert!(
            d.decide(&r, 2, 0x9000, &[hop(2, 0, 9)], &sink),
            "a new node"
        );
        // Without queue occupancy in the bitmap an upstream value is 0 to the sink.
        let mut d = Detection::default();
        assert!(d.decide(&r, 1, 0x8000, &[hop(1, 0, 0)], &sink));
        assert!(!d.decide(&r, 1, 0x8000, &[hop(1, 0, 90)], &sink));
    }

    #[test]
    fn a_new_flow_is_reported_whatever_the_rule() {
        let sink = hop(9, 0, 0);
        let hops = [hop(1, 0, 4)];
        // Per hop: flow 2 crosses the same, unmoved, queues as flow 1.
        let per_hop = rule(Algorithm::PerHop, Measurement::QueueOccupancy, 16);
        let mut d = Detection::default();
        assert!(d.decide(&per_hop, 1, 0x9000, &hops, &sink));
        assert!(
            !d.decide(&per_hop, 1, 0x9000, &hops, &sink),
            "nothing moved"
        );
        assert!(d.decide(&per_hop, 2, 0x9000, &hops, &sink), "a new flow");
        assert!(!d.decide(&per_hop, 2, 0x9000, &hops, &sink), "seen");
        // Complex, with a literal that never holds.
        let mut never = rule(Algorithm::Complex, Measurement::HopLatency, 0);
        never.when[0] = Condition::from_literal(1, 1, 1_000);
        assert!(d.decide(&never, 3, 0x9000, &hops, &sink), "a new flow");
        assert!(!d.decide(&never, 3, 0x9000, &hops, &sink));
        // Bounded: as many flows as slots and more hold no more than the slots, and a flow
        // whose slot another took since is new again.
        let mut d = Detection::default();
        let flows = 0..(2 * FLOW_SLOTS as u64);
        let new = flows
            .filter(|f| d.decide(&never, *f, 0x9000, &hops, &sink))
            .count();
        assert_eq!((new, d.flow_owner.len()), (2 * FLOW_SLOTS, FLOW_SLOTS));
        let taken = (0..2 * FLOW_SLOTS as u64)
            .filter(|f| d.decide(&never, *f, 0x9000, &hops, &sink))
            .count();
        assert!(taken > 0, "some slots changed hands");
    }

    #[test]
    fn per_flow_and_ewma_take_the_sum_and_complex_the_largest() {
        let hops = [hop(1, 100, 2), hop(2, 300, 7)];
        let sink = hop(3, 50, 1);
        let mut d = Detection::default();
        let per_flow = rule(Algorithm::PerFlow, Measurement::HopLatency, 100);
        assert!(d.decide(&per_flow, 1, 0xB000, &hops, &sink));
        let faster = [hop(1, 100, 2), hop(2, 250, 7)];
        assert!(!d.decide(&per_flow, 1, 0xB000, &faster, &sink), "450 → 400");
        // EWMA, w = 64/256: 450 then 4 × 850 → 550, 650, … reported when 100 away.
        let ewma = rule(Algorithm::Ewma, Measurement::HopLatency, 100);
        assert!(d.decide(&ewma, 1, 0xB000, &hops, &sink));
        let slow = [hop(1, 500, 2), hop(2, 300, 7)];
        let fired: Vec<bool> = (0..4)
            .map(|_| d.decide(&ewma, 1, 0xB000, &slow, &sink))
            .collect();
        assert_eq!(fired, [false, true, false, false], "550, 625, 681, 723");
        let mut complex = rule(Algorithm::Complex, Measurement::HopLatency, 0);
        complex.when[0] = Condition::from_literal(1, 1, 6);
        complex.when[3] = Condition::from_literal(0, 2, 400);
        assert!(
            d.decide(&complex, 1, 0xB000, &hops, &sink),
            "7 > 6 and 300 < 400"
        );
        assert!(!d.decide(&complex, 1, 0xB000, &slow[..1], &sink), "2 ≤ 6");
    }
}
