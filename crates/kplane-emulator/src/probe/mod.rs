//! GPINT's probe data plane (gpint-reliable-int-monitoring §III-B/C, §IV): source-routed INT
//! probes over switches with a packet-rate capacity, links that lose packets, and SQR.
//!
//! A probe leaves the monitoring module for the switch at its start index. Each switch it
//! reaches queues it behind the background traffic ([`backlog`]), counts it (rule hits, the
//! in-port's packets), and — unless it has seen the request within [`LOOP_WINDOW_NS`] (the loop check) or runs
//! without recovery — answers with a feedback (DSCP 0x19): to the monitor when it is the
//! first switch, to the previous switch otherwise. It then pushes its DLV header (switch,
//! queue depth, measurements) and the measurements of its MEA range; a range longer than one
//! pass inserts recirculates the probe through the pipeline, queueing again. With SR headers
//! left it pops one and forwards the probe to that neighbour, keeping a clone in its SQR ring
//! for `hold`; a feedback from the neighbour discards the clone, its absence sends the clone
//! to the monitor as a failure notification (DSCP 0x21) carrying what was measured so far.
//! The last switch sends the probe to the monitor (DSCP 0x17). The monitor's links to the
//! switches are out of band: lossless, a fixed delay. SNMP requests (the baseline) queue at
//! the switch like any packet, then wait for its agent.

pub mod backlog;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use kplane_model::rng::Rng;

pub use backlog::{Backlog, Load};

/// A request seen again within this at a switch is a loop (the P4 program's window too).
pub const LOOP_WINDOW_NS: u64 = 10_000_000_000;

/// Probe DSCPs (§III-C).
pub const DSCP_MEASUREMENT: u8 = 0x17;
pub const DSCP_FEEDBACK: u8 = 0x19;
pub const DSCP_FAILURE: u8 = 0x21;

/// What the probes measure (Req META's request type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// The switch's rule-hit counter: one measurement.
    RuleHits,
    /// Packets received per port: one measurement per port.
    PortPackets,
}

#[derive(Clone, Debug)]
pub struct FabricConfig {
    /// Packets a switch's processor serves per second.
    pub capacity_pps: f64,
    /// Packets a switch's queue holds.
    pub queue: f64,
    /// Each switch-to-switch link drops a packet with this probability (PDP).
    pub link_loss: f64,
    pub link_delay_ns: u64,
    /// Monitor ↔ switch (out of band, lossless).
    pub monitor_delay_ns: u64,
    /// SQR in the switches: feedbacks, clones held for `hold_ns`, failure notifications.
    pub recovery: bool,
    pub hold_ns: u64,
    /// Clones a switch's ring holds at most (a probe finding it full is sent unprotected).
    pub ring: usize,
    /// Measurements one pipeline pass inserts; more recirculate.
    pub per_pass: usize,
    pub measure: Measure,
    /// An SNMP agent's time per request (the switch's control-plane CPU).
    pub snmp_agent_ns: u64,
}

impl Default for FabricConfig {
    fn default() -> Self {
        Self {
            capacity_pps: 12_000.0,
            queue: 1_000.0,
            link_loss: 0.0,
            link_delay_ns: 1_000_000,
            monitor_delay_ns: 1_000_000,
            recovery: false,
            hold_ns: 1_500_000_000,
            ring: 64,
            per_pass: 4,
            measure: Measure::RuleHits,
            snmp_agent_ns: 5_000_000,
        }
    }
}

/// A switch's device-level header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dlv {
    pub switch: usize,
    pub queue_depth: u8,
    pub measurements: u16,
}

/// A probe: Req META's request id, its source route and position on it, the DLV and MEA
/// stacks so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    pub request: u16,
    pub route: Vec<usize>,
    /// The index in `route` of the switch it is at (or sent to).
    pub pos: usize,
    pub dlv: Vec<Dlv>,
    pub mea: Vec<u64>,
}

/// What reaches the monitoring module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// DSCP 0x17 (the route's last switch sent it) or 0x21 (a switch whose next hop did not
    /// answer within the hold time sent its clone: `probe.pos` is that switch's index).
    Probe { dscp: u8, probe: Probe },
    /// DSCP 0x19 from the first switch of a probe.
    Feedback { request: u16, switch: usize },
    /// An SNMP response.
    Snmp {
        request: u16,
        switch: usize,
        value: u64,
    },
}

