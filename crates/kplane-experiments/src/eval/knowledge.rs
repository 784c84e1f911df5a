//! `kplane eval knowledge`: the knowledge service scored against the emulator's ground truth.
//!
//! 1. **Train**: clean traffic (seed `--train-seed`, [`TRAIN_SEED`] by default) teaches the
//!    models of normal behaviour.
//! 2. **Label**: the scripted scenarios with their default parameters (the training variants),
//!    each starting at a point of one window drawn from its seed, are run; every anomaly raised
//!    is labelled from the ground truth → the type definitions' labelled set (`types.json`),
//!    unless `--labels` gives one.
//! 3. **Score**: each asked scenario runs `--runs` times (seeds `--seed`, `--seed`+1, …) with
//!    parameters drawn from the seed — other victims, attackers, rates, links and times than
//!    the training variants — and what the service raised is compared with what was injected.
//!
//! Every run is a fresh knowledge service loading the persisted models (a restart).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use kplane_emulator::run::RunConfig;
use kplane_emulator::topology::Topology;
use kplane_knowledge::typer::{Labelled, Typer};
use kplane_model::results::{Anomaly, AnomalyType, EntityKind};
use kplane_model::rng::Rng;

use super::family::{Family, Generator};
use super::forecasts::{ForecastScore, Periods, forecast_table, periods_of, score_forecasts};
use super::incidents::{self, IncidentScore};
use super::pipeline::{Outcome, Source, knowledge_config, run_pipeline};
use super::score::{Detection, Raised, SCORED, TypeScore, features_of, key, raised};

/// The clean run the models learn from, unless `--train-seed` says otherwise.
pub const TRAIN_SEED: u64 = 9_001;
/// The labelling runs' first seed.
pub const LABEL_SEED: u64 = 9_101;
/// Scored scenarios.
pub const SCENARIOS: [&str; 8] = [
    "ddos",
    "port-scan",
    "microburst",
    "link-failure",
    "mixed",
    "clean",
    "flash-crowd",
    "heavy-hitter",
];
#[derive(Debug, Args)]
pub struct KnowledgeArgs {
    /// ddos | port-scan | microburst | link-failure | mixed | clean | flash-crowd | heavy-hitter
    /// (repeatable), or an emulator scenario with parameters, run as given
    /// (`ddos:victim=3,rate=4`, docs/emulator.md).
    #[arg(long, default_values_t = ["mixed".to_string(), "clean".to_string()])]
    scenario: Vec<String>,
    /// Fabric families (repeatable): a preset (ft4-100m, ls-2x4-1g, ft6-1g, ws-20-100m,
    /// ls-4x8-10g, ft4-10g-sparse, indep-3tier) or a spec
    /// `topology=…;link-mbps=…;flows=…;elephants=…;jobs=…;job-mbps=…`. With several, each is
    /// scored held out: its type classifier learns from the other families' labels.
    #[arg(long, default_values_t = ["ft4-100m".to_string()])]
    family: Vec<String>,
    /// First seed of the scored runs (scenario parameters are drawn from it).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Scored runs per scenario (seeds seed, seed+1, …).
    #[arg(long, default_value_t = 3)]
    runs: u64,
    /// Virtual seconds scored per run (after its warm-up).
    #[arg(long, default_value_t = 40)]
    seconds: u64,
    /// Virtual seconds of each scored run's own traffic before its scored part, with nothing
    /// injected: the service learns the run's entities' habits from them, as a deployed one
    /// has, and what it raised that ended within them is not scored. A scenario with
    /// parameters is run as given, its times shares of the whole run.
    #[arg(long, default_value_t = 20)]
    warm_seconds: u64,
    /// Virtual seconds of clean traffic the models learn from. The default is what a deployed
    /// service has trained on after its first retraining (`retrain-every`, 600 windows of
    /// 1 s); on less, each kind's tail is read from fewer windows.
    #[arg(long, default_value_t = 600)]
    train_seconds: u64,
    /// Seed of the clean run the models learn from: another draw of the same family's traffic
    /// shows how much the thresholds, and what they raise, depend on the training draw.
    #[arg(long, default_value_t = TRAIN_SEED)]
    train_seed: u64,
    /// Window of the processor and the knowledge service (the deployments' default: 1 s).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    window: Duration,
    /// The type classifier's labelled set (JSON, docs/knowledge.md) for every family; default:
    /// generated from the training variants of the scenarios, per family.
    #[arg(long)]
    labels: Option<PathBuf>,
    /// Labelling runs per training variant (seeds 9101, 9102, …).
    #[arg(long, default_value_t = 3)]
    label_runs: u64,
    /// Virtual seconds per labelling run, whatever the scored runs' length: a long clean
    /// evaluation does not lengthen the attacks it labels.
    #[arg(long, default_value_t = 40)]
    label_seconds: u64,
    /// Also write the labelled set generated from every family here.
    #[arg(long)]
    write_labels: Option<PathBuf>,
    /// Hop latency the processor raises a breach above (`stream-processor.thresholds.
    /// hop-latency-ns`); default: its default for 10 Gb/s links scaled to the family's link
    /// rate (the same queue depth in packets: 10 ms at 100 Mb/s).
    #[arg(long, value_parser = humantime::parse_duration)]
    hop_latency_threshold: Option<Duration>,
    /// How long a value stays above its threshold before the processor raises the breach
    /// (`stream-processor.thresholds.min-duration`). Default: longer than one background
    /// elephant can keep a queue full on its own at the family's link rate (200 ms at
    /// 100 Mb/s), so sustained congestion is raised and passing bursts are not.
    #[arg(long, value_parser = humantime::parse_duration)]
    min_duration: Option<Duration>,
    /// Windows of 1 s the training and scoring cost is measured on (3600: an hour).
    #[arg(long, default_value_t = 3_600)]
    cost_windows: usize,
    /// Where results go (results.csv, anomalies.jsonl, incidents.jsonl, report.md); default: a new directory
    /// under the system's temporary directory.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Where a fault comes from, which decides how it is scored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Origin {
    /// Injected harm: to be raised as its type on its entities, counted in recall.
    Injected,
    /// Injected traffic that is not a fault (a flash crowd, a heavy hitter): what must not be
    /// typed as an attack or blocked.
    Benign,
    /// A queue the emulator held at or over the breach depth for the breach's minimum
    /// duration while nothing harmful was injected (the background's elephants and periodic
    /// jobs, a flash crowd): congestion that happened. Raised as congestion on that queue, or
    /// on the host the queue leads to, it is right, never a false alarm; missed, it is counted
    /// apart from the injected faults.
    Observed,
}

/// One fault and the entities it is about.
#[derive(Clone, Debug)]
pub(super) struct Fault {
    /// The type it should be raised as; `unknown` for benign traffic.
    pub(super) kind: AnomalyType,
    pub(super) origin: Origin,
    pub(super) start_ns: i64,
    pub(super) end_ns: i64,
    /// (entity kind, entity or, for any queue of a switch's port, `node:port/`).
    pub(super) primary: Vec<(EntityKind, String)>,
}

/// A clean run: nothing injected, harmful or benign (congestion may still have happened).
pub(super) fn nothing_injected(faults: &[Fault]) -> bool {
    faults.iter().all(|f| f.origin == Origin::Observed)
}

impl Fault {
    /// Harm under way: injected, or congestion that happened.
    pub(super) fn harmful(&self) -> bool {
        self.origin != Origin::Benign
    }

    pub(super) fn injected(&self) -> bool {
        self.origin == Origin::Injected
    }

    pub(super) fn is_primary(&self, a: &Anomaly) -> bool {
        self.primary.iter().any(|(k, e)| {
            *k == a.entity_kind
                && if e.ends_with('/') {
                    a.entity.starts_with(e.as_str())
                } else {
                    a.entity == *e
                }
        })
    }

    /// Whether `a`'s windows meet the fault's (one window early for the window holding its
    /// start, `close_after` + 1 late for its aftermath).
    pub(super) fn overlaps(&self, a: &Anomaly, window_ns: i64) -> bool {
        a.start_ns <= self.end_ns + 3 * window_ns && a.last_ns >= self.start_ns - window_ns
    }
}

/// The node ids' link entities (`node:egress port`, both directions) of a link between two
/// INT node ids.
fn link_entities(topo: &Topology, a: u32, b: u32) -> Vec<(EntityKind, String)> {
    let id = |n: usize| topo.nodes[n].id;
    topo.links
        .iter()
        .filter(|l| {
            let (x, y) = (id(l.a.0), id(l.b.0));
            (x, y) == (a, b) || (x, y) == (b, a)
        })
        .flat_map(|l| {
            [
                (EntityKind::Link, format!("{}:{}", id(l.a.0), l.a.1)),
                (EntityKind::Link, format!("{}:{}", id(l.b.0), l.b.1)),
            ]
        })
        .collect()
}

