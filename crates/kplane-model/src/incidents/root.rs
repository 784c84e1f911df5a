//! What an incident is about: the root its breaches share.
//!
//! * Threshold breaches (hop latency, queue occupancy), report-loss bursts, black holes and
//!   loops name a switch: the switch whose egress is slow, that stopped reporting, that is
//!   the last to see a flow, or where a loop closes. A flow's hop-latency breach names the
//!   switch but not its queue, so congestion is rooted at the switch; the incident lists the
//!   queues its members name.
//! * A path change is rooted at the switch where the new path leaves the old one.
//! * Knowledge anomalies are rooted at their entity: a destination or source address, a
//!   link, the switch of a queue; a flow's anomaly joins the open incident that holds the
//!   flow, else roots at the flow.

use std::fmt;

use crate::results::{Anomaly, EntityKind};
use serde::Serialize;

use super::episodes::Episode;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RootKind {
    Switch,
    Link,
    Destination,
    Source,
    Flow,
}

impl RootKind {
    pub const ALL: [RootKind; 5] = [
        Self::Switch,
        Self::Link,
        Self::Destination,
        Self::Source,
        Self::Flow,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Switch => "switch",
            Self::Link => "link",
            Self::Destination => "destination",
            Self::Source => "source",
            Self::Flow => "flow",
        }
    }
}

/// `switch 5`, `link 5:2`, `destination 10.0.0.2`, …
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Root {
    pub kind: RootKind,
    /// `5` (switch), `5:2` (node:port), an address, or a flow `10.0.0.1:5000>10.0.0.2:80/17`.
    pub entity: String,
}

impl Root {
    pub fn switch(node: u32) -> Self {
        Self {
            kind: RootKind::Switch,
            entity: node.to_string(),
        }
    }

    /// The switch it names, if any (an Alertmanager label).
    pub fn switch_id(&self) -> Option<&str> {
        match self.kind {
            RootKind::Switch => Some(&self.entity),
            RootKind::Link => self.entity.split(':').next(),
            _ => None,
        }
    }
}

impl fmt::Display for Root {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind.as_str(), self.entity)
    }
}

/// The root an episode's own subject names (before any open incident claims it).
pub fn of_episode(e: &Episode) -> Option<Root> {
    let node = e.subject.node_id;
    match e.kind {
        "threshold" | "report_loss_burst" | "black_hole" => node.map(Root::switch),
        "loop" => first_repeat(&e.path).or(node).map(Root::switch),
        "path_change" => divergence(&e.previous_path, &e.path).map(Root::switch),
        _ => None,
    }
}

/// The root of a knowledge anomaly's entity (`None` for a flow: it joins its incident).
pub fn of_anomaly(a: &Anomaly) -> Root {
    let (kind, entity) = match a.entity_kind {
        EntityKind::Destination => (RootKind::Destination, a.entity.clone()),
        EntityKind::Source => (RootKind::Source, a.entity.clone()),
        EntityKind::Link => (RootKind::Link, a.entity.clone()),
        // `5:2/0`: queues live in their switch.
        EntityKind::Queue => (
            RootKind::Switch,
            crate::results::parse_queue_entity(&a.entity)
                .map(|(node, _, _)| node.to_string())
                .unwrap_or_default(),
        ),
        EntityKind::Flow => (RootKind::Flow, a.entity.clone()),
    };
    Root { kind, entity }
}

/// `10.0.0.1:5000>10.0.0.2:80/17`, the knowledge service's flow entity.
pub fn flow_of(e: &Episode) -> Option<String> {
    let s = &e.subject;
    let (src, dst) = (s.src_ip?, s.dst_ip?);
    Some(crate::results::flow_entity(
        src,
        s.src_port.unwrap_or(0),
        dst,
        s.dst_port.unwrap_or(0),
        s.protocol.unwrap_or(0),
    ))
}

/// The kind of trouble an episode is: what an incident made of it is called.
pub fn trouble(episode_kind: &str) -> &str {
    match episode_kind {
        "threshold" => "congestion",
        "report_loss_burst" => "report_loss",
        k => k,
    }
}

/// Whether an episode is a flow's (its breaches can join their destination's incident).
pub fn is_flow_level(e: &Episode) -> bool {
    e.subject.src_ip.is_some() && e.subject.dst_ip.is_some()
}

/// The switch where `new` leaves `old`: the last node both share before they differ.
fn divergence(old: &[u32], new: &[u32]) -> Option<u32> {
    let same = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    match same {
        0 => new.first().copied(),
        n => Some(new[n - 1]),
    }
}

fn first_repeat(path: &[u32]) -> Option<u32> {
    path.iter()
        .enumerate()
        .find(|(i, n)| path[..*i].contains(n))
        .map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_change_is_rooted_where_the_new_path_leaves_the_old() {
        assert_eq!(divergence(&[1, 2, 3, 4], &[1, 2, 7, 4]), Some(2));
        assert_eq!(divergence(&[1, 2], &[9, 2]), Some(9));
        assert_eq!(divergence(&[], &[]), None);
    }

    #[test]
    fn a_loop_is_rooted_where_it_closes() {
        assert_eq!(first_repeat(&[1, 2, 3, 2, 3]), Some(2));
        assert_eq!(first_repeat(&[1, 2, 3]), None);
    }
}
