//! `kplane eval lab`: the knowledge service scored on real switches.
//!
//! A `kplane lab up` child (BMv2 switches in network namespaces, hosts sending real packets)
//! runs `--learn` seconds of clean traffic, which the knowledge service trains on, then one
//! attack per slot — parameters drawn from the seed — each followed by clean traffic. After the
//! lab has ended, every anomaly record the knowledge service stored (the store's `anomalies`
//! table) is scored against the lab's truth file with the rules of `kplane eval knowledge`
//! ([`super::score`]), and so are the incidents built from those and the processor's stored
//! immediate events (`alerts`, [`super::incidents`]). The anomaly types are the shipped definitions, labelled on the
//! emulator's fat-tree: nothing of the lab was seen by them, so the whole run is held out.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use kplane_bench::child::Up;
use kplane_model::results::{Alert, Anomaly};
use kplane_model::rng::Rng;
use serde_json::{Value, json};

use super::incidents::{self, IncidentScore};
use super::knowledge::{Csv, detection_table, faults, truth_label};
use super::pipeline::Outcome;
use super::score::{Detection, raised};

/// Seconds of the learning stretch left for the last windows to close and the training to
/// end: the model must judge the first slot from its start. On a busy 2-core machine the first
/// training took 2 s and the windows close some 2 s after they end.
const TRAINING_MARGIN_S: u64 = 10;

/// What a slot holds.
pub const LAB_SCENARIOS: [&str; 3] = ["ddos", "port-scan", "clean"];

#[derive(Debug, Args)]
pub struct LabArgs {
    /// The fabric (`kplane lab up --topology`).
    #[arg(long, default_value = "leaf-spine:2,4,2")]
    topology: String,
    /// The lab's name (prefix of its namespaces and interfaces; not the default lab's, so that
    /// both can run).
    #[arg(long, default_value = "kpev")]
    name: String,
    /// Background flow arrivals per second.
    #[arg(long, default_value_t = 5.0)]
    flows: f64,
    /// Share of the background flows that are elephants.
    #[arg(long, default_value_t = 0.2)]
    elephant_share: f64,
    /// Seconds of clean traffic the knowledge service learns from before the first slot.
    #[arg(long, default_value_t = 120)]
    learn: u64,
    /// ddos | port-scan | clean (repeatable): one slot each per run.
    #[arg(long, default_values_t = ["ddos".to_string(), "port-scan".to_string(), "clean".to_string()])]
    scenario: Vec<String>,
    /// Runs of the scenarios (seeds seed, seed+1, …, each drawing the attacks' hosts and rates).
    #[arg(long, default_value_t = 3)]
    runs: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seconds an attack lasts.
    #[arg(long, default_value_t = 20)]
    attack: u64,
    /// Seconds of clean traffic after each slot's attack (its aftermath, and the false alarms'
    /// ground).
    #[arg(long, default_value_t = 40)]
    gap: u64,
    /// Where the results go (report.md, results.csv, anomalies.jsonl, and the lab's data
    /// directory `lab-data/`); default: a new directory under the temporary directory.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// One slot's attack, as `kplane lab up --attack` takes it; `None` for a clean slot.
fn attack_of(scenario: &str, seed: u64, hosts: &[std::net::Ipv4Addr]) -> Option<String> {
    // Each scenario its own stream, so that a run's scanner is not its DDoS's victim.
    let stream = LAB_SCENARIOS
        .iter()
        .position(|s| *s == scenario)
        .unwrap_or(0) as u64;
    let mut d = Rng::new(seed.wrapping_mul(LAB_SCENARIOS.len() as u64) + stream);
    let h = hosts.len() as u64;
    let log_uniform = |d: &mut Rng, lo: f64, hi: f64| (d.real(lo.ln(), hi.ln())).exp();
    match scenario {
        // A victim's usual traffic at the default background is some 20 packets/s: 5–30×, from
        // two to every other host, within what BMv2 forwards on two cores (docs/lab.md).
        "ddos" => {
            let victim = hosts[d.int(0, h) as usize];
            let sources = d.int(2, h);
            let pps = log_uniform(&mut d, 100.0, 600.0).round();
            Some(format!("ddos:victim={victim},sources={sources},pps={pps}"))
        }
        "port-scan" => {
            let scanner = d.int(0, h);
            let target = (scanner + d.int(1, h)) % h;
            let pps = log_uniform(&mut d, 20.0, 200.0).round();
            Some(format!(
                "port-scan:scanner={},target={},pps={pps}",
                hosts[scanner as usize], hosts[target as usize]
            ))
        }
        _ => None,
    }
}

/// The lab's truth file as the emulator's ground-truth events (wall-clock nanoseconds).
fn events(truth: &str) -> Vec<Value> {
    truth
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|t| {
            let at = |k: &str| t[k].as_i64();
            let (start, end) = (at("start_ns")?, at("end_ns")?);
            let victim = t["victim"].clone();
            let attackers = t["attackers"].clone();
            Some(match t["kind"].as_str()? {
                "ddos" => json!({"kind": "ddos_start", "t_ns": start, "end_ns": end,
                    "victim": victim, "sources": attackers}),
                "port_scan" => json!({"kind": "port_scan", "t_ns": start, "end_ns": end,
                    "scanner": attackers[0], "victims": [victim]}),
                _ => return None,
            })
        })
        .collect()
}

