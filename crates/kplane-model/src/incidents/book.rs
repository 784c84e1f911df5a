//! The correlation: breaches (alert episodes, knowledge anomalies) that share a root within a
//! time span become one incident.
//!
//! * A breach joins the open incident of its root ([`super::root`]); a flow's breach whose
//!   destination has an open incident (an attack on it) joins that one instead, and a flow's
//!   anomaly joins the open incident that holds the flow.
//! * An incident opened by a knowledge anomaly on an address (a destination or source: an
//!   attack, a scan, a heavy hitter) *reaches* the switches on its flows' paths. While one of
//!   its members is under way, a breach rooted at a switch or link it reaches joins it instead
//!   of opening an incident of its own, and open incidents with such roots that started no
//!   earlier than it are merged into it (news `merge`, their ids lead to it).
//! * An address's anomaly joins the active incident it is a *peer* of (`blast_radius.peers`:
//!   the addresses at the other end of at least half of an address's flows or bytes): one of
//!   its peers is one of the incident's addresses (a scanner joins its target's, an attacker
//!   its victim's), it is a peer of one of them (a scanned host its scanner's), or they share
//!   a peer (two attackers of one victim); and its type is one of the incident's address
//!   members' (an attacker of one host that scans another is two faults).
//! * A congested queue's incident reaches, the same way, the switches of the queues and links
//!   its anomaly explains (`blast_radius.collateral`: an incast's ports on the way to its
//!   target).
//! * A link's incident reaches the switches at the link's two ends the same way, and, when
//!   both ends are known, every breach whose path (for a path change, old or new) crosses
//!   the link: the reroutes around a cut link, wherever they diverge; and every path change
//!   whose old and new paths both reach one end of it (an equal-cost group towards a switch
//!   that lost or regained a link is hashed again). Those of the window the cut fell in, the
//!   one before the link's first silent window, are merged into it. It keeps claiming path
//!   changes while it is open (the reroute back when the cable returns); a link's anomaly
//!   joins the open incident of the link's opposite direction (a cut cable is seen from both
//!   ends), and an open link incident with an end at a switch it reaches is merged into it
//!   (a link silent because a cut elsewhere took its routes away).
//! * An incident is quiet once none of its members is open. It resolves `hold` after that
//!   (event time); a breach of its root within `hold` joins it again instead of opening a
//!   new one, so a flapping queue is one incident.
//! * Severity is the worst of its members'; its kind is that of its worst member (the first,
//!   among equals).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

use crate::results::{Anomaly, AnomalyPhase, AnomalyType, QueueKey, node_of, queue_entity};
use serde::Serialize;
use serde_json::{Value, json};

use super::episodes::Episode;
use super::root::{self, Root, RootKind};

/// Members kept per incident (the count goes on past it).
pub const MEMBERS_KEPT: usize = 20_000;
/// Flows kept per incident for its flow count, top flows and flow lookups.
pub const FLOWS_KEPT: usize = 20_000;
/// Distinct paths kept per incident.
pub const PATHS_KEPT: usize = 64;
/// Timeline steps kept per incident.
pub const TIMELINE_KEPT: usize = 1_000;
/// Flows an incident lists as its top affected.
pub const TOP_FLOWS: usize = 10;

/// `info` < `warning` < `critical`.
fn rank(severity: &str) -> u8 {
    match severity {
        "critical" => 2,
        "warning" => 1,
        _ => 0,
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// One breach in an incident.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Member {
    /// The episode's id (`GET /v1/events`) or the anomaly's (`GET /v1/anomalies/{id}`).
    pub id: String,
    /// `event` (an alert episode) or `anomaly` (the knowledge service's).
    pub source: &'static str,
    /// The episode's kind (`threshold`, `black_hole`, …) or the anomaly's type.
    pub kind: String,
    pub severity: &'static str,
    pub start_ns: i64,
    pub end_ns: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// Peak value (threshold breaches: latency or occupancy; anomalies: score).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_id: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress_port: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow: Option<String>,
}

impl Member {
    fn of_episode(e: &Episode) -> Self {
        Self {
            id: e.id.clone(),
            source: "event",
            kind: e.kind.to_string(),
            severity: e.severity,
            start_ns: e.start_ns,
            end_ns: e.end_ns,
            metric: e.subject.metric.clone(),
            peak: e.peak.map(|v| v as f64),
            threshold: e.threshold.map(|v| v as f64),
            node_id: e.subject.node_id,
            queue_id: e.subject.queue_id,
            egress_port: e.subject.egress_port,
            flow: root::flow_of(e),
        }
    }

    fn of_anomaly(a: &Anomaly) -> Self {
        let severity = match a.anomaly_type {
            AnomalyType::Ddos | AnomalyType::BlackHole | AnomalyType::RoutingLoop => "critical",
            _ => "warning",
        };
        Self {
            id: a.id.clone(),
            source: "anomaly",
            kind: a.anomaly_type.as_str().to_string(),
            severity,
            start_ns: a.start_ns,
            end_ns: a.end_ns,
            metric: Some("score".into()),
            peak: Some(a.score),
            threshold: Some(a.threshold),
            node_id: None,
            queue_id: None,
            egress_port: None,
            flow: (a.entity_kind == crate::results::EntityKind::Flow).then(|| a.entity.clone()),
        }
    }

    /// How far past its threshold it went (1 when it names none).
    fn ratio(&self) -> f64 {
        match (self.peak, self.threshold) {
            (Some(p), Some(t)) if t > 0.0 => p / t,
            _ => 1.0,
        }
    }

    /// What the incident is called when this member is its worst.
    fn trouble(&self) -> String {
        if self.source == "event" {
            root::trouble(&self.kind).to_string()
        } else {
            self.kind.clone()
        }
    }
}

/// One step of an incident's timeline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Step {
    pub time_ns: i64,
    /// `opened`, `joined`, `member_ended`, `quiet`, `reopened`, `resolved`.
    pub event: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
}

/// A flow an incident affects, by how far past its threshold it went.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowImpact {
    pub flow: String,
    pub ratio: f64,
    pub member: String,
}

/// What an incident reaches: for an address's, the switches on its flows' paths; for a
/// link's, the two ends (empty for other incidents); and the addresses of its address
/// members, their peers and their types.
#[derive(Clone, Debug, Default)]
struct Reach {
    nodes: BTreeSet<u32>,
    addresses: BTreeSet<IpAddr>,
    peers: BTreeSet<IpAddr>,
    types: BTreeSet<AnomalyType>,
    /// A link incident's link as its two end switches (lower id first), when both are known.
    links: BTreeSet<(u32, u32)>,
}

impl Reach {
    /// Whether a breach rooted at `root` (a switch or link) is within it.
    fn covers(&self, root: &Root) -> bool {
        matches!(root.kind, RootKind::Switch | RootKind::Link)
            && root
                .switch_id()
                .and_then(|n| n.parse().ok())
                .is_some_and(|n| self.nodes.contains(&n))
    }

    /// Whether a path crosses one of its links.
    fn crosses(&self, path: &[u32]) -> bool {
        path.windows(2)
            .any(|w| self.links.contains(&(w[0].min(w[1]), w[0].max(w[1]))))
    }

    /// Whether a breach with this root and these paths is within it.
    fn takes(&self, root: &Root, paths: &[&[u32]]) -> bool {
        self.covers(root) || paths.iter().any(|p| self.crosses(p))
    }

