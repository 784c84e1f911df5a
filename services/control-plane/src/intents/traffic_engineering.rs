//! Traffic engineering from the knowledge service's forecasts: when a switch-to-switch
//! link's forecast utilisation reaches `utilization` (‰ of its rate), the destinations whose
//! flows carry most of its traffic are moved onto paths whose forecasts have room for them,
//! each with a `reroute` recommendation (the policy decides whether it applies at once, and
//! verification checks that the flows left the link). A move whose link is still hot `settle`
//! after it was written is rolled back; a move is withdrawn once `hold` has passed and the
//! link's forecast with the moved traffic back would stay below `release`.
//!
//! A reroute moves every flow towards its destination (the forwarding table matches
//! destinations), so a destination's share of a link is the share of the link's reported
//! bytes that flows towards it carry, times the link's forecast.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use kplane_model::results::Forecast;
use kplane_runtime::Shutdown;
use kplane_runtime::auth::{Identity, Role};
use kplane_southbound::Topology;
use serde::{Deserialize, Serialize};

use super::Intents;
use super::compile::reroute_path;
use super::model::{Avoid, IntentKind, IntentSpec, Origin};
use super::store::{Intent, State};
use super::verify::{FlowObs, observe};

/// The owner and actor of traffic-engineering intents.
pub const OWNER: &str = "traffic-engineering";

/// `[intent-api.intents.traffic-engineering]`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct TrafficEngineeringConfig {
    /// Off: forecasts move nothing.
    pub enabled: bool,
    /// A link whose forecast reaches this utilisation (‰ of its rate) is relieved; a path has
    /// room for a destination when each of its links' forecast plus the destination's share
    /// stays below it.
    pub utilization: f64,
    /// A move is withdrawn once the link's forecast plus the moved share is below this (‰).
    pub release: f64,
    /// At most this many destinations are moved off one link.
    pub max_moves: usize,
    /// How often the forecasts are read.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// How long after a move is written its link is judged: still at `utilization` → the
    /// move is rolled back.
    #[serde(with = "humantime_serde")]
    pub settle: Duration,
    /// The least time a move stands before it may be withdrawn; also how long a link whose
    /// move was rolled back is left alone.
    #[serde(with = "humantime_serde")]
    pub hold: Duration,
    /// Table priority of the moves' entries.
    pub priority: u32,
}

impl Default for TrafficEngineeringConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            utilization: 800.0,
            release: 600.0,
            max_moves: 4,
            interval: Duration::from_secs(1),
            settle: Duration::from_secs(10),
            hold: Duration::from_secs(120),
            priority: 100,
        }
    }
}

impl TrafficEngineeringConfig {
    pub fn check(&self, problems: &mut Vec<String>) {
        let at = "intent-api.intents.traffic-engineering";
        if !(self.utilization > 0.0 && self.utilization <= 1000.0) {
            problems.push(format!("{at}: utilization must be in (0, 1000] (‰)"));
        }
        if !(self.release >= 0.0 && self.release < self.utilization) {
            problems.push(format!("{at}: release must be >= 0 and below utilization"));
        }
        if self.max_moves == 0 {
            problems.push(format!("{at}: max-moves must be >= 1"));
        }
        if self.interval < Duration::from_millis(100) {
            problems.push(format!("{at}: interval must be >= 100ms"));
        }
    }
}

/// A switch-to-switch link in one direction: (from, to).
type Hop = (u32, u32);

/// The latest forecast per link direction: (predicted, observed) in ‰, from the forecasts of
/// `link_utilization` whose entity (`node:port`) leads to another switch.
pub fn link_loads(topo: &Topology, forecasts: &[Forecast]) -> HashMap<Hop, (f64, f64)> {
    forecasts
        .iter()
        .filter(|f| f.series == "link_utilization")
        .filter_map(|f| {
            let (node, port) = f.entity.split_once(':')?;
            let node = node.parse().ok()?;
            let to = topo.peer(node, port.parse().ok()?)?;
            Some(((node, to), (f.predicted.max(0.0), f.last_value.max(0.0))))
        })
        .collect()
}

