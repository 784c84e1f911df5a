//! Explanations and recommended actions: who an anomaly reaches (its blast radius, from the
//! window's flows and their paths) and the intents (docs/intents.md) that would answer it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use kplane_model::results::{AnomalyType, BlastRadius, EntityKind};
use serde_json::{Value, json};

use crate::features::{FlowRow, Window, node_of, parse_link};

/// At most this many flows are listed (the total is counted).
const LISTED: usize = 50;
/// At most this many sources are blocked for one anomaly.
pub const BLOCKED: usize = 32;
/// A DDoS victim's source is blocked if it sent it at least this share of the heaviest source's
/// bytes in the window: attackers are blocked, a client that sent the victim a little is not.
const ATTACKER_SHARE: f64 = 0.1;

/// The flows an entity concerns in a window.
pub fn flows_of<'w>(w: &'w Window, kind: EntityKind, entity: &str) -> Vec<&'w FlowRow> {
    let ip: Option<IpAddr> = entity.parse().ok();
    let node = node_of(entity);
    w.flows
        .iter()
        .filter(|f| match kind {
            EntityKind::Source => f.src.is_some() && f.src == ip,
            EntityKind::Destination => f.dst.is_some() && f.dst == ip,
            EntityKind::Queue | EntityKind::Link => node.is_some_and(|node| f.path.contains(&node)),
            EntityKind::Flow => false,
        })
        .collect()
}

/// Who an entity's anomaly of type `t` reaches in window `w`: its flows (the heaviest listed),
/// the switches, queues and links on their paths; for an address its peers (a port scan's
/// target's also its scanner), for a queue or link the destination its traffic converges on
/// ([`sink`]).
pub fn blast_radius(w: &Window, kind: EntityKind, entity: &str, t: AnomalyType) -> BlastRadius {
    let flows = &flows_of(w, kind, entity)[..];
    let nodes: BTreeSet<u32> = flows.iter().flat_map(|f| f.path.iter().copied()).collect();
    let queues = w
        .queues
        .keys()
        .filter(|(n, _, _)| nodes.contains(n))
        .copied()
        .collect();
    let links = w
        .links
        .keys()
        .filter(|(n, _)| nodes.contains(n))
        .copied()
        .collect();
    let mine: BTreeSet<*const FlowRow> = flows.iter().map(|f| *f as *const FlowRow).collect();
    let other_flows = w
        .flows
        .iter()
        .filter(|f| !mine.contains(&(*f as *const FlowRow)))
        .filter(|f| f.path.iter().any(|n| nodes.contains(n)))
        .count();
    let mut heaviest = flows.to_vec();
    heaviest.sort_by(|a, b| b.bytes.total_cmp(&a.bytes));
    BlastRadius {
        flows: heaviest.iter().take(LISTED).map(|f| f.flow_ref()).collect(),
        flows_total: flows.len(),
        nodes: nodes.into_iter().collect(),
        queues,
        links,
        other_flows,
        reverse_link: None,
        peers: match kind {
            EntityKind::Queue | EntityKind::Link => sink(w, kind, entity)
                .filter(Sink::converges)
                .map(|s| s.dst)
                .into_iter()
                .collect(),
            EntityKind::Destination if t == AnomalyType::PortScan => {
                let mut p = peers(kind, flows);
                p.extend(scanner(flows).filter(|s| !p.contains(s)));
                p
            }
            _ => peers(kind, flows),
        },
        collateral: Vec::new(),
    }
}

/// Where the traffic through a queue's or link's port went in a window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sink {
    /// The destination that took the most of the port's bytes.
    pub dst: IpAddr,
    /// Its share of them.
    pub share: f64,
    /// The switches its flows there still cross after this one (0: the port leads to it).
    pub hops: usize,
}

impl Sink {
    /// Whether the port's traffic converges on it: at least half of its bytes went there (an
    /// incast's target, an elephant's receiver).
    pub fn converges(&self) -> bool {
        self.share >= 0.5
    }
}