    /// Whether one of `other`'s links has an end within it: a link of a switch it reaches.
    /// A cut link's far end is not in its root (a link is named from its near end), so this
    /// finds it from either end.
    fn holds_an_end_of(&self, other: &Reach) -> bool {
        other
            .links
            .iter()
            .any(|(x, y)| self.nodes.contains(x) || self.nodes.contains(y))
    }

    /// Whether a reroute (its old and new paths) is its link's doing without crossing it:
    /// one of its paths reaches an end of the link. A switch's equal-cost group towards a
    /// switch that lost or regained a link is hashed again, so flows move between its other
    /// links too (a leaf's flows to the leaf of a cut uplink, from one healthy spine to
    /// another), and where paths are chosen end to end, flows move onto and off the other
    /// paths through the link's ends (a pod's flows, hashed again among the paths left).
    fn rehashed(&self, paths: &[&[u32]]) -> bool {
        paths.len() >= 2
            && self
                .links
                .iter()
                .any(|&(x, y)| paths.iter().any(|p| p.contains(&x) || p.contains(&y)))
    }

    /// Whether an address anomaly belongs here by its peers, with a type of its address
    /// members (an attacker of one victim that scans another host is two faults): one of its
    /// peers is one of the addresses (a scanner whose target is here, an attacker whose
    /// victim), it is a peer of one of them (a scanned host whose scanner is here, a victim
    /// whose attacker), or they share a peer (two attackers of one victim).
    fn holds_peer_of(&self, a: &Anomaly) -> bool {
        if !self.types.contains(&a.anomaly_type) {
            return false;
        }
        a.entity.parse().is_ok_and(|ip| self.peers.contains(&ip))
            || a.explanation
                .blast_radius
                .peers
                .iter()
                .any(|p| self.addresses.contains(p) || self.peers.contains(p))
    }

    /// Grows it by an address anomaly's blast radius, or a link anomaly's two ends.
    fn extend(&mut self, a: &Anomaly) {
        use crate::results::EntityKind;
        let b = &a.explanation.blast_radius;
        match a.entity_kind {
            EntityKind::Link => {
                let (near, far) = (
                    node_of(&a.entity),
                    b.reverse_link.as_deref().and_then(node_of),
                );
                self.nodes.extend(near.into_iter().chain(far));
                if let (Some(x), Some(y)) = (near, far) {
                    self.links.insert((x.min(y), x.max(y)));
                }
            }
            EntityKind::Destination | EntityKind::Source => {
                self.nodes.extend(b.nodes.iter().copied());
                self.addresses.extend(a.entity.parse::<IpAddr>().ok());
                self.peers.extend(b.peers.iter().copied());
                self.types.insert(a.anomaly_type);
            }
            // A congested queue reaches the switches of the queues and links it explains: an
            // incast's ports on the way to its target.
            EntityKind::Queue => self.nodes.extend(
                b.collateral
                    .iter()
                    .filter(|c| matches!(c.kind, EntityKind::Queue | EntityKind::Link))
                    .filter_map(|c| node_of(&c.entity)),
            ),
            EntityKind::Flow => {}
        }
    }

    fn absorb(&mut self, other: Reach) {
        self.nodes.extend(other.nodes);
        self.addresses.extend(other.addresses);
        self.peers.extend(other.peers);
        self.types.extend(other.types);
        self.links.extend(other.links);
    }
}

/// A path change's kind (an alert episode's).
const REROUTE: &str = "path_change";

/// How long before its first window a link failure's cut may have fallen: one window (the last
/// its link carried anything in). Nothing for any other anomaly.
fn cut_before(a: &Anomaly) -> i64 {
    if a.anomaly_type == AnomalyType::LinkFailure && a.windows > 0 {
        (a.last_ns - a.start_ns) / i64::from(a.windows)
    } else {
        0
    }
}

/// One incident.
#[derive(Clone, Debug)]
pub struct Incident {
    /// `<root kind>-<start ns>-<hash of the entity>` (URL-safe): stable across its updates.
    pub id: String,
    pub root: Root,
    pub kind: String,
    pub severity: &'static str,
    pub start_ns: i64,
    /// Event time of its latest member change.
    pub last_ns: i64,
    /// When it resolved (its last member's end).
    pub end_ns: Option<i64>,
    /// Since when no member has been open.
    quiet_since: Option<i64>,
    /// The member that went furthest past its threshold.
    peak: Option<Member>,
    members: BTreeMap<String, Member>,
    member_count: u64,
    open_members: BTreeSet<String>,
    flows: HashMap<String, FlowImpact>,
    flows_truncated: bool,
    paths: BTreeSet<Vec<u32>>,
    queues: BTreeSet<QueueKey>,
    timeline: Vec<Step>,
    timeline_dropped: u64,
    reach: Reach,
    /// The incident it was merged into.
    merged_into: Option<String>,
}

impl Incident {
    fn new(root: Root, first: &Member) -> Self {
        Self {
            id: format!(
                "{}-{}-{:08x}",
                root.kind.as_str(),
                first.start_ns,
                fnv1a(root.entity.as_bytes()) as u32
            ),
            root,
            kind: first.trouble(),
            severity: first.severity,
            start_ns: first.start_ns,
            last_ns: first.start_ns,
            end_ns: None,
            quiet_since: None,
            peak: None,
            members: BTreeMap::new(),
            member_count: 0,
            open_members: BTreeSet::new(),
            flows: HashMap::new(),
            flows_truncated: false,
            paths: BTreeSet::new(),
            queues: BTreeSet::new(),
            timeline: Vec::new(),
            timeline_dropped: 0,
            reach: Reach::default(),
            merged_into: None,
        }
    }

    pub fn is_open(&self) -> bool {
        self.end_ns.is_none()
    }

    /// Whether it had started by `time_ns` and has a member under way (not quiet in its hold):
    /// only then does it claim what it reaches.
    fn is_active_by(&self, time_ns: i64) -> bool {
        self.start_ns <= time_ns && !self.open_members.is_empty()
    }

    fn step(&mut self, time_ns: i64, event: &'static str, member: Option<&str>) {
        if self.timeline.len() == TIMELINE_KEPT {
            self.timeline_dropped += 1;
            return;
        }
        self.timeline.push(Step {
            time_ns,
            event,
            member: member.map(str::to_string),
        });
    }

    /// Adds or updates a member; true when the incident's headline (kind, severity) changed.
    fn absorb(&mut self, m: Member, paths: &[&[u32]]) -> bool {
        let t = m.end_ns.unwrap_or(m.start_ns).max(m.start_ns);
        self.last_ns = self.last_ns.max(t);
        // An open member past the kept ones is known by its open entry.
        let new = !self.members.contains_key(&m.id) && !self.open_members.contains(&m.id);
        if new {
            self.member_count += 1;
            self.step(m.start_ns, "joined", Some(&m.id));
        }
        if m.end_ns.is_none() {
            self.open_members.insert(m.id.clone());
            if self.quiet_since.take().is_some() {
                self.step(t, "reopened", Some(&m.id));
            }
        } else if self.open_members.remove(&m.id) || new {
            if !new || m.end_ns != Some(m.start_ns) {
                self.step(t, "member_ended", Some(&m.id));
            }
            if self.open_members.is_empty() {
                self.quiet_since = Some(self.quiet_since.map_or(t, |q| q.max(t)));
            }
        }
        for p in paths.iter().filter(|p| !p.is_empty()) {
            if self.paths.len() < PATHS_KEPT {
                self.paths.insert(p.to_vec());
            }
        }
        if let (Some(n), Some(q)) = (m.node_id, m.queue_id) {
            let port = m.egress_port.and_then(|p| u16::try_from(p).ok());
            self.queues.insert((n, port, q));
        }
        if let Some(flow) = &m.flow {
            self.note_flow(flow, &m);
        }
        let mut headline = false;
        if rank(m.severity) > rank(self.severity) {
            self.severity = m.severity;
            self.kind = m.trouble();
            headline = true;
        }
        if self.peak.as_ref().is_none_or(|p| m.ratio() > p.ratio()) {
            self.peak = Some(m.clone());
        }
        if new && self.members.len() == MEMBERS_KEPT {
            return headline;
        }
        self.members.insert(m.id.clone(), m);
        headline
    }