/// The faults of a run's ground truth.
pub(super) fn faults(o: &Outcome) -> Vec<Fault> {
    let mut out = Vec::new();
    // A port's queue: (switch, port).
    type Port = (u32, u16);
    // Per target queue: (first start, last end, target host, the other queues the bursts
    // fill).
    let mut bursts: BTreeMap<Port, (i64, i64, String, Vec<Port>)> = BTreeMap::new();
    let t = |e: &serde_json::Value, k: &str| e[k].as_i64().unwrap_or(0);
    let s = |e: &serde_json::Value, k: &str| e[k].as_str().unwrap_or_default().to_string();
    // The addresses an event lists under `key`, as entities of `kind`.
    let listed = |e: &serde_json::Value, key: &str, kind: EntityKind| {
        e[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| Some((kind, v.as_str()?.to_string())))
            .collect::<Vec<_>>()
    };
    let fault = |kind, benign, e: &serde_json::Value, primary| Fault {
        kind,
        origin: if benign {
            Origin::Benign
        } else {
            Origin::Injected
        },
        start_ns: t(e, "t_ns"),
        end_ns: t(e, "end_ns"),
        primary,
    };
    for e in &o.events {
        match e["kind"].as_str().unwrap_or_default() {
            "ddos_start" => {
                let mut primary = vec![(EntityKind::Destination, s(e, "victim"))];
                primary.extend(listed(e, "sources", EntityKind::Source));
                out.push(fault(AnomalyType::Ddos, false, e, primary));
            }
            "port_scan" => {
                let mut primary = vec![(EntityKind::Source, s(e, "scanner"))];
                primary.extend(listed(e, "victims", EntityKind::Destination));
                out.push(fault(AnomalyType::PortScan, false, e, primary));
            }
            // Benign: every address of the traffic, both ways (a fetch is answered, a copy
            // acknowledged), so that any of them typed as an attack is counted so.
            "flash_crowd" | "heavy_hitter_start" => {
                let host = s(e, "target") + &s(e, "source");
                let mut primary = vec![
                    (EntityKind::Destination, host.clone()),
                    (EntityKind::Source, host),
                ];
                for key in ["clients", "peers"] {
                    primary.extend(listed(e, key, EntityKind::Source));
                    primary.extend(listed(e, key, EntityKind::Destination));
                }
                out.push(fault(AnomalyType::Unknown, true, e, primary));
            }
            "link_down" => {
                let ids: Vec<u32> = e["link"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_u64().map(|v| v as u32))
                    .collect();
                // The independent generator names each end's port; the emulator's topology
                // gives them.
                let named: Vec<(EntityKind, String)> = e["ports"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|p| Some(format!("{}:{}", p[0].as_u64()?, p[1].as_u64()?)))
                    .map(|l| (EntityKind::Link, l))
                    .collect();
                let primary = match (&o.topology, &ids[..]) {
                    _ if !named.is_empty() => named,
                    (Some(topo), &[a, b]) => link_entities(topo, a, b),
                    _ => continue,
                };
                out.push(fault(AnomalyType::LinkFailure, false, e, primary));
            }
            // Bursts of tens of microseconds: one fault per target queue, over the span.
            "microburst" => {
                let queue = |q: &serde_json::Value| {
                    Some((q["node"].as_u64()? as u32, q["port"].as_u64()? as u16))
                };
                let Some(target_queue) = queue(&e["queue"]) else {
                    continue;
                };
                let b =
                    bursts
                        .entry(target_queue)
                        .or_insert((i64::MAX, 0, s(e, "target"), Vec::new()));
                b.0 = b.0.min(t(e, "t_ns"));
                b.1 = b.1.max(t(e, "end_ns"));
                // An incast of the independent generator names the ports its answers meet at
                // on their way as well.
                for q in e["queues"].as_array().into_iter().flatten() {
                    if let Some(q) = queue(q)
                        && q != target_queue
                        && !b.3.contains(&q)
                    {
                        b.3.push(q);
                    }
                }
            }
            _ => {}
        }
    }
    // A microburst is about the queue it fills and the host it converges on (incast).
    for (queue, (start, end, target, on_the_way)) in bursts {
        let mut primary = vec![queue_of_port(queue), (EntityKind::Destination, target)];
        primary.extend(on_the_way.into_iter().map(queue_of_port));
        out.push(Fault {
            kind: AnomalyType::Congestion,
            origin: Origin::Injected,
            start_ns: start,
            end_ns: end,
            primary,
        });
    }
    out.extend(observed(o, &out));
    out
}

/// The run's congestion that happened with no injected fault under way (from 3 s before its
/// start to 3 s after its end): congestion during a fault is that fault's. A queue's episodes
/// less than a second apart are one (a dip of a few milliseconds does not end congestion).
fn observed(o: &Outcome, injected: &[Fault]) -> Vec<Fault> {
    const SLACK_NS: i64 = 3_000_000_000;
    const MERGE_NS: u64 = 1_000_000_000;
    let mut episodes = o.congested.clone();
    episodes.sort_by_key(|c| (c.node, c.port, c.start_ns));
    let mut merged: Vec<kplane_emulator::sim::Congested> = Vec::new();
    for c in episodes {
        match merged.last_mut() {
            Some(m)
                if (m.node, m.port) == (c.node, c.port) && c.start_ns <= m.end_ns + MERGE_NS =>
            {
                m.end_ns = m.end_ns.max(c.end_ns);
            }
            _ => merged.push(c),
        }
    }
    merged
        .into_iter()
        .map(|c| {
            let mut primary = vec![queue_of_port((c.node, c.port))];
            primary.extend(
                o.topology
                    .as_ref()
                    .and_then(|t| host_behind(t, c.node, c.port))
                    .map(|ip| (EntityKind::Destination, ip)),
            );
            Fault {
                kind: AnomalyType::Congestion,
                origin: Origin::Observed,
                start_ns: c.start_ns as i64,
                end_ns: c.end_ns as i64,
                primary,
            }
        })
        .filter(|c| {
            !injected.iter().any(|f| {
                f.injected()
                    && f.start_ns - SLACK_NS <= c.end_ns
                    && c.start_ns <= f.end_ns + SLACK_NS
            })
        })
        .collect()
}

/// Any queue of a switch's egress port (`5:2/`): the ground truth names ports, a switch
/// numbers their queues.
fn queue_of_port((node, port): (u32, u16)) -> (EntityKind, String) {
    (EntityKind::Queue, format!("{node}:{port}/"))
}

/// The host a switch's port leads to, if it leads to one: congestion in the queue towards a
/// host is congestion at that destination too.
fn host_behind(topo: &Topology, node: u32, port: u16) -> Option<String> {
    topo.hosts().find_map(|(_, h)| {
        let &(_, switch, at) = h.ports.first()?;
        (topo.nodes[switch].id == node && at == port).then(|| h.ip.map(|ip| ip.to_string()))?
    })
}

/// What the ground truth says an anomaly is: its fault's type on an entity the fault is about
/// (the anomaly's own type if the entity is in several faults at once: a DDoS source that also
/// scans; congestion for a queue that was congested); congestion for a queue that filled
/// during any injected fault (collateral, but real); `unknown` otherwise (a false alarm when
/// no fault was under way).
pub(super) fn truth_label(a: &Anomaly, faults: &[Fault], window_ns: i64) -> AnomalyType {
    let during: Vec<&Fault> = faults
        .iter()
        .filter(|i| i.harmful() && i.overlaps(a, window_ns))
        .collect();
    let mut about = during.iter().filter(|i| i.is_primary(a));
    if let Some(i) = about.clone().find(|i| i.kind == a.anomaly_type) {
        return i.kind;
    }
    if let Some(i) = about.next() {
        return i.kind;
    }
    if a.entity_kind == EntityKind::Queue && during.iter().any(|i| i.injected()) {
        return AnomalyType::Congestion;
    }
    AnomalyType::Unknown
}

/// Salt of the seed's stream that draws where in a window the injected traffic starts.
const START_STREAM: u64 = 0x5747_4152_5453;

/// Whether `scenario` is an operator's, with parameters, run as given.
fn is_given(scenario: &str) -> bool {
    scenario.contains(':') || scenario.contains('+')
}

