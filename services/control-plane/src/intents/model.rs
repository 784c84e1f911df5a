//! The intent model: what operators and the knowledge service ask for (docs/intents.md).
//! Specs arrive as JSON (HTTP) or YAML/JSON files (`kplane intent apply -f`); [`IntentSpec::check`]
//! names the field at fault of everything it refuses.

use std::net::Ipv4Addr;
use std::time::Duration;

use kplane_model::detection::{self, Prefix};
pub use kplane_model::detection::{Algorithm, Measurement, ipv4_prefix};
use serde::{Deserialize, Serialize};

/// A `complex` condition of a switch entry: 32-bit bounds.
pub type Condition = detection::Condition<u32>;

/// What an intent asks for, its scope and its bookkeeping. One flat JSON object: `kind`,
/// the kind's fields and the common ones; a field that is unknown or belongs to another kind
/// is refused by name.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "RawSpec", rename_all = "kebab-case")]
pub struct IntentSpec {
    #[serde(flatten)]
    pub kind: IntentKind,
    /// Switches (INT node ids) to program; absent: derived from the topology (the edge
    /// switches for monitor, block and tune; the switches on paths to the prefix for reroute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switches: Option<Vec<u32>>,
    /// 1–65535, higher wins: the table-entry priority of monitor, block and tune.
    #[serde(default = "default_priority")]
    pub priority: u32,
    /// How long it stays (e.g. `10m`); absent: until deleted.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub ttl: Option<Duration>,
    /// Who asks (defaults to the token's name).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub owner: String,
    /// Why (shown in the audit log and the console).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// `operator` (applied at once) or `recommendation` (from the knowledge service or
    /// telemetry backpressure: applied only if the policy allows its kind, else pending
    /// until an admin approves).
    #[serde(default)]
    pub origin: Origin,
    /// The anomaly (`GET /v1/anomalies/{id}`) a recommended intent answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anomaly: Option<String>,
}

fn default_priority() -> u32 {
    100
}

/// The wire form of [`IntentSpec`]: one JSON object, split into the fields every kind has
/// ([`Common`]) and the kind's own ([`RawKind`]); serde refuses whatever else is there.
type RawSpec = serde_json::Map<String, serde_json::Value>;

/// The fields every kind has.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Common {
    switches: Option<Vec<u32>>,
    priority: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    ttl: Option<Duration>,
    #[serde(default)]
    owner: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    origin: Origin,
    anomaly: Option<String>,
}

impl Common {
    const FIELDS: [&str; 7] = [
        "switches", "priority", "ttl", "owner", "reason", "origin", "anomaly",
    ];
}

/// Each kind's own fields as given (defaults that depend on other fields are filled in by
/// [`IntentSpec::try_from`]).
#[derive(Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "kebab-case",
    rename_all_fields = "kebab-case",
    deny_unknown_fields
)]
enum RawKind {
    Monitor {
        #[serde(rename = "match")]
        flows: Option<FlowMatch>,
        instructions: Option<u16>,
        max_hops: Option<u8>,
        int_label: Option<bool>,
        encapsulation: Option<Encapsulation>,
        detection: Option<Detection>,
    },
    Block {
        #[serde(rename = "match")]
        flows: FlowMatch,
    },
    Reroute {
        dst: String,
        avoid: Avoid,
    },
    Tune {
        #[serde(rename = "match", default)]
        flows: FlowMatch,
        detection: Detection,
    },
    IntLabel {
        ports: Option<Vec<u32>>,
        #[serde(default, with = "humantime_serde")]
        interval: Option<Duration>,
        #[serde(default)]
        algorithm: LabelAlgorithm,
        #[serde(default)]
        function: LabelFunction,
        max_hops: Option<u8>,
        #[serde(default, with = "humantime_serde")]
        rest: Option<Duration>,
    },
    LabelFrequency {
        ports: Vec<u32>,
        shift: u8,
    },
    ProbePlan {
        planner: Option<String>,
        #[serde(default)]
        measure: ProbeMeasure,
    },
}