    fn note_flow(&mut self, flow: &str, m: &Member) {
        self.note_impact(FlowImpact {
            flow: flow.to_string(),
            ratio: m.ratio(),
            member: m.id.clone(),
        });
    }

    fn note_impact(&mut self, impact: FlowImpact) {
        if let Some(f) = self.flows.get_mut(&impact.flow) {
            if f.ratio < impact.ratio {
                *f = impact;
            }
        } else if self.flows.len() < FLOWS_KEPT {
            self.flows.insert(impact.flow.clone(), impact);
        } else {
            self.flows_truncated = true;
        }
    }

    /// Takes in everything `other` holds: its members, flows, paths, queues, reach and
    /// timeline.
    fn absorb_incident(&mut self, other: Incident, time_ns: i64) {
        self.step(time_ns, "merged", Some(&other.id));
        let kept = other.members.len() as u64;
        for m in other.members.into_values() {
            self.absorb(m, &[]);
        }
        // Members past the kept ones are counted, and the open ones known by id.
        self.member_count += other.member_count.saturating_sub(kept);
        for id in other.open_members {
            if self.open_members.insert(id) {
                self.quiet_since = None;
            }
        }
        for f in other.flows.into_values() {
            self.note_impact(f);
        }
        self.flows_truncated |= other.flows_truncated;
        for p in other.paths {
            if self.paths.len() < PATHS_KEPT {
                self.paths.insert(p);
            }
        }
        self.queues.extend(other.queues);
        self.reach.absorb(other.reach);
        self.start_ns = self.start_ns.min(other.start_ns);
        for s in other.timeline {
            self.step(s.time_ns, s.event, s.member.as_deref());
        }
        self.timeline.sort_by_key(|s| s.time_ns);
    }

    pub fn summary_text(&self) -> String {
        let flows = match self.flows.len() {
            0 => String::new(),
            n => format!(
                ", {n}{} flows affected",
                if self.flows_truncated { "+" } else { "" }
            ),
        };
        let peak = self
            .peak
            .as_ref()
            .filter(|p| p.threshold.is_some())
            .map(|p| {
                format!(
                    ", peak {} {:.1}× its threshold",
                    p.metric.as_deref().unwrap_or(&p.kind),
                    p.ratio()
                )
            })
            .unwrap_or_default();
        format!(
            "{} at {}: {} breach{}{flows}{peak}",
            self.kind.replace('_', " "),
            self.root,
            self.member_count,
            if self.member_count == 1 { "" } else { "es" }
        )
    }

    /// What lists and notifications carry.
    pub fn summary(&self) -> Value {
        json!({
            "id": self.id,
            "root": self.root,
            "kind": self.kind,
            "severity": self.severity,
            "state": match (&self.merged_into, self.is_open()) {
                (Some(_), _) => "merged",
                (None, true) => "open",
                (None, false) => "resolved",
            },
            "merged_into": self.merged_into,
            "start_ns": self.start_ns,
            "last_ns": self.last_ns,
            "end_ns": self.end_ns,
            "summary": self.summary_text(),
            "members": self.member_count,
            "open_members": self.open_members.len(),
            "flows": self.flows.len(),
            "flows_truncated": self.flows_truncated,
            "queues": self.queues.iter().copied().map(queue_entity).collect::<Vec<_>>(),
            "peak": self.peak,
        })
    }

    /// `GET /v1/incidents/{id}`: the summary with its evidence — every member kept, the top
    /// flows, the paths and the timeline.
    pub fn detail(&self) -> Value {
        let mut top: Vec<&FlowImpact> = self.flows.values().collect();
        top.sort_by(|a, b| {
            b.ratio
                .total_cmp(&a.ratio)
                .then_with(|| a.flow.cmp(&b.flow))
        });
        top.truncate(TOP_FLOWS);
        let mut v = self.summary();
        let extra = json!({
            "top_flows": top,
            "paths": self.paths,
            "member_list": self.members.values().collect::<Vec<_>>(),
            "members_truncated": self.member_count > self.members.len() as u64,
            "timeline": self.timeline,
            "timeline_dropped": self.timeline_dropped,
        });
        if let (Value::Object(v), Value::Object(extra)) = (&mut v, extra) {
            v.extend(extra);
        }
        v
    }

    pub fn has_member(&self, id: &str) -> bool {
        self.members.contains_key(id)
    }

    /// The members kept, by id.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }

    /// How many breaches joined it (kept or not).
    pub fn member_count(&self) -> u64 {
        self.member_count
    }
}

/// An incident's news: opened, changed (kind, severity, reopened, its member count reached a
/// power of two, another merged into it), resolved, or merged into another (it ends; its
/// summary names the other in `merged_into`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Open,
    Update,
    Resolve,
    Merge,
}

impl Change {
    /// Whether the incident ends with it.
    pub fn ends(self) -> bool {
        matches!(self, Self::Resolve | Self::Merge)
    }
}

#[derive(Clone, Debug)]
pub struct News {
    pub change: Change,
    /// [`Incident::summary`] at the change.
    pub incident: Arc<Value>,
}

/// The counters `/metrics` shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub opened: u64,
    pub resolved: u64,
    pub merged: u64,
    pub breaches: u64,
}

/// Every incident: the open ones and the latest `keep` resolved ones.
#[derive(Debug)]
pub struct IncidentBook {
    incidents: HashMap<String, Incident>,
    /// Root → its open incident.
    open: HashMap<Root, String>,
    /// Open member → its incident (a member's updates find it even when another root has
    /// claimed it).
    member_of: HashMap<String, String>,
    /// Flow → the open incident that holds it (for flow anomalies).
    flow_in: HashMap<String, String>,
    resolved: VecDeque<String>,
    /// Merged incident → the one it was merged into, the latest `keep`.
    merged: HashMap<String, String>,
    merged_order: VecDeque<String>,
    keep: usize,
    hold_ns: i64,
    /// The latest event time seen.
    now_ns: i64,
    pub counts: Counts,
}

impl IncidentBook {
    pub fn new(keep: usize, hold: std::time::Duration) -> Self {
        Self {
            incidents: HashMap::new(),
            open: HashMap::new(),
            member_of: HashMap::new(),
            flow_in: HashMap::new(),
            resolved: VecDeque::new(),
            merged: HashMap::new(),
            merged_order: VecDeque::new(),
            keep: keep.max(1),
            hold_ns: i64::try_from(hold.as_nanos()).unwrap_or(i64::MAX),
            now_ns: i64::MIN,
            counts: Counts::default(),
        }
    }