/// Fails unless the knowledge service's first model (its registry in `dir`) was trained before
/// `attack_ns`: without one, the attack's first windows are judged by nothing and teach the
/// habits they are later judged against — a run that cannot be scored, not a miss.
fn model_ready_before(dir: &Path, attack_ns: i64) -> anyhow::Result<()> {
    let registry = kplane_knowledge::registry::Registry::load(dir)?;
    let trained = registry
        .iter()
        .flat_map(|r| &r.history)
        .filter(|t| t.ok)
        .map(|t| t.trained_ns)
        .min();
    match trained {
        Some(t) if t < attack_ns => Ok(()),
        Some(t) => bail!(
            "the knowledge service's first model was ready {:.1} s after the first attack \
             started: the run cannot be scored (a longer --learn gives it time)",
            (t - attack_ns) as f64 / 1e9
        ),
        None => bail!(
            "the knowledge service trained no model (see {}): the run cannot be scored",
            dir.join(kplane_knowledge::registry::Registry::FILE)
                .display()
        ),
    }
}

/// Every row of a store's `table` (`<store>/tables/<table>`), decoded by `decode` (the rows,
/// and how many did not decode: an error here, nothing is skipped silently).
fn stored<T>(
    store: &Path,
    table: &str,
    decode: fn(&arrow_array::RecordBatch) -> (Vec<T>, usize),
) -> anyhow::Result<Vec<T>> {
    let store = kplane_store::Store::local(store);
    let files = store.current_parquet(&kplane_store::layout::table_key(table))?;
    let mut out = Vec::new();
    for f in files {
        for b in store.read_parquet(&f.key).with_context(|| f.key.clone())? {
            let (rows, bad) = decode(&b);
            if bad > 0 {
                bail!("{}: {bad} {table} rows that do not decode", f.key);
            }
            out.extend(rows);
        }
    }
    Ok(out)
}

/// Shifts a ground-truth event's times by `-t0`.
fn shift_event(e: &Value, t0: i64) -> Value {
    let mut e = e.clone();
    for k in ["t_ns", "end_ns"] {
        e[k] = json!(e[k].as_i64().unwrap_or(0) - t0);
    }
    e
}

/// Shifts an anomaly's times by `-t0`.
fn shifted(mut a: Anomaly, t0: i64) -> Anomaly {
    a.start_ns -= t0;
    a.last_ns -= t0;
    a.end_ns = a.end_ns.map(|e| e - t0);
    a.detected_ns -= t0;
    a
}

