//! `kplane emulate`: a P4 INT fabric on this machine, sending real telemetry reports.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use kplane_emulator::report::ReportVersion;
use kplane_emulator::run::{RunConfig, Summary, build, run};
use kplane_emulator::sim::SimConfig;
use kplane_emulator::topology::LinkSpec;
use kplane_runtime::{ConfigSource, EXIT_CONFIG, HttpConfig, Shutdown};

/// `HOST:PORT` → the first address it resolves to.
fn resolve(s: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    s.to_socket_addrs()
        .map_err(|e| format!("cannot resolve {s}: {e}"))?
        .next()
        .ok_or_else(|| format!("{s} resolves to no address"))
}

#[derive(Debug, Args)]
pub struct EmulateArgs {
    /// fat-tree:K | leaf-spine:SPINES,LEAVES,HOSTS | watts-strogatz:N,K,P[,SEED] | FILE.toml
    #[arg(long, default_value = "fat-tree:4")]
    topology: String,
    /// Send reports to this collector (repeatable; reports are spread by source address). A
    /// host name is resolved once, at start (`collector:32766` in docker-compose).
    #[arg(long, value_name = "HOST:PORT", value_parser = resolve)]
    collector: Vec<SocketAddr>,
    /// How long to emulate (virtual time), e.g. 60s, 500ms.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// none | microburst[-cache|-hadoop] | ddos | port-scan | link-failure | routing-loop |
    /// black-hole | all, optionally with parameters: `ddos:victim=5,rate=3` (docs/emulator.md)
    #[arg(long, default_value = "none")]
    scenario: String,
    /// Pace virtual time to the wall clock (for live use); default: as fast as possible.
    #[arg(long)]
    realtime: bool,
    /// Switch timestamps start at the current Unix time (implied by --realtime); default:
    /// virtual time from 0, so that they match the ground truth's times.
    #[arg(long)]
    wall_clock: bool,
    /// With --realtime: virtual seconds per wall second.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// Write the ground truth (injected events, failures, queue occupancy series) here.
    #[arg(long, value_name = "FILE.json")]
    truth: Option<PathBuf>,
    /// Telemetry Report version the sinks send.
    #[arg(long, default_value = "2.0")]
    report_version: ReportVersion,
    /// INT-MX (postcard) mode: every switch reports every INT packet.
    #[arg(long)]
    mx: bool,
    /// INT instruction bitmap for every flow (decimal or 0x..).
    #[arg(long, default_value = "0xFF00", value_parser = parse_u16)]
    bitmap: u16,
    /// Background Poisson flow arrivals per second.
    #[arg(long, default_value_t = 1000.0)]
    flows: f64,
    /// Share of the background flows that are elephants (1000 packets; the rest: mice of 10).
    #[arg(long, default_value_t = 0.2)]
    elephant_share: f64,
    /// Sending rate of one background flow, Mb/s (an elephant lasts 1000 packets of 1000 bytes
    /// at it: 8 ms at 1000 Mb/s, 0.8 s at 10).
    #[arg(long, default_value_t = 1000.0)]
    flow_mbps: f64,
    /// Periodic jobs in the background: fixed host pairs, each sending a transfer of a quarter
    /// of its period (8–20 s) every period (docs/emulator.md).
    #[arg(long, default_value_t = 0)]
    jobs: usize,
    /// Sending rate of a job's transfer, Mb/s.
    #[arg(long, default_value_t = 10.0)]
    job_mbps: f64,
    /// Egress queue capacity, packets.
    #[arg(long, default_value_t = 128)]
    queue_capacity: usize,
    /// Up to this much more switch processing delay per packet and hop, uniform (a real
    /// pipeline's latency varies by tens of ns).
    #[arg(long, default_value = "0ns", value_parser = humantime::parse_duration)]
    processing_jitter: Duration,
    /// Link rate, Gb/s.
    #[arg(long, default_value_t = 10.0)]
    link_gbps: f64,
    /// Link propagation delay.
    #[arg(long, default_value = "1us", value_parser = humantime::parse_duration)]
    link_delay: Duration,
    /// Link loss probability.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Serve the control channel (table entries, failures) on this address.
    #[arg(long, value_name = "ADDR:PORT")]
    control: Option<SocketAddr>,
}

fn parse_u16(s: &str) -> Result<u16, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u16::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("{s:?}: {e}"))
}

impl EmulateArgs {
    pub fn config(&self) -> RunConfig {
        RunConfig {
            topology: self.topology.clone(),
            link: LinkSpec {
                delay_ns: self.link_delay.as_nanos() as u64,
                rate_bps: (self.link_gbps * 1e9) as u64,
                loss: self.loss,
            },
            collectors: self.collector.clone(),
            duration: self.duration,
            scenario: self.scenario.clone(),
            realtime: self.realtime,
            speed: self.speed,
            truth: self.truth.clone(),
            sim: SimConfig {
                seed: self.seed,
                queue_capacity: self.queue_capacity,
                processing_jitter_ns: self.processing_jitter.as_nanos() as u64,
                report_version: self.report_version,
                mx: self.mx,
                clock_base_ns: if self.realtime || self.wall_clock {
                    kplane_model::unix_time_ns()
                } else {
                    0
                },
                ..SimConfig::default()
            },
            flows_per_second: self.flows,
            elephant_share: self.elephant_share,
            flow_rate_bps: (self.flow_mbps * 1e6) as u64,
            jobs: self.jobs,
            job_rate_bps: (self.job_mbps * 1e6) as u64,
            bitmap: self.bitmap,
            entries: Vec::new(),
        }
    }
}