    /// Changes the time span and how many resolved incidents are kept.
    pub fn set_rules(&mut self, keep: usize, hold: std::time::Duration) {
        self.keep = keep.max(1);
        self.hold_ns = i64::try_from(hold.as_nanos()).unwrap_or(i64::MAX);
    }

    /// An alert episode's news.
    pub fn episode(&mut self, e: &Episode) -> Vec<News> {
        let member = Member::of_episode(e);
        let root = self
            .member_of
            .get(&e.id)
            .cloned()
            .map(Claim::Incident)
            .or_else(|| {
                let own = root::of_episode(e)?;
                let attacked = e
                    .subject
                    .dst_ip
                    .filter(|_| root::is_flow_level(e))
                    .map(|d| Root {
                        kind: RootKind::Destination,
                        entity: d.to_string(),
                    })
                    .and_then(|d| self.open.get(&d).cloned());
                Some(attacked.map_or(Claim::Root(own), Claim::Incident))
            });
        let Some(claim) = root else {
            return Vec::new();
        };
        // A reroute's old path is affected too: it is what broke.
        self.place(claim, member, &[&e.path, &e.previous_path], e.last_ns)
    }

    /// A knowledge anomaly's news.
    pub fn anomaly(&mut self, a: &Anomaly) -> Vec<News> {
        let member = Member::of_anomaly(a);
        let reverse = a
            .explanation
            .blast_radius
            .reverse_link
            .as_ref()
            .filter(|_| a.entity_kind == crate::results::EntityKind::Link)
            .map(|l| Root {
                kind: RootKind::Link,
                entity: l.clone(),
            });
        let own = root::of_anomaly(a);
        let claim = self
            .member_of
            .get(&a.id)
            .or_else(|| {
                self.flow_in
                    .get(&a.entity)
                    .filter(|_| member.flow.is_some())
            })
            .or_else(|| {
                if self.open.contains_key(&own) {
                    return None;
                }
                reverse
                    .and_then(|r| self.open.get(&r))
                    .or_else(|| self.peer_of(a))
            })
            .cloned()
            .map_or(Claim::Root(own), Claim::Incident);
        let member = Member {
            end_ns: (a.phase == AnomalyPhase::End).then_some(a.end_ns.unwrap_or(a.last_ns)),
            ..member
        };
        let mut news = self.place(claim, member, &[], a.last_ns);
        news.extend(self.reach_out(a));
        news
    }

    /// The active incident an address anomaly is a peer of (the earliest).
    fn peer_of(&self, a: &Anomaly) -> Option<&String> {
        self.earliest_open(|i| i.is_active_by(a.start_ns) && i.reach.holds_peer_of(a))
    }

    /// The earliest started open incident that `keep` keeps.
    fn earliest_open(&self, keep: impl Fn(&Incident) -> bool) -> Option<&String> {
        self.open
            .values()
            .map(|id| &self.incidents[id])
            .filter(|i| keep(i))
            .min_by(|a, b| a.start_ns.cmp(&b.start_ns).then_with(|| a.id.cmp(&b.id)))
            .map(|i| &i.id)
    }

    /// An address, link or queue anomaly grows its incident's reach; open incidents within it
    /// that started no earlier than it or the anomaly are merged into it.
    fn reach_out(&mut self, a: &Anomaly) -> Vec<News> {
        if a.entity_kind == crate::results::EntityKind::Flow {
            return Vec::new();
        }
        let Some(id) = self.incident_of(&a.id).map(|i| i.id.clone()) else {
            return Vec::new();
        };
        let Some(inc) = self.incidents.get_mut(&id).filter(|i| i.is_open()) else {
            return Vec::new();
        };
        inc.reach.extend(a);
        let inc = &self.incidents[&id];
        if inc.open_members.is_empty() {
            return Vec::new();
        }
        // A queue's anomaly covers its whole window, which began before the switch's first
        // breach; a link's silence is raised from the first window it was silent in, the
        // one after its cut, whose reroutes came before.
        let since = inc.start_ns.min(a.start_ns - cut_before(a));
        let mut within: Vec<(i64, String)> = self
            .open
            .iter()
            .filter(|(_, other)| **other != id)
            .map(|(_, other)| &self.incidents[other])
            .filter(|o| {
                let paths: Vec<&[u32]> = o.paths.iter().map(Vec::as_slice).collect();
                inc.reach.takes(&o.root, &paths)
                    || (o.kind == REROUTE && inc.reach.rehashed(&paths))
                    || inc.reach.holds_an_end_of(&o.reach)
            })
            .filter(|o| o.start_ns >= since)
            .map(|o| (o.start_ns, o.id.clone()))
            .collect();
        within.sort();
        let mut news = Vec::new();
        for (_, other) in within {
            news.extend(self.merge(&other, &id, a.last_ns));
        }
        news
    }

    /// Merges `from` into `into`: the merge news of the one, an update of the other.
    fn merge(&mut self, from: &str, into: &str, time_ns: i64) -> Vec<News> {
        if !self.incidents.contains_key(into) {
            return Vec::new();
        }
        let Some(mut gone) = self.incidents.remove(from) else {
            return Vec::new();
        };
        self.open.remove(&gone.root);
        for owner in self.member_of.values_mut().chain(self.flow_in.values_mut()) {
            if owner == from {
                *owner = into.to_string();
            }
        }
        gone.merged_into = Some(into.to_string());
        gone.end_ns = Some(time_ns.max(gone.start_ns));
        let ended = News {
            change: Change::Merge,
            incident: Arc::new(gone.summary()),
        };
        self.counts.merged += 1;
        self.merged.insert(from.to_string(), into.to_string());
        self.merged_order.push_back(from.to_string());
        while self.merged_order.len() > self.keep {
            if let Some(old) = self.merged_order.pop_front() {
                self.merged.remove(&old);
            }
        }
        let Some(inc) = self.incidents.get_mut(into) else {
            return vec![ended];
        };
        inc.absorb_incident(gone, time_ns);
        vec![
            ended,
            News {
                change: Change::Update,
                incident: Arc::new(inc.summary()),
            },
        ]
    }

    fn place(&mut self, claim: Claim, member: Member, paths: &[&[u32]], time_ns: i64) -> Vec<News> {
        self.counts.breaches += 1;
        let mut news = self.advance(time_ns);
        let id = match claim {
            Claim::Incident(id) if self.incidents.get(&id).is_some_and(Incident::is_open) => id,
            Claim::Incident(_) => return news,
            Claim::Root(root) => match self
                .open
                .get(&root)
                .or_else(|| self.reaching(&root, paths, &member))
            {
                Some(id) => id.clone(),
                None => {
                    let inc = Incident::new(root.clone(), &member);
                    let id = inc.id.clone();
                    self.open.insert(root, id.clone());
                    self.incidents.insert(id.clone(), inc);
                    self.counts.opened += 1;
                    if let Some(i) = self.incidents.get_mut(&id) {
                        i.step(member.start_ns, "opened", None);
                    }
                    id
                }
            },
        };
        let Some(inc) = self.incidents.get_mut(&id) else {
            return news;
        };
        let opened = inc.member_count == 0;
        let reopened = inc.quiet_since.is_some() && member.end_ns.is_none();
        if member.end_ns.is_none() {
            self.member_of.insert(member.id.clone(), id.clone());
        } else {
            self.member_of.remove(&member.id);
        }
        if let Some(flow) = &member.flow
            && inc.flows.len() < FLOWS_KEPT
        {
            self.flow_in.insert(flow.clone(), id.clone());
        }
        let before = inc.member_count;
        let headline = inc.absorb(member, paths);
        let grew = inc.member_count != before && inc.member_count.is_power_of_two();
        let change = if opened {
            Some(Change::Open)
        } else if headline || reopened || grew {
            Some(Change::Update)
        } else {
            None
        };
        if let Some(change) = change {
            news.push(News {
                change,
                incident: Arc::new(inc.summary()),
            });
        }
        news
    }