/// The sink of a queue (`5:2/0`) or link (`5:2`) in window `w`: none when no bytes with a
/// destination went through its port, or the port is not known (no link row in the window, a
/// queue keyed without its port). A port towards another switch carries the flows whose path
/// goes there next; a port towards a host, the flows whose path ends at its switch.
pub fn sink(w: &Window, kind: EntityKind, entity: &str) -> Option<Sink> {
    let (node, port) = match kind {
        EntityKind::Queue => match kplane_model::results::parse_queue_entity(entity)? {
            (node, Some(port), _) => (node, port),
            _ => return None,
        },
        EntityKind::Link => parse_link(entity)?,
        _ => return None,
    };
    let next = w.links.get(&(node, port))?.next;
    // Each flow through the port, with the switches it still crosses after this one.
    let through: Vec<(&FlowRow, usize)> = w
        .flows
        .iter()
        .filter_map(|f| {
            let at = f.path.iter().position(|n| *n == node)?;
            let on = match next {
                Some(next) => f.path.get(at + 1) == Some(&next),
                None => at + 1 == f.path.len(),
            };
            on.then_some((f, f.path.len() - 1 - at))
        })
        .collect();
    let total: f64 = through.iter().map(|(f, _)| f.bytes).sum();
    let (dst, bytes) = heaviest(through.iter().filter_map(|(f, _)| Some((f.dst?, f.bytes))))
        .into_iter()
        .next()
        .filter(|(_, b)| *b > 0.0)?;
    let hops = through
        .iter()
        .filter(|(f, _)| f.dst == Some(dst))
        .map(|(_, h)| *h)
        .min()?;
    Some(Sink {
        dst,
        share: bytes / total,
        hops,
    })
}

/// The addresses at the other end of at least half of an address's flows (a scanner's
/// target, a scanned host's scanner) and of at least half of its bytes (a flooding attacker's
/// victim).
fn peers(kind: EntityKind, flows: &[&FlowRow]) -> Vec<IpAddr> {
    let other = |f: &FlowRow| match kind {
        EntityKind::Source => f.dst,
        EntityKind::Destination => f.src,
        _ => None,
    };
    let mut by: Vec<(IpAddr, usize, f64)> = Vec::new();
    for f in flows {
        let Some(ip) = other(f) else { continue };
        match by.iter_mut().find(|(x, ..)| *x == ip) {
            Some(e) => {
                e.1 += 1;
                e.2 += f.bytes;
            }
            None => by.push((ip, 1, f.bytes)),
        }
    }
    let n = by.iter().map(|e| e.1).sum::<usize>();
    let bytes = by.iter().map(|e| e.2).sum::<f64>();
    let by_flows = by.iter().find(|e| 2 * e.1 >= n).map(|e| e.0);
    let by_bytes = by
        .iter()
        .find(|e| bytes > 0.0 && 2.0 * e.2 >= bytes)
        .map(|e| e.0);
    let mut peers: Vec<IpAddr> = by_flows.into_iter().chain(by_bytes).collect();
    peers.dedup();
    peers
}

/// A scanned host's scanner: the source that reached it on at least half of the destination
/// ports it was reached on in the window — what made it a port scan's target. Among a busy
/// host's clients a scanner's probes are a few of its flows (56 of 212 on `ls-4x8-10g`), so
/// it is seldom a peer by flows or bytes; by ports it is (58 of 59).
fn scanner(flows: &[&FlowRow]) -> Option<IpAddr> {
    let mut ports: BTreeSet<u16> = BTreeSet::new();
    let mut by: BTreeMap<IpAddr, BTreeSet<u16>> = BTreeMap::new();
    for f in flows {
        let Some(port) = f.dst_port else { continue };
        ports.insert(port);
        if let Some(src) = f.src {
            by.entry(src).or_default().insert(port);
        }
    }
    by.into_iter()
        .max_by_key(|(_, p)| p.len())
        .filter(|(_, p)| 2 * p.len() >= ports.len())
        .map(|(src, _)| src)
}

