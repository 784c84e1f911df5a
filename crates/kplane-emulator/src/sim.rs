//! The discrete-event engine: packets move host → switches → host through per-port egress
//! queues; INT metadata is pushed at each switch; sinks report.

use crate::EmulatorError;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::IpAddr;

use serde::Serialize;

use crate::detect::{Detection, Rule};
use crate::label::{PacketLabel, PortConfig};
use crate::report::{self, Hop, PacketInfo, ReportVersion};
use crate::routing::Routes;
use crate::tables::{TableId, Tables, Update};
use crate::topology::{NodeIdx, NodeKind, Topology};
use kplane_model::rng::Rng;
use kplane_p4::EntrySpec;
use kplane_p4::tx_util::{TxWindow, scale_q16};

/// Most hops a packet's INT stack holds in the emulator.
pub const MAX_STACK: usize = 16;

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    /// Egress queue capacity, packets.
    pub queue_capacity: usize,
    /// Switch processing delay, ns.
    pub processing_ns: u64,
    /// Up to this much more processing delay, uniform per packet and hop (ns): a real
    /// pipeline's latency varies by tens of ns (0: a fixed delay).
    pub processing_jitter_ns: u64,
    pub report_version: ReportVersion,
    /// INT-MX (postcard) mode: every switch reports every INT packet, no stack.
    pub mx: bool,
    pub hw_id: u8,
    pub ttl: u8,
    /// Ground-truth queue sampling period, ns (0: no sampling).
    pub sample_ns: u64,
    /// Number of report destinations (collectors); reports are spread by source address.
    pub collectors: usize,
    /// Added to virtual time in the switches' timestamps: 0 (virtual time from the epoch) or
    /// the wall clock at start, so that reports carry real Unix times (`--realtime`).
    pub clock_base_ns: u64,
    /// INT-label ground truth: the telemetry interval whose active ports are recorded.
    pub label_interval_ns: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            queue_capacity: 128,
            processing_ns: 500,
            processing_jitter_ns: 0,
            report_version: ReportVersion::V20,
            mx: false,
            hw_id: 0,
            ttl: 64,
            sample_ns: 1_000_000,
            collectors: 1,
            clock_base_ns: 0,
            label_interval_ns: 100_000_000,
        }
    }
}

/// A flow: a 5-tuple and the packets it still has to send.
#[derive(Clone, Debug)]
pub struct Flow {
    pub src: NodeIdx,
    pub dst: NodeIdx,
    pub info: PacketInfo,
    pub hash: u64,
    pub packet_bytes: u32,
    pub remaining: u64,
    pub gap_ns: u64,
    /// Packets of this flow still in the network; the slot is reused only at zero.
    pub in_flight: u32,
}

#[derive(Clone, Debug)]
struct IntState {
    on: bool,
    bitmap: u16,
    max_hop: u8,
    exceeded: bool,
    n: u8,
    hops: [Hop; MAX_STACK],
}

#[derive(Clone, Debug)]
struct Packet {
    flow: u32,
    bytes: u32,
    ttl: u8,
    ingress_ns: u64,
    in_port: u16,
    tx_start: u64,
    queue_occupancy: u32,
    int: IntState,
    label: PacketLabel,
}

#[derive(Debug, Default)]
struct Queue {
    node: NodeIdx,
    port: u16,
    link: usize,
    pkts: VecDeque<u32>,
    busy: bool,
    /// Egress tx utilisation, measured as the P4 program measures it.
    tx: TxWindow,
    util_pm: u32,
    /// Last sampled occupancy (truth).
    last_sample: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Arrive { node: u32, port: u16, pkt: u32 },
    Depart { queue: u32 },
    Emit { flow: u32 },
    Action { idx: u32 },
    Sample,
}

/// Things scheduled at a time.
#[derive(Clone, Debug)]
pub enum Action {
    LinkDown(usize),
    LinkUp(usize),
    /// A link drops each packet with this probability from now on.
    LinkLoss(usize, f64),
    NodeDown(NodeIdx),
    NodeUp(NodeIdx),
    Insert(EntrySpec),
    /// Deletes the entry with this spec's switch, match and priority.
    Remove(EntrySpec),
    /// Start a flow (its first packet now).
    StartFlow(Box<Flow>),
    /// A note for the ground truth.
    Truth(serde_json::Value),
    /// Calls the traffic generator back (Poisson arrivals and such).
    Traffic(u32),
}

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    QueueFull,
    LinkLoss,
    LinkDown,
    NodeDown,
    NoRoute,
    TtlExpired,
    Acl,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    pub packets_sent: u64,
    pub packets_delivered: u64,
    pub int_packets: u64,
    pub reports: u64,
    pub report_bytes: u64,
    /// INT packets whose report the sink's event detection suppressed.
    pub reports_suppressed: u64,
    /// INT-label: items written (labelling times), packets whose items the last hop
    /// exported, and option bytes carried, summed over every link a labelled packet crossed.
    pub labels: u64,
    pub label_exports: u64,
    pub label_bytes: u64,
    /// Bytes the switches sent out of their ports (INT-label options included).
    pub egress_bytes: u64,
    pub drops: HashMap<DropReason, u64>,
    pub events: u64,
}