    /// The active incident whose reach holds `root`, or whose link one of `paths` crosses
    /// or a reroute's paths were hashed again around (the earliest). A link's incident also
    /// claims path changes while it is open, quiet in its hold: the flows moving back when
    /// the cable returns.
    fn reaching(&self, root: &Root, paths: &[&[u32]], member: &Member) -> Option<&String> {
        let t = member.start_ns;
        let reroute = member.kind == REROUTE;
        self.earliest_open(|i| {
            (i.reach.takes(root, paths) || (reroute && i.reach.rehashed(paths)))
                && (i.is_active_by(t)
                    || (reroute && i.root.kind == RootKind::Link && i.start_ns <= t))
        })
    }

    /// Moves the clock to `now_ns` (event time) and resolves what has been quiet for `hold`.
    pub fn advance(&mut self, now_ns: i64) -> Vec<News> {
        self.now_ns = self.now_ns.max(now_ns);
        let (now, hold) = (self.now_ns, self.hold_ns);
        self.resolve_where(|q| now.saturating_sub(q) >= hold)
    }

    /// Resolves every quiet incident, whatever the clock says: for when the breaches have
    /// stopped coming altogether, so event time no longer moves (the clock stays where it was,
    /// so late breaches are still judged by their own times).
    pub fn resolve_quiet(&mut self) -> Vec<News> {
        self.resolve_where(|_| true)
    }

    fn resolve_where(&mut self, due: impl Fn(i64) -> bool) -> Vec<News> {
        let due: Vec<String> = self
            .open
            .values()
            .filter(|id| self.incidents[*id].quiet_since.is_some_and(&due))
            .cloned()
            .collect();
        due.into_iter().filter_map(|id| self.resolve(&id)).collect()
    }

    fn resolve(&mut self, id: &str) -> Option<News> {
        let inc = self.incidents.get_mut(id)?;
        let end = inc.quiet_since?;
        inc.end_ns = Some(end);
        inc.step(end, "resolved", None);
        self.open.remove(&inc.root);
        for f in inc.flows.keys() {
            if self.flow_in.get(f).is_some_and(|i| i == id) {
                self.flow_in.remove(f);
            }
        }
        let news = News {
            change: Change::Resolve,
            incident: Arc::new(inc.summary()),
        };
        self.counts.resolved += 1;
        self.resolved.push_back(id.to_string());
        while self.resolved.len() > self.keep {
            if let Some(old) = self.resolved.pop_front() {
                self.incidents.remove(&old);
            }
        }
        Some(news)
    }

    /// Matching incidents, most recently started first.
    pub fn list(&self, keep: impl Fn(&Incident) -> bool, limit: usize) -> Vec<&Incident> {
        let mut v: Vec<&Incident> = self.incidents.values().filter(|i| keep(i)).collect();
        v.sort_by(|a, b| b.start_ns.cmp(&a.start_ns).then_with(|| a.id.cmp(&b.id)));
        v.truncate(limit);
        v
    }

    /// An incident by id; a merged one's id leads to the incident it was merged into.
    pub fn get(&self, id: &str) -> Option<&Incident> {
        let mut id = id;
        // Merged into one that was merged in turn: follow the chain (bounded by `keep`).
        for _ in 0..=self.merged.len() {
            match self.incidents.get(id) {
                Some(i) => return Some(i),
                None => id = self.merged.get(id)?,
            }
        }
        None
    }

    /// The incident a member (episode or anomaly id) belongs to, if kept.
    pub fn incident_of(&self, member: &str) -> Option<&Incident> {
        self.member_of
            .get(member)
            .and_then(|id| self.incidents.get(id))
            .or_else(|| self.incidents.values().find(|i| i.has_member(member)))
    }

    pub fn open_count(&self) -> usize {
        self.open.len()
    }
}

/// Where a breach goes: an incident that already claimed it (or its flow or destination), or
/// its own root's.
enum Claim {
    Incident(String),
    Root(Root),
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::results::{Alert, AlertKind};

    use super::*;
    use crate::incidents::episodes::EpisodeBook;

    const S: i64 = 1_000_000_000;

    fn latency(t: i64, node: u32, src: u8, kind: AlertKind) -> Alert {
        Alert {
            time_ns: t,
            kind: Some(kind),
            src_ip: Some(format!("10.0.0.{src}").parse().unwrap()),
            dst_ip: Some("10.0.1.1".parse().unwrap()),
            src_port: Some(1000),
            dst_port: Some(80),
            protocol: Some(6),
            node_id: Some(node),
            metric: Some("hop_latency_ns".into()),
            value: Some(5_000),
            threshold: Some(1_000),
            path: vec![1, node, 9],
            ..Alert::default()
        }
    }

    /// Episodes of `alerts` fed to a book with a 10 s hold.
    fn feed(alerts: &[Alert]) -> (IncidentBook, Vec<News>) {
        let mut eps = EpisodeBook::new(1_000);
        let mut book = IncidentBook::new(100, Duration::from_secs(10));
        let mut news = Vec::new();
        for a in alerts {
            if let Some((_, e)) = eps.apply(a) {
                news.extend(book.episode(&e));
            }
        }
        (book, news)
    }

    #[test]
    fn flows_slowed_by_one_switch_are_one_incident_with_every_flow_and_member() {
        let mut alerts: Vec<Alert> = (1..=40)
            .map(|src| latency(src as i64 * S / 10, 5, src, AlertKind::Threshold))
            .collect();
        alerts.push(latency(5 * S, 7, 1, AlertKind::Threshold));
        let (book, news) = feed(&alerts);
        let all = book.list(|_| true, 10);
        assert_eq!(all.len(), 2, "switch 5 and switch 7");
        let five = all.iter().find(|i| i.root == Root::switch(5)).unwrap();
        assert_eq!(five.member_count, 40);
        assert_eq!(five.flows.len(), 40);
        assert_eq!(five.kind, "congestion");
        assert_eq!(five.severity, "critical", "5× the threshold");
        let detail = five.detail();
        assert_eq!(detail["member_list"].as_array().unwrap().len(), 40);
        assert_eq!(detail["top_flows"].as_array().unwrap().len(), TOP_FLOWS);
        // Opened once, then updates only when the count reached a power of two.
        let five_news: Vec<Change> = news
            .iter()
            .filter(|n| n.incident["id"] == five.id.as_str())
            .map(|n| n.change)
            .collect();
        assert_eq!(five_news[0], Change::Open);
        assert_eq!(
            five_news.len(),
            1 + 5,
            "2, 4, 8, 16, 32 members: {five_news:?}"
        );
    }

