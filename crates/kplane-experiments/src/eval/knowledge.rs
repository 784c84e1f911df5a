//! `kplane eval knowledge`: the knowledge service scored against the emulator's ground truth.
//!
//! 1. **Train**: clean traffic (seed [`TRAIN_SEED`]) teaches the models of normal behaviour.
//! 2. **Label**: the scripted scenarios with their default parameters (the training variants)
//!    are run; every anomaly raised is labelled from the ground truth → the type classifier's
//!    training set (`types.json`), unless `--labels` gives one.
//! 3. **Score**: each asked scenario runs `--runs` times (seeds `--seed`, `--seed`+1, …) with
//!    parameters drawn from the seed — other victims, attackers, rates, links and times than
//!    the training variants — and what the service raised is compared with what was injected.
//!
//! Every run is a fresh knowledge service loading the persisted models (a restart).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use kplane_emulator::run::RunConfig;
use kplane_emulator::topology::{LinkSpec, Topology};
use kplane_knowledge::typer::Labelled;
use kplane_model::results::{Anomaly, AnomalyPhase, AnomalyType, EntityKind, Forecast};
use kplane_model::rng::Rng;

use super::pipeline::{Outcome, knowledge_config, run_pipeline};

/// The clean run the models learn from.
pub const TRAIN_SEED: u64 = 9_001;
/// The labelling runs' first seed.
pub const LABEL_SEED: u64 = 9_101;
/// Scored scenarios.
pub const SCENARIOS: [&str; 6] = [
    "ddos",
    "port-scan",
    "microburst",
    "link-failure",
    "mixed",
    "clean",
];
/// The types scored.
const SCORED: [AnomalyType; 4] = [
    AnomalyType::Ddos,
    AnomalyType::PortScan,
    AnomalyType::Congestion,
    AnomalyType::LinkFailure,
];

#[derive(Debug, Args)]
pub struct KnowledgeArgs {
    /// ddos | port-scan | microburst | link-failure | mixed | clean (repeatable), or an emulator
    /// scenario with parameters, run as given (`ddos:victim=3,rate=4`, docs/emulator.md).
    #[arg(long, default_values_t = ["mixed".to_string(), "clean".to_string()])]
    scenario: Vec<String>,
    /// First seed of the scored runs (scenario parameters are drawn from it).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Scored runs per scenario (seeds seed, seed+1, …).
    #[arg(long, default_value_t = 3)]
    runs: u64,
    /// Virtual seconds per scored run.
    #[arg(long, default_value_t = 40)]
    seconds: u64,
    /// Virtual seconds of clean traffic the models learn from.
    #[arg(long, default_value_t = 300)]
    train_seconds: u64,
    /// Window of the processor and the knowledge service (the deployments' default: 1 s).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    window: Duration,
    /// Background flows per second (Poisson arrivals between random hosts).
    #[arg(long, default_value_t = 1_000.0)]
    flows: f64,
    /// Share of the background flows that are elephants (1000 packets; mice: 10).
    #[arg(long, default_value_t = 0.02)]
    elephant_share: f64,
    /// Periodic jobs in the background: fixed host pairs, each sending a transfer of a quarter
    /// of its period (8–20 s) every period (docs/emulator.md).
    #[arg(long, default_value_t = 8)]
    jobs: usize,
    /// Sending rate of a job's transfer, Mb/s.
    #[arg(long, default_value_t = 10.0)]
    job_mbps: f64,
    /// The type classifier's labelled set (JSON, docs/knowledge.md); default: generated from
    /// the training variants of the scenarios.
    #[arg(long)]
    labels: Option<PathBuf>,
    /// Labelling runs per training variant (seeds 9101, 9102, …).
    #[arg(long, default_value_t = 3)]
    label_runs: u64,
    /// Also write the generated labelled set here.
    #[arg(long)]
    write_labels: Option<PathBuf>,
    /// Hop latency the processor raises a breach above (`stream-processor.thresholds.
    /// hop-latency-ns`); default: its default for 10 Gb/s links scaled to these 100 Mb/s ones
    /// (the same queue depth in packets: 100 µs × 100 = 10 ms).
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    hop_latency_threshold: Duration,
    /// How long a value stays above its threshold before the processor raises the breach
    /// (`stream-processor.thresholds.min-duration`). Default: longer than one background
    /// elephant (1000 packets of 1500 B at 100 Mb/s: 120 ms) can keep a queue full on its own,
    /// so sustained congestion is raised and the background's passing bursts are not.
    #[arg(long, default_value = "200ms", value_parser = humantime::parse_duration)]
    min_duration: Duration,
    /// Windows of 1 s the training and scoring cost is measured on (3600: an hour).
    #[arg(long, default_value_t = 3_600)]
    cost_windows: usize,
    /// Where results go (results.csv, anomalies.jsonl, incidents.jsonl, report.md); default: a new directory
    /// under the system's temporary directory.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// One injected fault and the entities it is about.
#[derive(Clone, Debug)]
pub(super) struct Fault {
    pub(super) kind: AnomalyType,
    pub(super) start_ns: i64,
    pub(super) end_ns: i64,
    /// (entity kind, entity or, for queues, `node/` prefix).
    pub(super) primary: Vec<(EntityKind, String)>,
}

impl Fault {
    fn is_primary(&self, a: &Anomaly) -> bool {
        self.primary.iter().any(|(k, e)| {
            *k == a.entity_kind
                && if *k == EntityKind::Queue {
                    a.entity.starts_with(e.as_str())
                } else {
                    a.entity == *e
                }
        })
    }