/// How a `monitor` intent's source carries INT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Encapsulation {
    /// INT-MD v2.1 after the L4 header, flagged by DSCP 0x17.
    #[default]
    IntMd,
    /// The KDN paper's INT-over-UDP: UDP destination port 19268, the original port in the
    /// KDN header, v0.5 items (`int_source_kdn`).
    Kdn,
}

impl Encapsulation {
    fn is_int_md(&self) -> bool {
        *self == Self::IntMd
    }
}

impl RawKind {
    /// Every field of every kind (a field named here but not of the kind at hand is refused
    /// as "not a field of a … intent", anything else as unknown).
    const FIELDS: [&str; 16] = [
        "match",
        "instructions",
        "max-hops",
        "int-label",
        "encapsulation",
        "detection",
        "dst",
        "avoid",
        "ports",
        "interval",
        "algorithm",
        "function",
        "rest",
        "shift",
        "planner",
        "measure",
    ];

    fn into_kind(self) -> IntentKind {
        match self {
            Self::Monitor {
                flows,
                instructions,
                max_hops,
                int_label,
                encapsulation,
                detection,
            } => {
                let int_label = int_label.unwrap_or(false);
                IntentKind::Monitor {
                    flows: flows.unwrap_or_default(),
                    instructions: instructions.unwrap_or_else(default_bitmap),
                    max_hops: max_hops.unwrap_or(if int_label {
                        LABEL_MAX_HOP
                    } else {
                        default_max_hops()
                    }),
                    int_label,
                    encapsulation: encapsulation.unwrap_or_default(),
                    detection,
                }
            }
            Self::Block { flows } => IntentKind::Block { flows },
            Self::Reroute { dst, avoid } => IntentKind::Reroute { dst, avoid },
            Self::Tune { flows, detection } => IntentKind::Tune { flows, detection },
            Self::IntLabel {
                ports,
                interval,
                algorithm,
                function,
                max_hops,
                rest,
            } => IntentKind::IntLabel {
                ports,
                interval: interval.unwrap_or_else(default_label_interval),
                algorithm,
                function,
                max_hops: max_hops.unwrap_or(LABEL_MAX_HOP),
                rest: rest.unwrap_or_default(),
            },
            Self::LabelFrequency { ports, shift } => IntentKind::LabelFrequency { ports, shift },
            Self::ProbePlan { planner, measure } => IntentKind::ProbePlan {
                planner: planner.unwrap_or_else(|| "gpint-3".into()),
                measure,
            },
        }
    }
}

/// Deserializes one part of a spec; an error inside a field names its path (`ttl: …`,
/// `match.dst-port: …`).
fn part<T: serde::de::DeserializeOwned>(
    v: serde_json::Map<String, serde_json::Value>,
) -> Result<T, (String, serde_json::Error)> {
    serde_path_to_error::deserialize(serde_json::Value::Object(v)).map_err(|e| {
        let path = e.path().to_string();
        (path, e.into_inner())
    })
}

/// serde's message for a kind's part, in the intent's words: a field of another kind, a
/// missing field and an unknown kind name the field at fault.
fn kind_error(kind: &str, (path, e): (String, serde_json::Error)) -> String {
    let msg = e.to_string();
    let quoted = |after: &str| {
        let rest = msg.strip_prefix(after)?;
        Some(rest[..rest.find('`')?].to_string())
    };
    if path == "kind" && quoted("unknown variant `").is_some() {
        format!(
            "kind: {kind:?} is not one of monitor, block, reroute, tune, int-label, label-frequency, probe-plan"
        )
    } else if path != "." {
        format!("{path}: {msg}")
    } else if let Some(field) = quoted("unknown field `")
        && RawKind::FIELDS.contains(&field.as_str())
    {
        format!("{field}: not a field of a {kind} intent")
    } else if let Some(field) = quoted("missing field `") {
        format!("{field}: a {kind} intent needs it")
    } else {
        msg
    }
}

impl TryFrom<RawSpec> for IntentSpec {
    type Error = String;

