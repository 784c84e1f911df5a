//! `kplane tracegen`: the independent report generator (`kplane-tracegen`), which shares no
//! code with the emulator, sending to a collector — to try a deployed kplane on traffic it
//! did not generate (docs/knowledge.md#the-independent-generator).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use kplane_tracegen::run::{Config, run};

#[derive(Debug, Args)]
pub struct TracegenArgs {
    /// three-tier:EDGES,AGGREGATION,CORE,HOSTS_PER_EDGE (default 8 edges, 8 aggregation,
    /// 4 core, 8 hosts each).
    #[arg(long, default_value = "three-tier")]
    fabric: String,
    /// Send reports here (repeatable; spread by source address).
    #[arg(long, value_name = "HOST:PORT", required = true)]
    collector: Vec<SocketAddr>,
    /// Virtual time to generate, e.g. 60s.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// none | ddos | port-scan | link-failure | incast | flash-crowd | heavy-hitter with
    /// parameters, joined by `+`:
    /// `ddos:victim=5,sources=500,pps=20000,start=0.4,duration=0.2,replace=0.5`.
    #[arg(long, default_value = "none")]
    scenario: String,
    /// Link rate, Mb/s.
    #[arg(long, default_value_t = 1_000.0)]
    link_mbps: f64,
    /// Background flow arrivals per second.
    #[arg(long, default_value_t = 400.0)]
    flows: f64,
    /// Mean packets per background flow (Pareto sizes).
    #[arg(long, default_value_t = 10.0)]
    mean_packets: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Pace virtual time to the wall clock, timestamps from the current time (a live feed);
    /// default: as fast as the socket takes them, timestamps from 0.
    #[arg(long)]
    realtime: bool,
    /// Write the ground truth (`{"fabric", "events"}`) here.
    #[arg(long, value_name = "FILE.json")]
    truth: Option<PathBuf>,
}

pub fn run_cli(a: TracegenArgs) -> ExitCode {
    let start_ns = if a.realtime {
        kplane_model::unix_time_ns()
    } else {
        0
    };
    let cfg = Config {
        fabric: a.fabric.clone(),
        link_mbps: a.link_mbps,
        flows: a.flows,
        mean_packets: a.mean_packets,
        seconds: a.duration.as_secs_f64(),
        seed: a.seed,
        scenario: a.scenario.clone(),
        start_ns,
    };
    let began = Instant::now();
    let realtime = a.realtime;
    let pace = move |_sent: u64, now_ns: u64| {
        let due = Duration::from_nanos(now_ns);
        if realtime && let Some(wait) = due.checked_sub(began.elapsed()) {
            std::thread::sleep(wait);
        }
    };
    let o = match run(&cfg, &a.collector, pace) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("kplane tracegen: {e}");
            return ExitCode::from(kplane_runtime::EXIT_CONFIG);
        }
    };
    if let Some(path) = &a.truth {
        let truth = serde_json::json!({"fabric": a.fabric, "events": o.events});
        if let Err(e) = std::fs::write(path, truth.to_string()) {
            eprintln!("kplane tracegen: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    println!(
        "kplane tracegen: {} hosts, {:.1} virtual s in {:.1} s: {} reports sent, {} not sent \
         (socket errors), {} packets dropped in the fabric, {} ground-truth events",
        o.hosts,
        o.virtual_seconds,
        began.elapsed().as_secs_f64(),
        o.reports_sent,
        o.send_errors,
        o.dropped,
        o.events.len()
    );
    if o.send_errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
