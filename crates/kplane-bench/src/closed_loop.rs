//! `kplane bench loop`: the closed loop, timed, in `kplane up` (the emulator) or `kplane lab
//! up` (BMv2 switches, `--data-plane lab`). The child runs a DDoS after a clean stretch the
//! knowledge service learns from; the bench reads what happened through the real entry points
//! (the API over HTTP; the ground truth from the emulator's control channel or the lab's truth
//! file) and prints, from the attack's start: the anomaly raised, the block intents submitted,
//! written to the switches and verified against fresh telemetry; then when the attackers'
//! traffic stopped reaching the victim (in the store's flows for the emulator; counted at the
//! victim's interface in the lab).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

use crate::child::Up;

/// Where the loop runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DataPlane {
    /// `kplane up`: the emulator.
    Emulator,
    /// `kplane lab up`: BMv2 switches in network namespaces (root and the P4 toolchain).
    Lab,
}

#[derive(Debug, Args)]
pub struct LoopArgs {
    /// The emulator (`kplane up`) or BMv2 switches (`kplane lab up`).
    #[arg(long, value_enum, default_value = "emulator")]
    data_plane: DataPlane,
    /// Seconds of clean traffic before the attack (the knowledge service learns from them:
    /// keep it above `[knowledge] min-windows` windows).
    #[arg(long, default_value_t = 75)]
    learn: u64,
    /// Seconds the attack lasts.
    #[arg(long, default_value_t = 30)]
    attack: u64,
    /// Attacking hosts.
    #[arg(long, default_value_t = 8)]
    attackers: u64,
    /// What the attackers offer together, as a multiple of the victim's link rate (emulator).
    #[arg(long, default_value_t = 3.0)]
    rate: f64,
    /// What the attackers send together, packets per second (lab: BMv2 forwards about
    /// 1,600 packets/s on 2 cores, docs/lab.md).
    #[arg(long, default_value_t = 300.0)]
    pps: f64,
    /// The victim (host index).
    #[arg(long, default_value_t = 0)]
    victim: u64,
    /// Background flow arrivals per second. With the default link rate and elephant share this
    /// is the traffic `kplane eval knowledge` scores and the shipped anomaly types were
    /// labelled on. Default: 1,000 (emulator), 5 (lab).
    #[arg(long)]
    flows: Option<f64>,
    /// Share of the background flows that are elephants.
    #[arg(long, default_value_t = 0.02)]
    elephant_share: f64,
    /// Link rate, Gb/s: 100 Mb/s links, as in `kplane eval knowledge`, so that an attack at
    /// three times the victim's link rate stays small enough to emulate in real time.
    #[arg(long, default_value_t = 0.1)]
    link_gbps: f64,
    /// The fabric (`kplane up --topology` or `kplane lab up --topology`): another than the
    /// shipped labels' families holds the loop out of them (docs/benchmarks.md). Default:
    /// fat-tree:4 (emulator), leaf-spine:2,4,2 (lab).
    #[arg(long)]
    topology: Option<String>,
    /// Runs (each a fresh `kplane up`; the attack's phase in its window spread over them).
    #[arg(long, default_value_t = 3)]
    runs: u64,
    /// Print the measurements as JSON (a list) instead of a table.
    #[arg(long)]
    json: bool,
}

/// Starts the `kplane up` or `kplane lab up` child of one run, `total` seconds long.
fn start(a: &LoopArgs, total: u64) -> anyhow::Result<Up> {
    let mut args: Vec<String> = match a.data_plane {
        DataPlane::Emulator => {
            let scenario = format!(
                "ddos:victim={},attackers={},rate={},start={},duration={}",
                a.victim,
                a.attackers,
                a.rate,
                a.learn as f64 / total as f64,
                a.attack as f64 / total as f64
            );
            vec![
                "up".into(),
                "--scenario".into(),
                scenario,
                "--flows".into(),
                a.flows.unwrap_or(1_000.0).to_string(),
                "--link-gbps".into(),
                a.link_gbps.to_string(),
                "--topology".into(),
                a.topology.as_deref().unwrap_or("fat-tree:4").into(),
            ]
        }
        DataPlane::Lab => {
            let topology = a.topology.as_deref().unwrap_or("leaf-spine:2,4,2");
            let hosts = kplane_lab::Topology::parse(topology)?.hosts;
            let victim = hosts
                .get(a.victim as usize)
                .with_context(|| {
                    format!("--victim {}: the lab has {} hosts", a.victim, hosts.len())
                })?
                .ip;
            let attack = format!(
                "ddos:start={}s,duration={}s,victim={victim},sources={},pps={}",
                a.learn, a.attack, a.attackers, a.pps
            );
            vec![
                "lab".into(),
                "up".into(),
                "--attack".into(),
                attack,
                "--topology".into(),
                topology.into(),
                "--flows".into(),
                a.flows.unwrap_or(5.0).to_string(),
            ]
        }
    };
    args.extend([
        "--duration".into(),
        format!("{total}s"),
        "--elephant-share".into(),
        a.elephant_share.to_string(),
    ]);
    let data = std::env::temp_dir().join(format!("kplane-bench-loop-{}", std::process::id()));
    Up::spawn(&args, &[], data)
}

