//! One anomaly per incident, not one per entity: in a window, the entities an attack or a
//! congested queue explains join it as its collateral instead of being raised on their own —
//! a DDoS victim's attackers and the queues and links on their paths, a scanner's targets, the
//! destination a congested queue serves.
//!
//! Roots, strongest first: a DDoS at a destination, a scan from a source, a scan at a
//! destination, a DDoS from a source, a congested queue, a congested destination (an
//! incast). A root claims, among the window's other raised entity-windows that have no anomaly
//! of their own yet:
//! * for an attack or a congested destination: the addresses at the other end of its flows
//!   typed `unknown` or its own type, and the queues and links on its flows' switches typed
//!   `unknown` or `congestion`;
//! * for a congested queue: the queues and links of its switch, and the addresses whose flows
//!   cross that switch, typed `unknown` or `congestion`; and, when its traffic converges on a
//!   destination (at least half of its port's bytes, [`sink`]), the queues and links anywhere
//!   whose port's bytes went most to that destination, typed `unknown` or `congestion`: an
//!   incast fills every port its answers meet on the way, and it is one fault, rooted at the
//!   congested queue nearest its target.
//!
//! Among roots of one rank, the queue nearest the destination its traffic converges on comes
//! first, then the highest score.
//!
//! A link failure is never collateral: it is a fault of its own, whatever crosses it.

use std::collections::BTreeSet;
use std::net::IpAddr;

use kplane_model::results::{AnomalyType, Collateral, EntityKind};

use crate::explain::{Sink, flows_of, sink};
use crate::features::{Window, node_of};

/// A raised entity-window of this window, typed.
#[derive(Clone, Copy, Debug)]
pub struct Raised<'a> {
    pub kind: EntityKind,
    pub entity: &'a str,
    pub score: f64,
    pub typed: AnomalyType,
    /// Already an anomaly of its own (an open episode): it stays one.
    pub open: bool,
}

impl Raised<'_> {
    pub fn collateral(&self) -> Collateral {
        Collateral {
            kind: self.kind,
            entity: self.entity.to_string(),
            anomaly_type: self.typed,
        }
    }
}

/// A root's rank (lower first), or `None` for what cannot be a root.
fn rank(kind: EntityKind, t: AnomalyType) -> Option<u8> {
    match (t, kind) {
        (AnomalyType::Ddos, EntityKind::Destination) => Some(0),
        (AnomalyType::PortScan, EntityKind::Source) => Some(1),
        (AnomalyType::PortScan, EntityKind::Destination) => Some(2),
        (AnomalyType::Ddos, EntityKind::Source) => Some(3),
        (AnomalyType::Congestion, EntityKind::Queue) => Some(4),
        (AnomalyType::Congestion, EntityKind::Destination) => Some(5),
        _ => None,
    }
}

/// What a root reaches in the window: the switches its flows cross and the addresses at
/// their other end (for a queue: its switch, and the destination its traffic converges on).
struct Reach {
    nodes: BTreeSet<u32>,
    peers: BTreeSet<IpAddr>,
    sink: Option<IpAddr>,
}

fn reach(w: &Window, root: &Raised, sink: Option<Sink>) -> Reach {
    if root.kind == EntityKind::Queue {
        return Reach {
            nodes: node_of(root.entity).into_iter().collect(),
            peers: BTreeSet::new(),
            sink: sink.filter(Sink::converges).map(|s| s.dst),
        };
    }
    let flows = flows_of(w, root.kind, root.entity);
    Reach {
        nodes: flows.iter().flat_map(|f| f.path.iter().copied()).collect(),
        peers: flows
            .iter()
            .filter_map(|f| match root.kind {
                EntityKind::Destination => f.src,
                _ => f.dst,
            })
            .collect(),
        sink: None,
    }
}

/// Whether `c`, whose port's bytes went most to `sink`, is collateral of `root`, which reaches
/// `r`.
fn joins(w: &Window, root: &Raised, r: &Reach, c: &Raised, sink: Option<Sink>) -> bool {
    let loose = matches!(c.typed, AnomalyType::Unknown);
    match c.kind {
        EntityKind::Queue | EntityKind::Link => {
            (loose || c.typed == AnomalyType::Congestion)
                && (node_of(c.entity).is_some_and(|n| r.nodes.contains(&n))
                    || r.sink.is_some_and(|d| sink.is_some_and(|s| s.dst == d)))
        }
        EntityKind::Source | EntityKind::Destination if root.kind == EntityKind::Queue => {
            (loose || c.typed == AnomalyType::Congestion)
                && flows_of(w, c.kind, c.entity)
                    .iter()
                    .any(|f| f.path.iter().any(|n| r.nodes.contains(n)))
        }
        EntityKind::Source | EntityKind::Destination => {
            (loose || c.typed == root.typed)
                && c.kind != root.kind
                && c.entity.parse().is_ok_and(|ip| r.peers.contains(&ip))
        }
        EntityKind::Flow => false,
    }
}