/// The heavier direction of a link.
fn either(loads: &HashMap<Hop, (f64, f64)>, [a, b]: [u32; 2]) -> (f64, f64) {
    let (x, y) = (
        loads.get(&(a, b)).copied().unwrap_or_default(),
        loads.get(&(b, a)).copied().unwrap_or_default(),
    );
    (x.0.max(y.0), x.1.max(y.1))
}

/// One destination moved off a hot link.
#[derive(Clone, Debug, PartialEq)]
pub struct Move {
    /// `a.b.c.d/32`.
    pub dst: String,
    pub avoid: Avoid,
    /// Its share of the hot link (‰).
    pub share: f64,
    /// The path its flows from the heaviest source switch take once moved.
    pub path: Vec<u32>,
}

fn crosses(path: &[u32], (a, b): Hop) -> bool {
    path.windows(2).any(|w| (w[0], w[1]) == (a, b))
}

/// The moves that relieve `hot`: destinations by their share of its bytes, heaviest first
/// (those in `fixed`, already rerouted, stay), each onto the shortest path that avoids `hot`
/// and every link without room for its share, until the link's forecast minus the moved
/// shares is below `utilization`. All or nothing: moves that would leave the link hot are not
/// made. `loads` is updated with the moves.
pub fn plan(
    topo: &Topology,
    loads: &mut HashMap<Hop, (f64, f64)>,
    flows: &[FlowObs],
    hot: Hop,
    fixed: &HashSet<u32>,
    cfg: &TrafficEngineeringConfig,
) -> Vec<Move> {
    let before = loads.clone();
    let load = loads.get(&hot).map_or(0.0, |l| l.0);
    // Bytes towards each destination across the link, and the switch most of them enter at.
    let mut by_dst: BTreeMap<u32, (u64, BTreeMap<u32, u64>)> = BTreeMap::new();
    let mut total = 0u64;
    for f in flows.iter().filter(|f| crosses(&f.path, hot)) {
        let e = by_dst.entry(f.dst).or_default();
        e.0 += f.bytes;
        *e.1.entry(f.path[0]).or_default() += f.bytes;
        total += f.bytes;
    }
    let mut ranked: Vec<(u32, u64, u32)> = by_dst
        .into_iter()
        .filter(|(d, _)| !fixed.contains(d))
        .map(|(d, (b, from))| {
            let entry = from
                .iter()
                .max_by_key(|(_, b)| **b)
                .map_or(hot.0, |(s, _)| *s);
            (d, b, entry)
        })
        .collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut remaining = load;
    let mut out = Vec::new();
    for (dst, bytes, from) in ranked {
        if remaining < cfg.utilization || out.len() >= cfg.max_moves {
            break;
        }
        let share = load * bytes as f64 / total.max(1) as f64;
        let prefix = format!("{}/32", std::net::Ipv4Addr::from(dst));
        let mut links: Vec<[u32; 2]> = topo
            .links
            .iter()
            .filter(|&&((a, _), (b, _), up)| {
                up && [a, b] != [hot.0, hot.1] && [b, a] != [hot.0, hot.1]
            })
            .map(|&((a, _), (b, _), _)| [a, b])
            .filter(|&l| either(loads, l).0 + share >= cfg.utilization)
            .collect();
        links.sort_unstable();
        let avoid = Avoid {
            switch: None,
            link: Some([hot.0, hot.1]),
            links,
        };
        // No path around every full link: this destination does not move.
        let Ok(path) = reroute_path(topo, &prefix, &avoid, from) else {
            continue;
        };
        for w in path.windows(2) {
            loads.entry((w[0], w[1])).or_default().0 += share;
        }
        if let Some(l) = loads.get_mut(&hot) {
            l.0 -= share;
        }
        remaining -= share;
        out.push(Move {
            dst: prefix,
            avoid,
            share,
            path,
        });
    }
    if remaining >= cfg.utilization {
        *loads = before;
        return Vec::new();
    }
    out
}

/// What the controller remembers of its moves (lost on a restart: a move adopted then has
/// share 0 and counts as judged).
#[derive(Debug, Default)]
struct Moves {
    share: HashMap<String, f64>,
    judged: HashSet<String>,
    /// Links left alone until then (a move of theirs was rolled back).
    cooling: HashMap<[u32; 2], Instant>,
}