    fn try_from(mut raw: RawSpec) -> Result<Self, String> {
        let common: serde_json::Map<_, _> = Common::FIELDS
            .iter()
            .filter_map(|f| raw.remove_entry(*f))
            .collect();
        let kind = match raw.get("kind") {
            Some(serde_json::Value::String(k)) => k.clone(),
            Some(other) => return Err(format!("kind: {other} is not a kind of intent")),
            None => return Err("kind: missing (monitor, block, reroute, tune, int-label, label-frequency or probe-plan)".into()),
        };
        let body = part::<RawKind>(raw).map_err(|e| kind_error(&kind, e))?;
        let c = part::<Common>(common).map_err(|(path, e)| match path.as_str() {
            "." => e.to_string(),
            _ => format!("{path}: {e}"),
        })?;
        Ok(Self {
            kind: body.into_kind(),
            // The same switch twice is one switch.
            switches: c.switches.map(|mut s| {
                s.sort_unstable();
                s.dedup();
                s
            }),
            priority: c.priority.unwrap_or_else(default_priority),
            ttl: c.ttl,
            owner: c.owner,
            reason: c.reason,
            origin: c.origin,
            anomaly: c.anomaly,
        })
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    #[default]
    Operator,
    Recommendation,
}

/// The kinds of intent.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "kebab-case",
    rename_all_fields = "kebab-case"
)]
pub enum IntentKind {
    /// Put matching flows on the INT watchlist (the source inserts INT), optionally with a
    /// per-flow detection algorithm at the sinks.
    Monitor {
        #[serde(rename = "match", default)]
        flows: FlowMatch,
        /// INT instruction bitmap (default 0xFF00: node id, ports, hop latency, queue,
        /// timestamps, …).
        #[serde(default = "default_bitmap")]
        instructions: u16,
        #[serde(default = "default_max_hops")]
        max_hops: u8,
        /// INT-label specific-flow telemetry instead of INT-MD: the flow's packets start with
        /// INT_num = `max-hops` (default 5, the collector's `decode.int-label-max-hop`) and
        /// every labelling port labels them.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        int_label: bool,
        /// How the source carries INT: INT-MD v2.1 flagged by DSCP (default), or the KDN
        /// paper's INT-over-UDP (UDP flows only).
        #[serde(default, skip_serializing_if = "Encapsulation::is_int_md")]
        encapsulation: Encapsulation,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detection: Option<Detection>,
    },
    /// Drop matching packets (a drop ACL at the edge).
    Block {
        #[serde(rename = "match")]
        flows: FlowMatch,
    },
    /// Traffic towards `dst` avoids a switch or a link.
    Reroute {
        /// Destination prefix, e.g. `10.0.1.0/24`.
        dst: String,
        avoid: Avoid,
    },
    /// Sink detection thresholds of a flow set.
    Tune {
        #[serde(rename = "match", default)]
        flows: FlowMatch,
        detection: Detection,
    },
    /// INT-label (int-label-distributed-labeling §3) on egress ports: each labels some of the
    /// packets it forwards with its state (`label_config` entries).
    IntLabel {
        /// Egress ports; absent: every port of the switch the topology knows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ports: Option<Vec<u32>>,
        /// The labelling interval T (default 100 ms).
        #[serde(with = "humantime_serde")]
        interval: Duration,
        algorithm: LabelAlgorithm,
        /// Base B's labelling probability f(INT_num).
        function: LabelFunction,
        /// MAX_hop: items a packet carries at most (1–5).
        max_hops: u8,
        /// Base B's rest time T1: no probabilistic labelling this soon after a labelling.
        #[serde(with = "humantime_serde")]
        rest: Duration,
    },
    /// Pro's labelling frequency of egress ports (`label_frequency` entries): their interval
    /// becomes T / 2^shift. Pro's controller submits these itself (docs/int-label.md).
    LabelFrequency { ports: Vec<u32>, shift: u8 },
    /// GPINT's probe paths over the switches (gpint-reliable-int-monitoring §III-A): a plan
    /// computed from the topology whenever it is asked for (`GET /v1/probe-plans`), so a
    /// failed link or switch changes it; no table entries.
    ProbePlan {
        /// A planner of `kplane_probe::PLANNERS`: gpint-2, gpint-3, gpint-5, euler.
        planner: String,
        measure: ProbeMeasure,
    },
}