    /// Whether `a`'s windows meet the fault's (one window early for the window holding its
    /// start, `close_after` + 1 late for its aftermath).
    fn overlaps(&self, a: &Anomaly, window_ns: i64) -> bool {
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
    // Per target queue's node: (first start, last end, target host).
    let mut bursts: BTreeMap<u32, (i64, i64, String)> = BTreeMap::new();
    let t = |e: &serde_json::Value, k: &str| e[k].as_i64().unwrap_or(0);
    let s = |e: &serde_json::Value, k: &str| e[k].as_str().unwrap_or_default().to_string();
    for e in &o.truth.events {
        match e["kind"].as_str().unwrap_or_default() {
            "ddos_start" => {
                let mut primary = vec![(EntityKind::Destination, s(e, "victim"))];
                for src in e["sources"].as_array().into_iter().flatten() {
                    if let Some(ip) = src.as_str() {
                        primary.push((EntityKind::Source, ip.to_string()));
                    }
                }
                out.push(Fault {
                    kind: AnomalyType::Ddos,
                    start_ns: t(e, "t_ns"),
                    end_ns: t(e, "end_ns"),
                    primary,
                });
            }
            "port_scan" => out.push(Fault {
                kind: AnomalyType::PortScan,
                start_ns: t(e, "t_ns"),
                end_ns: t(e, "end_ns"),
                primary: vec![
                    (EntityKind::Source, s(e, "scanner")),
                    (EntityKind::Destination, s(e, "victim")),
                ],
            }),
            "link_down" => {
                let ids: Vec<u32> = e["link"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_u64().map(|v| v as u32))
                    .collect();
                if let [a, b] = ids[..] {
                    out.push(Fault {
                        kind: AnomalyType::LinkFailure,
                        start_ns: t(e, "t_ns"),
                        end_ns: t(e, "end_ns"),
                        primary: link_entities(&o.topology, a, b),
                    });
                }
            }
            // Bursts of tens of microseconds: one fault per target queue, over the span.
            "microburst" => {
                let node = e["queue"]["node"].as_u64().unwrap_or(0) as u32;
                let b = bursts.entry(node).or_insert((i64::MAX, 0, s(e, "target")));
                b.0 = b.0.min(t(e, "t_ns"));
                b.1 = b.1.max(t(e, "end_ns"));
            }
            _ => {}
        }
    }
    // A microburst is about the queue it fills and the host it converges on (incast).
    for (node, (start, end, target)) in bursts {
        out.push(Fault {
            kind: AnomalyType::Congestion,
            start_ns: start,
            end_ns: end,
            primary: vec![
                (EntityKind::Queue, format!("{node}/")),
                (EntityKind::Destination, target),
            ],
        });
    }
    out
}

/// What the ground truth says an anomaly is: its fault's type on an entity the fault is about
/// (the anomaly's own type if the entity is in several faults at once: a DDoS source that also
/// scans); congestion for a queue that filled during any fault (collateral, but real);
/// `unknown` otherwise (a false alarm when no fault was under way).
fn truth_label(a: &Anomaly, faults: &[Fault], window_ns: i64) -> AnomalyType {
    let during: Vec<&Fault> = faults.iter().filter(|i| i.overlaps(a, window_ns)).collect();
    let mut about = during.iter().filter(|i| i.is_primary(a));
    if let Some(i) = about.clone().find(|i| i.kind == a.anomaly_type) {
        return i.kind;
    }
    if let Some(i) = about.next() {
        return i.kind;
    }
    if a.entity_kind == EntityKind::Queue && !during.is_empty() {
        return AnomalyType::Congestion;
    }
    AnomalyType::Unknown
}

/// The standardised features of an anomaly in model order (from its explanation).
fn z_vector(a: &Anomaly) -> Vec<f64> {
    kplane_knowledge::features::names(a.entity_kind)
        .iter()
        .map(|n| {
            a.explanation
                .features
                .iter()
                .find(|f| f.name == *n)
                .map_or(0.0, |f| f.z)
        })
        .collect()
}

/// Learnt anomalies as they were raised: each episode's start, and the update that typed it
/// if its start was untyped (facts from alerts are not scored here).
fn raised(o: &Outcome) -> impl Iterator<Item = &Anomaly> {
    let mut typed_at_start = std::collections::HashSet::new();
    o.anomalies.iter().filter(move |a| {
        let learnt = !matches!(
            a.anomaly_type,
            AnomalyType::RoutingLoop | AnomalyType::BlackHole
        );
        match a.phase {
            AnomalyPhase::Start => {
                if a.anomaly_type != AnomalyType::Unknown {
                    typed_at_start.insert(a.id.as_str());
                }
                learnt
            }
            AnomalyPhase::Update => {
                learnt
                    && a.anomaly_type != AnomalyType::Unknown
                    && typed_at_start.insert(a.id.as_str())
            }
            AnomalyPhase::End => false,
        }
    })
}

/// The emulator scenario of a scored run: parameters drawn from `seed`, never the training
/// variants' (victim 0, the last host scanning, the middle link, the last host bursting).
///
/// A scenario with parameters (`ddos:victim=3,rate=4`, several joined by `+`; docs/emulator.md)
/// is run as given: operators script their own.
pub fn scored_spec(scenario: &str, seed: u64) -> anyhow::Result<String> {
    if scenario.contains(':') || scenario.contains('+') {
        return Ok(scenario.to_string());
    }
    let mut d = Rng::new(seed);
    let ddos = |d: &mut Rng, start: f64| {
        format!(
            "ddos:victim={},attackers={},rate={:.2},start={start:.2},duration={:.2}",
            d.int(1, 14),
            d.int(4, 12),
            d.real(1.5, 3.0),
            d.real(0.15, 0.25)
        )
    };
    let scan = |d: &mut Rng, start: f64| {
        format!(
            "port-scan:victim={},scanner={},ports={},gap-us={},start={start:.2}",
            d.int(1, 8),
            d.int(8, 15),
            d.int(300, 2_000),
            d.int(10, 60)
        )
    };
    let link = |d: &mut Rng, start: f64| {
        // Any switch-to-switch link but the middle one.
        let mut at = d.real(0.0, 0.95);
        if (0.45..0.55).contains(&at) {
            at -= 0.2;
        }
        format!(
            "link-failure:link={at:.3},start={start:.2},duration={:.2}",
            d.real(0.2, 0.3)
        )
    };
    let burst = |d: &mut Rng, start: f64| {
        // Not the web profile: its bursts (25 µs median) are shorter than one packet on the
        // evaluation's 100 Mb/s links (80 µs), so they queue nothing — no congestion to find.
        let profile = ["-cache", "-hadoop"][d.int(0, 2) as usize];
        format!(
            "microburst{profile}:target={},start={start:.2},end={:.2}",
            d.int(0, 14),
            start + 0.3
        )
    };
    Ok(match scenario {
        "ddos" => ddos(&mut d, 0.5),
        "port-scan" => scan(&mut d, 0.5),
        "link-failure" => link(&mut d, 0.6),
        "microburst" => burst(&mut d, 0.5),
        // Apart in time so that each is scored on its own.
        "mixed" => [ddos(&mut d, 0.35), scan(&mut d, 0.55), link(&mut d, 0.7)].join("+"),
        "clean" => "none".into(),
        other => bail!(
            "unknown scenario {other:?} (one of {})",
            SCENARIOS.join(", ")
        ),
    })
}

/// The training variants the labelled set comes from: victims, scanners and burst targets
/// among the first and last hosts, scans of 200 to 1024 ports, and links at 0.5 and 0.97 along
/// the list, which the scored runs never draw.
const LABELLING: [&str; 9] = [
    "ddos:start=0.5",
    "ddos:victim=15,attackers=6,rate=2,start=0.4,duration=0.25",
    "port-scan:start=0.5",
    "port-scan:victim=15,scanner=0,ports=600,gap-us=30,start=0.4",
    "port-scan:victim=0,scanner=15,ports=200,gap-us=100,start=0.6",
    "link-failure:start=0.5,duration=0.3",
    "link-failure:link=0.97,start=0.5,duration=0.25",
    "microburst-hadoop:start=0.5,end=0.8",
    "microburst-cache:target=15,start=0.3,end=0.7",
];

fn emulation(a: &KnowledgeArgs, spec: &str, seconds: u64, seed: u64) -> RunConfig {
    let mut rc = RunConfig {
        duration: Duration::from_secs(seconds),
        scenario: spec.into(),
        flows_per_second: a.flows,
        elephant_share: a.elephant_share,
        jobs: a.jobs,
        job_rate_bps: (a.job_mbps * 1e6) as u64,
        // 100 Mb/s links: a DDoS at twice the victim's link rate stays small enough to emulate.
        link: LinkSpec {
            rate_bps: 100_000_000,
            ..LinkSpec::default()
        },
        ..RunConfig::default()
    };
    rc.sim.seed = seed;
    rc
}

/// Per type: (raised as it, of them right, injected, detected, detection delays in windows).
#[derive(Debug, Default)]
struct TypeScore {
    raised: u64,
    right: u64,
    injected: u64,
    detected: u64,
    delays: Vec<f64>,
}

impl TypeScore {
    fn precision(&self) -> Option<f64> {
        (self.raised > 0).then(|| self.right as f64 / self.raised as f64)
    }
    fn recall(&self) -> Option<f64> {
        (self.injected > 0).then(|| self.detected as f64 / self.injected as f64)
    }
    fn f1(&self) -> Option<f64> {
        match (self.precision(), self.recall()) {
            (Some(p), Some(r)) if p + r > 0.0 => Some(2.0 * p * r / (p + r)),
            (Some(_), Some(_)) => Some(0.0),
            _ => None,
        }
    }
}

/// Forecast errors of one method: windows, sum of |error| / actual (actual > 0), sum of
/// squared errors.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Err3 {
    pub(super) n: u64,
    n_pct: u64,
    abs_pct: f64,
    sq: f64,
}

impl Err3 {
    fn add(&mut self, predicted: f64, actual: f64) {
        self.n += 1;
        self.sq += (predicted - actual).powi(2);
        if actual > 0.0 {
            self.n_pct += 1;
            self.abs_pct += (predicted - actual).abs() / actual;
        }
    }
    pub(super) fn mape(&self) -> f64 {
        100.0 * self.abs_pct / self.n_pct.max(1) as f64
    }
    fn rmse(&self) -> f64 {
        (self.sq / self.n.max(1) as f64).sqrt()
    }
}

/// Per series: model, last value, EWMA.
pub(super) type ForecastScore = BTreeMap<String, [Err3; 3]>;

pub(super) fn score_forecasts(forecasts: &[Forecast], into: &mut ForecastScore) {
    // What window T turned out to be is the last value of the forecast made at T.
    let actual: BTreeMap<(&str, &str, i64), f64> = forecasts
        .iter()
        .map(|f| {
            (
                (f.series.as_str(), f.entity.as_str(), f.observed_end_ns),
                f.last_value,
            )
        })
        .collect();
    for f in forecasts {
        let Some(&v) = actual.get(&(f.series.as_str(), f.entity.as_str(), f.window_end_ns)) else {
            continue;
        };
        let e = into.entry(f.series.clone()).or_default();
        e[0].add(f.predicted, v);
        e[1].add(f.last_value, v);
        e[2].add(f.ewma, v);
    }
}

#[derive(Debug, Default)]
struct Totals {
    types: BTreeMap<AnomalyType, TypeScore>,
    false_alarms: u64,
    virtual_seconds: f64,
    clean_false_alarms: u64,
    clean_seconds: f64,
    forecasts: ForecastScore,
    runs: u64,
    reports_sent: u64,
    reports_lost: u64,
    incidents: super::incidents::IncidentScore,
}

/// Scores one run; returns its incidents' summaries.
fn score_run(
    o: &Outcome,
    scenario: &str,
    window_ns: i64,
    totals: &mut Totals,
) -> Vec<serde_json::Value> {
    let injected = faults(o);
    for a in raised(o) {
        let truth = truth_label(a, &injected, window_ns);
        let s = totals.types.entry(a.anomaly_type).or_default();
        s.raised += 1;
        if truth == a.anomaly_type {
            s.right += 1;
        }
        if truth == AnomalyType::Unknown && !injected.iter().any(|i| i.overlaps(a, window_ns)) {
            totals.false_alarms += 1;
            if scenario == "clean" {
                totals.clean_false_alarms += 1;
            }
        }
    }
    for i in &injected {
        let s = totals.types.entry(i.kind).or_default();
        s.injected += 1;
        let first = raised(o)
            .filter(|a| a.anomaly_type == i.kind && i.is_primary(a) && i.overlaps(a, window_ns))
            .map(|a| a.last_ns)
            .min();
        if let Some(at) = first {
            s.detected += 1;
            s.delays
                .push(((at - i.start_ns) as f64 / window_ns as f64).max(0.0));
        }
    }
    let incidents = super::incidents::score_run(
        o,
        &injected,
        scenario == "clean",
        window_ns,
        &mut totals.incidents,
    );
    totals.virtual_seconds += o.virtual_seconds;
    if scenario == "clean" {
        totals.clean_seconds += o.virtual_seconds;
    }
    score_forecasts(&o.forecasts, &mut totals.forecasts);
    totals.runs += 1;
    totals.reports_sent += o.reports_sent;
    totals.reports_lost += o.reports_lost;
    incidents
}

/// The labelled entity-windows of a labelling run.
fn labels_of(o: &Outcome, window_ns: i64) -> Vec<Labelled> {
    let injected = faults(o);
    raised(o)
        .map(|a| Labelled {
            kind: a.entity_kind,
            z: z_vector(a),
            label: truth_label(a, &injected, window_ns),
        })
        .collect()
}

fn fmt(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.2}"))
}