    #[test]
    fn an_incident_resolves_after_its_hold_and_a_breach_within_it_joins_again() {
        let (mut book, _) = feed(&[
            latency(0, 5, 1, AlertKind::Threshold),
            latency(S, 5, 1, AlertKind::ThresholdCleared),
            // Within the 10 s hold: the same incident.
            latency(5 * S, 5, 2, AlertKind::Threshold),
            latency(6 * S, 5, 2, AlertKind::ThresholdCleared),
        ]);
        assert_eq!(book.list(|_| true, 10).len(), 1);
        assert!(book.advance(15 * S).is_empty(), "quiet for 9 s only");
        let news = book.advance(16 * S);
        assert_eq!(news.len(), 1);
        assert_eq!(news[0].change, Change::Resolve);
        assert_eq!(news[0].incident["end_ns"], 6 * S);
        assert_eq!(news[0].incident["members"], 2);
        // After it resolved, the root's next breach is a new incident.
        let mut eps = EpisodeBook::new(10);
        let (_, e) = eps
            .apply(&latency(30 * S, 5, 3, AlertKind::Threshold))
            .unwrap();
        let news = book.episode(&e);
        assert_eq!(news[0].change, Change::Open);
        assert_eq!(book.list(|_| true, 10).len(), 2);
        assert_eq!(book.counts.opened, 2);
        assert_eq!(book.counts.resolved, 1);
    }

    fn attack(t: i64, phase: AnomalyPhase) -> Anomaly {
        Anomaly {
            id: "destination:10.0.1.1:0".into(),
            entity_kind: crate::results::EntityKind::Destination,
            entity: "10.0.1.1".into(),
            anomaly_type: AnomalyType::Ddos,
            confidence: 0.9,
            score: 30.0,
            threshold: 3.0,
            start_ns: 0,
            end_ns: (phase == AnomalyPhase::End).then_some(t),
            last_ns: t,
            windows: 1,
            detected_ns: t,
            phase,
            model_version: 1,
            explanation: Default::default(),
            recommendations: Vec::new(),
            settled: false,
        }
    }

    #[test]
    fn an_attacked_destination_claims_the_breaches_of_flows_to_it() {
        let mut book = IncidentBook::new(100, Duration::from_secs(10));
        let news = book.anomaly(&attack(0, AnomalyPhase::Start));
        assert_eq!(news[0].change, Change::Open);
        let mut eps = EpisodeBook::new(100);
        for src in 1..=5 {
            let (_, e) = eps
                .apply(&latency(S, 5, src, AlertKind::Threshold))
                .unwrap();
            book.episode(&e);
        }
        let all = book.list(|_| true, 10);
        assert_eq!(
            all.len(),
            1,
            "the queue's breaches are the attack's collateral"
        );
        assert_eq!(all[0].kind, "ddos");
        assert_eq!(all[0].member_count, 6);
        // A flow anomaly about one of its flows joins it too.
        let flow = all[0].flows.keys().next().unwrap().clone();
        let id = all[0].id.clone();
        let mut f = attack(S, AnomalyPhase::Start);
        f.id = "flow:x:1".into();
        f.entity_kind = crate::results::EntityKind::Flow;
        f.entity = flow;
        f.anomaly_type = AnomalyType::BlackHole;
        book.anomaly(&f);
        assert_eq!(book.get(&id).unwrap().member_count, 7);
        assert_eq!(book.incident_of("flow:x:1").unwrap().id, id);
    }

    /// An address anomaly whose flows go to or come from `peers`, its peers.
    fn address(kind: crate::results::EntityKind, ip: &str, t: i64, peers: &[&str]) -> Anomaly {
        use crate::results::EntityKind;
        let mut a = attack(t, AnomalyPhase::Start);
        a.id = format!("{}:{ip}:{t}", kind.as_str());
        a.entity_kind = kind;
        a.entity = ip.into();
        a.start_ns = t;
        a.explanation.blast_radius.nodes = vec![1, 5, 9];
        a.explanation.blast_radius.peers = peers.iter().map(|p| p.parse().unwrap()).collect();
        a.explanation.blast_radius.flows = peers
            .iter()
            .map(|p| {
                let (src, dst) = match kind {
                    EntityKind::Source => (ip, *p),
                    _ => (*p, ip),
                };
                (src, dst)
            })
            .map(|(src, dst)| crate::results::FlowRef {
                src_ip: Some(src.parse().unwrap()),
                dst_ip: Some(dst.parse().unwrap()),
                src_port: Some(1),
                dst_port: Some(80),
                protocol: Some(6),
                path: vec![1, 5, 9],
            })
            .collect();
        a
    }

    /// A path change at `t` of a flow from 10.0.0.`src`, from path `old` to `new`.
    fn reroute(
        book: &mut IncidentBook,
        eps: &mut EpisodeBook,
        t: i64,
        src: u8,
        old: &[u32],
        new: &[u32],
    ) {
        let mut a = latency(t, 5, src, AlertKind::PathChange);
        (a.previous_path, a.path) = (old.to_vec(), new.to_vec());
        let (_, e) = eps.apply(&a).unwrap();
        book.episode(&e);
    }

    fn link(id: &str, entity: &str, reverse: Option<&str>, t: i64) -> Anomaly {
        let mut a = attack(t, AnomalyPhase::Start);
        a.id = id.into();
        a.entity_kind = crate::results::EntityKind::Link;
        a.entity = entity.into();
        a.start_ns = t;
        a.anomaly_type = AnomalyType::LinkFailure;
        a.explanation.blast_radius.reverse_link = reverse.map(str::to_string);
        a
    }

    #[test]
    fn an_attack_takes_in_the_collateral_on_its_paths_before_and_after_it_is_raised() {
        use crate::results::EntityKind;
        let mut book = IncidentBook::new(100, Duration::from_secs(10));
        let mut eps = EpisodeBook::new(100);
        // Long before the attack: switch 9 congested on its own.
        let mut before = latency(0, 9, 1, AlertKind::Threshold);
        before.dst_ip = Some("10.0.2.2".parse().unwrap());
        let (_, e) = eps.apply(&before).unwrap();
        book.episode(&e);
        // In the attack's first window, before it is raised: a link on its path.
        book.anomaly(&link("link:5:1:20", "5:1", None, 20 * S));
        let collateral = book.list(|i| i.root.kind == RootKind::Link, 10)[0]
            .id
            .clone();
        // The attack is raised: the link's incident is merged into it, switch 9's is not.
        let news = book.anomaly(&address(
            EntityKind::Destination,
            "10.0.1.1",
            20 * S,
            &["10.0.0.7"],
        ));
        let merge = news.iter().find(|n| n.change == Change::Merge).unwrap();
        assert_eq!(merge.incident["id"], collateral.as_str());
        assert_eq!(merge.incident["state"], "merged");
        let attack_id = merge.incident["merged_into"].as_str().unwrap().to_string();
        assert_eq!(
            book.get(&collateral).unwrap().id,
            attack_id,
            "its id leads on"
        );
        assert_eq!(book.counts.merged, 1);
        // After it is raised: a queue breach on its path (no flow) and the attacker's own
        // anomaly join it; a switch off its paths does not.
        let mut q = latency(21 * S, 5, 3, AlertKind::Threshold);
        (q.src_ip, q.dst_ip) = (None, None);
        q.metric = Some("queue_occupancy".into());
        let (_, e) = eps.apply(&q).unwrap();
        book.episode(&e);
        book.anomaly(&address(
            EntityKind::Source,
            "10.0.0.7",
            21 * S,
            &["10.0.1.1"],
        ));
        let mut off = latency(21 * S, 4, 4, AlertKind::Threshold);
        off.dst_ip = Some("10.0.2.2".parse().unwrap());
        let (_, e) = eps.apply(&off).unwrap();
        book.episode(&e);
        let all = book.list(|_| true, 10);
        let roots: Vec<String> = all.iter().map(|i| i.root.to_string()).collect();
        assert_eq!(
            roots,
            ["switch 4", "destination 10.0.1.1", "switch 9"],
            "{roots:?}"
        );
        let attack = book.get(&attack_id).unwrap();
        assert_eq!(attack.kind, "ddos");
        assert_eq!(attack.member_count, 4, "link, attack, queue, attacker");
        assert!(attack.timeline.iter().any(|s| s.event == "merged"));

        // Once every member has ended, it claims nothing more while it waits out its hold: a
        // link failing on its paths later is an incident of its own.
        let ids: Vec<String> = attack.open_members.iter().cloned().collect();
        for id in ids {
            let mut end = address(EntityKind::Destination, "10.0.1.1", 20 * S, &[]);
            end.id = id;
            end.phase = AnomalyPhase::End;
            end.end_ns = Some(23 * S);
            end.last_ns = 23 * S;
            book.anomaly(&end);
        }
        book.anomaly(&link("link:9:2:25", "9:2", None, 25 * S));
        let link = book.list(|i| i.root.kind == RootKind::Link, 10);
        assert_eq!(link.len(), 1, "its own incident");
    }

