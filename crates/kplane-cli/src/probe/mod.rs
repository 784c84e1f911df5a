//! `kplane probe`: GPINT's monitoring module against real switches
//! (gpint-reliable-int-monitoring §III–IV; docs/gpint.md). Each session fetches the active
//! `probe-plan` intent's plan from the intent API (recomputed there from the topology as it
//! is), sends the probes on the monitor's links, recovers lost ones with Algorithms 1–2 and
//! the switches' SQR rings, forwards every returned probe to the collector as telemetry,
//! posts what it found (links and switches unavailable, links congested) back to the API —
//! which plans around them and recommends reroutes — and prints one JSON line per session.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use kplane_probe::monitor::{Monitor, MonitorConfig, RecoveryConfig, Session, Unavailable};
use serde_json::{Value, json};

use crate::intent::Client;
pub use kplane_probe::wire_net::{LivePlan, MonitorLink, WireNet};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum RecoveryPreset {
    /// GPINT-FT: t_f = 0.4 s, r_a = 2.
    FineTuned,
    /// The paper's evaluation: t_f = 1.5 s, r_a = 10.
    Paper,
    /// Each probe sent once.
    Off,
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The intent API, where the probe plans come from.
    #[arg(long, env = "KPLANE_API", default_value = "http://127.0.0.1:8080")]
    api: String,
    /// Bearer token: operator, to post each session's findings back (with a viewer token the
    /// findings are only printed; see --no-feedback).
    #[arg(long, env = "KPLANE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The `probe-plan` intent to run (default: the first active one).
    #[arg(long)]
    intent: Option<String>,
    /// The monitor's link to a switch, `SWITCH=INTERFACE:PORT`: the interface on this host
    /// and the switch's port facing it. Repeat for each switch a probe may start or end at.
    #[arg(long = "link", required = true)]
    links: Vec<MonitorLink>,
    /// The collector's UDP address: every returned probe goes there as a Telemetry Report
    /// v2.0 (its DLVs become hops like any INT).
    #[arg(long)]
    collector: Option<SocketAddr>,
    /// Data recovery (Algorithms 1–2; the switches' SQR rings are set separately).
    #[arg(long, value_enum, default_value_t = RecoveryPreset::FineTuned)]
    recovery: RecoveryPreset,
    /// t_f: how long a probe may go unconfirmed before it is sent again (overrides the
    /// preset's; keep it above the switches' hold time). With `--recovery off`: how long a
    /// probe may take before it is lost (default 2 s).
    #[arg(long, value_parser = humantime::parse_duration)]
    feedback_timeout: Option<Duration>,
    /// Probes in flight at most (the paper's orchestrator: 12).
    #[arg(long, default_value_t = 12)]
    concurrent: usize,
    /// From one session's start to the next's.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    period: Duration,
    /// A session not done after this has failed.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    session_limit: Duration,
    /// Sessions to run (0: until stopped).
    #[arg(long, default_value_t = 0)]
    sessions: u64,
    /// The probes' IPv4 source (and destination) address.
    #[arg(long, default_value = "10.255.0.1")]
    source: Ipv4Addr,
    /// A link is congested when a probe found the queue of its port at least this deep
    /// (packets; the DLV's 8-bit queue depth).
    #[arg(long, default_value_t = 32)]
    congested_depth: u8,
    /// Print the findings only: do not post them to `POST /v1/probe-plans/{intent}/status`.
    #[arg(long)]
    no_feedback: bool,
}

impl ProbeArgs {
    fn monitor(&self) -> MonitorConfig {
        let mut recovery = match self.recovery {
            RecoveryPreset::FineTuned => Some(RecoveryConfig::fine_tuned()),
            RecoveryPreset::Paper => Some(RecoveryConfig::paper()),
            RecoveryPreset::Off => None,
        };
        let timeout = self.feedback_timeout.map(|t| t.as_nanos() as u64);
        if let (Some(r), Some(t)) = (&mut recovery, timeout) {
            r.feedback_timeout_ns = t;
        }
        MonitorConfig {
            concurrent: self.concurrent.max(1),
            recovery,
            timeout_ns: timeout.unwrap_or(2_000_000_000),
            session_limit_ns: self.session_limit.as_nanos() as u64,
        }
    }
}