pub fn run(a: KnowledgeArgs) -> anyhow::Result<()> {
    for s in &a.scenario {
        scored_spec(s, 0)?;
    }
    let out = match &a.out {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("kplane-eval-knowledge-{}", std::process::id())),
    };
    let state = out.join("state");
    if state.exists() {
        std::fs::remove_dir_all(&state).with_context(|| format!("{}", state.display()))?;
    }
    std::fs::create_dir_all(&state)?;
    let stores = out.join("stores");
    let _ = std::fs::remove_dir_all(&stores);
    let store = |name: &str| stores.join(name);
    let window = a.window.max(Duration::from_millis(10));
    let window_ns = window.as_nanos() as i64;
    let thresholds = kplane_stream_processor::config::Thresholds {
        hop_latency_ns: a.hop_latency_threshold.as_nanos() as u64,
        min_duration: a.min_duration,
        ..Default::default()
    };
    let window_count = (a.train_seconds as u128 * 1_000 / window.as_millis()) as usize;
    // Trained with a margin before the run ends (training runs beside the scoring).
    let min_windows = (window_count * 9 / 10).max(20);

    // 1. Train on clean traffic.
    eprintln!(
        "kplane eval knowledge: training on {} s of clean traffic (seed {TRAIN_SEED})",
        a.train_seconds
    );
    run_pipeline(
        &store("train"),
        window,
        &thresholds,
        knowledge_config(&state, window, min_windows),
        emulation(&a, "none", a.train_seconds, TRAIN_SEED),
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
        bail!("no model trained: {}", registry.message);
    }
    let training_seconds = registry.history.last().map_or(0.0, |t| t.seconds);

    // 2. The type classifier's labelled set.
    let labels: Vec<Labelled> = match &a.labels {
        Some(p) => serde_json::from_str(
            &std::fs::read_to_string(p).with_context(|| format!("{}", p.display()))?,
        )
        .with_context(|| format!("{}: not a labelled set", p.display()))?,
        None => {
            let mut all = Vec::new();
            for (i, spec) in LABELLING.iter().enumerate() {
                for r in 0..a.label_runs {
                    let seed = LABEL_SEED + 100 * r + i as u64;
                    eprintln!("kplane eval knowledge: labelling {spec} (seed {seed})");
                    let o = run_pipeline(
                        &store(&format!("label-{seed}")),
                        window,
                        &thresholds,
                        knowledge_config(&state, window, min_windows),
                        emulation(&a, spec, a.seconds, seed),
                        || true,
                    )?;
                    all.extend(labels_of(&o, window_ns));
                }
            }
            all
        }
    };
    let text = serde_json::to_string_pretty(&labels)?;
    std::fs::write(state.join("types.json"), &text)?;
    if let Some(p) = &a.write_labels {
        std::fs::write(p, &text).with_context(|| format!("{}", p.display()))?;
    }

    // 3. Scored runs.
    let mut totals = Totals::default();
    let mut anomalies = std::fs::File::create(out.join("anomalies.jsonl"))?;
    let mut incidents = std::fs::File::create(out.join("incidents.jsonl"))?;
    for scenario in &a.scenario {
        for r in 0..a.runs {
            let seed = a.seed + r;
            let spec = scored_spec(scenario, seed)?;
            eprintln!("kplane eval knowledge: {scenario} seed {seed}: {spec}");
            let o = run_pipeline(
                &store(&format!("{scenario}-{seed}")),
                window,
                &thresholds,
                knowledge_config(&state, window, min_windows),
                emulation(&a, &spec, a.seconds, seed),
                || true,
            )?;
            let injected = faults(&o);
            for x in raised(&o) {
                let mut v = serde_json::to_value(x)?;
                v["eval"] = serde_json::json!({"scenario": scenario, "seed": seed, "spec": spec,
                    "truth": truth_label(x, &injected, window_ns)});
                writeln!(anomalies, "{v}")?;
            }
            let eval = serde_json::json!({"scenario": scenario, "seed": seed, "spec": spec,
                "faults": injected.iter().map(|f| serde_json::json!({"kind": f.kind,
                    "start_ns": f.start_ns, "end_ns": f.end_ns, "entities": f.primary}))
                    .collect::<Vec<_>>()});
            for mut v in score_run(&o, scenario, window_ns, &mut totals) {
                v["eval"] = eval.clone();
                writeln!(incidents, "{v}")?;
            }
        }
    }

    // 4. Cost: training on an hour of 1 s windows, scoring on one core.
    let (history, _) = kplane_knowledge::history::windows(&store("train"), usize::MAX);
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
        training_seconds,
        windows: n,
        hour_training,
        scored,
        secs,
    };
    let report = report(&a, &totals, &cost, &out);
    std::fs::write(out.join("report.md"), &report.0)?;
    std::fs::write(out.join("results.csv"), &report.1)?;
    print!("{}", report.0);
    Ok(())
}