impl Stats {
    pub fn dropped(&self) -> u64 {
        self.drops.values().sum()
    }
}

/// A report ready to send, and which collector it goes to.
#[derive(Clone, Debug)]
pub struct Report {
    pub collector: usize,
    pub bytes: Vec<u8>,
    /// Virtual time the switch sent it, ns.
    pub sent_ns: u64,
}

/// The ground truth a run writes (`--truth`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Truth {
    pub topology: String,
    pub events: Vec<serde_json::Value>,
    /// Per queue that was ever non-empty at a sample: (node id, port) and [t_ns, packets].
    pub queues: Vec<QueueSeries>,
    /// INT-label (with `label_config` entries): each (interval start, node id, egress port)
    /// that forwarded a packet in a telemetry interval of `label_interval_ns`.
    pub active_ports: Vec<(u64, u32, u16)>,
    /// INT-label: every labelling, (time, node id, egress port).
    pub labels: Vec<(u64, u32, u16)>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct QueueSeries {
    pub node: u32,
    pub port: u16,
    pub samples: Vec<(u64, usize)>,
}

/// A queue's congestion as it happened: from `start_ns` to `end_ns` every sample of its
/// occupancy was at or over a depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Congested {
    pub node: u32,
    pub port: u16,
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Truth {
    /// Every run of a queue's samples at or over `depth` packets that lasted `min_ns` or
    /// longer. Samples are `sample_ns` apart while a queue holds packets; a longer gap is a
    /// queue that was empty.
    pub fn congested(&self, depth: usize, min_ns: u64, sample_ns: u64) -> Vec<Congested> {
        let mut out = Vec::new();
        for q in &self.queues {
            let mut run: Option<(u64, u64)> = None;
            let mut close = |run: Option<(u64, u64)>| {
                if let Some((start_ns, end_ns)) = run
                    && end_ns - start_ns >= min_ns
                {
                    out.push(Congested {
                        node: q.node,
                        port: q.port,
                        start_ns,
                        end_ns,
                    });
                }
            };
            for &(t, len) in &q.samples {
                run = match run {
                    Some((start, last)) if len >= depth && t - last <= sample_ns => {
                        Some((start, t))
                    }
                    _ => {
                        close(run);
                        (len >= depth).then_some((t, t))
                    }
                };
            }
            close(run);
        }
        out
    }
}

/// Something that adds traffic when called back (see [`Action::Traffic`]).
pub trait Generator: Send {
    /// Called at `now`; may start flows and must return when to be called next (or None).
    fn fire(&mut self, sim: &mut Sim, now: u64) -> Option<u64>;
}