fn undirected([a, b]: [u32; 2]) -> [u32; 2] {
    [a.min(b), a.max(b)]
}

/// The hot link a move of this controller relieves.
fn relieved(i: &Intent) -> Option<(&str, [u32; 2])> {
    match &i.spec.kind {
        IntentKind::Reroute { dst, avoid } if i.spec.owner == OWNER => {
            avoid.link.map(|l| (dst.as_str(), l))
        }
        _ => None,
    }
}

/// Reads the forecasts every `interval` and moves, judges and withdraws, until `shutdown`.
pub async fn run(intents: Intents, cfg: TrafficEngineeringConfig, shutdown: Shutdown) {
    if !cfg.enabled {
        return;
    }
    let me = Identity {
        name: OWNER.into(),
        role: Role::Operator,
    };
    let mut moves = Moves::default();
    let mut tick = tokio::time::interval(cfg.interval);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shutdown.wait() => return,
        }
        step(&intents, &cfg, &me, &mut moves).await;
    }
}

async fn step(intents: &Intents, cfg: &TrafficEngineeringConfig, me: &Identity, moves: &mut Moves) {
    let topo = intents.topology().await;
    let mut loads = link_loads(&topo, &intents.telemetry.link_forecasts());
    if loads.is_empty() {
        return;
    }
    let now = Instant::now();
    let now_ms = kplane_model::unix_time_ns() / 1_000_000;
    moves.cooling.retain(|_, until| *until > now);
    let live: Vec<Intent> = intents
        .list(None)
        .await
        .into_iter()
        .filter(|i| !i.state.ended())
        .collect();
    let standing: Vec<&Intent> = live.iter().filter(|i| relieved(i).is_some()).collect();
    let mut relieving: HashSet<[u32; 2]> = HashSet::new();
    let mut rolled_back: HashSet<[u32; 2]> = HashSet::new();
    for &i in &standing {
        let Some((dst, link)) = relieved(i) else {
            continue;
        };
        let link = undirected(link);
        relieving.insert(link);
        let share = moves.share.get(&i.id).copied().unwrap_or(0.0);
        let (predicted, observed) = either(&loads, link);
        let written = i.applied_ms.unwrap_or(u64::MAX);
        if i.state == State::Active
            && !moves.judged.contains(&i.id)
            && now_ms.saturating_sub(written) >= cfg.settle.as_millis() as u64
        {
            if observed >= cfg.utilization || rolled_back.contains(&link) {
                let why = format!(
                    "link {}-{} still at {observed:.0}‰ (≥ {:.0}‰) {:?} after {dst} was moved off it",
                    link[0], link[1], cfg.utilization, cfg.settle
                );
                if intents.roll_back(&i.id, OWNER, &why).await.is_ok() {
                    tracing::info!(intent = %i.id, %why, "traffic engineering: move rolled back");
                    moves.cooling.insert(link, now + cfg.hold);
                    rolled_back.insert(link);
                }
                continue;
            }
            moves.judged.insert(i.id.clone());
        }
        let old_enough = now_ms.saturating_sub(i.created_ms) >= cfg.hold.as_millis() as u64;
        if moves.judged.contains(&i.id)
            && old_enough
            && predicted + share < cfg.release
            && intents.delete(&i.id, me).await.is_ok()
        {
            tracing::info!(
                intent = %i.id,
                "traffic engineering: link {}-{} at {predicted:.0}‰ with {dst}'s {share:.0}‰ back is below {:.0}‰; move withdrawn",
                link[0], link[1], cfg.release
            );
        }
    }
    moves
        .share
        .retain(|id, _| standing.iter().any(|i| &i.id == id));
    moves
        .judged
        .retain(|id| standing.iter().any(|i| &i.id == id));
    // Hot links nobody relieves yet, hottest first.
    let mut hot: Vec<(Hop, f64)> = loads
        .iter()
        .filter(|(_, l)| l.0 >= cfg.utilization)
        .map(|(h, l)| (*h, l.0))
        .filter(|((a, b), _)| {
            let l = undirected([*a, *b]);
            !relieving.contains(&l) && !moves.cooling.contains_key(&l)
        })
        .collect();
    if hot.is_empty() {
        return;
    }
    hot.sort_by(|a, b| b.1.total_cmp(&a.1));
    let flows = observe(&*intents.telemetry);
    // Destinations another reroute stands for (a second one would conflict).
    let fixed: HashSet<u32> = live
        .iter()
        .filter_map(|i| match &i.spec.kind {
            IntentKind::Reroute { dst, .. } => dst
                .strip_suffix("/32")
                .and_then(|a| a.parse::<std::net::Ipv4Addr>().ok())
                .map(u32::from),
            _ => None,
        })
        .collect();
    for (link, load) in hot {
        for m in plan(&topo, &mut loads, &flows, link, &fixed, cfg) {
            let spec = IntentSpec {
                kind: IntentKind::Reroute {
                    dst: m.dst.clone(),
                    avoid: m.avoid.clone(),
                },
                switches: None,
                priority: cfg.priority,
                ttl: None,
                owner: OWNER.into(),
                reason: format!(
                    "traffic engineering: link {}-{} forecast at {load:.0}‰ (≥ {:.0}‰); {} carries {:.0}‰ of it, moved onto {:?}",
                    link.0, link.1, cfg.utilization, m.dst, m.share, m.path
                ),
                origin: Origin::Recommendation,
                anomaly: None,
            };
            match intents.submit(spec, me).await {
                Ok(v) => {
                    let id = v["id"].as_str().unwrap_or_default().to_string();
                    tracing::info!(intent = %id, dst = %m.dst, link = ?link, "traffic engineering: move submitted");
                    moves.share.insert(id, m.share);
                }
                Err(e) => {
                    tracing::warn!(dst = %m.dst, error = ?e, "traffic engineering: move refused")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kplane_southbound::SwitchNode;

    /// Two paths from switch 1 to switch 4: 1-2-4 and 1-3-4; hosts 10.0.0.1 behind 1 and
    /// 10.0.4.x behind 4.
    fn diamond() -> Topology {
        let host = |id: u32, net: [u8; 4]| SwitchNode {
            id,
            hosts: vec![(u32::from_be_bytes(net), 24, 9)],
            ..Default::default()
        };
        Topology {
            switches: vec![
                host(1, [10, 0, 1, 0]),
                host(2, [10, 0, 2, 0]),
                host(3, [10, 0, 3, 0]),
                host(4, [10, 0, 4, 0]),
            ],
            links: vec![
                ((1, 1), (2, 1), true),
                ((1, 2), (3, 1), true),
                ((2, 2), (4, 1), true),
                ((3, 2), (4, 2), true),
            ],
        }
    }

    fn flow(dst: [u8; 4], path: &[u32], bytes: u64) -> FlowObs {
        FlowObs {
            window_start_ms: 0,
            window_end_ms: 1_000,
            last_seen_ms: 1_000,
            src: u32::from_be_bytes([10, 0, 1, 5]),
            dst: u32::from_be_bytes(dst),
            src_port: 1,
            dst_port: 2,
            protocol: 6,
            path: path.to_vec(),
            bytes,
        }
    }

    fn forecast(entity: &str, predicted: f64) -> Forecast {
        Forecast {
            series: "link_utilization".into(),
            entity: entity.into(),
            window_end_ns: 0,
            horizon_windows: 1,
            predicted,
            last_value: predicted,
            observed_end_ns: 0,
            ewma: predicted,
            model_version: 1,
        }
    }

    #[test]
    fn forecasts_of_switch_to_switch_ports_are_link_loads() {
        let loads = link_loads(
            &diamond(),
            &[
                forecast("1:1", 900.0),
                forecast("2:2", 100.0),
                forecast("1:9", 50.0),
            ],
        );
        assert_eq!(loads.get(&(1, 2)), Some(&(900.0, 900.0)));
        assert_eq!(loads.get(&(2, 4)), Some(&(100.0, 100.0)));
        // Port 9 leads to a host: not a link traffic engineering can relieve.
        assert_eq!(loads.len(), 2);
    }

    #[test]
    fn the_heaviest_destination_moves_onto_the_path_with_room_until_the_link_is_below() {
        let topo = diamond();
        let cfg = TrafficEngineeringConfig::default();
        let mut loads = link_loads(&topo, &[forecast("1:1", 900.0), forecast("1:2", 100.0)]);
        let flows = [
            flow([10, 0, 4, 1], &[1, 2, 4], 600),
            flow([10, 0, 4, 2], &[1, 2, 4], 300),
            flow([10, 0, 4, 3], &[1, 2, 4], 100),
            flow([10, 0, 4, 4], &[1, 3, 4], 5_000),
        ];
        let moves = plan(&topo, &mut loads, &flows, (1, 2), &HashSet::new(), &cfg);
        // 10.0.4.1 carries 60 % of 900‰: moving it leaves 360‰, below 800‰.
        assert_eq!(moves.len(), 1, "{moves:?}");
        assert_eq!(moves[0].dst, "10.0.4.1/32");
        assert_eq!(moves[0].path, vec![1, 3, 4]);
        assert!((moves[0].share - 540.0).abs() < 1e-9);
        assert_eq!(moves[0].avoid.link, Some([1, 2]));
        assert!((loads[&(1, 3)].0 - 640.0).abs() < 1e-9);
        assert!((loads[&(1, 2)].0 - 360.0).abs() < 1e-9);
    }

    #[test]
    fn a_destination_with_no_path_with_room_stays() {
        let topo = diamond();
        let cfg = TrafficEngineeringConfig::default();
        let mut loads = link_loads(&topo, &[forecast("1:1", 900.0), forecast("1:2", 700.0)]);
        let flows = [
            flow([10, 0, 4, 1], &[1, 2, 4], 600),
            flow([10, 0, 4, 2], &[1, 2, 4], 400),
        ];
        // Either share (540‰ or 360‰) on top of 1-3's 700‰ reaches 800‰: nothing moves.
        assert!(plan(&topo, &mut loads, &flows, (1, 2), &HashSet::new(), &cfg).is_empty());
        assert_eq!(loads[&(1, 2)].0, 900.0);
    }

    #[test]
    fn destinations_move_until_the_link_is_below_or_no_path_has_room() {
        let topo = diamond();
        let cfg = TrafficEngineeringConfig::default();
        let flows: Vec<FlowObs> = (1..=6)
            .map(|d| flow([10, 0, 4, d], &[1, 2, 4], 100 + u64::from(d)))
            .collect();
        let mut loads = link_loads(&topo, &[forecast("1:1", 1_000.0)]);
        let moves = plan(&topo, &mut loads, &flows, (1, 2), &HashSet::new(), &cfg);
        // About 170‰ each: 1,000 → 830 → 660‰, the heaviest first.
        assert_eq!(moves.len(), 2, "{moves:?}");
        assert_eq!(moves[0].dst, "10.0.4.6/32");
        assert_eq!(moves[1].dst, "10.0.4.5/32");
        assert!(loads[&(1, 2)].0 < cfg.utilization);

        let tight = TrafficEngineeringConfig {
            utilization: 300.0,
            release: 100.0,
            ..cfg
        };
        let mut loads = link_loads(&topo, &[forecast("1:1", 1_000.0)]);
        // 1-3 has room for one (170‰ < 300‰), not for a second (340‰): one move would
        // leave the link hot, so none is made.
        assert!(plan(&topo, &mut loads, &flows, (1, 2), &HashSet::new(), &tight).is_empty());
        assert_eq!(loads[&(1, 2)].0, 1_000.0);

        // A destination already rerouted stays, and still counts in the link's bytes.
        let mut loads = link_loads(&topo, &[forecast("1:1", 1_000.0)]);
        let fixed = HashSet::from([u32::from_be_bytes([10, 0, 4, 6])]);
        let moves = plan(&topo, &mut loads, &flows, (1, 2), &fixed, &cfg);
        assert_eq!(moves[0].dst, "10.0.4.5/32");
        assert!((moves[0].share - 1_000.0 * 105.0 / 621.0).abs() < 1e-9);
    }
}