/// Training and scoring cost.
struct Cost {
    /// The clean run's training.
    training_seconds: f64,
    /// 1 s windows of the measured training and scoring.
    windows: usize,
    hour_training: f64,
    scored: u64,
    secs: f64,
}

/// The markdown report and the CSV.
fn report(a: &KnowledgeArgs, t: &Totals, c: &Cost, out: &Path) -> (String, String) {
    let mut md = String::new();
    let mut csv = String::from("metric,type,value\n");
    let mut row = |metric: &str, ty: &str, v: f64| {
        csv += &format!("{metric},{ty},{v}\n");
    };
    md += &format!(
        "# kplane eval knowledge\n\nScenarios {} × {} runs (seeds {}…{}), {} s each, {} ms windows, \
         {} background flows/s ({} % elephants) and {} periodic jobs of {} Mb/s; models trained on {} s of clean traffic (seed \
         {TRAIN_SEED}); the processor raises breaches above {} hop latency (held {}); results in {}.\n\n",
        a.scenario.join(", "),
        a.runs,
        a.seed,
        a.seed + a.runs.saturating_sub(1),
        a.seconds,
        a.window.as_millis(),
        a.flows,
        100.0 * a.elephant_share,
        a.jobs,
        a.job_mbps,
        a.train_seconds,
        humantime::format_duration(a.hop_latency_threshold),
        humantime::format_duration(a.min_duration),
        out.display()
    );
    md += "| type | injected | detected | recall | raised as it | right | precision | F1 | delay (windows, mean) |\n";
    md += "|---|---|---|---|---|---|---|---|---|\n";
    for ty in SCORED {
        let s = t
            .types
            .get(&ty)
            .map_or_else(TypeScore::default, |s| TypeScore {
                raised: s.raised,
                right: s.right,
                injected: s.injected,
                detected: s.detected,
                delays: s.delays.clone(),
            });
        let delay =
            (!s.delays.is_empty()).then(|| s.delays.iter().sum::<f64>() / s.delays.len() as f64);
        md += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            ty.as_str(),
            s.injected,
            s.detected,
            fmt(s.recall()),
            s.raised,
            s.right,
            fmt(s.precision()),
            fmt(s.f1()),
            fmt(delay)
        );
        for (m, v) in [
            ("recall", s.recall()),
            ("precision", s.precision()),
            ("f1", s.f1()),
            ("delay_windows", delay),
        ] {
            if let Some(v) = v {
                row(m, ty.as_str(), v);
            }
        }
    }
    let i = &t.incidents;
    md += &format!(
        "\nIncidents (docs/incidents.md: alerts and anomalies correlated by root, hold {} s) against \
         the injected faults: {} faults, {} with an incident → recall {}; {} incidents, {} about a \
         fault → precision {}; {} incidents per detected fault, each incident counted for one (1 is the aim); on clean runs {} \
         incidents in {:.0} s.\n",
        super::incidents::HOLD.as_secs(),
        i.faults,
        i.detected,
        fmt(i.recall()),
        i.incidents,
        i.about_a_fault,
        fmt(i.precision()),
        fmt(i.per_fault()),
        i.clean_incidents,
        i.clean_seconds
    );
    for (m, v) in [
        ("incident_recall", i.recall()),
        ("incident_precision", i.precision()),
        ("incidents_per_fault", i.per_fault()),
    ] {
        if let Some(v) = v {
            row(m, "all", v);
        }
    }
    let unknown = t.types.get(&AnomalyType::Unknown).map_or(0, |s| s.raised);
    md += &format!("\nRaised as `unknown`: {unknown}.\n");
    md += &format!(
        "\nReports: {} sent, {} lost on the way into the collector (the emulator is paced by it).\n",
        t.reports_sent, t.reports_lost
    );
    row("reports_lost", "all", t.reports_lost as f64);
    let per_hour = |n: u64, s: f64| n as f64 / (s / 3_600.0).max(1e-9);
    md += &format!(
        "\nFalse alarms (raised while nothing was injected): {} in {:.0} virtual s → {:.1} per hour; \
         on clean runs {} in {:.0} s → {:.1} per hour.\n",
        t.false_alarms,
        t.virtual_seconds,
        per_hour(t.false_alarms, t.virtual_seconds),
        t.clean_false_alarms,
        t.clean_seconds,
        per_hour(t.clean_false_alarms, t.clean_seconds)
    );
    row(
        "false_alarms_per_hour",
        "all",
        per_hour(t.false_alarms, t.virtual_seconds),
    );
    if t.clean_seconds > 0.0 {
        row(
            "false_alarms_per_hour",
            "clean",
            per_hour(t.clean_false_alarms, t.clean_seconds),
        );
    }
    md += "\n| forecast | windows | MAPE model | MAPE last value | MAPE EWMA | vs EWMA | RMSE model | RMSE last value | RMSE EWMA |\n|---|---|---|---|---|---|---|---|---|\n";
    for (series, [m, l, e]) in &t.forecasts {
        let gain = 100.0 * (1.0 - m.mape() / e.mape().max(1e-9));
        md += &format!(
            "| {series} | {} | {:.1} % | {:.1} % | {:.1} % | {gain:+.0} % | {:.1} | {:.1} | {:.1} |\n",
            m.n,
            m.mape(),
            l.mape(),
            e.mape(),
            m.rmse(),
            l.rmse(),
            e.rmse()
        );
        row("forecast_mape_model", series, m.mape());
        row("forecast_mape_last_value", series, l.mape());
        row("forecast_mape_ewma", series, e.mape());
        row("forecast_mape_gain_vs_ewma_pct", series, gain);
        row("forecast_rmse_model", series, m.rmse());
        row("forecast_rmse_ewma", series, e.rmse());
    }
    let rate = c.scored as f64 / c.secs.max(1e-9);
    md += &format!(
        "\nTraining: {:.2} s on the clean run's windows; {:.2} s on {} windows of 1 s (the clean run's, \
         repeated), one thread. Scoring: {} entity-windows in {:.3} s → {rate:.0} entity-windows/s on one \
         core (features, models, episodes, forecasts).\n",
        c.training_seconds, c.hour_training, c.windows, c.scored, c.secs
    );
    row(
        "training_seconds",
        &format!("{}_windows_of_1s", c.windows),
        c.hour_training,
    );
    row("scoring_entity_windows_per_second", "all", rate);
    (md, csv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scored_runs_draw_parameters_apart_from_the_training_variants() {
        for seed in 0..50 {
            let s = scored_spec("ddos", seed).unwrap();
            assert!(!s.contains("victim=0,"), "{s}");
            let l = scored_spec("link-failure", seed).unwrap();
            let at: f64 = l["link-failure:link=".len()..]
                .split(',')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(!(0.45..0.55).contains(&at), "{l}");
        }
        assert_eq!(
            scored_spec("ddos", 3).unwrap(),
            scored_spec("ddos", 3).unwrap()
        );
        assert_ne!(
            scored_spec("ddos", 3).unwrap(),
            scored_spec("ddos", 4).unwrap()
        );
        assert!(scored_spec("mixed", 1).unwrap().contains('+'));
        assert!(scored_spec("flood", 1).is_err());
    }

    #[test]
    fn an_entity_in_two_faults_is_right_as_either_and_a_burst_target_is_congestion() {
        let anomaly = |kind: EntityKind, entity: &str, ty: AnomalyType| Anomaly {
            id: format!("{}:{entity}:1", kind.as_str()),
            entity_kind: kind,
            entity: entity.into(),
            anomaly_type: ty,
            confidence: 1.0,
            score: 10.0,
            threshold: 1.0,
            start_ns: 1_000,
            end_ns: None,
            last_ns: 2_000,
            windows: 1,
            detected_ns: 0,
            phase: AnomalyPhase::Start,
            model_version: 1,
            explanation: Default::default(),
            recommendations: Vec::new(),
        };
        let fault = |kind, primary: Vec<(EntityKind, &str)>| Fault {
            kind,
            start_ns: 0,
            end_ns: 5_000,
            primary: primary
                .into_iter()
                .map(|(k, e)| (k, e.to_string()))
                .collect(),
        };
        let faults = [
            fault(
                AnomalyType::Ddos,
                vec![
                    (EntityKind::Destination, "10.0.0.1"),
                    (EntityKind::Source, "10.0.0.9"),
                ],
            ),
            fault(
                AnomalyType::PortScan,
                vec![
                    (EntityKind::Source, "10.0.0.9"),
                    (EntityKind::Destination, "10.0.0.2"),
                ],
            ),
            fault(
                AnomalyType::Congestion,
                vec![
                    (EntityKind::Queue, "5/"),
                    (EntityKind::Destination, "10.0.0.7"),
                ],
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
        let queue = anomaly(EntityKind::Queue, "5/2", AnomalyType::Congestion);
        assert_eq!(truth(&queue), AnomalyType::Congestion);
        let bystander = anomaly(EntityKind::Source, "10.0.0.3", AnomalyType::Ddos);
        assert_eq!(truth(&bystander), AnomalyType::Unknown);
    }

    #[test]
    fn precision_recall_and_f1() {
        let s = TypeScore {
            raised: 4,
            right: 3,
            injected: 2,
            detected: 2,
            delays: vec![1.0],
        };
        assert_eq!(s.precision(), Some(0.75));
        assert_eq!(s.recall(), Some(1.0));
        assert!((s.f1().unwrap() - 6.0 / 7.0).abs() < 1e-9);
        assert_eq!(TypeScore::default().f1(), None);
    }
}