pub struct Sim {
    pub cfg: SimConfig,
    pub topo: Topology,
    routes: Routes,
    pub link_up: Vec<bool>,
    pub node_up: Vec<bool>,
    pub tables: Tables,
    now: u64,
    seq: u64,
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    packets: Vec<Packet>,
    free_packets: Vec<u32>,
    flows: Vec<Flow>,
    free_flows: Vec<u32>,
    queues: Vec<Queue>,
    /// First queue index of each node.
    queue_base: Vec<usize>,
    actions: Vec<Option<Action>>,
    generators: Vec<Option<Box<dyn Generator>>>,
    report_seq: HashMap<(u32, u8), u32>,
    /// Each sink's event-detection state, by node id.
    detection: HashMap<u32, Detection>,
    /// INT-label: whether any port has a `label_config` entry; each port's last labelling
    /// (Reg1) and the last telemetry interval it was seen active in, by (node id, port).
    labelling: bool,
    /// Base B's draws, apart from the traffic's: changing the algorithm keeps the traffic.
    label_rng: Rng,
    label_last: HashMap<(u32, u16), u64>,
    label_active: HashMap<(u32, u16), u64>,
    pub rng: Rng,
    pub stats: Stats,
    pub truth: Truth,
    reports: Vec<Report>,
    queue_series: HashMap<usize, usize>,
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("topology", &self.topo.name)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

fn ip_u64(ip: IpAddr) -> u64 {
    match ip {
        IpAddr::V4(v) => u32::from(v).into(),
        IpAddr::V6(v) => (u128::from(v) & 0xFFFF_FFFF) as u64,
    }
}

impl Sim {
    pub fn new(topo: Topology, cfg: SimConfig) -> Self {
        let link_up = vec![true; topo.links.len()];
        let node_up = vec![true; topo.nodes.len()];
        let routes = Routes::compute(&topo, &link_up, &node_up);
        let mut queues = Vec::new();
        let mut queue_base = Vec::new();
        for (n, node) in topo.nodes.iter().enumerate() {
            queue_base.push(queues.len());
            for (p, (li, _, _)) in node.ports.iter().enumerate() {
                queues.push(Queue {
                    node: n,
                    port: p as u16,
                    link: *li,
                    ..Queue::default()
                });
            }
        }
        let rng = Rng::new(cfg.seed);
        let label_rng = Rng::new(cfg.seed ^ 0x1ABE_1ABE);
        let mut sim = Self {
            truth: Truth {
                topology: topo.name.clone(),
                ..Truth::default()
            },
            cfg,
            topo,
            routes,
            link_up,
            node_up,
            tables: Tables::default(),
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            packets: Vec::new(),
            free_packets: Vec::new(),
            flows: Vec::new(),
            free_flows: Vec::new(),
            queues,
            queue_base,
            actions: Vec::new(),
            generators: Vec::new(),
            report_seq: HashMap::new(),
            detection: HashMap::new(),
            labelling: false,
            label_rng,
            label_last: HashMap::new(),
            label_active: HashMap::new(),
            rng,
            stats: Stats::default(),
            reports: Vec::new(),
            queue_series: HashMap::new(),
        };
        if sim.cfg.sample_ns > 0 {
            sim.push(sim.cfg.sample_ns, Ev::Sample);
        }
        sim
    }

    pub fn now(&self) -> u64 {
        self.now
    }

    fn push(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((at.max(self.now), self.seq, ev)));
    }

    /// Installs a table entry now (checked against the P4Info).
    pub fn insert(&mut self, spec: EntrySpec) -> Result<(), EmulatorError> {
        self.write(&[Update::Insert(spec)]).map_err(|(_, e)| e)
    }

    /// Applies a write batch now, all or nothing (see [`Tables::write`]).
    pub fn write(&mut self, updates: &[Update]) -> Result<(), (usize, EmulatorError)> {
        self.tables.write(updates)?;
        let detection = |u: &Update| match u {
            Update::Insert(s) | Update::Modify(s) | Update::Delete(s) => {
                s.table == "int_sink_detection"
            }
        };
        if updates.iter().any(detection) {
            // New detection rules start from fresh registers.
            self.detection.clear();
        }
        self.labelling = !self.tables.is_empty("label_config");
        Ok(())
    }

    /// Schedules `action` at `at` ns.
    pub fn schedule(&mut self, at: u64, action: Action) {
        self.actions.push(Some(action));
        let idx = (self.actions.len() - 1) as u32;
        self.push(at, Ev::Action { idx });
    }

    /// Registers a traffic generator, first called at `at`.
    pub fn add_generator(&mut self, at: u64, g: Box<dyn Generator>) {
        self.generators.push(Some(g));
        let idx = (self.generators.len() - 1) as u32;
        self.schedule(at, Action::Traffic(idx));
    }

    /// Records a ground-truth event at the current time.
    pub fn note(&mut self, mut event: serde_json::Value) {
        if let Some(o) = event.as_object_mut() {
            o.insert("t_ns".into(), self.now.into());
        }
        self.truth.events.push(event);
    }

    /// Starts a flow now; returns its index.
    pub fn start_flow(&mut self, flow: Flow) -> u32 {
        let idx = match self.free_flows.pop() {
            Some(i) => {
                self.flows[i as usize] = flow;
                i
            }
            None => {
                self.flows.push(flow);
                (self.flows.len() - 1) as u32
            }
        };
        let now = self.now;
        self.push(now, Ev::Emit { flow: idx });
        idx
    }