/// What a probe plan's probes measure at each switch (Req META's request type).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeMeasure {
    /// The switch's rule-hit counter: one measurement.
    #[default]
    RuleHits,
    /// Packets received per port: one measurement per port.
    PortPackets,
}

/// INT-label's labelling algorithm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LabelAlgorithm {
    /// Algo. 1: label when the interval since the port's last labelling passed.
    #[default]
    BaseA,
    /// Algo. 2: also label, with probability f(INT_num), packets that carry items.
    BaseB,
}

/// Base B's f: F1 (1 once a packet carries an item), F2 (INT_num / (MAX_hop − 1)), F3 (F2
/// scaled by the time since the last labelling over T).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LabelFunction {
    #[default]
    F1,
    F2,
    F3,
}

impl LabelAlgorithm {
    /// `set_labelling`'s `algorithm`.
    pub fn code(self) -> u64 {
        match self {
            Self::BaseA => 0,
            Self::BaseB => 1,
        }
    }
}

impl LabelFunction {
    /// `set_labelling`'s `function`.
    pub fn code(self) -> u64 {
        match self {
            Self::F1 => 1,
            Self::F2 => 2,
            Self::F3 => 3,
        }
    }
}

fn default_label_interval() -> Duration {
    Duration::from_millis(100)
}

/// The most S a `label-frequency` intent sets (the interval divided by 2^16 at most).
pub const MAX_LABEL_SHIFT: u8 = 16;

fn default_bitmap() -> u16 {
    0xFF00
}

fn default_max_hops() -> u8 {
    8
}

/// INT-label's MAX_hop: the default of the emulator's `set_labelling` and of the collector's
/// `decode.int-label-max-hop`.
pub const LABEL_MAX_HOP: u8 = 5;

impl IntentKind {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Monitor { .. } => "monitor",
            Self::Block { .. } => "block",
            Self::Reroute { .. } => "reroute",
            Self::Tune { .. } => "tune",
            Self::IntLabel { .. } => "int-label",
            Self::LabelFrequency { .. } => "label-frequency",
            Self::ProbePlan { .. } => "probe-plan",
        }
    }
}

/// What a reroute's paths avoid: a switch, a link (its two switches), further links (traffic
/// engineering avoids the links with no room), or several of these.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Avoid {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<u32>,
    /// `[a, b]`: the link between switches a and b.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<[u32; 2]>,
    /// More links, each `[a, b]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<[u32; 2]>,
}

impl Avoid {
    /// Every link avoided (`link` and `links`).
    pub fn all_links(&self) -> impl Iterator<Item = [u32; 2]> + '_ {
        self.link.into_iter().chain(self.links.iter().copied())
    }

    /// Whether a path (switch ids in order) crosses what is avoided.
    pub fn crossed_by(&self, path: &[u32]) -> bool {
        self.switch.is_some_and(|s| path.contains(&s))
            || path.windows(2).any(|w| {
                self.all_links()
                    .any(|[x, y]| (w[0], w[1]) == (x, y) || (w[0], w[1]) == (y, x))
            })
    }
}

impl std::fmt::Display for Avoid {
    /// "switch 3", "link 1-2", "switch 3, links 1-2, 4-5".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let links: Vec<String> = self.all_links().map(|[a, b]| format!("{a}-{b}")).collect();
        let mut parts = Vec::new();
        if let Some(s) = self.switch {
            parts.push(format!("switch {s}"));
        }
        match links.len() {
            0 => {}
            1 => parts.push(format!("link {}", links[0])),
            _ => parts.push(format!("links {}", links.join(", "))),
        }
        f.write_str(&parts.join(", "))
    }
}