pub fn run(a: ProbeArgs) -> ExitCode {
    // Receive and report errors are warnings on stderr (RUST_LOG=info for more).
    let _ = kplane_runtime::init_logging(&kplane_runtime::LogConfig {
        level: "warn".into(),
        ..Default::default()
    });
    let client = match Client::new(&a.api, a.token.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kplane probe: {e}");
            return ExitCode::from(2);
        }
    };
    let mut net = match WireNet::open(&a.links, a.collector, a.source) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("kplane probe: {e}");
            return ExitCode::from(2);
        }
    };
    // Switches remember request ids for their loop check's window: start somewhere new.
    let first = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u16);
    let mut monitor = Monitor::starting_at(a.monitor(), first);
    let mut n = 0u64;
    loop {
        n += 1;
        let started = Instant::now();
        let line = match fetch_plan(&client, a.intent.as_deref()) {
            Ok(plan) => {
                let mut line = session(&mut net, &mut monitor, plan, n, a.congested_depth);
                if !a.no_feedback {
                    line["feedback"] = feed_back(&client, &line);
                }
                line
            }
            Err(e) => json!({ "session": n, "error": e }),
        };
        println!("{line}");
        if a.sessions > 0 && n >= a.sessions {
            return ExitCode::SUCCESS;
        }
        std::thread::sleep(a.period.saturating_sub(started.elapsed()));
    }
}

/// The chosen `probe-plan` intent's plan as the API computes it now.
fn fetch_plan(client: &Client, intent: Option<&str>) -> Result<LivePlan, String> {
    let (status, v) = client.call("GET", "/v1/probe-plans", None)?;
    if status != 200 {
        return Err(format!("GET /v1/probe-plans: {status} {v}"));
    }
    let plans = v["plans"].as_array().cloned().unwrap_or_default();
    let chosen = match intent {
        Some(id) => plans.iter().find(|p| p["intent"] == id),
        None => plans.first(),
    };
    match chosen {
        Some(p) => LivePlan::from_json(p).map_err(|e| e.to_string()),
        None => Err(match intent {
            Some(id) => format!("no active probe-plan intent {id}"),
            None => "no active probe-plan intent".to_string(),
        }),
    }
}

/// Posts a session's findings to the API (`POST /v1/probe-plans/{intent}/status`): its
/// answer (reroutes recommended and withdrawn), or the error.
fn feed_back(client: &Client, line: &Value) -> Value {
    let path = format!(
        "/v1/probe-plans/{}/status",
        line["intent"].as_str().unwrap_or_default()
    );
    let body = json!({
        "session": line["session"],
        "unavailable": line["unavailable"],
        "available": line["available"],
        "congested": line["congested"],
    });
    match client.call("POST", &path, Some(&body)) {
        Ok((200, v)) => json!({ "recommended": v["recommended"], "withdrawn": v["withdrawn"] }),
        Ok((status, v)) => json!({ "error": format!("{status} {v}") }),
        Err(e) => json!({ "error": e }),
    }
}

/// One session over `plan`; its JSON line. A link whose queue a probe found at least
/// `congested_depth` deep is listed as congested.
fn session(
    net: &mut WireNet,
    monitor: &mut Monitor,
    plan: LivePlan,
    n: u64,
    congested_depth: u8,
) -> Value {
    net.set_plan(plan.clone());
    let unattached = net.unattached();
    let before = net.counts.clone();
    net.measurements.clear();
    net.queue_depths.clear();
    let s: Session = monitor.collect(net, &plan.plan);
    let unavailable: Vec<Value> = s
        .unavailable
        .iter()
        .map(|u| match *u {
            Unavailable::Switch(v) => json!({ "switch": plan.ids[v] }),
            Unavailable::Link(a, b) => json!({ "link": [plan.ids[a], plan.ids[b]] }),
        })
        .collect();
    // What the probes crossed, once the session completed: every planned hop but those over
    // what was found unavailable.
    let lost = |x: usize, y: usize| {
        s.unavailable.iter().any(|u| match *u {
            Unavailable::Switch(v) => v == x || v == y,
            Unavailable::Link(a, b) => (a, b) == (x, y) || (a, b) == (y, x),
        })
    };
    let mut crossed: Vec<(u32, u32)> = plan
        .plan
        .paths
        .iter()
        .filter(|_| s.complete)
        .flat_map(|p| p.windows(2))
        .filter(|w| !lost(w[0], w[1]))
        .map(|w| {
            let (a, b) = (plan.ids[w[0]], plan.ids[w[1]]);
            (a.min(b), a.max(b))
        })
        .collect();
    crossed.sort_unstable();
    crossed.dedup();
    json!({
        "session": n,
        "intent": plan.intent,
        "paths": plan.plan.paths.len(),
        "switches": plan.ids,
        "complete": s.complete,
        "latency_ms": s.latency_ns as f64 / 1e6,
        "probes": s.probes,
        "recovery_probes": s.recovery_probes,
        "recovered_paths": s.recovered_paths,
        "unavailable": unavailable,
        "available": crossed
            .iter()
            .map(|(a, b)| json!({ "link": [a, b] }))
            .collect::<Vec<_>>(),
        "congested": net
            .queue_depths
            .iter()
            .filter(|(_, d)| **d >= congested_depth)
            .map(|((a, b), d)| json!({ "link": [a, b], "queue_depth": d }))
            .collect::<Vec<_>>(),
        "unattached": unattached,
        "network": net.counts.since(&before),
        "measurements": net.measurements,
    })
}