    /// A flow between two hosts, `packets` packets of `bytes` at `gap_ns` intervals.
    #[allow(clippy::too_many_arguments)]
    pub fn flow(
        &mut self,
        src: NodeIdx,
        dst: NodeIdx,
        protocol: u8,
        ports: (u16, u16),
        packets: u64,
        bytes: u32,
        gap_ns: u64,
    ) -> Flow {
        let ip = |n: NodeIdx| self.topo.nodes[n].ip.unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let info = PacketInfo {
            src: ip(src),
            dst: ip(dst),
            protocol,
            src_port: ports.0,
            dst_port: ports.1,
            bytes,
        };
        let hash = [
            ip_u64(info.src),
            ip_u64(info.dst),
            u64::from(ports.0) << 16 | u64::from(ports.1),
            protocol.into(),
        ]
        .into_iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, w| {
            (h ^ w).wrapping_mul(0x100_0000_01b3)
        });
        Flow {
            src,
            dst,
            info,
            hash,
            packet_bytes: bytes.clamp(64, 9000),
            remaining: packets,
            gap_ns,
            in_flight: 0,
        }
    }

    /// Takes the reports produced so far.
    pub fn take_reports(&mut self) -> Vec<Report> {
        std::mem::take(&mut self.reports)
    }

    /// Runs every event up to and including `until` ns.
    pub fn run_until(&mut self, until: u64) {
        while let Some(Reverse((t, _, ev))) = self.heap.peek().copied() {
            if t > until {
                break;
            }
            self.heap.pop();
            self.now = t;
            self.stats.events += 1;
            self.handle(ev);
        }
        self.now = self.now.max(until);
    }

    /// Whether anything is still scheduled.
    pub fn idle(&self) -> bool {
        self.heap.is_empty()
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Emit { flow } => self.emit(flow),
            Ev::Arrive { node, port, pkt } => self.arrive(node as usize, port, pkt),
            Ev::Depart { queue } => self.depart(queue as usize),
            Ev::Action { idx } => {
                if let Some(a) = self.actions.get_mut(idx as usize).and_then(Option::take) {
                    self.act(a);
                }
            }
            Ev::Sample => self.sample(),
        }
    }

    fn act(&mut self, a: Action) {
        match a {
            Action::LinkDown(l) | Action::LinkUp(l) => {
                let up = matches!(a, Action::LinkUp(_));
                if let Some(s) = self.link_up.get_mut(l) {
                    *s = up;
                }
                self.reroute();
            }
            Action::LinkLoss(l, loss) => {
                if let Some(link) = self.topo.links.get_mut(l) {
                    link.loss = loss;
                }
            }
            Action::NodeDown(n) | Action::NodeUp(n) => {
                let up = matches!(a, Action::NodeUp(_));
                if let Some(s) = self.node_up.get_mut(n) {
                    *s = up;
                }
                self.reroute();
            }
            Action::Insert(spec) => {
                if let Err(e) = self.insert(spec) {
                    tracing::warn!(error = %e, "scheduled table entry rejected");
                }
            }
            Action::Remove(spec) => {
                if let Err((_, e)) = self.write(&[Update::Delete(spec)]) {
                    tracing::warn!(error = %e, "scheduled table entry removal rejected");
                }
            }
            Action::StartFlow(f) => {
                self.start_flow(*f);
            }
            Action::Truth(v) => self.note(v),
            Action::Traffic(idx) => {
                let Some(mut g) = self.generators.get_mut(idx as usize).and_then(Option::take)
                else {
                    return;
                };
                let next = g.fire(self, self.now);
                self.generators[idx as usize] = Some(g);
                if let Some(at) = next {
                    let action = self.reschedule_traffic(idx);
                    self.push(at, Ev::Action { idx: action });
                }
            }
        }
    }

    fn reschedule_traffic(&mut self, idx: u32) -> u32 {
        self.actions.push(Some(Action::Traffic(idx)));
        (self.actions.len() - 1) as u32
    }

    /// Recomputes routes after a failure or recovery.
    pub fn reroute(&mut self) {
        self.routes = Routes::compute(&self.topo, &self.link_up, &self.node_up);
    }

    fn alloc_packet(&mut self, p: Packet) -> u32 {
        match self.free_packets.pop() {
            Some(i) => {
                self.packets[i as usize] = p;
                i
            }
            None => {
                self.packets.push(p);
                (self.packets.len() - 1) as u32
            }
        }
    }

    fn drop_packet(&mut self, pkt: u32, reason: DropReason) {
        *self.stats.drops.entry(reason).or_default() += 1;
        self.release(pkt);
    }

    /// A packet left the network: free it, and its flow once nothing of it is left.
    fn release(&mut self, pkt: u32) {
        self.free_packets.push(pkt);
        let f = self.packets[pkt as usize].flow;
        if let Some(flow) = self.flows.get_mut(f as usize) {
            debug_assert!(
                flow.in_flight > 0,
                "flow {f} released with nothing in flight"
            );
            flow.in_flight = flow.in_flight.saturating_sub(1);
            if flow.in_flight == 0 && flow.remaining == 0 {
                self.free_flows.push(f);
            }
        }
    }

    fn emit(&mut self, f: u32) {
        let Some(flow) = self.flows.get_mut(f as usize) else {
            return;
        };
        if flow.remaining == 0 {
            // A flow started with no packets: nothing will ever release it.
            if flow.in_flight == 0 {
                self.free_flows.push(f);
            }
            return;
        }
        flow.remaining -= 1;
        flow.in_flight += 1;
        let (src, bytes, gap, more) =
            (flow.src, flow.packet_bytes, flow.gap_ns, flow.remaining > 0);
        let p = Packet {
            flow: f,
            bytes,
            ttl: self.cfg.ttl,
            ingress_ns: 0,
            in_port: 0,
            tx_start: 0,
            queue_occupancy: 0,
            int: IntState {
                on: false,
                bitmap: 0,
                max_hop: 0,
                exceeded: false,
                n: 0,
                hops: [Hop::default(); MAX_STACK],
            },
            label: PacketLabel::default(),
        };
        let pkt = self.alloc_packet(p);
        self.stats.packets_sent += 1;
        // Hosts send straight onto their access link (no host queue).
        let &(li, peer, peer_port) = &self.topo.nodes[src].ports[0];
        let link = &self.topo.links[li];
        let tx = u64::from(bytes) * 8 * 1_000_000_000 / link.rate_bps.max(1);
        let at = self.now + tx + link.delay_ns;
        if !self.link_up[li] {
            self.drop_packet(pkt, DropReason::LinkDown);
        } else {
            self.push(
                at,
                Ev::Arrive {
                    node: peer as u32,
                    port: peer_port,
                    pkt,
                },
            );
        }
        if more {
            let now = self.now;
            self.push(now + gap, Ev::Emit { flow: f });
        }
    }

    fn key_values(&self, flow: &Flow) -> [u64; 5] {
        let i = &flow.info;
        [
            ip_u64(i.src),
            ip_u64(i.dst),
            i.protocol.into(),
            i.src_port.into(),
            i.dst_port.into(),
        ]
    }

    fn arrive(&mut self, node: NodeIdx, port: u16, pkt: u32) {
        if !self.node_up[node] {
            return self.drop_packet(pkt, DropReason::NodeDown);
        }
        let node_id = self.topo.nodes[node].id;
        let fi = self.packets[pkt as usize].flow as usize;
        let (flow_dst, flow_hash) = (self.flows[fi].dst, self.flows[fi].hash);
        let keys = self.key_values(&self.flows[fi]);
        if self
            .tables
            .lookup_id(TableId::DropAcl, node_id, &keys)
            .is_some_and(|e| e.spec.action == "acl_drop")
        {
            return self.drop_packet(pkt, DropReason::Acl);
        }
        let from_host = self.topo.nodes[node]
            .ports
            .get(port as usize)
            .is_some_and(|&(_, peer, _)| self.topo.nodes[peer].kind == NodeKind::Host);
        {
            let p = &mut self.packets[pkt as usize];
            p.ingress_ns = self.now;
            p.in_port = port;
            p.ttl = p.ttl.saturating_sub(1);
            if p.ttl == 0 {
                return self.drop_packet(pkt, DropReason::TtlExpired);
            }
        }
        // INT source: the first switch, for flows on the watchlist — INT-MD, or INT-label's
        // specific-flow telemetry.
        if from_host
            && !self.packets[pkt as usize].int.on
            && let Some(e) = self.tables.lookup_id(TableId::IntWatchlist, node_id, &keys)
        {
            let max_hop = e.param("max_hop") as u8;
            match e.spec.action.as_str() {
                "int_source" => {
                    let bitmap = e.param("instruction_bitmap") as u16;
                    let p = &mut self.packets[pkt as usize];
                    p.int.on = true;
                    p.int.bitmap = bitmap;
                    p.int.max_hop = max_hop.clamp(1, MAX_STACK as u8);
                    self.stats.int_packets += 1;
                }
                "int_label_specific" => self.packets[pkt as usize].label.offset = max_hop.max(1),
                _ => {}
            }
        }
        // Forwarding: an override entry wins over ECMP.
        let out = match self
            .tables
            .lookup_id(TableId::Ipv4Forward, node_id, &keys[1..2])
        {
            Some(e) if e.spec.action == "drop" => None,
            Some(e) if e.spec.action == "set_egress" => Some(e.param("port") as u16),
            _ => {
                let ports = self.routes.next_ports(node, flow_dst);
                (!ports.is_empty()).then(|| {
                    // ECMP: the flow's hash mixed with the switch's id (a per-switch seed, as
                    // switches are configured), so that successive switches choose
                    // independently — with a shared bit deciding at every hop, the choices
                    // polarise and half of a layer's links carry one edge's flows only.
                    let h =
                        mix64(flow_hash ^ u64::from(node_id).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    ports[(h % ports.len() as u64) as usize]
                })
            }
        };
        let Some(out) = out.filter(|p| (*p as usize) < self.topo.nodes[node].ports.len()) else {
            return self.drop_packet(pkt, DropReason::NoRoute);
        };
        let qi = self.queue_base[node] + out as usize;
        if self.queues[qi].pkts.len() >= self.cfg.queue_capacity {
            return self.drop_packet(pkt, DropReason::QueueFull);
        }
        self.packets[pkt as usize].queue_occupancy = self.queues[qi].pkts.len() as u32;
        self.queues[qi].pkts.push_back(pkt);
        if !self.queues[qi].busy {
            self.start_tx(qi);
        }
    }

    fn start_tx(&mut self, qi: usize) {
        let Some(&pkt) = self.queues[qi].pkts.front() else {
            self.queues[qi].busy = false;
            return;
        };
        let jitter = match self.cfg.processing_jitter_ns {
            0 => 0,
            j => self.rng.below(j + 1),
        };
        let start = {
            let p = &self.packets[pkt as usize];
            self.now.max(p.ingress_ns + self.cfg.processing_ns + jitter)
        };
        if self.labelling {
            self.label_at_egress(qi, pkt, start);
        }
        let link = &self.topo.links[self.queues[qi].link];
        let p = &mut self.packets[pkt as usize];
        p.tx_start = start;
        self.stats.egress_bytes += u64::from(p.bytes);
        let tx = u64::from(p.bytes) * 8 * 1_000_000_000 / link.rate_bps.max(1);
        self.queues[qi].busy = true;
        self.push(start + tx, Ev::Depart { queue: qi as u32 });
    }

    fn depart(&mut self, qi: usize) {
        let Some(pkt) = self.queues[qi].pkts.pop_front() else {
            self.queues[qi].busy = false;
            return;
        };
        let (node, port, li) = (
            self.queues[qi].node,
            self.queues[qi].port,
            self.queues[qi].link,
        );
        let link = self.topo.links[li].clone();
        {
            let q = &mut self.queues[qi];
            let bytes = u64::from(self.packets[pkt as usize].bytes);
            q.util_pm = q.tx.send(self.now / 1000, bytes, scale_q16(link.rate_bps));
        }
        let node_id = self.topo.nodes[node].id;
        let hop = {
            let p = &self.packets[pkt as usize];
            Hop {
                node: node_id,
                in_port: p.in_port,
                out_port: port,
                latency_ns: (p.tx_start - p.ingress_ns) as u32,
                queue_id: port as u8,
                queue_occupancy: p.queue_occupancy,
                ingress_ns: p.ingress_ns + self.cfg.clock_base_ns,
                egress_ns: p.tx_start + self.cfg.clock_base_ns,
                tx_utilization: self.queues[qi].util_pm,
            }
        };
        let (peer, peer_port) = if link.a.0 == node { link.b } else { link.a };
        let to_host = self.topo.nodes[peer].kind == NodeKind::Host;
        let int_on = self.packets[pkt as usize].int.on;
        if int_on {
            if self.cfg.mx {
                // The switch in front of the destination is the sink; the others' postcards
                // are intermediate reports (v2.0 I flag).
                self.postcard(pkt, &hop, !to_host);
            } else {
                let p = &mut self.packets[pkt as usize];
                if (p.int.n as usize) < (p.int.max_hop as usize).min(MAX_STACK) {
                    p.int.hops[p.int.n as usize] = hop;
                    p.int.n += 1;
                } else {
                    // Max hop count reached (a loop, or a long path): this switch reports the
                    // stack as an intermediate report and the packet carries no more INT.
                    p.int.exceeded = true;
                    self.intermediate_report(pkt, hop);
                }
            }
        }
        // The last hop exports the INT-label items and restores the packet.
        if to_host && !self.packets[pkt as usize].label.items.is_empty() {
            self.export_labels(pkt, node_id);
        }
        // Next packet on this port.
        self.start_tx(qi);
        if !self.link_up[li] {
            return self.drop_packet(pkt, DropReason::LinkDown);
        }
        if link.loss > 0.0 && self.rng.uniform() < link.loss {
            return self.drop_packet(pkt, DropReason::LinkLoss);
        }
        if to_host {
            if int_on && !self.cfg.mx {
                self.sink(pkt, hop);
            }
            self.stats.packets_delivered += 1;
            self.release(pkt);
        } else {
            self.push(
                self.now + link.delay_ns,
                Ev::Arrive {
                    node: peer as u32,
                    port: peer_port,
                    pkt,
                },
            );
        }
    }

    /// INT-label at an egress port, as the packet starts out of it at `now`: the ground truth
    /// of active ports, then the port's labelling decision ([`crate::label`]).
    fn label_at_egress(&mut self, qi: usize, pkt: u32, now: u64) {
        let (node, port) = (self.queues[qi].node, self.queues[qi].port);
        let node_id = self.topo.nodes[node].id;
        let interval = now / self.cfg.label_interval_ns.max(1);
        if self.label_active.insert((node_id, port), interval) != Some(interval) {
            self.truth.active_ports.push((
                interval * self.cfg.label_interval_ns.max(1),
                node_id,
                port,
            ));
        }
        let key = [u64::from(port)];
        let Some(cfg) = self
            .tables
            .lookup_id(TableId::LabelConfig, node_id, &key)
            .map(|r| {
                let shift = self
                    .tables
                    .lookup_id(TableId::LabelFrequency, node_id, &key);
                PortConfig::of(r, shift)
            })
        else {
            return;
        };
        let last = self.label_last.get(&(node_id, port)).copied();
        let rng = &mut self.label_rng;
        if cfg.labels(last, now, &self.packets[pkt as usize].label, || {
            rng.uniform()
        }) {
            let p = &self.packets[pkt as usize];
            let base = self.cfg.clock_base_ns;
            let item = Hop {
                node: node_id,
                in_port: p.in_port,
                out_port: port,
                latency_ns: now.saturating_sub(p.ingress_ns) as u32,
                queue_id: port as u8,
                queue_occupancy: p.queue_occupancy,
                ingress_ns: p.ingress_ns + base,
                egress_ns: now + base,
                tx_utilization: self.queues[qi].util_pm,
            };
            let p = &mut self.packets[pkt as usize];
            let before = p.label.bytes();
            p.label.items.push(item);
            p.bytes += p.label.bytes() - before;
            self.label_last.insert((node_id, port), now);
            self.stats.labels += 1;
            self.truth.labels.push((now, node_id, port));
        }
        self.stats.label_bytes += u64::from(self.packets[pkt as usize].label.bytes());
    }

    /// The last hop: the items go to the collector in a report, the packet loses the option.
    fn export_labels(&mut self, pkt: u32, node_id: u32) {
        let info = self.flows[self.packets[pkt as usize].flow as usize].info;
        let label = std::mem::take(&mut self.packets[pkt as usize].label);
        self.packets[pkt as usize].bytes -= label.bytes();
        let seq = self.next_seq(node_id);
        let bytes = report::label_report(self.cfg.hw_id, seq, node_id, &label, &info);
        self.stats.label_exports += 1;
        self.push_report(&info, bytes);
    }

    fn next_seq(&mut self, node: u32) -> u32 {
        let s = self.report_seq.entry((node, self.cfg.hw_id)).or_insert(0);
        let v = *s;
        // 22 bits in TR v2.0; 32 before.
        *s = if self.cfg.report_version == ReportVersion::V20 {
            (*s + 1) & 0x3F_FFFF
        } else {
            s.wrapping_add(1)
        };
        v
    }

    fn collector_for(&self, info: &PacketInfo) -> usize {
        (ip_u64(info.src) as usize) % self.cfg.collectors.max(1)
    }

    fn postcard(&mut self, pkt: u32, hop: &Hop, intermediate: bool) {
        let info = self.flows[self.packets[pkt as usize].flow as usize].info;
        let seq = self.next_seq(hop.node);
        let bytes = report::postcard(self.cfg.hw_id, seq, hop, &info, intermediate);
        self.push_report(&info, bytes);
    }

    fn push_report(&mut self, info: &PacketInfo, bytes: Vec<u8>) {
        self.stats.reports += 1;
        self.stats.report_bytes += bytes.len() as u64;
        let collector = self.collector_for(info);
        self.reports.push(Report {
            collector,
            bytes,
            sent_ns: self.now,
        });
    }

    /// The sink: event detection decides, then the report.
    fn sink(&mut self, pkt: u32, me: Hop) {
        let flow_idx = self.packets[pkt as usize].flow as usize;
        let flow_hash = self.flows[flow_idx].hash;
        let keys = self.key_values(&self.flows[flow_idx]);
        let report = match self
            .tables
            .lookup_id(TableId::IntSinkDetection, me.node, &keys)
        {
            None => true,
            Some(entry) => {
                let rule = Rule::of(entry);
                let int = &self.packets[pkt as usize].int;
                // The sink's own hop is the last one pushed.
                let upstream = &int.hops[..(int.n as usize).saturating_sub(1)];
                self.detection
                    .entry(me.node)
                    .or_default()
                    .decide(&rule, flow_hash, int.bitmap, upstream, &me)
            }
        };
        if !report {
            self.stats.reports_suppressed += 1;
            return;
        }
        // The sink's own hop is the last one pushed; it goes in the report's own metadata.
        let upstream = (self.packets[pkt as usize].int.n as usize).saturating_sub(1);
        self.report(pkt, &me, upstream, false);
    }

    fn intermediate_report(&mut self, pkt: u32, me: Hop) {
        let p = &mut self.packets[pkt as usize];
        p.int.on = false;
        let upstream = p.int.n as usize;
        self.report(pkt, &me, upstream, true);
    }

    /// Builds and queues `pkt`'s report from `me` with the first `upstream` pushed hops.
    fn report(&mut self, pkt: u32, me: &Hop, upstream: usize, intermediate: bool) {
        let seq = self.next_seq(me.node);
        let p = &self.packets[pkt as usize];
        let info = self.flows[p.flow as usize].info;
        let bytes = report::sink_report(
            self.cfg.report_version,
            p.int.bitmap,
            self.cfg.hw_id,
            seq,
            me,
            &p.int.hops[..upstream],
            &info,
            intermediate,
        );
        self.push_report(&info, bytes);
    }

    fn sample(&mut self) {
        let now = self.now;
        for (qi, q) in self.queues.iter_mut().enumerate() {
            let len = q.pkts.len();
            if len > 0 || q.last_sample > 0 {
                let series = match self.queue_series.get(&qi) {
                    Some(&s) => s,
                    None => {
                        self.truth.queues.push(QueueSeries {
                            node: self.topo.nodes[q.node].id,
                            port: q.port,
                            samples: Vec::new(),
                        });
                        let s = self.truth.queues.len() - 1;
                        self.queue_series.insert(qi, s);
                        s
                    }
                };
                self.truth.queues[series].samples.push((now, len));
            }
            q.last_sample = len;
        }
        let next = now + self.cfg.sample_ns;
        self.push(next, Ev::Sample);
    }

    /// Current occupancy of (switch node, port).
    pub fn queue_len(&self, node: NodeIdx, port: u16) -> usize {
        self.queues[self.queue_base[node] + port as usize]
            .pkts
            .len()
    }
}