/// A 5-tuple match: prefixes, a protocol and port ranges; a missing field matches anything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FlowMatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<String>,
    /// `tcp`, `udp`, `icmp` or a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// `80` or `1000-2000` (a bare number too: YAML's `dst-port: 53`).
    #[serde(
        default,
        deserialize_with = "port_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub src_port: Option<String>,
    #[serde(
        default,
        deserialize_with = "port_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub dst_port: Option<String>,
}

/// A port or range as text, given as text or as a number.
fn port_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct PortText;
    impl serde::de::Visitor<'_> for PortText {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a port (53) or a range (1000-2000)")
        }
        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Self::Value, E> {
            Ok(Some(n.to_string()))
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
            Ok(Some(s.to_string()))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    d.deserialize_any(PortText)
}

/// A sink detection algorithm (the event-detection paper's per-flow control).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Detection {
    pub algorithm: Algorithm,
    #[serde(default)]
    pub measurement: Measurement,
    /// In the measurement's unit (ns, packets, per mille).
    #[serde(default)]
    pub threshold: u32,
    /// EWMA weight of the new value, 0–1 (default 0.25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    /// `complex`: one or two conditions that must both hold (a switch entry holds two).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub when: Vec<Condition>,
}

// Weights are finite numbers in 0..=1 once checked.
impl Eq for Detection {}

/// Whether `addr` is in the prefix `p` (an unparsable prefix contains nothing).
pub fn in_prefix(p: &str, addr: u32) -> bool {
    p.parse::<Prefix>()
        .is_ok_and(|p| p.contains(Ipv4Addr::from(addr).into()))
}

impl FlowMatch {
    /// The match parsed once into the shared vocabulary; every part that does not parse is
    /// a problem naming its field under `at`.
    pub fn parse(&self, at: &str) -> Result<detection::FlowMatch, Vec<String>> {
        fn one<T: std::str::FromStr<Err = detection::ParseError>>(
            at: &str,
            name: &str,
            v: &Option<String>,
            problems: &mut Vec<String>,
        ) -> Option<T> {
            v.as_deref().and_then(|v| match v.parse() {
                Ok(x) => Some(x),
                Err(e) => {
                    problems.push(format!("{at}.{name}: {e}"));
                    None
                }
            })
        }
        let mut problems = Vec::new();
        let m = detection::FlowMatch {
            src: one(at, "src", &self.src, &mut problems),
            dst: one(at, "dst", &self.dst, &mut problems),
            protocol: one(at, "protocol", &self.protocol, &mut problems),
            src_port: one(at, "src-port", &self.src_port, &mut problems),
            dst_port: one(at, "dst-port", &self.dst_port, &mut problems),
        };
        if problems.is_empty() {
            Ok(m)
        } else {
            Err(problems)
        }
    }

    fn check(&self, at: &str, problems: &mut Vec<String>) {
        match self.parse(at) {
            Err(p) => problems.extend(p),
            // The switches' tables match IPv4 addresses.
            Ok(m) => {
                for (name, p) in [("src", m.src), ("dst", m.dst)] {
                    if p.is_some_and(|p| p.ipv4().is_none()) {
                        problems.push(format!(
                            "{at}.{name}: the switches match IPv4 prefixes only (e.g. 10.0.1.0/24)"
                        ));
                    }
                }
            }
        }
    }
}

impl Detection {
    fn check(&self, at: &str, problems: &mut Vec<String>) {
        // A switch entry holds `SWITCH_CONDITIONS` literals and defaults the weight.
        detection::check_rule(
            at,
            self.algorithm,
            self.weight,
            false,
            &self.when,
            detection::SWITCH_CONDITIONS,
            problems,
        );
        let measurements = std::iter::once((format!("{at}.measurement"), self.measurement)).chain(
            self.when
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("{at}.when[{i}].measurement"), c.measurement)),
        );
        for (field, m) in measurements {
            if m.p4_code().is_none() {
                problems.push(format!(
                    "{field}: {} is not measured by the switches",
                    m.as_str()
                ));
            }
        }
    }

    /// EWMA weight in the P4 program's 1/256 units.
    pub fn weight_q8(&self) -> u64 {
        (self.weight.unwrap_or(0.25) * 256.0)
            .round()
            .clamp(1.0, 255.0) as u64
    }
}