/// The emulator scenario of a scored run on `fam`: parameters drawn from `seed`, never the
/// training variants' (victim 0, the last host scanning, the middle link, the last host
/// bursting). Attacks are scaled to the family's traffic: a DDoS at 0.5–10× the victim's usual
/// from a few or many sources; vertical and horizontal scans, fast (10 µs between probes) to
/// slow (5 ms); the benign flash crowd at 2–10× its target's usual.
///
/// Everything injected starts at a point of a window drawn from the seed as well: up to
/// `window_share` (one window, as a share of the run) after its base time, so that faults
/// begin anywhere in a window, not at its start only.
///
/// A scenario with parameters (`ddos:victim=3,rate=4`, several joined by `+`; docs/emulator.md)
/// is run as given: operators script their own.
pub fn scored_spec(
    scenario: &str,
    seed: u64,
    fam: &Family,
    window_share: f64,
) -> anyhow::Result<String> {
    if is_given(scenario) {
        return Ok(scenario.to_string());
    }
    // Its own stream: the other parameters stay what the seed drew before.
    let late = Rng::new(seed ^ START_STREAM).real(0.0, window_share);
    if fam.generator == Generator::Independent {
        return independent_spec(scenario, seed, fam, late);
    }
    let mut d = Rng::new(seed);
    let h = fam.hosts as u64;
    let log_uniform = |d: &mut Rng, lo: f64, hi: f64| (d.real(lo.ln(), hi.ln())).exp();
    let ddos = |d: &mut Rng, start: f64| {
        let victim = d.int(1, h - 1);
        let attackers = if d.int(0, 2) == 0 {
            d.int(2, 5)
        } else {
            d.int(6, (h - 1).min(40) + 1)
        };
        let times = log_uniform(d, 0.5, 10.0);
        format!(
            "ddos:victim={victim},attackers={attackers},rate={:.4},start={start:.5},duration={:.2}",
            fam.of_link(times),
            d.real(0.15, 0.25)
        )
    };
    let scan = |d: &mut Rng, start: f64| {
        let victim = d.int(1, h / 2);
        let scanner = d.int(h / 2, h - 1);
        let gap_us = log_uniform(d, 10.0, 5_000.0).round();
        if d.int(0, 2) == 0 {
            format!(
                "port-scan:victim={victim},scanner={scanner},ports={},gap-us={gap_us},start={start:.5}",
                d.int(300, 2_001)
            )
        } else {
            format!(
                "port-scan:victim={victim},scanner={scanner},hosts={},ports={},gap-us={gap_us},start={start:.5}",
                d.int(4, (h - 2).min(12) + 1),
                d.int(20, 101)
            )
        }
    };
    let link = |d: &mut Rng, start: f64| {
        // Any switch-to-switch link but the middle one.
        let mut at = d.real(0.0, 0.95);
        if (0.45..0.55).contains(&at) {
            at -= 0.2;
        }
        format!(
            "link-failure:link={at:.3},start={start:.5},duration={:.2}",
            d.real(0.2, 0.3)
        )
    };
    let burst = |d: &mut Rng, start: f64| {
        // Not the web profile: its bursts (25 µs median) are shorter than one packet on
        // 100 Mb/s links (80 µs), so they queue nothing — no congestion to find.
        let profile = ["-cache", "-hadoop"][d.int(0, 2) as usize];
        format!(
            "microburst{profile}:target={},start={start:.5},end={:.2}",
            d.int(0, h - 1),
            start + 0.3
        )
    };
    Ok(match scenario {
        "ddos" => ddos(&mut d, 0.5 + late),
        "port-scan" => scan(&mut d, 0.5 + late),
        "link-failure" => link(&mut d, 0.6 + late),
        "microburst" => burst(&mut d, 0.5 + late),
        // Apart in time so that each is scored on its own.
        "mixed" => [
            ddos(&mut d, 0.35 + late),
            scan(&mut d, 0.55 + late),
            link(&mut d, 0.7 + late),
        ]
        .join("+"),
        "clean" => "none".into(),
        "flash-crowd" => format!(
            "flash-crowd:target={},clients={},rate={:.4},start={:.5},duration={:.2}",
            d.int(1, h - 1),
            d.int(h / 2, h),
            fam.of_link(log_uniform(&mut d, 2.0, 10.0)),
            0.4 + late,
            d.real(0.15, 0.25)
        ),
        "heavy-hitter" => format!(
            "heavy-hitter:source={},flows={},rate={:.2},start={:.5},end=0.7",
            d.int(1, h - 1),
            d.int(16, 65),
            d.real(0.3, 0.8),
            0.4 + late
        ),
        other => bail!(
            "unknown scenario {other:?} (one of {})",
            SCENARIOS.join(", ")
        ),
    })
}

/// `spec`'s times, shares of a scored part of `seconds`, as shares of a run that begins with
/// `warm` seconds more: every `start` and `end` moved past the warm-up, every `duration`
/// scaled to the longer run. (Every drawn scenario names its start.)
pub fn spec_past_warm_up(spec: &str, seconds: u64, warm: u64) -> String {
    let (seconds, total) = (seconds as f64, (seconds + warm) as f64);
    let moved = |k: &str, f: f64| match k {
        "duration" => Some(f * seconds / total),
        "start" | "end" => Some((warm as f64 + f * seconds) / total),
        _ => None,
    };
    let param = |kv: &str| {
        kv.split_once('=')
            .and_then(|(k, v)| Some(format!("{k}={:.6}", moved(k, v.parse().ok()?)?)))
            .unwrap_or_else(|| kv.to_string())
    };
    spec.split('+')
        .map(|part| match part.split_once(':') {
            Some((name, params)) => {
                let params: Vec<String> = params.split(',').map(param).collect();
                format!("{name}:{}", params.join(","))
            }
            None => part.to_string(),
        })
        .collect::<Vec<_>>()
        .join("+")
}

/// [`scored_spec`] for the independent generator (`kplane-tracegen`'s scenario syntax): a DDoS
/// from 20–1000 spoofed sources at 0.5–10× the packets the background is expected to bring its
/// victim (hosts' popularity varies 10× and more), added to the background
/// or replacing half of it; vertical scans, fast to slow; link failures; incasts of 2–8
/// senders answering 64–512 kB each every 10–100 ms (its microbursts); and, benign, flash
/// crowds of half to all the hosts fetching 16–512 kB answers from one at 2–10× its usual
/// traffic (at most 90 % of its link), and heavy hitters copying to 2–16 peers at 30–80 % of
/// the link.
fn independent_spec(scenario: &str, seed: u64, fam: &Family, late: f64) -> anyhow::Result<String> {
    let mut d = Rng::new(seed);
    let h = fam.hosts as u64;
    let log_uniform = |d: &mut Rng, lo: f64, hi: f64| (d.real(lo.ln(), hi.ln())).exp();
    let ddos = |d: &mut Rng, start: f64| {
        format!(
            "ddos:victim={},sources={},times-usual={:.2},start={start:.5},duration={:.2},replace={}",
            d.int(1, h - 1),
            log_uniform(d, 20.0, 1_000.0).round(),
            log_uniform(d, 0.5, 10.0),
            d.real(0.15, 0.25),
            [0.0, 0.5][d.int(0, 2) as usize]
        )
    };
    let scan = |d: &mut Rng, start: f64| {
        format!(
            "port-scan:victim={},scanner={},ports={},gap-us={},start={start:.5}",
            d.int(1, h / 2),
            d.int(h / 2, h - 1),
            d.int(300, 2_001),
            log_uniform(d, 10.0, 5_000.0).round()
        )
    };
    let link = |d: &mut Rng, start: f64| {
        format!(
            "link-failure:link={:.3},start={start:.5},duration={:.2}",
            d.real(0.0, 0.999),
            d.real(0.2, 0.3)
        )
    };
    Ok(match scenario {
        "ddos" => ddos(&mut d, 0.5 + late),
        "port-scan" => scan(&mut d, 0.5 + late),
        "link-failure" => link(&mut d, 0.6 + late),
        "microburst" => format!(
            "incast:victim={},senders={},kb={:.0},period-ms={:.0},start={:.5},duration=0.3",
            d.int(1, h - 1),
            d.int(2, 9),
            log_uniform(&mut d, 64.0, 512.0),
            log_uniform(&mut d, 10.0, 100.0),
            0.5 + late
        ),
        "mixed" => [
            ddos(&mut d, 0.35 + late),
            scan(&mut d, 0.55 + late),
            link(&mut d, 0.7 + late),
        ]
        .join("+"),
        "clean" => "none".into(),
        "flash-crowd" => format!(
            "flash-crowd:target={},clients={},mbps={:.3},kb={:.0},start={:.5},duration={:.2}",
            d.int(1, h - 1),
            d.int(h / 2, h),
            (log_uniform(&mut d, 2.0, 10.0) * fam.usual_host_bps() / 1e6).min(0.9 * fam.link_mbps),
            log_uniform(&mut d, 16.0, 512.0),
            0.4 + late,
            d.real(0.15, 0.25)
        ),
        "heavy-hitter" => format!(
            "heavy-hitter:source={},peers={},mbps={:.1},start={:.5},duration=0.3",
            d.int(1, h - 1),
            d.int(2, 17),
            d.real(0.3, 0.8) * fam.link_mbps,
            0.4 + late
        ),
        other => bail!(
            "unknown scenario {other:?} (one of {})",
            SCENARIOS.join(", ")
        ),
    })
}