pub fn print_summary(s: &Summary, cfg: &RunConfig) {
    let drops: Vec<String> = s
        .stats
        .drops
        .iter()
        .map(|(k, v)| format!("{k:?} {v}"))
        .collect();
    let injected: Vec<String> = s.injected.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!(
        "kplane emulate: {} ({} switches, {} hosts), scenario {}, {:.3} s virtual in {:.2} s wall",
        s.topology, s.switches, s.hosts, cfg.scenario, s.virtual_seconds, s.wall_seconds
    );
    println!(
        "packets   sent {}, delivered {}, with INT {}, dropped {}{}",
        s.stats.packets_sent,
        s.stats.packets_delivered,
        s.stats.int_packets,
        s.stats.dropped(),
        if drops.is_empty() {
            String::new()
        } else {
            format!(" ({})", drops.join(", "))
        }
    );
    println!(
        "reports   {} built ({:.1} MB, {}{}), {} sent to {:?}, {} send errors, {} suppressed by sink detection",
        s.stats.reports,
        s.stats.report_bytes as f64 / 1e6,
        match cfg.sim.report_version {
            ReportVersion::V05 => "TR v0.5",
            ReportVersion::V10 => "TR v1.0",
            ReportVersion::V20 => "TR v2.0",
        },
        if cfg.sim.mx {
            ", INT-MX postcards"
        } else {
            ", INT-MD"
        },
        s.reports_sent,
        cfg.collectors,
        s.report_send_errors,
        s.stats.reports_suppressed
    );
    println!(
        "injected  {}",
        if injected.is_empty() {
            "nothing".into()
        } else {
            injected.join(", ")
        }
    );
    println!(
        "rate      {:.0} emulated packets/s ({} events)",
        s.packets_per_second(),
        s.stats.events
    );
}

/// The emulator's control channel behind the `[http]` tokens: reads (topology, tables,
/// truth) need a viewer, writes (entries, failures) an operator.
pub fn control_router(sim: kplane_emulator::control::Shared, http: &HttpConfig) -> axum::Router {
    let router = kplane_runtime::auth::protect(kplane_emulator::control::router(sim), http.auth());
    kplane_runtime::http::guard_hosts(router, http)
}

pub fn run_cli(source: ConfigSource, args: EmulateArgs) -> ExitCode {
    let http = if args.control.is_some() {
        match crate::config::load(&source) {
            Ok(c) if c.http.no_auth || !c.http.tokens.is_empty() => c.http,
            Ok(_) => {
                eprintln!(
                    "kplane emulate: the control channel needs [[http.tokens]] (or http.no-auth \
                     on a loopback --control) in the configuration"
                );
                return ExitCode::from(EXIT_CONFIG);
            }
            Err(e) => {
                eprint!("kplane emulate: {e}");
                return ExitCode::from(EXIT_CONFIG);
            }
        }
    } else {
        HttpConfig::default()
    };
    if let Some(addr) = args.control {
        let mut problems = Vec::new();
        http.check_listener("--control", addr, &mut problems);
        if let Some(p) = problems.first() {
            eprintln!("kplane emulate: {p}");
            return ExitCode::from(EXIT_CONFIG);
        }
    }
    let cfg = args.config();
    let sim = match build(&cfg) {
        Ok(s) => Arc::new(Mutex::new(s)),
        Err(e) => {
            eprintln!("kplane emulate: {e}");
            return ExitCode::from(2);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kplane emulate: {e}");
            return ExitCode::FAILURE;
        }
    };
    {
        let stop = stop.clone();
        rt.spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            stop.store(true, Ordering::Release);
        });
    }
    if let Some(addr) = args.control {
        let router = control_router(sim.clone(), &http);
        match rt.block_on(tokio::net::TcpListener::bind(addr)) {
            Ok(l) => {
                eprintln!(
                    "kplane emulate: control channel on http://{}",
                    l.local_addr().map_or(addr, |a| a)
                );
                rt.spawn(async move {
                    // Runs until the process ends with the emulation.
                    let _ = kplane_runtime::http::serve(l, router, &http, Shutdown::new()).await;
                });
            }
            Err(e) => {
                eprintln!("kplane emulate: cannot serve the control channel on {addr}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    match run(&cfg, sim, || stop.load(Ordering::Acquire)) {
        Ok(summary) => {
            print_summary(&summary, &cfg);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kplane emulate: {e}");
            ExitCode::FAILURE
        }
    }
}
