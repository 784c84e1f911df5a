//! The JSON messages of the result topics, defined once: the stream processor's immediate
//! events on `int.alerts` ([`Alert`]), the knowledge service's anomalies on `int.anomalies`
//! ([`Anomaly`]) and forecasts on `int.forecasts` ([`Forecast`]). One object per line.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    PathChange,
    Loop,
    BlackHole,
    BlackHoleCleared,
    Threshold,
    /// A threshold breach ended: the value fell below the clear level (`value`: the peak).
    ThresholdCleared,
    ReportLossBurst,
    /// A report-loss burst ended: the node's next loss report found fewer than the burst's
    /// reports lost within the interval (`value`: those reports).
    ReportLossBurstCleared,
}

impl AlertKind {
    pub const ALL: [AlertKind; 8] = [
        Self::PathChange,
        Self::Loop,
        Self::BlackHole,
        Self::BlackHoleCleared,
        Self::Threshold,
        Self::ThresholdCleared,
        Self::ReportLossBurst,
        Self::ReportLossBurstCleared,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::PathChange => "path_change",
            Self::Loop => "loop",
            Self::BlackHole => "black_hole",
            Self::BlackHoleCleared => "black_hole_cleared",
            Self::Threshold => "threshold",
            Self::ThresholdCleared => "threshold_cleared",
            Self::ReportLossBurst => "report_loss_burst",
            Self::ReportLossBurstCleared => "report_loss_burst_cleared",
        }
    }
}

/// One immediate event. On `int.alerts` as a JSON line; in the store's `alerts` table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct Alert {
    /// Event time of the row that raised it, ns since the Unix epoch.
    pub time_ns: i64,
    /// When the collector received the report (or event) that raised it.
    pub received_ns: i64,
    /// Wall clock when it was raised.
    pub detected_ns: i64,
    pub kind: Option<AlertKind>,
    pub partition: u32,
    pub src_ip: Option<IpAddr>,
    pub dst_ip: Option<IpAddr>,
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    pub protocol: Option<u8>,
    /// The switch it is about (threshold, loss, black hole: the last node still reporting).
    pub node_id: Option<u32>,
    /// A queue's id and egress port (a queue is a switch's port's queue).
    pub queue_id: Option<u8>,
    pub egress_port: Option<u32>,
    /// `hop_latency_ns` or `queue_occupancy` for threshold alerts.
    pub metric: Option<String>,
    /// The measured value: latency, occupancy, reports lost, ns since the last sink report.
    pub value: Option<u64>,
    pub threshold: Option<u64>,
    pub path: Vec<u32>,
    pub previous_path: Vec<u32>,
}

/// A flow as one string, `10.0.0.1:5000>10.0.0.2:80/17`: the knowledge service's flow
/// entity, and how incidents name the flows they affect.
pub fn flow_entity(
    src_ip: IpAddr,
    src_port: u16,
    dst_ip: IpAddr,
    dst_port: u16,
    protocol: u8,
) -> String {
    format!("{src_ip}:{src_port}>{dst_ip}:{dst_port}/{protocol}")
}

/// A queue: its switch, the egress port it is a queue of (`None` when the switch stamps no
/// port) and its queue id on that port.
pub type QueueKey = (u32, Option<u16>, u8);

/// A queue as one string, `5:2/0` (switch 5, port 2, queue 0; `5/0` without a port): the
/// knowledge service's queue entity, and how incidents name the queues they reach.
pub fn queue_entity((node, port, queue): QueueKey) -> String {
    match port {
        Some(port) => format!("{node}:{port}/{queue}"),
        None => format!("{node}/{queue}"),
    }
}

/// The switch a queue (`5:2/0`, `5/0`) or link (`5:2`) entity is on.
pub fn node_of(entity: &str) -> Option<u32> {
    entity.split([':', '/']).next()?.parse().ok()
}

/// [`queue_entity`]'s inverse.
pub fn parse_queue_entity(s: &str) -> Option<QueueKey> {
    let (at, queue) = s.split_once('/')?;
    let (node, port) = match at.split_once(':') {
        Some((node, port)) => (node, Some(port.parse().ok()?)),
        None => (at, None),
    };
    Some((node.parse().ok()?, port, queue.parse().ok()?))
}