pub fn run(a: LabArgs) -> anyhow::Result<()> {
    if let Some(s) = a
        .scenario
        .iter()
        .find(|s| !LAB_SCENARIOS.contains(&s.as_str()))
    {
        bail!("--scenario {s}: one of {}", LAB_SCENARIOS.join(", "));
    }
    if a.learn < 2 * TRAINING_MARGIN_S || a.attack == 0 || a.runs == 0 {
        bail!(
            "--learn must be at least {} s, --attack and --runs at least 1",
            2 * TRAINING_MARGIN_S
        );
    }
    let topology = kplane_lab::Topology::parse(&a.topology)?;
    let hosts: Vec<_> = topology.hosts.iter().map(|h| h.ip).collect();
    if hosts.len() < 3 {
        bail!(
            "{}: {} hosts; the attacks need at least 3",
            a.topology,
            hosts.len()
        );
    }
    let out = match &a.out {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("kplane-eval-lab-{}", std::process::id())),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("{}", out.display()))?;
    let window = kplane_stream_processor::Config::default().window;
    let window_ns = window.as_nanos() as i64;

    // The slots, one attack each (or none), in run order.
    let slot = a.attack + a.gap;
    let mut args: Vec<String> = ["lab", "up", "--topology", &a.topology, "--name", &a.name]
        .map(String::from)
        .to_vec();
    let mut slots = Vec::new();
    for r in 0..a.runs {
        for s in &a.scenario {
            let start = a.learn + slots.len() as u64 * slot;
            let attack = attack_of(s, a.seed + r, &hosts);
            if let Some(spec) = &attack {
                args.push("--attack".into());
                args.push(format!("{spec},start={start}s,duration={}s", a.attack));
            }
            slots.push((s.clone(), a.seed + r, attack));
        }
    }
    let total = a.learn + slots.len() as u64 * slot;
    args.extend([
        "--flows".into(),
        a.flows.to_string(),
        "--elephant-share".into(),
        a.elephant_share.to_string(),
        "--seed".into(),
        a.seed.to_string(),
        "--duration".into(),
        format!("{total}s"),
    ]);
    for (s, seed, attack) in &slots {
        eprintln!(
            "kplane eval lab: {s} seed {seed}: {}",
            attack.as_deref().unwrap_or("nothing injected")
        );
    }
    eprintln!(
        "kplane eval lab: {} of clean traffic to learn from, then {} slots of {slot} s: {total} s",
        a.learn,
        slots.len()
    );
    let data = out.join("lab-data");
    // One training, on the clean stretch only (a retraining would learn the attacks), started
    // early enough that its model is ready before the first slot.
    let min_windows = (a.learn - TRAINING_MARGIN_S).to_string();
    let up = Up::spawn(
        &args,
        &[
            ("KPLANE__KNOWLEDGE__MIN_WINDOWS", min_windows.as_str()),
            ("KPLANE__KNOWLEDGE__RETRAIN_EVERY", "1000000"),
            // What the services say besides their warnings is the lab's, not the evaluation's.
            ("KPLANE__LOG__LEVEL", "warn"),
        ],
        data.clone(),
    )?;
    // The traffic starts when the lab says it is provisioned.
    let traffic_start = kplane_model::unix_time_ns() as i64;
    up.finish(Duration::from_secs(total + 120))?;

    // Scored from the end of the learning stretch.
    let truth = std::fs::read_to_string(data.join("lab/truth.jsonl")).unwrap_or_default();
    let events = events(&truth);
    let first_attack = events.iter().filter_map(|e| e["t_ns"].as_i64()).min();
    if let Some(at) = first_attack {
        model_ready_before(&data.join("knowledge"), at)?;
    }
    let first_offset = slots
        .iter()
        .position(|(_, _, at)| at.is_some())
        .map(|k| (a.learn + k as u64 * slot) as i64 * 1_000_000_000);
    let t0 = match (first_attack, first_offset) {
        (Some(at), Some(off)) => at - off,
        _ => traffic_start,
    } + a.learn as i64 * 1_000_000_000;
    let slot_ns = slot as i64 * 1_000_000_000;
    let processor_store = data.join("stream-processor");
    // In the order raised.
    let mut all = stored(
        &processor_store,
        kplane_model::knowledge_tables::ANOMALIES,
        kplane_model::knowledge_tables::anomalies_from_batch,
    )?;
    all.sort_by_key(|a| (a.detected_ns, a.last_ns));
    // An anomaly belongs where its first window ends: a window that holds an attack's start
    // starts before it.
    let raised_at = |x: &Anomaly| x.start_ns + window_ns;
    let learning: Vec<Anomaly> = all.extract_if(.., |x| raised_at(x) <= t0).collect();
    let injected = events.len();
    if injected != slots.iter().filter(|s| s.2.is_some()).count() {
        bail!(
            "the lab's truth file holds {injected} attacks of {}: {truth}",
            slots.len()
        );
    }
    // Each slot is scored as a run of its own, from its start: its attack (if any) and what
    // was raised in it.
    let alerts = stored(
        &processor_store,
        kplane_store::tables::ALERTS,
        kplane_stream_processor::detect::alerts_from_batch,
    )?;
    let mut d = Detection::default();
    let mut inc = IncidentScore::default();
    let mut jsonl = std::fs::File::create(out.join("anomalies.jsonl"))?;
    let mut incidents_jsonl = std::fs::File::create(out.join("incidents.jsonl"))?;
    for k in 0..slots.len() as i64 {
        let from = t0 + k * slot_ns;
        // A window ending on the slot's start is the slot before's.
        let within = |ns: i64| from < ns && ns <= from + slot_ns;
        let o = Outcome {
            events: events
                .iter()
                .filter(|e| {
                    e["t_ns"]
                        .as_i64()
                        .is_some_and(|t| (from..from + slot_ns).contains(&t))
                })
                .map(|e| shift_event(e, from))
                .collect(),
            topology: None,
            // Real switches: no ground truth of their queues.
            congested: Vec::new(),
            alerts: alerts
                .iter()
                .filter(|x| (from..from + slot_ns).contains(&x.time_ns))
                .map(|x| Alert {
                    time_ns: x.time_ns - from,
                    detected_ns: x.detected_ns - from,
                    ..x.clone()
                })
                .collect(),
            anomalies: all
                .iter()
                .filter(|x| within(raised_at(x)))
                .map(|x| shifted(x.clone(), from))
                .collect(),
            forecasts: Vec::new(),
            virtual_seconds: slot as f64,
            scored_from_ns: 0,
            reports_sent: 0,
            reports_lost: 0,
            rows_late: 0,
        };
        let faults = faults(&o);
        let (summaries, incident_of) =
            incidents::score_run(&o, &o.anomalies, &faults, window_ns, &mut inc);
        d.score(&o, &o.anomalies, &faults, window_ns, &incident_of);
        for mut v in summaries {
            v["eval"] = json!({"slot": k, "slot_start_ns": from});
            writeln!(incidents_jsonl, "{v}")?;
        }
        for x in raised(&o.anomalies) {
            let mut v = serde_json::to_value(x)?;
            // Times relative to the slot's start (`slot_start_ns`, wall clock).
            v["eval"] = json!({"slot": k, "slot_start_ns": from,
                "truth": truth_label(x, &faults, window_ns)});
            writeln!(jsonl, "{v}")?;
        }
    }
    let mut csv = Csv(String::from("family,table,metric,type,value\n"));
    let family = format!("lab:{}", a.topology);
    let mut md = format!(
        "# kplane eval lab\n\n`kplane lab up --topology {}` (BMv2), {} flows/s ({} elephants), \
         {} s of clean traffic learnt, then {} slots of {} s: {} ({} runs from seed {}), each \
         attack {} s. {} ms windows. The anomaly types are the shipped definitions (labelled \
         on the emulator's ft4-100m): the lab is held out.\n\n",
        a.topology,
        a.flows,
        a.elephant_share,
        a.learn,
        slots.len(),
        slot,
        a.scenario.join(", "),
        a.runs,
        a.seed,
        a.attack,
        window.as_millis()
    );
    md += &detection_table(&d, &family, "lab", &mut csv);
    md += &incidents::report(&inc, &family, "lab", &mut csv);
    if !learning.is_empty() {
        md += &format!(
            "\n{} anomalies were raised during the learning stretch (not scored).\n",
            raised(&learning).count()
        );
    }
    md += "\nSlots:\n\n";
    for (k, (s, seed, attack)) in slots.iter().enumerate() {
        md += &format!(
            "* {}: {s} seed {seed}: {}\n",
            a.learn + k as u64 * slot,
            attack.as_deref().unwrap_or("nothing injected")
        );
    }
    std::fs::write(out.join("report.md"), &md)?;
    std::fs::write(out.join("results.csv"), &csv.0)?;
    print!("{md}");
    eprintln!("kplane eval lab: results in {}", out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attacks_are_drawn_from_the_seed_among_the_hosts() {
        let hosts: Vec<std::net::Ipv4Addr> = (1..=4)
            .map(|i| format!("10.0.1.{i}").parse().unwrap())
            .collect();
        let a = attack_of("ddos", 7, &hosts).unwrap();
        assert_eq!(Some(a.clone()), attack_of("ddos", 7, &hosts));
        assert!(kplane_lab::traffic::Attack::parse(&format!("{a},start=1s,duration=1s")).is_ok());
        for seed in 0..50 {
            let scan = attack_of("port-scan", seed, &hosts).unwrap();
            let p = kplane_lab::traffic::Attack::parse(&format!("{scan},start=1s,duration=1s"))
                .unwrap();
            let kplane_lab::traffic::AttackKind::PortScan { scanner, target } = p.kind else {
                panic!("{scan}");
            };
            assert_ne!(scanner, target);
        }
        assert_eq!(attack_of("clean", 1, &hosts), None);
    }

    #[test]
    fn the_truth_file_becomes_ground_truth_events() {
        let truth = r#"{"kind":"ddos","start_ns":1000,"end_ns":3000,"victim":"10.0.1.1","attackers":["10.0.1.2"]}
{"kind":"port_scan","start_ns":5000,"end_ns":6000,"victim":"10.0.2.1","attackers":["10.0.1.3"]}"#;
        let e = events(truth);
        assert_eq!(e[0]["kind"], "ddos_start");
        assert_eq!(shift_event(&e[0], 500)["t_ns"], 500);
        assert_eq!(e[0]["sources"][0], "10.0.1.2");
        assert_eq!(e[1]["kind"], "port_scan");
        assert_eq!(e[1]["scanner"], "10.0.1.3");
        assert_eq!(e[1]["victims"][0], "10.0.2.1");
        assert_eq!(e[1]["end_ns"], 6000);
    }
}