/// What the fabric did, for the experiments' accounting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FabricStats {
    pub probes_in: u64,
    /// Probe copies lost: a full queue, a lossy link, or a next hop that is not a neighbour.
    pub probes_dropped_queue: u64,
    pub probes_dropped_link: u64,
    pub probes_misrouted: u64,
    pub feedbacks_sent: u64,
    pub feedbacks_lost: u64,
    pub clones_discarded: u64,
    pub failure_notices: u64,
    pub recirculations: u64,
    pub loop_passes: u64,
    pub ring_full: u64,
    pub snmp_dropped: u64,
}

#[derive(Clone, Debug)]
enum Packet {
    Probe(Box<Probe>),
    Feedback(u16),
    Snmp(u16),
}

#[derive(Clone, Copy, Debug)]
enum From {
    Monitor,
    Switch(usize),
}

#[derive(Debug)]
enum Ev {
    /// A packet reaches a switch's queue.
    Arrive {
        at: usize,
        packet: Packet,
        from: From,
    },
    /// Its processor is done with it; `passes` more recirculations follow.
    Served {
        at: usize,
        packet: Packet,
        from: From,
        passes: usize,
    },
    /// A clone's hold time is over.
    Hold { at: usize, request: u16 },
    /// The monitor receives it.
    Deliver(Delivery),
}

#[derive(Debug)]
struct Switch {
    load: Load,
    backlog: Backlog,
    rule_hits: u64,
    /// Probe packets received per neighbour (port = the neighbour's index in the list).
    probe_packets: Vec<u64>,
    /// Requests seen (the loop check), with when.
    seen: HashMap<u16, u64>,
    ring: HashMap<u16, Probe>,
    agent_free_ns: u64,
}

/// The switches, links and events.
#[derive(Debug)]
pub struct Fabric {
    cfg: FabricConfig,
    adj: Vec<Vec<usize>>,
    switches: Vec<Switch>,
    rng: Rng,
    now: u64,
    seq: u64,
    events: BinaryHeap<Reverse<(u64, u64)>>,
    pending: HashMap<u64, Ev>,
    /// Scripted losses: probe packets still to drop on a directed link.
    scripted: HashMap<(usize, usize), u32>,
    pub stats: FabricStats,
}

impl Fabric {
    /// Switches `0..adj.len()`, `adj[s]` their neighbours (the SR header's next port is the
    /// neighbour's index there), `arrivals_pps[s]` the background packets reaching each per
    /// second; backlogs drawn at time `start_ns`.
    pub fn new(
        cfg: FabricConfig,
        adj: Vec<Vec<usize>>,
        arrivals_pps: &[f64],
        seed: u64,
        start_ns: u64,
    ) -> Self {
        let mut rng = Rng::new(seed ^ 0x6B1A_7E00);
        let switches = adj
            .iter()
            .enumerate()
            .map(|(s, n)| {
                let load = Load {
                    arrivals_pps: arrivals_pps.get(s).copied().unwrap_or(0.0),
                    capacity_pps: cfg.capacity_pps,
                    limit: cfg.queue,
                };
                (load, n.len())
            })
            .map(|(load, ports)| Switch {
                load,
                backlog: Backlog::stationary(&load, start_ns, &mut rng),
                rule_hits: 0,
                probe_packets: vec![0; ports],
                seen: HashMap::new(),
                ring: HashMap::new(),
                agent_free_ns: 0,
            })
            .collect();
        Self {
            cfg,
            adj,
            switches,
            rng,
            now: start_ns,
            seq: 0,
            events: BinaryHeap::new(),
            pending: HashMap::new(),
            scripted: HashMap::new(),
            stats: FabricStats::default(),
        }
    }

    pub fn now(&self) -> u64 {
        self.now
    }

    /// The monitor sends `probe` to the switch at `probe.pos` of its route.
    pub fn send_probe(&mut self, probe: Probe) {
        let at = probe.route[probe.pos];
        let when = self.now + self.cfg.monitor_delay_ns;
        self.push(
            when,
            Ev::Arrive {
                at,
                packet: Packet::Probe(Box::new(probe)),
                from: From::Monitor,
            },
        );
    }