/// What an anomaly is about: a source or destination address, a queue (switch, port,
/// queue id), a (node, egress port) link, or a flow (loops and black holes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityKind {
    Source,
    Destination,
    Queue,
    Link,
    Flow,
}

impl EntityKind {
    pub const ALL: [EntityKind; 5] = [
        Self::Source,
        Self::Destination,
        Self::Queue,
        Self::Link,
        Self::Flow,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Source => "source",
            Self::Destination => "destination",
            Self::Queue => "queue",
            Self::Link => "link",
            Self::Flow => "flow",
        }
    }
}

/// The type of an anomaly. `routing_loop` and `black_hole` are the processor's facts
/// (alerts), merged; the others are learnt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AnomalyType {
    Ddos,
    PortScan,
    Congestion,
    LinkFailure,
    RoutingLoop,
    BlackHole,
    /// Far from normal, but like no type the classifier knows.
    Unknown,
}

impl AnomalyType {
    pub const ALL: [AnomalyType; 7] = [
        Self::Ddos,
        Self::PortScan,
        Self::Congestion,
        Self::LinkFailure,
        Self::RoutingLoop,
        Self::BlackHole,
        Self::Unknown,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ddos => "ddos",
            Self::PortScan => "port_scan",
            Self::Congestion => "congestion",
            Self::LinkFailure => "link_failure",
            Self::RoutingLoop => "routing_loop",
            Self::BlackHole => "black_hole",
            Self::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// One feature of an entity-window and how far it is from normal.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct FeatureDeviation {
    pub name: String,
    pub value: f64,
    /// The training data's mean of the feature.
    pub normal: f64,
    /// Standard deviations from `normal` (on the model's scale).
    pub z: f64,
}

/// A flow touched by an anomaly, with its path.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct FlowRef {
    pub src_ip: Option<IpAddr>,
    pub dst_ip: Option<IpAddr>,
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    pub protocol: Option<u8>,
    pub path: Vec<u32>,
}

/// Who else an anomaly reaches: the flows it concerns, the switches, queues and links on
/// their paths, and the other flows crossing those switches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct BlastRadius {
    /// The flows of the entity in the anomaly's latest window (at most 50; `flows_total`).
    pub flows: Vec<FlowRef>,
    pub flows_total: usize,
    /// Switches on those flows' paths.
    pub nodes: Vec<u32>,
    /// Queues (switch, egress port, queue id) on those switches.
    #[serde(deserialize_with = "queue_keys")]
    pub queues: Vec<QueueKey>,
    /// (node, egress port) links leaving those switches.
    pub links: Vec<(u32, u16)>,
    /// Other flows crossing the same switches in the window.
    pub other_flows: usize,
    /// A switch-to-switch link's opposite direction (`8:2` for `5:1`), when known: a cut
    /// cable is one fault seen from both ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse_link: Option<String>,
    /// For a source or destination: the addresses at the other end of at least half of its
    /// flows, and of at least half of its bytes, in the window (a scanner's target, an
    /// attacker's victim, a scanned host's scanner), and for a port scan's target the source
    /// that reached it on at least half of its destination ports (at most three). For a queue
    /// or link: the destination of at least half of the bytes through its port (an incast's
    /// target).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<IpAddr>,
    /// Entities raised in the anomaly's windows that it explains, so not raised on their own:
    /// a DDoS victim's attackers and the queues and links on their paths, a scanner's targets,
    /// the destination a congested queue serves (at most [`COLLATERAL_LISTED`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collateral: Vec<Collateral>,
}

/// `[node, port, queue]` triples; a `[node, queue]` pair (a producer that keys queues by switch
/// and queue id only) is a queue without a port.
fn queue_keys<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<QueueKey>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Key {
        OfPort(u32, Option<u16>, u8),
        OfSwitch(u32, u8),
    }
    Ok(Vec::<Key>::deserialize(d)?
        .into_iter()
        .map(|k| match k {
            Key::OfPort(node, port, queue) => (node, port, queue),
            Key::OfSwitch(node, queue) => (node, None, queue),
        })
        .collect())
}

/// Collateral listed per anomaly at most.
pub const COLLATERAL_LISTED: usize = 64;