/// The training variants the labelled set comes from, on `fam`: victims, scanners and burst
/// targets among the first and last hosts, scans of 200 to 1024 ports, DDoS at 4× and 8× the
/// victim's usual, and links at 0.5 and 0.97 along the list, which the scored runs never draw;
/// and benign traffic on the first host (a flash crowd at 5× its usual, its heavy hitter).
/// Everything starts `late` after its base time (up to one window, drawn from the labelling
/// run's seed), so labels come from faults begun anywhere in a window, as scored ones do.
fn labelling(fam: &Family, late: f64) -> Vec<String> {
    let last = fam.hosts - 1;
    let at = |base: f64| base + late;
    vec![
        format!("ddos:start={:.5},rate={:.4}", at(0.5), fam.of_link(8.0)),
        format!(
            "ddos:victim={last},attackers=6,rate={:.4},start={:.5},duration=0.25",
            fam.of_link(4.0),
            at(0.4)
        ),
        format!("port-scan:start={:.5}", at(0.5)),
        format!(
            "port-scan:victim={last},scanner=0,ports=600,gap-us=30,start={:.5}",
            at(0.4)
        ),
        format!(
            "port-scan:victim=0,scanner={last},ports=200,gap-us=100,start={:.5}",
            at(0.6)
        ),
        format!("link-failure:start={:.5},duration=0.3", at(0.5)),
        format!("link-failure:link=0.97,start={:.5},duration=0.25", at(0.5)),
        format!("microburst-hadoop:start={:.5},end={:.5}", at(0.5), at(0.8)),
        format!(
            "microburst-cache:target={last},start={:.5},end={:.5}",
            at(0.3),
            at(0.7)
        ),
        // Benign: whatever they raise is labelled `unknown`, so that a crowd is not learnt as
        // an attack.
        format!(
            "flash-crowd:rate={:.4},start={:.5},duration=0.2",
            fam.of_link(5.0),
            at(0.5)
        ),
        format!("heavy-hitter:start={:.5},end={:.5}", at(0.4), at(0.7)),
    ]
}

/// A run of `spec` on `fam` for `seconds`, drawn from `seed`.
fn source(fam: &Family, spec: &str, seconds: u64, seed: u64) -> Source {
    match fam.generator {
        Generator::Emulator => {
            let mut rc = RunConfig {
                topology: fam.topology.clone(),
                duration: Duration::from_secs(seconds),
                scenario: spec.into(),
                flows_per_second: fam.flows,
                elephant_share: fam.elephants,
                jobs: fam.jobs,
                job_rate_bps: (fam.job_mbps * 1e6) as u64,
                link: fam.link(),
                ..RunConfig::default()
            };
            rc.sim.seed = seed;
            Source::Emulator(rc)
        }
        Generator::Independent => Source::Independent(kplane_tracegen::run::Config {
            fabric: fam.topology.clone(),
            link_mbps: fam.link_mbps,
            flows: fam.flows,
            seconds: seconds as f64,
            seed,
            scenario: spec.into(),
            ..Default::default()
        }),
    }
}

/// One family's results.
#[derive(Debug, Default)]
struct FamilyTotals {
    /// Typed as the scored runs typed them (confidence measured on the labels of
    /// [`LabelSource`]).
    scored: Detection,
    incidents: IncidentScore,
    forecasts: ForecastScore,
    /// The forecasts' learnt periods (the seasonal naive baseline's).
    periods: Periods,
    runs: u64,
    reports_sent: u64,
    reports_lost: u64,
    rows_late: u64,
    /// Per seed, what its clean run raised; and what each seed's runs raised after an attack
    /// ended. An emulator run's background is drawn from its seed, so the same anomaly in the
    /// clean run is the background's, not the attack's end.
    clean_raised: HashMap<u64, HashSet<Raised>>,
    aftermath: Vec<(u64, Raised)>,
}

impl FamilyTotals {
    /// Counts the anomalies raised after an attack that the same seed's clean run raised too.
    fn pair_aftermath_with_clean_runs(&mut self) {
        self.scored.after_attack_background = self
            .aftermath
            .iter()
            .filter(|(seed, k)| self.clean_raised.get(seed).is_some_and(|c| c.contains(k)))
            .count() as u64;
    }
}

/// Where the scored runs' type classifier learnt from.
#[derive(Debug)]
enum LabelSource {
    /// `--labels FILE`, for every family.
    File(PathBuf),
    /// The family's own training variants (one family: nothing is held out).
    SameFamily,
    /// The other families' training variants: each family held out.
    OtherFamilies,
}

/// The labels family `f`'s type classifier may learn from: the given file's, its own (one
/// family), or every other family's (held out).
fn labels_seen(
    from: &LabelSource,
    given: Option<&[Labelled]>,
    per_family: &[Vec<Labelled>],
    f: usize,
) -> Vec<Labelled> {
    match from {
        LabelSource::File(_) => given.unwrap_or_default().to_vec(),
        LabelSource::SameFamily => per_family[f].clone(),
        LabelSource::OtherFamilies => per_family
            .iter()
            .enumerate()
            .filter(|(g, _)| *g != f)
            .flat_map(|(_, l)| l.iter().cloned())
            .collect(),
    }
}

/// Scores one run of `seed`; returns its incidents' summaries.
fn score_run(
    o: &Outcome,
    seed: u64,
    window_ns: i64,
    t: &mut FamilyTotals,
) -> Vec<serde_json::Value> {
    let injected = faults(o);
    let (incidents, incident_of) =
        incidents::score_run(o, &o.anomalies, &injected, window_ns, &mut t.incidents);
    let after = t
        .scored
        .score(o, &o.anomalies, &injected, window_ns, &incident_of);
    t.aftermath.extend(after.into_iter().map(|k| (seed, k)));
    if nothing_injected(&injected) {
        t.clean_raised
            .entry(seed)
            .or_default()
            .extend(raised(&o.anomalies).map(key));
    }
    score_forecasts(&o.forecasts, &t.periods, &mut t.forecasts);
    t.runs += 1;
    t.reports_sent += o.reports_sent;
    t.reports_lost += o.reports_lost;
    t.rows_late += o.rows_late;
    incidents
}

/// The labelled entity-windows of a labelling run.
fn labels_of(o: &Outcome, window_ns: i64) -> Vec<Labelled> {
    let injected = faults(o);
    raised(&o.anomalies)
        .map(|a| Labelled {
            kind: a.entity_kind,
            features: features_of(a),
            label: truth_label(a, &injected, window_ns),
        })
        .collect()
}

pub(super) fn fmt(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.2}"))
}