/// The attack as injected, once it started: its start (ms), victim and attackers. The
/// emulator's from its control channel (report time = clock base + virtual time); the lab's
/// from its truth file.
fn truth(up: &Up) -> anyhow::Result<Option<(u64, String, Vec<String>)>> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(String::from))
            .collect()
    };
    let Some(control) = up.control else {
        let text = std::fs::read_to_string(up.data.join("lab/truth.jsonl")).unwrap_or_default();
        return Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|t| t["kind"] == "ddos")
            .map(|t| {
                (
                    t["start_ns"].as_u64().unwrap_or(0) / 1_000_000,
                    t["victim"].as_str().unwrap_or_default().to_string(),
                    strings(&t["attackers"]),
                )
            }));
    };
    let t = up.call(control, "GET", "/v1/truth", &Value::Null)?;
    let base = t["clock_base_ns"].as_u64().unwrap_or(0);
    Ok(t["events"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["kind"] == "ddos_start")
        .map(|e| {
            (
                (base + e["t_ns"].as_u64().unwrap_or(0)) / 1_000_000,
                e["victim"].as_str().unwrap_or_default().to_string(),
                strings(&e["sources"]),
            )
        }))
}

/// Polls `f` every 100 ms until it gives a value or `deadline` passes.
fn wait_for<T>(
    what: &str,
    deadline: Instant,
    mut f: impl FnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    loop {
        if let Some(v) = f()? {
            return Ok(v);
        }
        if Instant::now() > deadline {
            bail!("{what}: not seen in time");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One measured run.
#[derive(Debug, serde::Serialize)]
struct Measurement {
    victim: String,
    attackers: Vec<String>,
    attack_start_ms: u64,
    anomaly: String,
    anomaly_type: String,
    /// Seconds from the attack's start.
    anomaly_raised_s: f64,
    intent_submitted_s: f64,
    intent_applied_s: f64,
    intent_verified_s: f64,
    /// Blocks of the first answer that became active.
    first_blocks: usize,
    /// The episode's blocks when the attack's traffic was gone (attackers that joined later).
    blocks: usize,
    /// Attackers' flows at the victim in the windows before the first blocks.
    attack_flows_before: u64,
    /// The end of the last window in which an attacker's flow reached the victim.
    attack_stopped_s: f64,
    /// When the anomaly's first record was queryable in the store's `anomalies` table (the
    /// knowledge service writes it every `store-every`).
    anomaly_stored_s: f64,
}

pub fn run(a: LoopArgs) -> anyhow::Result<()> {
    if a.learn == 0 || a.attack == 0 || a.runs == 0 {
        bail!("--learn, --attack and --runs must be at least 1");
    }
    let mut all = Vec::new();
    for i in 0..a.runs {
        // Spread the attack's start over the phases of its window: how long it waits for the
        // window to close is part of the loop's time.
        std::thread::sleep(Duration::from_millis(1_000 * i / a.runs));
        let m = measure(&a)?;
        if !a.json {
            print_run(i + 1, &m);
        }
        all.push(m);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    let spread = |what: &str, f: fn(&Measurement) -> f64| {
        let mut v: Vec<f64> = all.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        println!(
            "attack start → {what} over {} runs: median {:.2} s, max {:.2} s",
            v.len(),
            v[v.len() / 2],
            v[v.len() - 1]
        );
    };
    spread("verified blocks", |m| m.intent_verified_s);
    spread("attack traffic gone", |m| m.attack_stopped_s);
    Ok(())
}

fn measure(a: &LoopArgs) -> anyhow::Result<Measurement> {
    // Every wait below ends by `end`, 60 s after the attack; the child (stopped once the run is
    // measured) outlives them all, 10 s more for its own start, so that a slow machine's late
    // verification is waited for rather than cut off by the child's `--duration`.
    let total = a.learn + a.attack + 60;
    let up = start(a, total + 10)?;
    let started = Instant::now();
    let end = started + Duration::from_secs(total);
    // The anomaly must come before the attack ends.
    let raised_by = started + Duration::from_secs(a.learn + a.attack);
    // Blocks are what a DDoS is answered with; apply them without an admin.
    up.api(
        "PUT",
        "/v1/intents/policy",
        &json!({"auto-apply": ["monitor", "tune", "block"]}),
    )?;
    eprintln!(
        "kplane bench loop: {} s of clean traffic, then a DDoS for {} s ({}, API {})",
        a.learn,
        a.attack,
        match a.data_plane {
            DataPlane::Emulator => "kplane up",
            DataPlane::Lab => "kplane lab up",
        },
        up.api
    );

    let (attack_start_ms, victim, attackers) = wait_for("the DDoS's start", end, || truth(&up))?;
    let since = |ms: u64| (ms as f64 - attack_start_ms as f64) / 1e3;

    // The victim's anomaly that recommended blocks (of its heaviest sources: every attacker),
    // raised on a window that ended after the attack began, and its intents. An attacker's
    // own anomaly blocks only that attacker, so it does not close the loop.
    let about = |v: &Value| {
        v["entity_kind"] == "destination"
            && v["entity"] == victim.as_str()
            && v["last_ns"].as_u64().unwrap_or(0) / 1_000_000 > attack_start_ms
    };
    // What was raised, for the error if the victim never is.
    let mut raised = Vec::new();
    let first = wait_for(
        "an anomaly about the attack with blocks recommended",
        raised_by,
        || {
            let v = up.api("GET", "/v1/anomalies?limit=1000", &Value::Null)?;
            let all = v["anomalies"].as_array().cloned().unwrap_or_default();
            raised = all
                .iter()
                .map(|x| {
                    format!(
                        "{} {} {} (recommendations {})",
                        x["entity_kind"].as_str().unwrap_or_default(),
                        x["entity"].as_str().unwrap_or_default(),
                        x["type"].as_str().unwrap_or_default(),
                        x["recommendations"]
                    )
                })
                .collect();
            Ok(all
                .into_iter()
                .filter(|x| about(x) && x["recommendations"].as_u64() > Some(0))
                .min_by_key(|x| x["start_ns"].as_u64().unwrap_or(u64::MAX)))
        },
    )
    .with_context(|| {
        let models = up
            .api("GET", "/v1/models", &Value::Null)
            .map_or_else(|e| e.to_string(), |m| m.to_string());
        format!("victim {victim}; raised: {raised:?}; models: {models}")
    })?;
    let id = first["id"].as_str().unwrap_or_default().to_string();
    let path = format!("/v1/anomalies/{id}");
    let anomaly = up.api("GET", &path, &Value::Null)?;
    let intents: Vec<Value> = wait_for("the recommended blocks verified", end, || {
        let v = up.api("GET", &path, &Value::Null)?;
        let intents: Vec<Value> = v["intents"].as_array().cloned().unwrap_or_default();
        let settled = !intents.is_empty()
            && intents.iter().all(|i| {
                !matches!(
                    i["state"].as_str(),
                    Some("pending" | "applying" | "verifying")
                )
            });
        Ok(settled.then_some(intents))
    })?;
    let mut submitted = u64::MAX;
    let mut applied = u64::MAX;
    let mut verified = u64::MAX;
    let mut active = 0;
    for i in &intents {
        let iid = i["id"].as_str().unwrap_or_default();
        let full = up.api("GET", &format!("/v1/intents/{iid}"), &Value::Null)?;
        submitted = submitted.min(full["created_ms"].as_u64().unwrap_or(u64::MAX));
        applied = applied.min(full["applied_ms"].as_u64().unwrap_or(u64::MAX));
        if full["state"] == "active" {
            active += 1;
            let audit = up.api("GET", &format!("/v1/audit?intent={iid}"), &Value::Null)?;
            for r in audit["audit"].as_array().into_iter().flatten() {
                // `applied` → `active` when verification is off.
                if r["result"] == "active" {
                    verified = verified.min(r["time_ms"].as_u64().unwrap_or(u64::MAX));
                }
            }
        }
    }
    if active == 0 {
        bail!("no recommended block became active: {intents:?}");
    }

    // The attack's traffic at the victim: its flows in the windows before the first blocks;
    // then when it stopped — the end of the last window an attacker's flow reached the victim
    // in, once three windows after it are stored (attackers that join later are blocked by the
    // episode's later recommendations, or by their own anomalies).
    let sources = attackers
        .iter()
        .map(|s| format!("'{s}'"))
        .collect::<Vec<_>>()
        .join(",");
    let attack =
        format!("FROM flows WHERE ip_text(dst_ip) = '{victim}' AND ip_text(src_ip) IN ({sources})");
    // Windows that end after the attack started (the one it started in too) and start before
    // the blocks were written.
    let before = up.count(&format!(
        "SELECT count(*) AS n {attack} AND window_end > to_timestamp_millis({attack_start_ms}) \
         AND window_start < to_timestamp_millis({applied})"
    ))?;
    let attack_end_ms = attack_start_ms + a.attack * 1_000;
    let stopped_ms = match a.data_plane {
        DataPlane::Emulator => stopped_in_store(&up, &attack, end)?,
        DataPlane::Lab => stopped_at_interface(&up, &victim, &attackers, end)?,
    };
    if stopped_ms >= attack_end_ms {
        bail!(
            "the attack's traffic reached the victim until it ended ({} blocks active)",
            active
        );
    }
    // The anomaly in the Parquet store, through SQL like any table.
    let stored_ms = wait_for("the anomaly in the store's anomalies table", end, || {
        let n = up.count(&format!(
            "SELECT count(*) AS n FROM anomalies WHERE id = '{id}' AND phase = 'start'"
        ))?;
        Ok((n > 0).then(|| kplane_model::unix_time_ns() / 1_000_000))
    })?;
    // The episode's blocks by then.
    let blocks = up.api("GET", &path, &Value::Null)?["intents"]
        .as_array()
        .map_or(0, Vec::len);
    let m = Measurement {
        anomaly: id,
        anomaly_type: anomaly["type"].as_str().unwrap_or_default().to_string(),
        anomaly_raised_s: since(anomaly["detected_ns"].as_u64().unwrap_or(0) / 1_000_000),
        intent_submitted_s: since(submitted),
        intent_applied_s: since(applied),
        intent_verified_s: since(verified),
        first_blocks: active,
        blocks,
        attack_flows_before: before,
        attack_stopped_s: since(stopped_ms),
        anomaly_stored_s: since(stored_ms),
        victim,
        attackers,
        attack_start_ms,
    };
    up.stop();
    Ok(m)
}

/// When the attack's traffic stopped reaching the victim in the store: the end of the last
/// window an attacker's flow reached it in, once three windows after it are stored.
fn stopped_in_store(up: &Up, attack: &str, end: Instant) -> anyhow::Result<u64> {
    wait_for("the attack's traffic gone from the victim", end, || {
        let last = up.count(&format!(
            "SELECT CAST(max(window_start) AS BIGINT) / 1000000 AS n {attack}"
        ))?;
        let quiet = up.count(&format!(
            "SELECT count(DISTINCT window_start) AS n FROM flows \
             WHERE window_start > to_timestamp_millis({last})"
        ))?;
        Ok((quiet >= 3).then_some(last + 1_000))
    })
}

/// When the attack's packets stopped arriving at the victim's interface (the lab's per-host
/// counts, `received.json`, read every 100 ms): the last time the attackers' count there
/// grew, once it has not for 3 s.
fn stopped_at_interface(
    up: &Up,
    victim: &str,
    attackers: &[String],
    end: Instant,
) -> anyhow::Result<u64> {
    let path = up.data.join("lab/received.json");
    let (mut seen, mut grew_ms) = (0u64, kplane_model::unix_time_ns() / 1_000_000);
    wait_for("the attack's packets gone from the victim", end, || {
        let counts: Value = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        let n: u64 = attackers
            .iter()
            .filter_map(|s| counts[victim][s].as_u64())
            .sum();
        let now = kplane_model::unix_time_ns() / 1_000_000;
        if n > seen {
            (seen, grew_ms) = (n, now);
        }
        Ok((now - grew_ms >= 3_000).then_some(grew_ms))
    })
}

fn print_run(n: u64, m: &Measurement) {
    println!(
        "run {n}: a DDoS towards {} from {} hosts, starting {:.2} s into its 1 s window",
        m.victim,
        m.attackers.len(),
        (m.attack_start_ms % 1_000) as f64 / 1e3
    );
    println!("  attack start                  0.00 s");
    println!(
        "  anomaly raised ({:>9})   {:>5.2} s  ({})",
        m.anomaly_type, m.anomaly_raised_s, m.anomaly
    );
    println!(
        "  block intents submitted      {:>5.2} s",
        m.intent_submitted_s
    );
    println!(
        "  written to the switches      {:>5.2} s",
        m.intent_applied_s
    );
    println!(
        "  verified by fresh telemetry  {:>5.2} s  ({} blocks active)",
        m.intent_verified_s, m.first_blocks
    );
    println!(
        "  attack traffic gone          {:>5.2} s  ({} blocks in all; {} attack flows at the victim before the first)",
        m.attack_stopped_s, m.blocks, m.attack_flows_before
    );
    println!(
        "  anomaly in the store          {:>5.2} s  (SELECT … FROM anomalies)",
        m.anomaly_stored_s
    );
}