fn host(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => format!("{v4}/32"),
        IpAddr::V6(v6) => format!("{v6}/128"),
    }
}

/// Bytes per address, heaviest first.
fn heaviest(bytes: impl Iterator<Item = (IpAddr, f64)>) -> Vec<(IpAddr, f64)> {
    let mut by: Vec<(IpAddr, f64)> = Vec::new();
    for (ip, b) in bytes {
        match by.iter_mut().find(|(x, _)| *x == ip) {
            Some(e) => e.1 += b,
            None => by.push((ip, b)),
        }
    }
    by.sort_by(|a, b| b.1.total_cmp(&a.1));
    by
}

/// The (protocol, destination port) that the most distinct sources use among `flows`, and
/// how many: a many-source flood's signature.
fn widest_class(flows: &[&FlowRow]) -> Option<((u8, u16), usize)> {
    let mut sources: BTreeMap<(u8, u16), BTreeSet<IpAddr>> = BTreeMap::new();
    for f in flows {
        if let (Some(p), Some(port), Some(src)) = (f.protocol, f.dst_port, f.src) {
            sources.entry((p, port)).or_default().insert(src);
        }
    }
    sources
        .into_iter()
        .map(|(class, s)| (class, s.len()))
        .max_by_key(|(_, n)| *n)
}

/// Why a flood whose widest kind of traffic comes from `n` of the victim's `sources` is
/// answered by blocking that kind rather than its heaviest sources, if it is: more sources than
/// are blocked one by one, or (`spread`: reached from many new sources) most of them.
fn kind_blocked_because(n: usize, spread: bool, sources: usize) -> Option<String> {
    if n > BLOCKED {
        Some(format!("more than {BLOCKED} to block one by one"))
    } else if spread && 2 * n > sources {
        Some(format!(
            "most of its {sources} sources, new to it (its heaviest are its own clients)"
        ))
    } else {
        None
    }
}

/// An IP protocol as an intent's `match.protocol` names it (docs/intents.md).
fn protocol_name(p: u8) -> String {
    match p {
        6 => "tcp".into(),
        17 => "udp".into(),
        1 => "icmp".into(),
        other => other.to_string(),
    }
}