    #[test]
    fn an_incast_is_one_incident_at_its_targets_switch_with_the_ports_on_its_way() {
        use crate::results::{Collateral, EntityKind};
        let mut book = IncidentBook::new(100, Duration::from_secs(10));
        let mut eps = EpisodeBook::new(100);
        let mut slow = |book: &mut IncidentBook, t: i64, node: u32, src: u8| {
            let (_, e) = eps
                .apply(&latency(t, node, src, AlertKind::Threshold))
                .unwrap();
            book.episode(&e)
        };
        // Long before: switch 2 congested on its own.
        slow(&mut book, 0, 2, 9);
        // In the window of the burst: the target's switch 5 and, a little later, spine 1 on
        // the answers' way.
        slow(&mut book, 20 * S + S / 2, 5, 1);
        slow(&mut book, 20 * S + 6 * S / 10, 1, 2);
        assert_eq!(book.open_count(), 3);
        // The knowledge service raises the queue towards the target, explaining the ports the
        // answers met on their way (spine 1's, switch 7's uplink).
        let mut q = attack(21 * S, AnomalyPhase::Start);
        q.id = "queue:5:3/3:21".into();
        q.entity_kind = EntityKind::Queue;
        q.entity = "5:3/3".into();
        q.anomaly_type = AnomalyType::Congestion;
        q.start_ns = 20 * S;
        q.explanation.blast_radius.collateral = vec![
            Collateral {
                kind: EntityKind::Queue,
                entity: "1:0/0".into(),
                anomaly_type: AnomalyType::Congestion,
            },
            Collateral {
                kind: EntityKind::Link,
                entity: "7:4".into(),
                anomaly_type: AnomalyType::Unknown,
            },
        ];
        let news = book.anomaly(&q);
        assert_eq!(
            news.iter().filter(|n| n.change == Change::Merge).count(),
            1,
            "spine 1's, not switch 2's from before"
        );
        // Later breaches on the way join it.
        slow(&mut book, 21 * S, 7, 3);
        let open = book.list(|i| i.is_open(), 10);
        let roots: Vec<String> = open.iter().map(|i| i.root.to_string()).collect();
        assert_eq!(roots, ["switch 5", "switch 2"], "{roots:?}");
        assert_eq!(open[0].member_count, 4, "5, 1, the queue, 7");
    }

    #[test]
    fn a_cut_cable_seen_from_both_ends_is_one_incident() {
        let mut book = IncidentBook::new(100, Duration::from_secs(10));
        book.anomaly(&link("link:5:1:0", "5:1", Some("8:2"), 0));
        book.anomaly(&link("link:8:2:0", "8:2", Some("5:1"), 0));
        // A flow rerouted at switch 5 before the link's start, and one where the link leaves
        // switch 8 after it.
        let mut eps = EpisodeBook::new(100);
        for (t, src, at) in [(-S / 2, 1, 5), (2 * S, 2, 8)] {
            let mut a = latency(t, at, src, AlertKind::PathChange);
            a.previous_path = vec![1, at, 5];
            a.path = vec![1, at, 6, 5];
            let (_, e) = eps.apply(&a).unwrap();
            book.episode(&e);
        }
        let all = book.list(|_| true, 10);
        assert_eq!(
            all.len(),
            2,
            "the path change before the link's start is its own"
        );
        let link = all.iter().find(|i| i.root.kind == RootKind::Link).unwrap();
        assert_eq!(link.member_count, 3);
        assert_eq!(link.kind, "link_failure");
    }

    #[test]
    fn addresses_join_through_their_peers_whichever_is_raised_first() {
        use crate::results::EntityKind::{Destination, Source};
        let mut book = IncidentBook::new(100, Duration::from_secs(10));
        let scan = |kind, ip, peers| Anomaly {
            anomaly_type: AnomalyType::PortScan,
            ..address(kind, ip, 20 * S, peers)
        };
        // A scanner raised before its target, whose listed flows are its usual clients.
        book.anomaly(&scan(Source, "10.0.0.15", &["10.0.0.4"]));
        book.anomaly(&scan(Destination, "10.0.0.4", &[]));
        // Two attackers of one victim raised before it, the victim with no peer.
        book.anomaly(&address(Source, "10.0.0.10", 20 * S, &["10.0.0.8"]));
        book.anomaly(&address(Source, "10.0.0.14", 20 * S, &["10.0.0.8"]));
        book.anomaly(&address(Destination, "10.0.0.8", 20 * S, &[]));
        // A host talking to neither: its own.
        book.anomaly(&address(Source, "10.0.0.3", 20 * S, &["10.0.0.1"]));
        // One of the attackers, still flooding the victim, scans another host: its own.
        let mut scanner = scan(Source, "10.0.0.14", &["10.0.0.5", "10.0.0.8"]);
        scanner.id = "source:10.0.0.14:scan".into();
        book.anomaly(&scanner);
        let all = book.list(|_| true, 10);
        let members = |root: &str| {
            all.iter()
                .find(|i| i.root.to_string() == root)
                .map(|i| i.member_count)
        };
        assert_eq!(
            all.len(),
            4,
            "{:?}",
            all.iter().map(|i| i.root.to_string()).collect::<Vec<_>>()
        );
        assert_eq!(members("source 10.0.0.15"), Some(2));
        assert_eq!(members("source 10.0.0.10"), Some(3));
        assert_eq!(members("source 10.0.0.3"), Some(1));
        assert!(
            all.iter()
                .any(|i| i.kind == "port_scan" && i.has_member("source:10.0.0.14:scan"))
        );
    }