    /// The monitor sends an SNMP request to `switch`.
    pub fn send_snmp(&mut self, request: u16, switch: usize) {
        let when = self.now + self.cfg.monitor_delay_ns;
        self.push(
            when,
            Ev::Arrive {
                at: switch,
                packet: Packet::Snmp(request),
                from: From::Monitor,
            },
        );
    }

    /// The next `count` probe packets sent from `from` to `to` are lost (tests' scripted
    /// losses, on top of the PDP).
    pub fn script_loss(&mut self, from: usize, to: usize, count: u32) {
        *self.scripted.entry((from, to)).or_default() += count;
    }

    /// Runs until the next delivery to the monitor at or before `until_ns` and returns it
    /// (the clock at its time), or `None` with the clock at `until_ns`.
    pub fn next(&mut self, until_ns: u64) -> Option<Delivery> {
        while let Some(&Reverse((t, id))) = self.events.peek() {
            if t > until_ns {
                break;
            }
            self.events.pop();
            self.now = t;
            let ev = self
                .pending
                .remove(&id)
                .expect("every queued event is pending");
            if let Ev::Deliver(d) = ev {
                return Some(d);
            }
            self.handle(ev);
        }
        self.now = self.now.max(until_ns);
        None
    }

    /// Runs in steps of `step_ns` until nothing is on its way (packets, held clones),
    /// dropping what would reach the monitor: a session's stragglers, before the next one.
    pub fn run_out(&mut self, step_ns: u64) {
        while !self.events.is_empty() {
            let until = self.now + step_ns;
            let _ = self.next(until);
        }
    }