/// A family's directory name: its preset name, or its spec made safe for a path.
fn dir_name(fam: &Family) -> String {
    fam.name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn read_labels(p: &Path) -> anyhow::Result<Vec<Labelled>> {
    serde_json::from_str(&std::fs::read_to_string(p).with_context(|| format!("{}", p.display()))?)
        .with_context(|| format!("{}: not a labelled set", p.display()))
}

pub fn run(a: KnowledgeArgs) -> anyhow::Result<()> {
    let families = a
        .family
        .iter()
        .map(|f| Family::parse(f))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for s in &a.scenario {
        for f in &families {
            if f.generator == Generator::Independent {
                let spec = scored_spec(s, 0, f, 0.0)?;
                kplane_tracegen::traffic::parse_scenario(&spec, 1, f.hosts)
                    .map_err(|e| anyhow::anyhow!("family {}: {e}", f.name))?;
            }
        }
    }
    if a.seconds == 0 || a.label_seconds == 0 {
        bail!("--seconds and --label-seconds must be at least 1 (a run's virtual seconds)");
    }
    if a.labels.is_none()
        && families
            .iter()
            .all(|f| f.generator == Generator::Independent)
    {
        bail!(
            "the independent generator has no training variants to label: add an emulator \
             family (--family ft4-100m) or give --labels"
        );
    }
    let out = match &a.out {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("kplane-eval-knowledge-{}", std::process::id())),
    };
    let stores = out.join("stores");
    let _ = std::fs::remove_dir_all(&stores);
    let window = a.window.max(Duration::from_millis(10));
    let window_ns = window.as_nanos() as i64;
    let window_count = (a.train_seconds as u128 * 1_000 / window.as_millis()) as usize;
    // Trained with a margin before the run ends (training runs beside the scoring).
    let min_windows = (window_count * 9 / 10).max(20);
    let thresholds = |fam: &Family| kplane_stream_processor::config::Thresholds {
        hop_latency_ns: a
            .hop_latency_threshold
            .unwrap_or_else(|| fam.hop_latency_threshold())
            .as_nanos() as u64,
        min_duration: a.min_duration.unwrap_or_else(|| fam.min_duration()),
        ..Default::default()
    };
    let labels_from = match (&a.labels, families.len()) {
        (Some(p), _) => LabelSource::File(p.clone()),
        (None, 1) => LabelSource::SameFamily,
        (None, _) => LabelSource::OtherFamilies,
    };

    // One window as a share of a run of `seconds`: how late in a window injected traffic may
    // start.
    let window_share_of = |seconds: u64| a.window.as_secs_f64() / seconds as f64;
    let window_share = window_share_of(a.seconds);
    // 1–2. Per family: the models of normal behaviour from its clean traffic, and the labels
    // of its training variants.
    let mut labels: Vec<Vec<Labelled>> = Vec::new();
    let mut training_seconds = Vec::new();
    let mut periods: Vec<Periods> = Vec::new();
    for fam in &families {
        let state = out.join(dir_name(fam)).join("state");
        if state.exists() {
            std::fs::remove_dir_all(&state).with_context(|| format!("{}", state.display()))?;
        }
        std::fs::create_dir_all(&state)?;
        let store = |name: &str| stores.join(format!("{}-{name}", dir_name(fam)));
        eprintln!(
            "kplane eval knowledge: {}: training on {} s of clean traffic (seed {})",
            fam.name, a.train_seconds, a.train_seed
        );
        run_pipeline(
            &store("train"),
            window,
            &thresholds(fam),
            knowledge_config(&state, window, min_windows),
            source(fam, "none", a.train_seconds, a.train_seed),
            || {
                state
                    .join(kplane_knowledge::registry::Registry::FILE)
                    .exists()
            },
        )?;
        let registry = kplane_knowledge::registry::Registry::load(&state)
            .map_err(anyhow::Error::msg)?
            .context("no model registry after the training run")?;
        if registry.models.is_empty() {
            bail!("{}: no model trained: {}", fam.name, registry.message);
        }
        training_seconds.push(registry.history.last().map_or(0.0, |t| t.seconds));
        periods.push(periods_of(&registry));
        let mut own = Vec::new();
        // The independent generator's families are only ever scored.
        if a.labels.is_none() && fam.generator == Generator::Emulator {
            for i in 0..labelling(fam, 0.0).len() {
                for r in 0..a.label_runs {
                    let seed = LABEL_SEED + 100 * r + i as u64;
                    let late =
                        Rng::new(seed ^ START_STREAM).real(0.0, window_share_of(a.label_seconds));
                    let spec = &labelling(fam, late)[i];
                    eprintln!(
                        "kplane eval knowledge: {}: labelling {spec} (seed {seed})",
                        fam.name
                    );
                    let o = run_pipeline(
                        &store(&format!("label-{seed}")),
                        window,
                        &thresholds(fam),
                        knowledge_config(&state, window, min_windows),
                        source(fam, spec, a.label_seconds, seed),
                        || true,
                    )?;
                    own.extend(labels_of(&o, window_ns));
                }
            }
        }
        labels.push(own);
    }
    let given = a.labels.as_deref().map(read_labels).transpose()?;
    if let Some(p) = &a.write_labels {
        let all = given.clone().unwrap_or_else(|| labels.concat());
        std::fs::write(p, serde_json::to_string_pretty(&all)?)
            .with_context(|| format!("{}", p.display()))?;
    }
    // The definitions on every labelled training variant: the training table.
    let training = Typer::measured(&given.clone().unwrap_or_else(|| labels.concat()));

    // 3. Scored runs, each family with the labels it may see.
    let mut totals: Vec<FamilyTotals> = Vec::new();
    let mut anomalies = std::fs::File::create(out.join("anomalies.jsonl"))?;
    let mut incidents = std::fs::File::create(out.join("incidents.jsonl"))?;
    for (f, fam) in families.iter().enumerate() {
        let state = out.join(dir_name(fam)).join("state");
        let seen = labels_seen(&labels_from, given.as_deref(), &labels, f);
        std::fs::write(state.join("types.json"), serde_json::to_string(&seen)?)?;
        let mut t = FamilyTotals {
            periods: std::mem::take(&mut periods[f]),
            ..FamilyTotals::default()
        };
        for scenario in &a.scenario {
            for r in 0..a.runs {
                let seed = a.seed + r;
                let mut spec = scored_spec(scenario, seed, fam, window_share)?;
                if !is_given(scenario) {
                    spec = spec_past_warm_up(&spec, a.seconds, a.warm_seconds);
                }
                eprintln!(
                    "kplane eval knowledge: {}: {scenario} seed {seed}: {spec}",
                    fam.name
                );
                let o = run_pipeline(
                    &stores.join(format!("{}-{scenario}-{seed}", dir_name(fam))),
                    window,
                    &thresholds(fam),
                    knowledge_config(&state, window, min_windows),
                    source(fam, &spec, a.seconds + a.warm_seconds, seed),
                    || true,
                )?
                .after_warm_up(a.warm_seconds as i64 * 1_000_000_000);
                let injected = faults(&o);
                let eval = serde_json::json!({"family": fam.name, "scenario": scenario,
                    "seed": seed, "spec": spec});
                for mut v in score_run(&o, seed, window_ns, &mut t) {
                    v["eval"] = eval.clone();
                    v["eval"]["faults"] = injected
                        .iter()
                        .map(|f| {
                            serde_json::json!({"kind": f.kind, "origin": f.origin,
                            "start_ns": f.start_ns, "end_ns": f.end_ns, "entities": f.primary})
                        })
                        .collect();
                    writeln!(incidents, "{v}")?;
                }
                for x in raised(&o.anomalies) {
                    let mut v = serde_json::to_value(x)?;
                    v["eval"] = eval.clone();
                    v["eval"]["truth"] = serde_json::json!(truth_label(x, &injected, window_ns));
                    writeln!(anomalies, "{v}")?;
                }
            }
        }
        t.pair_aftermath_with_clean_runs();
        totals.push(t);
    }

    // 4. Cost: training on an hour of 1 s windows, scoring on one core (the first family).
    let (history, _) = kplane_knowledge::history::windows(
        &kplane_store::Store::local(stores.join(format!("{}-train", dir_name(&families[0])))),
        usize::MAX,
    );
    let n = a.cost_windows.max(20);
    let hour = kplane_knowledge::bench::repeat(&history, n, 1_000_000_000);
    let bench_dir = out.join("bench-state");
    let _ = std::fs::remove_dir_all(&bench_dir);
    let mut cfg = knowledge_config(&bench_dir, Duration::from_secs(1), n);
    cfg.training_windows = n;
    let (mut engine, hour_training) =
        kplane_knowledge::bench::train(cfg.engine(), hour.clone()).map_err(anyhow::Error::msg)?;
    let (scored, secs) = kplane_knowledge::bench::score(&mut engine, &hour);

    let cost = Cost {
        training_seconds: training_seconds[0],
        windows: n,
        hour_training,
        scored,
        secs,
    };
    let report = report(&a, &families, &labels_from, &training, &totals, &cost, &out);
    std::fs::write(out.join("report.md"), &report.0)?;
    std::fs::write(out.join("results.csv"), &report.1)?;
    print!("{}", report.0);
    Ok(())
}

/// Training and scoring cost.
struct Cost {
    /// The first family's clean run's training.
    training_seconds: f64,
    /// 1 s windows of the measured training and scoring.
    windows: usize,
    hour_training: f64,
    scored: u64,
    secs: f64,
}

/// The rows of `results.csv`: `family,table,metric,type,value`.
#[derive(Default)]
pub(super) struct Csv(pub(super) String);

impl Csv {
    pub(super) fn row(&mut self, family: &str, table: &str, metric: &str, ty: &str, v: f64) {
        // A family given as a spec holds commas: quoted, as CSV readers expect.
        let family = if family.contains([',', '"']) {
            format!("\"{}\"", family.replace('"', "\"\""))
        } else {
            family.to_string()
        };
        self.0 += &format!("{family},{table},{metric},{ty},{v}\n");
    }
}

const TYPE_HEADER: &str = "| type | injected | detected | recall | raised as it | right | precision | confidence (mean) | F1 | delay (windows, mean) |\n|---|---|---|---|---|---|---|---|---|---|\n";