/// A 64-bit finaliser (SplitMix64's): every input bit affects every output bit.
fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod ecmp_tests {
    use super::mix64;

    #[test]
    fn successive_switches_choose_ecmp_ports_independently() {
        // Two switches with two next ports each: a flow's choices must agree half the time,
        // not always (polarised) or never.
        let pick =
            |flow: u64, node: u64| mix64(flow ^ node.wrapping_mul(0x9E37_79B9_7F4A_7C15)) % 2;
        let flows = 10_000u64;
        let agree = (0..flows)
            .map(|i| i.wrapping_mul(0x2545_F491_4F6C_DD1D))
            .filter(|f| pick(*f, 3) == pick(*f, 7))
            .count() as f64
            / flows as f64;
        assert!((0.45..0.55).contains(&agree), "{agree}");
    }
}

#[cfg(test)]
mod truth_tests {
    use super::{Congested, QueueSeries, Truth};

    #[test]
    fn congestion_is_a_long_enough_run_of_samples_at_the_depth_and_an_unsampled_gap_is_empty() {
        let ms = 1_000_000;
        // Over 10 packets from 1 to 4 ms (4 ms long counting from the first sample: 3 ms),
        // then a dip, then 6–7 ms, then a gap (the queue emptied), then 9–13 ms.
        let samples = [
            (1, 12),
            (2, 10),
            (3, 40),
            (4, 11),
            (5, 9),
            (6, 20),
            (7, 20),
            (9, 30),
            (10, 30),
            (11, 30),
            (12, 30),
            (13, 30),
        ]
        .map(|(t, n)| (t * ms, n));
        let truth = Truth {
            queues: vec![QueueSeries {
                node: 7,
                port: 2,
                samples: samples.to_vec(),
            }],
            ..Truth::default()
        };
        let at = |start: u64, end: u64| Congested {
            node: 7,
            port: 2,
            start_ns: start * ms,
            end_ns: end * ms,
        };
        assert_eq!(
            truth.congested(10, 3 * ms, ms),
            [at(1, 4), at(9, 13)],
            "the 1 ms run at 6–7 ms is too short"
        );
        assert_eq!(truth.congested(10, ms, ms), [at(1, 4), at(6, 7), at(9, 13)]);
        assert_eq!(truth.congested(31, 0, ms), [at(3, 3)]);
    }
}