    fn push(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.pending.insert(self.seq, ev);
        self.events.push(Reverse((at, self.seq)));
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive { at, packet, from } => {
                // A MEA range longer than a pass inserts recirculates (queueing again).
                let passes = match &packet {
                    Packet::Probe(_) => {
                        self.measurements(at)
                            .div_ceil(self.cfg.per_pass.max(1))
                            .max(1)
                            - 1
                    }
                    _ => 0,
                };
                self.enqueue(at, packet, from, passes);
            }
            Ev::Served {
                at,
                packet,
                from,
                passes,
            } => {
                if passes > 0 {
                    self.stats.recirculations += 1;
                    return self.enqueue(at, packet, from, passes - 1);
                }
                match packet {
                    Packet::Probe(p) => self.process_probe(at, *p, from),
                    Packet::Feedback(request) => {
                        if self.switches[at].ring.remove(&request).is_some() {
                            self.stats.clones_discarded += 1;
                        }
                    }
                    Packet::Snmp(request) => {
                        let sw = &mut self.switches[at];
                        let start = sw.agent_free_ns.max(self.now);
                        sw.agent_free_ns = start + self.cfg.snmp_agent_ns;
                        let value = sw.rule_hits;
                        let when = sw.agent_free_ns + self.cfg.monitor_delay_ns;
                        self.push(
                            when,
                            Ev::Deliver(Delivery::Snmp {
                                request,
                                switch: at,
                                value,
                            }),
                        );
                    }
                }
            }
            Ev::Hold { at, request } => {
                if let Some(clone) = self.switches[at].ring.remove(&request) {
                    self.stats.failure_notices += 1;
                    let when = self.now + self.cfg.monitor_delay_ns;
                    self.push(
                        when,
                        Ev::Deliver(Delivery::Probe {
                            dscp: DSCP_FAILURE,
                            probe: clone,
                        }),
                    );
                }
            }
            Ev::Deliver(_) => unreachable!("deliveries are returned by next()"),
        }
    }

    /// Measurements switch `at` inserts (its MEA range).
    fn measurements(&self, at: usize) -> usize {
        match self.cfg.measure {
            Measure::RuleHits => 1,
            Measure::PortPackets => self.adj[at].len().max(1),
        }
    }

    /// Into `at`'s queue behind the background, or dropped when it is full.
    fn enqueue(&mut self, at: usize, packet: Packet, from: From, passes: usize) {
        let sw = &mut self.switches[at];
        match sw.backlog.admit(&sw.load, self.now, &mut self.rng) {
            Some(wait) => {
                let when = self.now + wait;
                self.push(
                    when,
                    Ev::Served {
                        at,
                        packet,
                        from,
                        passes,
                    },
                );
            }
            None => match packet {
                Packet::Probe(_) => self.stats.probes_dropped_queue += 1,
                Packet::Feedback(_) => self.stats.feedbacks_lost += 1,
                Packet::Snmp(_) => self.stats.snmp_dropped += 1,
            },
        }
    }

    /// Over the link `from` → `to`: lost with the link's PDP, else arrives after its delay.
    fn transmit(&mut self, from: usize, to: usize, packet: Packet) {
        let scripted = matches!(packet, Packet::Probe(_))
            && self.scripted.get_mut(&(from, to)).is_some_and(|n| {
                let hit = *n > 0;
                *n = n.saturating_sub(1);
                hit
            });
        if scripted || self.rng.uniform() < self.cfg.link_loss {
            match packet {
                Packet::Probe(_) => self.stats.probes_dropped_link += 1,
                Packet::Feedback(_) => self.stats.feedbacks_lost += 1,
                Packet::Snmp(_) => self.stats.snmp_dropped += 1,
            }
            return;
        }
        let when = self.now + self.cfg.link_delay_ns;
        self.push(
            when,
            Ev::Arrive {
                at: to,
                packet,
                from: From::Switch(from),
            },
        );
    }

    fn process_probe(&mut self, at: usize, mut p: Probe, from: From) {
        self.stats.probes_in += 1;
        let n_mea = self.measurements(at);
        let now = self.now;
        let sw = &mut self.switches[at];
        sw.rule_hits += 1;
        if let From::Switch(prev) = from
            && let Ok(port) = self.adj[at].binary_search(&prev)
        {
            sw.probe_packets[port] += 1;
        }
        // The loop check: a request seen within the window passes without feedback or
        // clone (ids are 15 bits: they come round again).
        if sw.seen.len() > 4_096 {
            sw.seen
                .retain(|_, t| now.saturating_sub(*t) < LOOP_WINDOW_NS);
        }
        let first = sw
            .seen
            .insert(p.request, now)
            .is_none_or(|t| now.saturating_sub(t) >= LOOP_WINDOW_NS);
        if !first {
            self.stats.loop_passes += 1;
        }
        let protect = self.cfg.recovery && first;
        if protect {
            self.stats.feedbacks_sent += 1;
            match from {
                From::Monitor => {
                    let when = now + self.cfg.monitor_delay_ns;
                    self.push(
                        when,
                        Ev::Deliver(Delivery::Feedback {
                            request: p.request,
                            switch: at,
                        }),
                    );
                }
                From::Switch(prev) => self.transmit(at, prev, Packet::Feedback(p.request)),
            }
        }
        // DLV and MEA: the queue depth (in units of 4 packets) and the range's counters.
        let sw = &self.switches[at];
        let depth = (sw.backlog.queued() / 4.0).min(255.0) as u8;
        let background = sw.backlog.served / self.adj[at].len().max(1) as f64;
        let values: Vec<u64> = match self.cfg.measure {
            Measure::RuleHits => vec![sw.rule_hits],
            Measure::PortPackets => sw
                .probe_packets
                .iter()
                .map(|n| n + background as u64)
                .collect(),
        };
        p.dlv.push(Dlv {
            switch: at,
            queue_depth: depth,
            measurements: n_mea as u16,
        });
        p.mea.extend(values);
        if p.pos + 1 >= p.route.len() {
            let when = now + self.cfg.monitor_delay_ns;
            return self.push(
                when,
                Ev::Deliver(Delivery::Probe {
                    dscp: DSCP_MEASUREMENT,
                    probe: p,
                }),
            );
        }
        let next = p.route[p.pos + 1];
        if self.adj[at].binary_search(&next).is_err() {
            self.stats.probes_misrouted += 1;
            return;
        }
        if protect {
            if self.switches[at].ring.len() < self.cfg.ring {
                self.switches[at].ring.insert(p.request, p.clone());
                let when = now + self.cfg.hold_ns;
                self.push(
                    when,
                    Ev::Hold {
                        at,
                        request: p.request,
                    },
                );
            } else {
                self.stats.ring_full += 1;
            }
        }
        p.pos += 1;
        self.transmit(at, next, Packet::Probe(Box::new(p)));
    }
}