/// An entity raised as part of another's anomaly: its kind, name and its own type by
/// definition.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct Collateral {
    pub kind: EntityKind,
    pub entity: String,
    #[serde(rename = "type")]
    pub anomaly_type: AnomalyType,
}

/// Why an anomaly was raised.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct Explanation {
    /// One sentence for people.
    pub summary: String,
    /// The features that drove the score, largest deviation first.
    pub features: Vec<FeatureDeviation>,
    pub blast_radius: BlastRadius,
}

/// An anomaly episode: raised when an entity's score crosses the model's calibrated
/// threshold, updated while it lasts, closed when the score stays below.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct Anomaly {
    /// `<entity kind>:<entity>:<start ns>`: stable across updates of one episode.
    pub id: String,
    pub entity_kind: EntityKind,
    /// `10.0.0.2`, `5:2/0` (a queue: node:port/queue, [`queue_entity`]), `5:2` (a link:
    /// node:port), or a flow's 5-tuple.
    pub entity: String,
    #[serde(rename = "type")]
    pub anomaly_type: AnomalyType,
    /// The classifier's confidence in `type` (1 for facts from alerts).
    pub confidence: f64,
    /// Distance from normal; `threshold` is where the model calibrated "anomalous".
    pub score: f64,
    pub threshold: f64,
    /// Window times (event time, ns since the Unix epoch).
    pub start_ns: i64,
    /// Absent while the episode is open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ns: Option<i64>,
    pub last_ns: i64,
    /// Windows above the threshold so far.
    pub windows: u32,
    /// Wall clock when it was first raised.
    pub detected_ns: i64,
    /// `start`, `update` or `end`.
    pub phase: AnomalyPhase,
    pub model_version: u64,
    pub explanation: Explanation,
    /// Intent documents (docs/intents.md) the control plane may apply, with
    /// `origin: recommendation`.
    #[serde(default)]
    pub recommendations: Vec<serde_json::Value>,
    /// On an `end`: the entity did not return to its usual — the change lasted the knowledge
    /// service's `settle-after` and is its usual from now on (only `unknown` episodes settle).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub settled: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AnomalyPhase {
    Start,
    Update,
    End,
}

impl AnomalyPhase {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Update => "update",
            Self::End => "end",
        }
    }
}

/// A forecast of one series for the next window, beside the baselines it must beat.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct Forecast {
    /// `link_utilization` (entity `node:port`) or `destination_bytes` (entity an address).
    pub series: String,
    pub entity: String,
    /// The window forecast (its end, event time ns).
    pub window_end_ns: i64,
    pub horizon_windows: u32,
    pub predicted: f64,
    /// The value of the window the forecast was made at (ending at `observed_end_ns`): what
    /// the last-value baseline predicts, and what happened for the forecast made a window
    /// earlier.
    pub last_value: f64,
    #[serde(default)]
    pub observed_end_ns: i64,
    pub ewma: f64,
    pub model_version: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_is_named_by_its_switch_port_and_id_and_read_back() {
        assert_eq!(queue_entity((5, Some(2), 0)), "5:2/0");
        assert_eq!(queue_entity((5, None, 3)), "5/3");
        for key in [
            (5, Some(2), 0),
            (5, None, 3),
            (u32::MAX, Some(u16::MAX), 255),
        ] {
            assert_eq!(parse_queue_entity(&queue_entity(key)), Some(key));
        }
        for bad in ["5", "5:2", "x/0", "5:x/0", "5:2/256", ""] {
            assert_eq!(parse_queue_entity(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_blast_radius_reads_queues_with_and_without_a_port() {
        let radius = BlastRadius {
            queues: vec![(5, Some(2), 0), (6, None, 1)],
            ..BlastRadius::default()
        };
        let json = serde_json::to_value(&radius).unwrap();
        assert_eq!(json["queues"], serde_json::json!([[5, 2, 0], [6, null, 1]]));
        let back: BlastRadius = serde_json::from_value(json).unwrap();
        assert_eq!(back, radius);
        let mut pairs = serde_json::to_value(&radius).unwrap();
        pairs["queues"] = serde_json::json!([[5, 0]]);
        let read: BlastRadius = serde_json::from_value(pairs).unwrap();
        assert_eq!(read.queues, [(5, None, 0)]);
    }
}