/// Per raised entity-window, the index of the root it is collateral of (`None`: raised on its
/// own).
pub fn roots(w: &Window, raised: &[Raised]) -> Vec<Option<usize>> {
    let mut of: Vec<Option<usize>> = vec![None; raised.len()];
    let sinks: Vec<Option<Sink>> = raised.iter().map(|r| sink(w, r.kind, r.entity)).collect();
    let hops = |i: usize| {
        sinks[i]
            .filter(Sink::converges)
            .map_or(usize::MAX, |s| s.hops)
    };
    let mut order: Vec<(u8, usize)> = raised
        .iter()
        .enumerate()
        .filter_map(|(i, r)| rank(r.kind, r.typed).map(|k| (k, i)))
        .collect();
    order.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then(hops(a.1).cmp(&hops(b.1)))
            .then(raised[b.1].score.total_cmp(&raised[a.1].score))
    });
    let mut is_root = vec![false; raised.len()];
    for (_, i) in order {
        if of[i].is_some() {
            continue;
        }
        is_root[i] = true;
        let root = &raised[i];
        let r = reach(w, root, sinks[i]);
        for (j, c) in raised.iter().enumerate() {
            if j != i
                && !c.open
                && !is_root[j]
                && of[j].is_none()
                && joins(w, root, &r, c, sinks[j])
            {
                of[j] = Some(i);
            }
        }
    }
    of
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FlowRow;

    fn flow(src: &str, dst: &str, path: &[u32]) -> FlowRow {
        FlowRow {
            src: src.parse().ok(),
            dst: dst.parse().ok(),
            dst_port: Some(53),
            reports: 10.0,
            bytes: 5_000.0,
            path: path.to_vec(),
            ..FlowRow::default()
        }
    }

    fn raised(kind: EntityKind, entity: &str, typed: AnomalyType, score: f64) -> Raised<'_> {
        Raised {
            kind,
            entity,
            score,
            typed,
            open: false,
        }
    }

    #[test]
    fn a_ddos_takes_its_attackers_and_its_paths_and_leaves_a_link_failure_alone() {
        use AnomalyType::*;
        use EntityKind::*;
        let w = Window {
            flows: vec![
                flow("10.0.0.1", "10.0.0.9", &[1, 5, 3]),
                flow("10.0.0.2", "10.0.0.9", &[2, 5, 3]),
                flow("10.0.0.7", "10.0.0.8", &[7, 8]),
            ],
            ..Window::default()
        };
        let r = [
            raised(Destination, "10.0.0.9", Ddos, 9.0),
            raised(Source, "10.0.0.1", Ddos, 5.0),
            raised(Source, "10.0.0.2", Unknown, 5.0),
            raised(Queue, "5/0", Congestion, 6.0),
            raised(Link, "3:1", Unknown, 6.0),
            // A failure on the victim's path, and a queue off it: raised on their own.
            raised(Link, "5:2", LinkFailure, 7.0),
            raised(Queue, "7/0", Unknown, 6.0),
            // An address the attack does not reach.
            raised(Source, "10.0.0.7", Unknown, 5.0),
        ];
        let of = roots(&w, &r);
        assert_eq!(
            of,
            vec![None, Some(0), Some(0), Some(0), Some(0), None, None, None]
        );
        // An entity already raised on its own stays so.
        let mut r2 = r;
        r2[3].open = true;
        assert_eq!(roots(&w, &r2)[3], None);
    }

    #[test]
    fn a_congested_queue_takes_the_destination_it_serves_but_a_ddos_comes_first() {
        use AnomalyType::*;
        use EntityKind::*;
        let w = Window {
            flows: vec![
                flow("10.0.0.1", "10.0.0.3", &[1, 5, 3]),
                flow("10.0.0.2", "10.0.0.9", &[2, 6, 4]),
            ],
            ..Window::default()
        };
        let r = [
            raised(Queue, "3/0", Congestion, 9.0),
            raised(Destination, "10.0.0.3", Unknown, 5.0),
            raised(Link, "3:2", Unknown, 5.0),
            raised(Destination, "10.0.0.9", Unknown, 5.0),
        ];
        assert_eq!(roots(&w, &r), vec![None, Some(0), Some(0), None]);
        // The same queue on a DDoS victim's path is the attack's, not a root of its own.
        let r = [
            raised(Queue, "3/0", Congestion, 9.0),
            raised(Destination, "10.0.0.3", Ddos, 5.0),
        ];
        assert_eq!(roots(&w, &r), vec![Some(1), None]);
        // The destination it serves, congested too: the queue's.
        let r = [
            raised(Queue, "3/0", Congestion, 9.0),
            raised(Destination, "10.0.0.3", Congestion, 5.0),
        ];
        assert_eq!(roots(&w, &r), vec![None, Some(0)]);
    }

    #[test]
    fn a_congested_destination_takes_its_senders_and_the_queues_on_their_way() {
        use AnomalyType::*;
        use EntityKind::*;
        let w = Window {
            flows: vec![
                flow("10.0.0.1", "10.0.0.3", &[1, 5, 3]),
                flow("10.0.0.2", "10.0.0.3", &[2, 5, 3]),
                flow("10.0.0.7", "10.0.0.8", &[7, 8]),
            ],
            ..Window::default()
        };
        let r = [
            raised(Destination, "10.0.0.3", Congestion, 9.0),
            raised(Source, "10.0.0.1", Unknown, 5.0),
            raised(Queue, "3/1", Unknown, 5.0),
            raised(Source, "10.0.0.7", Unknown, 5.0),
        ];
        assert_eq!(roots(&w, &r), vec![None, Some(0), Some(0), None]);
    }

    #[test]
    fn an_incast_is_one_anomaly_rooted_at_the_queue_nearest_its_target() {
        use crate::features::LinkAcc;
        use AnomalyType::*;
        use EntityKind::*;
        let heavy = |src: &str, dst: &str, path: &[u32]| FlowRow {
            bytes: 500_000.0,
            ..flow(src, dst, path)
        };
        let link = |next: Option<u32>| LinkAcc {
            samples: 10.0,
            next,
            ..LinkAcc::default()
        };
        // Answers from hosts behind switches 1 and 2 meet at spine 5 and at switch 3's port
        // towards their target 10.0.0.3; switch 1's uplink carries two other transfers too
        // (the target takes the most of its bytes, not half); a transfer elsewhere fills
        // switch 7's port to 8.
        let w = Window {
            flows: vec![
                heavy("10.0.0.1", "10.0.0.3", &[1, 5, 3]),
                heavy("10.0.0.2", "10.0.0.3", &[2, 5, 3]),
                flow("10.0.0.4", "10.0.0.6", &[1, 5, 3]),
                FlowRow {
                    bytes: 300_000.0,
                    ..flow("10.0.0.4", "10.0.0.10", &[1, 5, 9])
                },
                FlowRow {
                    bytes: 300_000.0,
                    ..flow("10.0.0.4", "10.0.0.11", &[1, 5, 9])
                },
                heavy("10.0.0.7", "10.0.0.8", &[7, 8]),
            ],
            links: [
                ((3, 0), link(None)),
                ((5, 1), link(Some(3))),
                ((5, 2), link(Some(9))),
                ((1, 4), link(Some(5))),
                ((2, 4), link(Some(5))),
                ((7, 1), link(Some(8))),
            ]
            .into_iter()
            .collect(),
            ..Window::default()
        };
        let r = [
            raised(Queue, "5:1/0", Congestion, 9.0),
            raised(Queue, "3:0/0", Congestion, 6.0),
            raised(Queue, "1:4/0", Congestion, 5.0),
            raised(Link, "2:4", Unknown, 5.0),
            raised(Queue, "7:1/0", Congestion, 7.0),
            // The spine's port towards the other transfers' switch: not the incast's.
            raised(Link, "5:2", Unknown, 5.0),
        ];
        // The highest score is the spine's, but the target's port is where the incast is.
        assert_eq!(
            roots(&w, &r),
            vec![Some(1), None, Some(1), Some(1), None, None]
        );
        let uplink = sink(&w, Queue, "1:4/0").unwrap();
        assert_eq!(uplink.dst, "10.0.0.3".parse::<IpAddr>().unwrap());
        assert!(!uplink.converges());
        assert_eq!(sink(&w, Queue, "5:1/0").map(|s| s.hops), Some(1));
        // A queue known only by switch and queue id has no port, so no sink: its switch's
        // queues only.
        let r = [
            raised(Queue, "3/0", Congestion, 9.0),
            raised(Queue, "1:4/0", Congestion, 5.0),
        ];
        assert_eq!(roots(&w, &r), vec![None, None]);
    }
}