impl IntentSpec {
    /// Every problem at once, each naming its field; empty when the spec is valid.
    pub fn check(&self) -> Vec<String> {
        let mut p = Vec::new();
        if !(1..=65_535).contains(&self.priority) {
            p.push(format!("priority: {} is not 1-65535", self.priority));
        }
        if self.ttl.is_some_and(|t| t < Duration::from_secs(1)) {
            p.push("ttl: must be at least 1s".into());
        }
        if self.switches.as_ref().is_some_and(Vec::is_empty) {
            p.push("switches: an empty list selects nothing (omit it to derive the scope)".into());
        }
        if self.reason.len() > 1_000 || self.owner.len() > 200 {
            p.push("reason/owner: too long (1000 / 200 characters at most)".into());
        }
        match &self.kind {
            IntentKind::Monitor {
                flows,
                instructions,
                max_hops,
                int_label,
                encapsulation,
                detection,
            } => {
                flows.check("match", &mut p);
                if *encapsulation == Encapsulation::Kdn {
                    if *int_label {
                        p.push("encapsulation: kdn is INT-MD's alternative; an int-label flow carries the INT-label option".into());
                    }
                    if !flows
                        .protocol
                        .as_deref()
                        .is_some_and(|p| p == "udp" || p == "17")
                    {
                        p.push(
                            "encapsulation: kdn carries INT over UDP; match.protocol must be udp"
                                .into(),
                        );
                    }
                }
                if *int_label && *instructions != default_bitmap() {
                    p.push("instructions: INT-label's items are fixed (32 bytes of a port's state); int-label takes no bitmap".into());
                }
                if *int_label && detection.is_some() {
                    p.push("detection: sink detection filters INT-MD reports; an int-label flow is exported by its last hop".into());
                }
                if instructions & 0x00FF != 0 || *instructions == 0 {
                    p.push(format!(
                        "instructions: {instructions:#06x} asks for no or reserved metadata (bits 0x8000-0x0100)"
                    ));
                }
                if !(1..=16).contains(max_hops) {
                    p.push(format!("max-hops: {max_hops} is not 1-16"));
                }
                if let Some(d) = detection {
                    d.check("detection", &mut p);
                }
            }
            IntentKind::Block { flows } => {
                flows.check("match", &mut p);
                if *flows == FlowMatch::default() {
                    p.push(
                        "match: a block of everything is refused; give at least one field".into(),
                    );
                }
            }
            IntentKind::Reroute { dst, avoid } => {
                if ipv4_prefix(dst).is_none() {
                    p.push(format!(
                        "dst: {dst:?} is not an IPv4 prefix (e.g. 10.0.1.0/24)"
                    ));
                }
                if *avoid == Avoid::default() {
                    p.push("avoid: give a switch, a link or links".into());
                }
                if let Some([a, b]) = avoid.all_links().find(|[a, b]| a == b) {
                    p.push(format!(
                        "avoid: [{a}, {b}] is not a link between two switches"
                    ));
                }
            }
            IntentKind::IntLabel {
                ports,
                interval,
                max_hops,
                rest,
                ..
            } => {
                check_ports(ports.as_deref(), &mut p);
                let ns = interval.as_nanos();
                if !(1_000..=u128::from(u32::MAX)).contains(&ns) {
                    p.push(format!(
                        "interval: {} is not between 1µs and 4.29s (the switch holds it in 32 bits of ns)",
                        humantime::format_duration(*interval)
                    ));
                }
                if rest > interval {
                    p.push(
                        "rest: longer than the interval; it would never let Base B label".into(),
                    );
                }
                if !(1..=LABEL_MAX_HOP).contains(max_hops) {
                    p.push(format!(
                        "max-hops: {max_hops} is not 1-{LABEL_MAX_HOP} (the P4 program parses at most {LABEL_MAX_HOP} items)"
                    ));
                }
            }
            IntentKind::LabelFrequency { ports, shift } => {
                check_ports(Some(ports), &mut p);
                if *shift > MAX_LABEL_SHIFT {
                    p.push(format!("shift: {shift} is not 0-{MAX_LABEL_SHIFT}"));
                }
            }
            IntentKind::Tune { flows, detection } => {
                flows.check("match", &mut p);
                detection.check("detection", &mut p);
            }
            IntentKind::ProbePlan { planner, .. } => {
                if !kplane_probe::PLANNERS.iter().any(|(n, _)| n == planner) {
                    let names: Vec<&str> = kplane_probe::PLANNERS.iter().map(|(n, _)| *n).collect();
                    p.push(format!(
                        "planner: {planner:?} is not one of {}",
                        names.join(", ")
                    ));
                }
            }
        }
        p
    }
}