/// A detection table's rows (the scored types, then `unknown` and every type together), and
/// its figures in the CSV.
pub(super) fn detection_table(d: &Detection, family: &str, table: &str, csv: &mut Csv) -> String {
    let mut md = String::from(TYPE_HEADER);
    let empty = TypeScore::default();
    for ty in SCORED {
        let s = d.types.get(&ty).unwrap_or(&empty);
        md += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            ty.as_str(),
            s.injected,
            s.detected,
            fmt(s.recall()),
            s.raised,
            s.right,
            fmt(s.precision()),
            fmt(s.confidence()),
            fmt(s.f1()),
            fmt(s.delay())
        );
        for (m, v) in [
            ("recall", s.recall()),
            ("precision", s.precision()),
            ("confidence", s.confidence()),
            ("f1", s.f1()),
            ("delay_windows", s.delay()),
        ] {
            if let Some(v) = v {
                csv.row(family, table, m, ty.as_str(), v);
            }
        }
    }
    let unknown = d.types.get(&AnomalyType::Unknown).unwrap_or(&empty);
    let raised: u64 = d.types.values().map(|s| s.raised).sum();
    let right: u64 = d.types.values().map(|s| s.right).sum();
    md += &format!(
        "| unknown | – | – | – | {} | {} | {} | {} | – | – |\n| **all raised** | | | | {raised} | {right} | {} | | | |\n",
        unknown.raised,
        unknown.right,
        fmt(unknown.precision()),
        fmt(unknown.confidence()),
        fmt(d.precision_all())
    );
    if let Some(p) = d.precision_all() {
        csv.row(family, table, "precision", "all", p);
    }
    let per_hour = |n: u64, s: f64| n as f64 / (s / 3_600.0).max(1e-9);
    md += &format!(
        "\nFalse alarms (wrong, while nothing harmful was under way): {} in {:.0} s of traffic → {:.1} \
         per hour; on clean runs (nothing injected) {} in {:.0} s → {:.1} per hour. Raised after an \
         attack ended (up to 60 s, within the runs: {:.0} s of aftermath): {}{}. \
         Benign traffic ({} flash crowds and heavy hitters): typed as an attack {} times, {} with a \
         block recommended.\n",
        d.false_alarms,
        d.seconds,
        per_hour(d.false_alarms, d.seconds),
        d.clean_false_alarms,
        d.clean_seconds,
        per_hour(d.clean_false_alarms, d.clean_seconds),
        d.after_seconds,
        d.after_attack,
        match d.after_attack_background {
            0 => String::new(),
            n => format!(
                " ({n} of them raised as well, on the same entity in the same window, by the \
                 same seed's clean run: the background, not the attack's end)"
            ),
        },
        d.benign_faults,
        d.benign_attacks,
        d.benign_blocked
    );
    csv.row(
        family,
        table,
        "false_alarms_per_hour",
        "all",
        per_hour(d.false_alarms, d.seconds),
    );
    if d.clean_seconds > 0.0 {
        csv.row(
            family,
            table,
            "false_alarms_per_hour",
            "clean",
            per_hour(d.clean_false_alarms, d.clean_seconds),
        );
    }
    csv.row(
        family,
        table,
        "raised_after_attack",
        "all",
        d.after_attack as f64,
    );
    csv.row(
        family,
        table,
        "raised_after_attack",
        "not_in_the_clean_run",
        (d.after_attack - d.after_attack_background) as f64,
    );
    csv.row(
        family,
        table,
        "benign_typed_attack",
        "all",
        d.benign_attacks as f64,
    );
    if d.observed > 0 {
        md += &format!(
            "Congestion that happened with nothing harmful injected (an emulator queue at or over \
             the breach depth for the breach's minimum duration: the background's elephants and \
             jobs, a flash crowd; raised as congestion on its queue or the host it leads to, \
             right, not a false alarm): {} episodes, {} raised as congestion on their queue or \
             host; {} anomalies right only for it.\n",
            d.observed, d.observed_raised, d.observed_right
        );
        csv.row(
            family,
            table,
            "observed_congestion_recall",
            "congestion",
            d.observed_raised as f64 / d.observed as f64,
        );
    }
    md
}

/// The definitions on the labelled training variants (every family's): per kind and type, how
/// often each was said, right, and labelled — the figures the confidences come from.
fn training_table(t: &Typer, csv: &mut Csv) -> String {
    let mut md = format!(
        "\n## Training: the type definitions on the {} labelled anomalies of the training variants\n\n\
         | kind | type | labelled | said | right | precision | recall |\n|---|---|---|---|---|---|---|\n",
        t.samples
    );
    for ((kind, ty), x) in t.tallies() {
        let precision = (x.said > 0).then(|| x.right as f64 / x.said as f64);
        let recall = (x.labelled > 0).then(|| x.right as f64 / x.labelled as f64);
        md += &format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            kind.as_str(),
            ty.as_str(),
            x.labelled,
            x.said,
            x.right,
            fmt(precision),
            fmt(recall)
        );
        let ty = format!("{}:{}", kind.as_str(), ty.as_str());
        for (m, v) in [("precision", precision), ("recall", recall)] {
            if let Some(v) = v {
                csv.row("all", "training", m, &ty, v);
            }
        }
    }
    md
}