    #[test]
    fn a_cut_link_takes_the_reroutes_that_crossed_it_or_were_hashed_again_around_it() {
        let mut book = IncidentBook::new(100, Duration::from_secs(10));
        let mut eps = EpisodeBook::new(100);
        // Core 2 - aggregation 17 fails: flows through it move at the switch before it (5),
        // before the link's anomaly is raised at its window's end.
        let (via_2, via_1) = ([7, 5, 2, 17, 20], [7, 5, 1, 17, 20]);
        reroute(&mut book, &mut eps, S / 100, 1, &via_2, &via_1);
        book.anomaly(&link("link:17:3:0", "17:3", Some("2:3"), 0));
        book.anomaly(&link("link:2:3:0", "2:3", Some("17:3"), 0));
        // While it is down, another flow through it moves at switch 9; one that never crossed
        // it, also diverging at 9, is not its doing.
        let (down_2, down_1) = ([12, 9, 17, 2, 19], [12, 9, 17, 1, 19]);
        reroute(&mut book, &mut eps, 4 * S, 2, &down_2, &down_1);
        reroute(
            &mut book,
            &mut eps,
            4 * S,
            3,
            &[12, 9, 3, 19],
            &[12, 9, 4, 19],
        );
        let mut end = link("link:17:3:0", "17:3", Some("2:3"), 0);
        end.phase = AnomalyPhase::End;
        (end.end_ns, end.last_ns) = (Some(8 * S), 8 * S);
        book.anomaly(&end);
        end.id = "link:2:3:0".into();
        book.anomaly(&end);
        // The cable is back: flows move back onto it after its members ended, within its hold;
        // once it resolved, a reroute across it is an incident of its own.
        reroute(&mut book, &mut eps, 11 * S, 1, &via_1, &via_2);
        // Switch 6's group towards 17 is hashed again as the link returns: a flow to 17 moves
        // from core 1 to core 3, neither of them the link's.
        let (core_1, core_3) = ([8, 6, 1, 17, 21], [8, 6, 3, 17, 21]);
        reroute(&mut book, &mut eps, 12 * S, 5, &core_1, &core_3);
        reroute(&mut book, &mut eps, 40 * S, 4, &via_1, &via_2);
        let all = book.list(|_| true, 10);
        let link = all.iter().find(|i| i.root.kind == RootKind::Link).unwrap();
        assert_eq!(link.member_count, 6, "two link anomalies, four reroutes");
        assert!(link.paths.contains(&vec![7, 5, 2, 17, 20]), "old paths too");
        assert_eq!(
            all.len(),
            3,
            "the link, the unrelated reroute, the late one"
        );
        assert_eq!(book.counts.merged, 1);
    }

    #[test]
    fn a_cut_link_takes_the_reroutes_onto_and_off_the_other_paths_through_its_ends() {
        let mut book = IncidentBook::new(100, Duration::from_secs(10));
        let mut eps = EpisodeBook::new(100);
        // Aggregation 105 - core 201 is cut (the independent generator's seed 461): paths
        // between pods are hashed again among those left.
        let mut cut = link("link:105:3:2", "105:3", Some("201:3"), 2 * S);
        cut.last_ns = 3 * S;
        book.anomaly(&cut);
        // A flow moves onto a path through 105, another off one: the cut's doing.
        let onto = ([6, 106, 202, 108, 7], [6, 105, 203, 107, 7]);
        reroute(&mut book, &mut eps, 3 * S, 1, &onto.0, &onto.1);
        let off = ([7, 107, 203, 105, 6], [7, 108, 202, 106, 6]);
        reroute(&mut book, &mut eps, 4 * S, 2, &off.0, &off.1);
        // One whose paths reach neither end is not.
        let apart = ([5, 106, 204, 108, 7], [5, 106, 202, 108, 7]);
        reroute(&mut book, &mut eps, 4 * S, 3, &apart.0, &apart.1);
        let all = book.list(|_| true, 10);
        let link = all.iter().find(|i| i.root.kind == RootKind::Link).unwrap();
        assert_eq!(link.member_count, 3, "the link and the two reroutes");
        assert_eq!(all.len(), 2, "the link's, and the reroute apart from it");
    }

    #[test]
    fn links_silent_together_at_one_switch_are_one_incident_whichever_end_names_them() {
        let mut book = IncidentBook::new(100, Duration::from_secs(10));
        // Aggregation 103 - core 201 is cut (the independent generator's seed 602): core 201
        // no longer reaches 103's pod, so aggregation 101's link to it, whose routes all led
        // there, falls silent in the same window. Each is named from its own near end.
        let t = 26 * S;
        book.anomaly(&link("link:103:4", "103:4", Some("201:2"), t));
        book.anomaly(&link("link:101:4", "101:4", Some("201:1"), t));
        book.anomaly(&link("link:201:2", "201:2", Some("103:4"), t));
        book.anomaly(&link("link:201:1", "201:1", Some("101:4"), t));
        // A link of switches neither touches, silent in the same window, is apart.
        book.anomaly(&link("link:5:1", "5:1", Some("102:1"), t));
        let open = book.list(|i| i.is_open(), 10);
        assert_eq!(open.len(), 2, "{open:?}");
        let cut = open.iter().find(|i| i.member_count == 4).unwrap();
        for member in ["link:103:4", "link:101:4", "link:201:2", "link:201:1"] {
            assert!(cut.has_member(member), "{member}");
        }
        assert_eq!(book.counts.merged, 1);
    }

    #[test]
    fn a_cut_links_incident_takes_the_reroutes_of_the_window_its_cut_fell_in() {
        let mut book = IncidentBook::new(100, Duration::from_secs(10));
        let mut eps = EpisodeBook::new(100);
        // A window before the one the cut falls in, a reroute across the link at switch 9:
        // not its doing.
        let old = [12, 9, 17, 2, 19];
        reroute(&mut book, &mut eps, S / 2, 1, &old, &[12, 9, 17, 1, 19]);
        // Core 2 - aggregation 17 is cut at 1.6 s: a flow through it moves at switch 5 at once.
        let old = [7, 5, 2, 17, 20];
        reroute(
            &mut book,
            &mut eps,
            16 * S / 10,
            2,
            &old,
            &[7, 5, 1, 17, 20],
        );
        // Its silence is raised from its first silent window, 2–3 s.
        let mut cut = link("link:17:3:2", "17:3", Some("2:3"), 2 * S);
        cut.last_ns = 3 * S;
        book.anomaly(&cut);
        let all = book.list(|_| true, 10);
        let link = all.iter().find(|i| i.root.kind == RootKind::Link).unwrap();
        assert_eq!(link.member_count, 2, "the link and the reroute of its cut");
        assert_eq!(all.len(), 2, "the link's, and the earlier reroute's");
        assert_eq!(book.counts.merged, 1);
    }

    #[test]
    fn path_changes_root_where_they_leave_the_old_path_and_resolved_incidents_are_bounded() {
        // No hold: each path change resolves before the next opens a new incident.
        let mut book = IncidentBook::new(2, Duration::ZERO);
        let mut eps = EpisodeBook::new(100);
        for n in 0..5 {
            let mut a = latency(n * S, 8, n as u8, AlertKind::PathChange);
            a.previous_path = vec![1, 2, 3];
            a.path = vec![1, 4, 3];
            let (_, e) = eps.apply(&a).unwrap();
            book.episode(&e);
        }
        book.advance(100 * S);
        assert_eq!(book.counts.opened, 5);
        let kept = book.list(|_| true, 10);
        assert_eq!(kept.len(), 2, "the latest two resolved are kept");
        assert!(
            kept.iter()
                .all(|i| i.root == Root::switch(1) && !i.is_open())
        );
        // An episode that names no switch is no incident.
        let mut lone = latency(0, 1, 1, AlertKind::Threshold);
        lone.node_id = None;
        let (_, e) = eps.apply(&lone).unwrap();
        assert!(book.episode(&e).is_empty());
    }
}