/// Egress ports: a non-empty list of ports 0–511 (the P4 program's 9-bit ports).
fn check_ports(ports: Option<&[u32]>, problems: &mut Vec<String>) {
    match ports {
        Some([]) => problems.push("ports: an empty list selects nothing".into()),
        Some(list) => {
            for port in list.iter().filter(|port| **port > 511) {
                problems.push(format!("ports: {port} is not a port 0-511"));
            }
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: &str) -> IntentSpec {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_monitor_in_int_label_mode_selects_a_specific_flow() {
        let m = spec(r#"{"kind":"monitor","match":{"dst":"10.0.1.1"},"int-label":true}"#);
        assert!(matches!(
            m.kind,
            IntentKind::Monitor {
                int_label: true,
                max_hops: LABEL_MAX_HOP,
                ..
            }
        ));
        assert!(m.check().is_empty());
        // Persisted, it reads back the same (the default bitmap is written out too).
        let back: IntentSpec = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        for (bad, field) in [
            (
                r#"{"kind":"monitor","int-label":true,"instructions":61440}"#,
                "instructions:",
            ),
            (
                r#"{"kind":"monitor","int-label":true,"detection":{"algorithm":"noop"}}"#,
                "detection:",
            ),
        ] {
            let p = spec(bad).check();
            assert!(p.iter().any(|p| p.starts_with(field)), "{p:?}");
        }
        let e = serde_json::from_str::<IntentSpec>(
            r#"{"kind":"block","match":{"src":"10.0.0.1"},"int-label":true}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("int-label"), "{e}");
    }

    #[test]
    fn every_kind_parses_with_defaults() {
        let m = spec(r#"{"kind":"monitor","match":{"dst":"10.0.1.0/24","dst-port":"80-443"}}"#);
        assert_eq!(m.priority, 100);
        assert!(matches!(
            m.kind,
            IntentKind::Monitor {
                instructions: 0xFF00,
                max_hops: 8,
                ..
            }
        ));
        assert!(m.check().is_empty());
        let b = spec(r#"{"kind":"block","match":{"src":"10.0.0.2"},"ttl":"10m","reason":"ddos"}"#);
        assert_eq!(b.ttl, Some(Duration::from_secs(600)));
        assert!(b.check().is_empty());
        let r = spec(r#"{"kind":"reroute","dst":"10.0.0.16/32","avoid":{"switch":3}}"#);
        assert!(r.check().is_empty());
        let t = spec(
            r#"{"kind":"tune","detection":{"algorithm":"ewma","threshold":5000,"weight":0.5}}"#,
        );
        assert!(t.check().is_empty());
        let e = serde_json::from_str::<IntentSpec>(r#"{"kind":"block","match":{},"colour":1}"#)
            .unwrap_err();
        assert!(e.to_string().contains("unknown field `colour`"), "{e}");
        let e = serde_json::from_str::<IntentSpec>(r#"{"kind":"block","match":{},"max-hops":3}"#)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("max-hops: not a field of a block intent"),
            "{e}"
        );
        // What is stored reads back.
        let again: IntentSpec = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(again, m);
    }

    #[test]
    fn problems_name_their_fields() {
        let p = spec(
            r#"{"kind":"monitor","priority":0,"match":{"src":"10.0.0.300","protocol":"tcpp","dst-port":"9-1"},"max-hops":40}"#,
        )
        .check();
        let all = p.join("\n");
        for field in [
            "priority:",
            "match.src:",
            "match.protocol:",
            "match.dst-port:",
            "max-hops:",
        ] {
            assert!(all.contains(field), "{field} in {all}");
        }
        let p = spec(r#"{"kind":"reroute","dst":"x","avoid":{}}"#).check();
        assert_eq!(p.len(), 2, "{p:?}");
        let p = spec(r#"{"kind":"reroute","dst":"10.0.0.1/32","avoid":{"links":[[1,2],[3,3]]}}"#)
            .check();
        assert_eq!(p, vec!["avoid: [3, 3] is not a link between two switches"]);
        let several = spec(
            r#"{"kind":"reroute","dst":"10.0.0.1/32","avoid":{"switch":5,"link":[1,2],"links":[[3,4]]}}"#,
        );
        assert!(several.check().is_empty());
        let IntentKind::Reroute { avoid, .. } = &several.kind else {
            panic!("{several:?}");
        };
        assert_eq!(avoid.to_string(), "switch 5, links 1-2, 3-4");
        assert!(avoid.crossed_by(&[7, 4, 3]), "the link either way round");
        assert!(avoid.crossed_by(&[7, 5]));
        assert!(!avoid.crossed_by(&[1, 3, 2, 4]));
        assert!(!spec(r#"{"kind":"block","match":{}}"#).check().is_empty());
    }

    #[test]
    fn kdn_encapsulation_carries_udp_flows_and_not_int_label() {
        let kdn = |m: &str, extra: &str| {
            spec(&format!(
                r#"{{"kind":"monitor","match":{m},"encapsulation":"kdn"{extra}}}"#
            ))
            .check()
        };
        assert!(kdn(r#"{"dst":"10.0.0.1","protocol":"udp"}"#, "").is_empty());
        let p = kdn(r#"{"dst":"10.0.0.1"}"#, "");
        assert!(p[0].starts_with("encapsulation:"), "{p:?}");
        let p = kdn(r#"{"protocol":"udp"}"#, r#","int-label":true"#);
        assert!(p.iter().any(|m| m.contains("int-label")), "{p:?}");
    }

    #[test]
    fn flow_matches() {
        let m = FlowMatch {
            src: Some("10.0.0.0/8".into()),
            protocol: Some("udp".into()),
            dst_port: Some("53".into()),
            ..FlowMatch::default()
        };
        let m = m.parse("match").unwrap();
        let flow = |src: &str, dst: &str, src_port, dst_port, protocol| kplane_model::FlowKey {
            src_ip: src.parse().unwrap(),
            dst_ip: dst.parse().unwrap(),
            src_port,
            dst_port,
            protocol,
        };
        assert!(m.matches(&flow("10.1.2.3", "1.1.1.1", 9, 53, 17)));
        assert!(!m.matches(&flow("11.1.2.3", "1.1.1.1", 9, 53, 17)));
        assert!(!m.matches(&flow("10.1.2.3", "1.1.1.1", 9, 54, 17)));
    }

    #[test]
    fn ports_may_be_numbers_or_text() {
        let s = spec(r#"{"kind":"block","match":{"dst-port":53,"src-port":"1000-2000"}}"#);
        let IntentKind::Block { flows } = &s.kind else {
            panic!("{s:?}")
        };
        assert_eq!(flows.dst_port.as_deref(), Some("53"));
        assert_eq!(flows.src_port.as_deref(), Some("1000-2000"));
        let e = serde_json::from_str::<IntentSpec>(r#"{"kind":"block","match":{"dst-port":true}}"#)
            .unwrap_err();
        assert!(e.to_string().contains("a port (53) or a range"), "{e}");
    }
}