/// The markdown report and the CSV.
fn report(
    a: &KnowledgeArgs,
    families: &[Family],
    source: &LabelSource,
    training: &Typer,
    totals: &[FamilyTotals],
    c: &Cost,
    out: &Path,
) -> (String, String) {
    let mut md = String::new();
    let mut csv = Csv(String::from("family,table,metric,type,value\n"));
    md += &format!(
        "# kplane eval knowledge\n\nScenarios {} × {} runs (seeds {}…{}), {} s each scored after {} s of warm-up, {} ms \
         windows; models of normal behaviour trained per family on {} s of its clean traffic (seed \
         {}); results in {}.\n\n",
        a.scenario.join(", "),
        a.runs,
        a.seed,
        a.seed + a.runs.saturating_sub(1),
        a.seconds,
        a.warm_seconds,
        a.window.as_millis(),
        a.train_seconds,
        a.train_seed,
        out.display()
    );
    md += "| family | generator | topology | hosts | links | flows/s | elephants | periodic jobs | breach above (held) |\n|---|---|---|---|---|---|---|---|---|\n";
    for f in families {
        let (generator, elephants, jobs) = match f.generator {
            Generator::Emulator => (
                "emulator",
                format!("{} %", 100.0 * f.elephants),
                format!("{} × {} Mb/s", f.jobs, f.job_mbps),
            ),
            Generator::Independent => ("independent", "Pareto sizes".into(), "–".into()),
        };
        md += &format!(
            "| {} | {generator} | {} | {} | {} Mb/s | {} | {elephants} | {jobs} | {} ({}) |\n",
            f.name,
            f.topology,
            f.hosts,
            f.link_mbps,
            f.flows,
            humantime::format_duration(
                a.hop_latency_threshold
                    .unwrap_or_else(|| f.hop_latency_threshold())
            ),
            humantime::format_duration(a.min_duration.unwrap_or_else(|| f.min_duration())),
        );
    }
    let (scored_table, title) = match source {
        LabelSource::File(p) => (
            "given-labels",
            format!("Typed with the labels of {}", p.display()),
        ),
        LabelSource::SameFamily => (
            "in-family",
            "Typed with this family's own labels (nothing held out)".to_string(),
        ),
        LabelSource::OtherFamilies => (
            "held-out",
            "Held out: each family typed with the other families' labels only".to_string(),
        ),
    };
    let mut all = Detection::default();
    let mut inc = IncidentScore::default();
    let mut forecasts = ForecastScore::default();
    let (mut sent, mut lost, mut late) = (0, 0, 0);
    for t in totals {
        all.add(&t.scored);
        inc.add(&t.incidents);
        for (k, v) in &t.forecasts {
            let e = forecasts.entry(k.clone()).or_default();
            for (x, y) in e.iter_mut().zip(v) {
                x.add_all(y);
            }
        }
        sent += t.reports_sent;
        lost += t.reports_lost;
        late += t.rows_late;
    }
    md += &format!("\n## {title}\n\n");
    md += &detection_table(&all, "all", scored_table, &mut csv);
    if families.len() > 1 {
        for (f, t) in families.iter().zip(totals) {
            md += &format!("\n### {} ({})\n\n", f.name, scored_table);
            md += &detection_table(&t.scored, &f.name, scored_table, &mut csv);
        }
    }
    md += &training_table(training, &mut csv);
    md += &incidents::report(&inc, "all", scored_table, &mut csv);
    md += &format!(
        "\nReports: {sent} sent, {lost} lost on the way into the collector (the traffic source is paced by it); \
         {late} rows taken by the stream processor after their window was written (in no window).\n"
    );
    csv.row("all", scored_table, "reports_lost", "all", lost as f64);
    csv.row("all", scored_table, "rows_late", "all", late as f64);
    let mut rows = vec![("all", "", &forecasts)];
    if families.len() > 1 {
        for (f, t) in families.iter().zip(totals) {
            let load = if f.jobs > 0 {
                "periodic jobs"
            } else {
                "no periodic jobs"
            };
            rows.push((&f.name, load, &t.forecasts));
        }
    }
    md += &forecast_table(&rows, scored_table, &mut csv);
    let rate = c.scored as f64 / c.secs.max(1e-9);
    md += &format!(
        "\nTraining ({}): {:.2} s on the clean run's windows; {:.2} s on {} windows of 1 s (the clean run's, \
         repeated), one thread. Scoring: {} entity-windows in {:.3} s → {rate:.0} entity-windows/s on one \
         core (features, models, episodes, forecasts).\n",
        families[0].name, c.training_seconds, c.hour_training, c.windows, c.scored, c.secs
    );
    csv.row(
        &families[0].name,
        "cost",
        "training_seconds",
        &format!("{}_windows_of_1s", c.windows),
        c.hour_training,
    );
    csv.row(
        &families[0].name,
        "cost",
        "scoring_entity_windows_per_second",
        "all",
        rate,
    );
    (md, csv.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of parameter `name` in a scenario spec (`ddos:rate=0.4,start=0.5`).
    fn param(spec: &str, name: &str) -> f64 {
        let after = spec.split(&format!("{name}=")).nth(1).unwrap();
        after.split(',').next().unwrap().parse().unwrap()
    }

    /// A drawn scenario runs after the warm-up: its times, shares of the scored part, become
    /// the same instants of the longer run, and every part of every drawn scenario, on both
    /// generators, names the start the move needs.
    #[test]
    fn drawn_scenarios_begin_after_the_warm_up_at_the_same_instants_of_the_scored_part() {
        let moved = spec_past_warm_up(
            "ddos:victim=3,rate=0.4,start=0.5,duration=0.2+microburst-cache:start=0.7,end=0.9",
            40,
            20,
        );
        let at = |part: &str, name: &str| param(part, name) * 60.0;
        let (ddos, burst) = moved.split_once('+').unwrap();
        let near = |got: f64, want: f64| assert!((got - want).abs() < 1e-3, "{moved}: {want}");
        assert!(ddos.starts_with("ddos:victim=3,rate=0.4,"), "{moved}");
        near(at(ddos, "start"), 20.0 + 0.5 * 40.0);
        near(at(ddos, "duration"), 0.2 * 40.0);
        near(at(burst, "start"), 20.0 + 0.7 * 40.0);
        near(at(burst, "end"), 20.0 + 0.9 * 40.0);
        assert_eq!(spec_past_warm_up("none", 40, 20), "none");
        assert_eq!(
            spec_past_warm_up("ddos:start=0.5", 40, 0),
            "ddos:start=0.500000"
        );
        for fam in ["ft4-100m", "indep-3tier"] {
            let fam = Family::parse(fam).unwrap();
            for scenario in SCENARIOS.iter().filter(|s| **s != "clean") {
                for seed in 0..20 {
                    let spec = scored_spec(scenario, seed, &fam, 0.025).unwrap();
                    for part in spec.split('+') {
                        assert!(part.contains("start="), "{}: {part}", fam.name);
                    }
                }
            }
        }
    }

    #[test]
    fn scored_runs_draw_parameters_apart_from_the_training_variants() {
        let fam = Family::parse("ft4-100m").unwrap();
        for seed in 0..50 {
            let s = scored_spec("ddos", seed, &fam, 0.025).unwrap();
            assert!(!s.contains("victim=0,"), "{s}");
            // 0.5–10× the victim's usual, as a fraction of its link rate.
            let rate = param(&s, "rate");
            assert!(
                (fam.of_link(0.5) - 1e-4..=fam.of_link(10.0) + 1e-4).contains(&rate),
                "{s}"
            );
            let l = scored_spec("link-failure", seed, &fam, 0.025).unwrap();
            let at: f64 = l["link-failure:link=".len()..]
                .split(',')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(!(0.45..0.55).contains(&at), "{l}");
        }
        let scans: Vec<String> = (0..20)
            .map(|seed| scored_spec("port-scan", seed, &fam, 0.025).unwrap())
            .collect();
        assert!(scans.iter().any(|s| s.contains("hosts=")), "{scans:?}");
        assert!(scans.iter().any(|s| !s.contains("hosts=")), "{scans:?}");
        assert_eq!(
            scored_spec("ddos", 3, &fam, 0.025).unwrap(),
            scored_spec("ddos", 3, &fam, 0.025).unwrap()
        );
        assert_ne!(
            scored_spec("ddos", 3, &fam, 0.025).unwrap(),
            scored_spec("ddos", 4, &fam, 0.025).unwrap()
        );
        assert!(scored_spec("mixed", 1, &fam, 0.025).unwrap().contains('+'));
        assert!(
            scored_spec("flash-crowd", 1, &fam, 0.025)
                .unwrap()
                .starts_with("flash-crowd:")
        );
        assert!(scored_spec("flood", 1, &fam, 0.025).is_err());
        // The independent generator's microbursts are incasts; its DDoS is in packets/s; its
        // benign crowds and copies are its own, in Mb/s, within the link.
        let indep = Family::parse("indep-3tier").unwrap();
        let d = scored_spec("ddos", 1, &indep, 0.025).unwrap();
        assert!(d.contains("times-usual=") && d.contains("sources="), "{d}");
        let i = scored_spec("microburst", 1, &indep, 0.025).unwrap();
        assert!(i.starts_with("incast:"), "{i}");
        for seed in 0..20 {
            let crowd = scored_spec("flash-crowd", seed, &indep, 0.025).unwrap();
            let copy = scored_spec("heavy-hitter", seed, &indep, 0.025).unwrap();
            assert!(param(&crowd, "mbps") <= 0.9 * indep.link_mbps, "{crowd}");
            assert!(
                (0.3..0.8).contains(&(param(&copy, "mbps") / indep.link_mbps)),
                "{copy}"
            );
            for spec in [&crowd, &copy] {
                kplane_tracegen::traffic::parse_scenario(spec, 1, indep.hosts).unwrap();
            }
        }
        for spec in [d, i] {
            kplane_tracegen::traffic::parse_scenario(&spec, 1, indep.hosts).unwrap();
        }
    }

    #[test]
    fn injected_traffic_starts_anywhere_within_one_window_of_its_base_time() {
        let start = |spec: &str| param(spec, "start");
        for name in ["ft4-100m", "indep-3tier"] {
            let fam = Family::parse(name).unwrap();
            let starts: Vec<f64> = (0..40)
                .map(|seed| start(&scored_spec("ddos", seed, &fam, 0.025).unwrap()))
                .collect();
            assert!(
                starts.iter().all(|s| (0.5..0.525).contains(s)),
                "{starts:?}"
            );
            // Early and late in the window both.
            assert!(starts.iter().any(|s| *s < 0.505) && starts.iter().any(|s| *s > 0.52));
            // The other parameters are what the seed drew without it.
            let at_window_start = scored_spec("ddos", 7, &fam, 0.0).unwrap();
            let later = scored_spec("ddos", 7, &fam, 0.025).unwrap();
            assert_eq!(
                at_window_start.split("start=").next(),
                later.split("start=").next()
            );
        }
    }

    #[test]
    fn what_the_same_seeds_clean_run_raised_too_is_the_background_not_the_attacks_end() {
        let link = |e: &str, at: i64| (EntityKind::Link, e.to_string(), at);
        let mut t = FamilyTotals {
            clean_raised: [(122, [link("6:2", 34)].into_iter().collect())].into(),
            aftermath: vec![
                (122, link("6:2", 34)),
                // Another window, another entity, another seed: the attack's end.
                (122, link("6:2", 35)),
                (122, link("7:1", 34)),
                (121, link("6:2", 34)),
            ],
            ..FamilyTotals::default()
        };
        t.scored.after_attack = 4;
        t.pair_aftermath_with_clean_runs();
        assert_eq!(t.scored.after_attack_background, 1);
    }

    #[test]
    fn congestion_that_happened_is_a_fault_only_when_nothing_injected_was_under_way_and_is_at_the_host_it_queues_for()
     {
        let s = 1_000_000_000;
        let o = Outcome {
            events: vec![serde_json::json!({"kind": "link_down", "t_ns": 20 * s,
                "end_ns": 30 * s, "ports": [[1, 2], [2, 1]]})],
            congested: [(5, 9), (25, 26), (32, 34), (9, 10)]
                .map(|(a, b)| kplane_emulator::sim::Congested {
                    node: 7,
                    port: 2,
                    start_ns: a * s as u64,
                    end_ns: b * s as u64,
                })
                .to_vec(),
            ..crate::eval::score::fixtures::outcome()
        };
        let f = faults(&o);
        let observed: Vec<_> = f
            .iter()
            .filter(|f| f.origin == Origin::Observed)
            .map(|f| (f.start_ns / s, f.end_ns / s, f.primary.clone()))
            .collect();
        // 5–9 s and 9–10 s are one; 25–26 s is during the link failure, 32–34 s within 3 s of
        // its end.
        assert_eq!(
            observed,
            [(5, 10, vec![(EntityKind::Queue, "7:2/".to_string())])]
        );
        assert_eq!(f.iter().filter(|f| f.injected()).count(), 1);
        // The queue towards a host: congestion at that destination too.
        use kplane_emulator::topology::{LinkSpec, NodeKind};
        let mut topo = Topology::default();
        let switch = topo.add(NodeKind::Switch, "s1".into());
        let host = topo.add(NodeKind::Host, "h0".into());
        let spec = LinkSpec {
            delay_ns: 1_000,
            rate_bps: 1_000_000_000,
            loss: 0.0,
        };
        topo.connect(host, switch, spec);
        let o = Outcome {
            topology: Some(topo),
            congested: vec![kplane_emulator::sim::Congested {
                node: 1,
                port: 0,
                start_ns: 5 * s as u64,
                end_ns: 6 * s as u64,
            }],
            ..crate::eval::score::fixtures::outcome()
        };
        assert_eq!(
            faults(&o)[0].primary,
            [
                (EntityKind::Queue, "1:0/".to_string()),
                (EntityKind::Destination, "10.0.0.1".to_string())
            ]
        );
    }

    #[test]
    fn benign_traffic_is_about_every_address_of_it_both_ways() {
        let o = Outcome {
            events: vec![
                serde_json::json!({"kind": "flash_crowd", "t_ns": 1, "end_ns": 2,
                    "target": "172.16.1.15", "clients": ["172.16.2.11"]}),
                serde_json::json!({"kind": "heavy_hitter_start", "t_ns": 1, "end_ns": 2,
                    "source": "10.0.0.3", "flows": 2}),
            ],
            ..crate::eval::score::fixtures::outcome()
        };
        let f = faults(&o);
        let about = |i: usize| {
            let mut p = f[i].primary.clone();
            p.sort();
            p
        };
        let both = |ip: &str| {
            [
                (EntityKind::Source, ip.to_string()),
                (EntityKind::Destination, ip.to_string()),
            ]
        };
        let mut crowd: Vec<_> = both("172.16.1.15")
            .into_iter()
            .chain(both("172.16.2.11"))
            .collect();
        crowd.sort();
        assert_eq!(about(0), crowd);
        // The emulator's heavy hitter names no peers: its host, both ways.
        let mut hitter = both("10.0.0.3").to_vec();
        hitter.sort();
        assert_eq!(about(1), hitter);
        assert!(f.iter().all(|f| f.origin == Origin::Benign));
    }

    #[test]
    fn bursts_into_one_queue_are_one_fault_with_the_host_and_the_ports_an_incasts_answers_meet_at()
    {
        let s = 1_000_000_000;
        let burst = |t: i64, queues: &[(u32, u16)]| {
            let q: Vec<_> = queues
                .iter()
                .map(|(n, p)| serde_json::json!({"node": n, "port": p}))
                .collect();
            serde_json::json!({"kind": "microburst", "t_ns": t * s, "end_ns": (t + 1) * s,
                "target": "172.16.1.15", "queue": q[0], "queues": q})
        };
        let o = Outcome {
            // Into switch 1's port 1 twice; another port of switch 1 is another queue.
            events: vec![
                burst(20, &[(1, 1), (103, 1), (201, 2)]),
                burst(22, &[(1, 1), (104, 1)]),
                burst(21, &[(1, 2)]),
            ],
            ..crate::eval::score::fixtures::outcome()
        };
        let f = faults(&o);
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!((f[0].start_ns / s, f[0].end_ns / s), (20, 23));
        let q = |n: &str| (EntityKind::Queue, n.to_string());
        let host = (EntityKind::Destination, "172.16.1.15".to_string());
        assert_eq!(
            f[0].primary,
            [
                q("1:1/"),
                host.clone(),
                q("103:1/"),
                q("201:2/"),
                q("104:1/")
            ]
        );
        assert_eq!(f[1].primary, [q("1:2/"), host]);
        // Scored against the queues raised: any queue id of the port, not another port.
        use super::super::score::fixtures::anomaly;
        let raised = |e: &str| anomaly(EntityKind::Queue, e, AnomalyType::Congestion);
        assert!(f[0].is_primary(&raised("103:1/0")));
        assert!(f[0].is_primary(&raised("1:1/7")));
        assert!(!f[0].is_primary(&raised("1:3/0")));
        assert!(!f[0].is_primary(&raised("10:1/0")));
    }

    #[test]
    fn an_entity_in_two_faults_is_labelled_either_and_benign_traffic_is_labelled_unknown() {
        use super::super::score::fixtures::{anomaly, fault};
        let faults = [
            fault(
                AnomalyType::Ddos,
                false,
                vec![
                    (EntityKind::Destination, "10.0.0.1"),
                    (EntityKind::Source, "10.0.0.9"),
                ],
            ),
            fault(
                AnomalyType::PortScan,
                false,
                vec![
                    (EntityKind::Source, "10.0.0.9"),
                    (EntityKind::Destination, "10.0.0.2"),
                ],
            ),
            fault(
                AnomalyType::Congestion,
                false,
                vec![
                    (EntityKind::Queue, "5:2/"),
                    (EntityKind::Destination, "10.0.0.7"),
                ],
            ),
            fault(
                AnomalyType::Unknown,
                true,
                vec![(EntityKind::Destination, "10.0.0.4")],
            ),
        ];
        let truth = |a: &Anomaly| truth_label(a, &faults, 1_000);
        let scanner = EntityKind::Source;
        for ty in [AnomalyType::Ddos, AnomalyType::PortScan] {
            assert_eq!(truth(&anomaly(scanner, "10.0.0.9", ty)), ty);
        }
        assert_eq!(
            truth(&anomaly(scanner, "10.0.0.9", AnomalyType::Unknown)),
            AnomalyType::Ddos
        );
        let target = anomaly(EntityKind::Destination, "10.0.0.7", AnomalyType::Congestion);
        assert_eq!(truth(&target), AnomalyType::Congestion);
        let queue = anomaly(EntityKind::Queue, "5:2/0", AnomalyType::Congestion);
        assert_eq!(truth(&queue), AnomalyType::Congestion);
        let bystander = anomaly(EntityKind::Source, "10.0.0.3", AnomalyType::Ddos);
        assert_eq!(truth(&bystander), AnomalyType::Unknown);
        let crowd = anomaly(EntityKind::Destination, "10.0.0.4", AnomalyType::Ddos);
        assert_eq!(truth(&crowd), AnomalyType::Unknown);
    }

    #[test]
    fn training_variants_scale_with_the_family() {
        for (name, _) in super::super::family::PRESETS {
            let fam = Family::parse(name).unwrap();
            let v = labelling(&fam, 0.0);
            assert_eq!(v.len(), 11);
            assert!(v[1].contains(&format!("victim={}", fam.hosts - 1)), "{v:?}");
        }
    }

    #[test]
    fn training_variants_start_late_in_a_window_by_the_same_share() {
        let fam = Family::parse("ft4-100m").unwrap();
        let on_time = labelling(&fam, 0.0);
        let late = labelling(&fam, 0.0125);
        for (a, b) in on_time.iter().zip(&late) {
            for key in ["start", "end"] {
                if a.contains(&format!("{key}=")) {
                    let shift = param(b, key) - param(a, key);
                    assert!((shift - 0.0125).abs() < 1e-9, "{a} → {b}");
                }
            }
            // Nothing else moves.
            let rest = |s: &str| -> Vec<String> {
                s.split([':', ','])
                    .filter(|p| !p.starts_with("start=") && !p.starts_with("end="))
                    .map(String::from)
                    .collect()
            };
            assert_eq!(rest(a), rest(b));
        }
    }

    #[test]
    fn the_collectors_decoder_reads_the_independent_generators_reports() {
        use kplane_tracegen::encode::{HopMeta, Packet, sink_report};
        let hop = |node_id, at| HopMeta {
            node_id,
            ingress_port: 1,
            egress_port: 9,
            hop_latency_ns: 800,
            queue_id: 0,
            queue_occupancy: 4,
            ingress_ts_ns: at,
            egress_ts_ns: at + 800,
            tx_utilization: 120,
        };
        let packet = Packet {
            src: [198, 18, 7, 9],
            dst: [172, 16, 3, 12],
            protocol: 17,
            src_port: 5_353,
            dst_port: 80,
            length: 64,
            tcp_flags: 0,
        };
        let bytes = sink_report(
            3,
            &hop(3, 9_000),
            &[
                hop(1, 1_000),
                hop(101, 3_000),
                hop(201, 5_000),
                hop(102, 7_000),
            ],
            &packet,
            3,
        );
        let mut decoder = kplane_wire::Decoder::new(kplane_wire::DecodeOptions::default());
        let mut records = Vec::new();
        let outcome =
            decoder.decode_report(&bytes, Default::default(), |r| records.push(r.clone()));
        assert_eq!(outcome.records, 1, "{outcome:?}");
        let r = &records[0];
        let flow = r.flow.expect("the flow");
        assert_eq!(flow.src_ip.to_string(), "198.18.7.9");
        assert_eq!(flow.dst_ip.to_string(), "172.16.3.12");
        assert_eq!(
            (flow.src_port, flow.dst_port, flow.protocol),
            (5_353, 80, 17)
        );
        let path: Vec<Option<u32>> = r.path().collect();
        assert_eq!(path, [Some(1), Some(101), Some(201), Some(102), Some(3)]);
    }

    #[test]
    fn a_held_out_family_never_learns_from_its_own_labels() {
        let label = |x: f64| Labelled {
            kind: EntityKind::Destination,
            features: [("vs_usual_log_reports".to_string(), x)].into(),
            label: AnomalyType::Ddos,
        };
        let per_family = vec![
            vec![label(0.0)],
            vec![label(1.0), label(1.5)],
            vec![label(2.0)],
        ];
        let held_out = labels_seen(&LabelSource::OtherFamilies, None, &per_family, 1);
        assert_eq!(held_out, [label(0.0), label(2.0)]);
        assert_eq!(
            labels_seen(&LabelSource::SameFamily, None, &per_family[..1], 0),
            [label(0.0)]
        );
        let given = [label(9.0)];
        assert_eq!(
            labels_seen(&LabelSource::File("x".into()), Some(&given), &per_family, 2),
            given
        );
    }
}