/// The intents that answer an anomaly, as documents the intent API accepts. `spread`: the
/// entity is reached from many more sources than usual ([`crate::typer::from_many_new_sources`]).
pub fn recommend(
    t: AnomalyType,
    kind: EntityKind,
    entity: &str,
    w: &Window,
    flows: &[&FlowRow],
    spread: bool,
    id: &str,
) -> Vec<Value> {
    let reason = |what: &str| format!("knowledge: {what}");
    let base = |mut v: Value, what: &str| {
        v["reason"] = json!(reason(what));
        v["origin"] = json!("recommendation");
        v["owner"] = json!("knowledge");
        v["anomaly"] = json!(id);
        v["ttl"] = json!("10m");
        v
    };
    match (t, kind) {
        // Block the heaviest sources towards the victim; a flood from more sources than that,
        // or from many new ones that most of the window's sources towards the victim share a
        // kind of traffic with (spoofed, a botnet: each sends little, and the heaviest sources
        // are the victim's own clients): its kind of traffic towards the victim.
        (AnomalyType::Ddos, EntityKind::Destination) => {
            let Ok(victim) = entity.parse::<IpAddr>() else {
                return Vec::new();
            };
            let sources = flows.iter().filter_map(|f| f.src).collect::<BTreeSet<_>>();
            if let Some(((protocol, port), n)) = widest_class(flows)
                && let Some(why) = kind_blocked_because(n, spread, sources.len())
            {
                return vec![base(
                    json!({"kind": "block", "match": {"dst": host(victim),
                        "protocol": protocol_name(protocol), "dst-port": port.to_string()}}),
                    &format!(
                        "DDoS towards {victim} from {n} sources, {why}: block its {} port \
                         {port} traffic",
                        protocol_name(protocol)
                    ),
                )];
            }
            let sources = heaviest(flows.iter().filter_map(|f| f.src.map(|s| (s, f.bytes))));
            let top = sources.first().map_or(0.0, |(_, b)| *b);
            sources
                .into_iter()
                .take_while(|(_, b)| *b >= ATTACKER_SHARE * top)
                .take(BLOCKED)
                .map(|(s, _)| {
                    base(
                        json!({"kind": "block", "match": {"src": host(s), "dst": host(victim)}}),
                        &format!("DDoS towards {victim}: block {s}"),
                    )
                })
                .collect()
        }
        // One of the attackers: block it towards the destination it sends the most to.
        (AnomalyType::Ddos, EntityKind::Source) => {
            let Ok(attacker) = entity.parse::<IpAddr>() else {
                return Vec::new();
            };
            heaviest(
                flows
                    .iter()
                    .filter(|f| f.src == Some(attacker))
                    .filter_map(|f| f.dst.map(|d| (d, f.bytes))),
            )
            .first()
                .map(|(victim, _)| {
                    base(
                        json!({"kind": "block", "match": {"src": host(attacker), "dst": host(*victim)}}),
                        &format!("DDoS from {attacker} towards {victim}: block it"),
                    )
                })
                .into_iter()
                .collect()
        }
        (AnomalyType::PortScan, EntityKind::Destination | EntityKind::Source) => {
            let mut pairs: BTreeSet<(IpAddr, IpAddr)> = BTreeSet::new();
            // The scanner is the source with the most destination ports towards the target.
            let mut ports: Vec<(IpAddr, IpAddr, BTreeSet<u16>)> = Vec::new();
            for f in flows {
                let (Some(s), Some(d), Some(p)) = (f.src, f.dst, f.dst_port) else {
                    continue;
                };
                match ports.iter_mut().find(|(a, b, _)| *a == s && *b == d) {
                    Some(e) => {
                        e.2.insert(p);
                    }
                    None => ports.push((s, d, [p].into())),
                }
            }
            ports.sort_by_key(|p| std::cmp::Reverse(p.2.len()));
            if let Some((s, d, _)) = ports.first() {
                pairs.insert((*s, *d));
            }
            pairs
                .into_iter()
                .map(|(s, d)| {
                    base(
                        json!({"kind": "block", "match": {"src": host(s), "dst": host(d)}}),
                        &format!("port scan of {d} by {s}: block it"),
                    )
                })
                .collect()
        }
        // Watch the flows through the congested switch with a tighter queue threshold.
        (AnomalyType::Congestion, EntityKind::Queue) => {
            let Some(node) = node_of(entity) else {
                return Vec::new();
            };
            vec![base(
                json!({"kind": "tune", "switches": [node],
                       "detection": {"algorithm": "per-hop", "measurement": "queue-occupancy", "threshold": 16}}),
                &format!(
                    "congestion at queue {entity}: report switch {node}'s occupancy changes of 16 cells"
                ),
            )]
        }
        // Steer the destinations whose traffic used the failed link around it.
        (AnomalyType::LinkFailure, EntityKind::Link) => {
            let Some((node, port)) = parse_link(entity) else {
                return Vec::new();
            };
            let Some(next) = w.next_node(node, port) else {
                return Vec::new();
            };
            let dsts: BTreeSet<IpAddr> = flows.iter().filter_map(|f| f.dst).collect();
            dsts.into_iter()
                .take(8)
                .map(|d| {
                    base(
                        json!({"kind": "reroute", "dst": host(d), "avoid": {"link": [node, next]}}),
                        &format!("link {node}–{next} failed: route {d} around it"),
                    )
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// One sentence for the console and the log.
pub fn summary(t: AnomalyType, kind: EntityKind, entity: &str, top: Option<&str>) -> String {
    let what = match t {
        AnomalyType::Ddos if kind == EntityKind::Source => "a DDoS from",
        AnomalyType::Ddos => "a DDoS towards",
        AnomalyType::PortScan => "a port scan involving",
        AnomalyType::Congestion => "congestion at",
        AnomalyType::LinkFailure => "a link failure at",
        AnomalyType::RoutingLoop => "a routing loop of",
        AnomalyType::BlackHole => "a black hole on the path of",
        AnomalyType::Unknown => "unusual behaviour of",
    };
    match top {
        Some(f) => format!("{what} {} {entity}; driven most by {f}", kind.as_str()),
        None => format!("{what} {} {entity}", kind.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(src: &str, dst: &str, bytes: f64) -> FlowRow {
        FlowRow {
            src: src.parse().ok(),
            dst: dst.parse().ok(),
            bytes,
            ..FlowRow::default()
        }
    }

    /// A scan of 40 ports: one light flow to each.
    fn scan(w: &mut Window, scanner: &str, target: &str) {
        for p in 1..=40 {
            w.flows.push(FlowRow {
                dst_port: Some(p),
                ..flow(scanner, target, 64.0)
            });
        }
    }

    /// What `recommend` answers an anomaly of type `t` at destination `dst` with (id "a").
    fn recommended(w: &Window, t: AnomalyType, dst: &str) -> Vec<Value> {
        recommended_spread(w, t, dst, false)
    }

    /// [`recommended`], `spread` saying whether `dst` hears from many new sources.
    fn recommended_spread(w: &Window, t: AnomalyType, dst: &str, spread: bool) -> Vec<Value> {
        let flows = flows_of(w, EntityKind::Destination, dst);
        recommend(t, EntityKind::Destination, dst, w, &flows, spread, "a")
    }

    fn blocked(recs: &[Value]) -> Vec<&str> {
        recs.iter()
            .map(|r| r["match"]["src"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn a_ddos_victim_blocks_its_heavy_sources_not_a_light_client() {
        let w = Window {
            flows: vec![
                flow("10.0.1.1", "10.0.0.1", 9e6),
                flow("10.0.1.2", "10.0.0.1", 8e6),
                // A client that sent the victim a little.
                flow("10.0.2.9", "10.0.0.1", 4e4),
                // Elsewhere.
                flow("10.0.1.3", "10.0.0.7", 9e6),
            ],
            ..Window::default()
        };
        let recs = recommended(&w, AnomalyType::Ddos, "10.0.0.1");
        assert_eq!(blocked(&recs), ["10.0.1.1/32", "10.0.1.2/32"]);
        for r in &recs {
            assert_eq!(r["kind"], "block");
            assert_eq!(r["match"]["dst"], "10.0.0.1/32");
            assert_eq!(r["anomaly"], "a");
        }
    }

    #[test]
    fn a_flood_from_more_sources_than_blocks_blocks_its_kind_of_traffic() {
        let mut w = Window::default();
        // A client's heavy DNS traffic and a spoofed UDP flood to port 80.
        w.flows.push(FlowRow {
            protocol: Some(17),
            dst_port: Some(53),
            ..flow("10.0.2.2", "10.0.0.1", 9e6)
        });
        for i in 0..(BLOCKED as u8 + 8) {
            w.flows.push(FlowRow {
                protocol: Some(17),
                dst_port: Some(80),
                ..flow(&format!("198.18.0.{i}"), "10.0.0.1", 640.0)
            });
        }
        let recs = recommended(&w, AnomalyType::Ddos, "10.0.0.1");
        assert_eq!(recs.len(), 1, "{recs:?}");
        let m = &recs[0]["match"];
        assert_eq!(m["dst"], "10.0.0.1/32");
        assert_eq!(m["protocol"], "udp");
        assert_eq!(m["dst-port"], "80");
        assert!(m.get("src").is_none(), "the client is not blocked: {m}");
        assert_eq!(
            recs[0]["reason"],
            "knowledge: DDoS towards 10.0.0.1 from 40 sources, more than 32 to block one by \
             one: block its udp port 80 traffic"
        );
    }

    #[test]
    fn a_flood_from_many_new_sources_blocks_its_kind_of_traffic_not_the_clients() {
        let mut w = Window::default();
        // The victim's clients, heavy, and a spoofed flood's first moments: 20 sources of a
        // packet each, fewer than are blocked one by one.
        for (i, port) in [443, 443, 53].into_iter().enumerate() {
            w.flows.push(FlowRow {
                protocol: Some(6),
                dst_port: Some(port),
                ..flow(&format!("10.0.2.{i}"), "10.0.0.1", 9e5)
            });
        }
        for i in 0..20 {
            w.flows.push(FlowRow {
                protocol: Some(17),
                dst_port: Some(80),
                ..flow(&format!("198.18.0.{i}"), "10.0.0.1", 64.0)
            });
        }
        let recs = recommended_spread(&w, AnomalyType::Ddos, "10.0.0.1", true);
        assert_eq!(recs.len(), 1, "{recs:?}");
        let m = &recs[0]["match"];
        assert_eq!(
            (&m["protocol"], &m["dst-port"]),
            (&"udp".into(), &"80".into()),
            "{m}"
        );
        assert!(m.get("src").is_none(), "no client is blocked: {m}");
        assert_eq!(
            recs[0]["reason"],
            "knowledge: DDoS towards 10.0.0.1 from 20 sources, most of its 23 sources, new to \
             it (its heaviest are its own clients): block its udp port 80 traffic"
        );
        // From the usual sources (no spread), the heaviest are the attackers.
        let recs = recommended(&w, AnomalyType::Ddos, "10.0.0.1");
        assert_eq!(
            blocked(&recs),
            ["10.0.2.0/32", "10.0.2.1/32", "10.0.2.2/32"]
        );
        // A spread whose sources share no kind of traffic (a flood to random ports) names no
        // kind to block: the heaviest sources are.
        let mut random = Window {
            flows: w.flows[..3].to_vec(),
            ..Window::default()
        };
        for i in 0..20u16 {
            random.flows.push(FlowRow {
                protocol: Some(17),
                dst_port: Some(1000 + i),
                ..flow(&format!("198.18.0.{i}"), "10.0.0.1", 64.0)
            });
        }
        let recs = recommended_spread(&random, AnomalyType::Ddos, "10.0.0.1", true);
        assert!(
            recs.iter().all(|r| r["match"].get("src").is_some()),
            "{recs:?}"
        );
    }

    #[test]
    fn an_address_peers_hold_half_its_flows_or_half_its_bytes() {
        let mut w = Window::default();
        // A scanner: many light flows to its target, one heavy one elsewhere.
        scan(&mut w, "10.0.3.3", "10.0.0.5");
        w.flows.push(flow("10.0.3.3", "10.0.0.9", 9e6));
        // An attacker: one flood among several light flows.
        w.flows.push(flow("10.0.4.4", "10.0.0.7", 9e6));
        for d in 1..=4 {
            w.flows.push(flow("10.0.4.4", &format!("10.0.0.{d}"), 1e3));
        }
        // A client spread evenly: none.
        for d in 1..=4 {
            w.flows.push(flow("10.0.5.5", &format!("10.0.0.{d}"), 1e3));
        }
        let peers = |kind, e: &str| blast_radius(&w, kind, e, AnomalyType::Unknown).peers;
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            peers(EntityKind::Source, "10.0.3.3"),
            [ip("10.0.0.5"), ip("10.0.0.9")]
        );
        assert_eq!(peers(EntityKind::Destination, "10.0.0.5"), [ip("10.0.3.3")]);
        assert_eq!(peers(EntityKind::Source, "10.0.4.4"), [ip("10.0.0.7")]);
        assert!(peers(EntityKind::Source, "10.0.5.5").is_empty());
        // The heaviest flows are listed first.
        let b = blast_radius(&w, EntityKind::Source, "10.0.3.3", AnomalyType::PortScan);
        assert_eq!(b.flows[0].dst_ip, Some(ip("10.0.0.9")));
    }

    #[test]
    fn a_scanned_hosts_scanner_is_its_peer_by_ports_among_many_clients() {
        let mut w = Window::default();
        // A busy server: 200 clients' flows to its 4 service ports, each heavier than a
        // probe; a scanner's 40 probes are a sixth of its flows and a sliver of its bytes.
        for c in 0..200 {
            w.flows.push(FlowRow {
                dst_port: Some(80 + (c % 4) as u16),
                ..flow(&format!("10.1.{}.{}", c / 100, c % 100), "10.0.0.5", 1e5)
            });
        }
        scan(&mut w, "10.0.3.3", "10.0.0.5");
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let peers = |w: &Window, t| blast_radius(w, EntityKind::Destination, "10.0.0.5", t).peers;
        assert_eq!(peers(&w, AnomalyType::PortScan), [ip("10.0.3.3")]);
        // Under any other type the ports say nothing: no client holds half its flows or bytes.
        assert!(peers(&w, AnomalyType::Unknown).is_empty());
        // A host reached on its usual ports only has no scanner.
        w.flows.retain(|f| f.src != Some(ip("10.0.3.3")));
        assert!(peers(&w, AnomalyType::PortScan).is_empty());
    }

    #[test]
    fn a_ports_sink_is_the_destination_of_the_most_of_its_bytes() {
        use crate::features::LinkAcc;
        let on = |src: &str, dst: &str, bytes: f64, path: &[u32]| FlowRow {
            path: path.to_vec(),
            ..flow(src, dst, bytes)
        };
        let mut w = Window {
            flows: vec![
                on("10.0.0.1", "10.0.0.3", 6e5, &[1, 5, 3]),
                on("10.0.0.2", "10.0.0.4", 4e5, &[2, 5, 3]),
                on("10.0.0.2", "10.0.0.9", 9e6, &[2, 5, 9]),
            ],
            ..Window::default()
        };
        for (port, next) in [(1, Some(3)), (2, Some(9)), (0, None)] {
            let l = LinkAcc {
                next,
                ..LinkAcc::default()
            };
            w.links.insert((5, port), l);
            w.links.insert((3, port), LinkAcc { next: None, ..l });
        }
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // Towards switch 3: the flows whose path goes there next, 60 % of it to 10.0.0.3;
        // the heavy transfer through the same switch to 9 does not count.
        let towards_3 = Some(Sink {
            dst: ip("10.0.0.3"),
            share: 0.6,
            hops: 1,
        });
        assert_eq!(sink(&w, EntityKind::Queue, "5:1/0"), towards_3);
        assert_eq!(sink(&w, EntityKind::Link, "5:1"), towards_3);
        assert_eq!(
            blast_radius(&w, EntityKind::Queue, "5:1/0", AnomalyType::Congestion).peers,
            [ip("10.0.0.3")]
        );
        // Towards a host: the flows that end at the switch.
        assert_eq!(
            sink(&w, EntityKind::Queue, "3:0/0").map(|s| s.hops),
            Some(0)
        );
        // The most, but not half: its sink, on which it does not converge (no peer).
        w.flows.push(on("10.0.0.2", "10.0.0.5", 4e5, &[2, 5, 3]));
        let s = sink(&w, EntityKind::Queue, "5:1/0").unwrap();
        assert_eq!((s.dst, s.converges()), (ip("10.0.0.3"), false));
        assert!(
            blast_radius(&w, EntityKind::Queue, "5:1/0", AnomalyType::Congestion)
                .peers
                .is_empty()
        );
        // No port known, no link row: none.
        assert_eq!(sink(&w, EntityKind::Queue, "5/0"), None);
        assert_eq!(sink(&w, EntityKind::Queue, "5:7/0"), None);
    }

    #[test]
    fn a_port_scan_blocks_the_scanner_towards_its_target() {
        let mut w = Window::default();
        scan(&mut w, "10.0.3.3", "10.0.0.5");
        w.flows.push(FlowRow {
            dst_port: Some(443),
            ..flow("10.0.2.2", "10.0.0.5", 9e6)
        });
        let recs = recommended(&w, AnomalyType::PortScan, "10.0.0.5");
        assert_eq!(blocked(&recs), ["10.0.3.3/32"]);
    }
}
