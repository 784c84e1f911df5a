//! `kplane lab up` / `kplane lab down`: the lab's flags (the fabric, switches and traffic are
//! `kplane-lab`'s), and the same services as `kplane up` driving its switches over P4Runtime.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use kplane_lab::traffic::{Attack, Background};
use kplane_lab::{Lab, LabSpec, Topology};
use kplane_runtime::{BoxError, ConfigSource, EXIT_CONFIG, Shutdown, run_service};
use kplane_stream_processor::config::Thresholds;

use crate::config::load;
use crate::up::{Services, ServicesArgs};

/// The lab's hop-latency threshold unless the configuration sets another. BMv2 forwards in a
/// software loop: a hop takes 0.26–0.40 ms (median per switch, 2-core VM) and its per-window
/// tail reaches 2–4 ms while the host's cores are busy, so the default (100 µs, a hardware
/// switch's queueing) makes nearly every packet a breach. 10 ms is 25× its median: queueing.
const BMV2_HOP_LATENCY_NS: u64 = 10_000_000;

/// The lab's minimum breach duration unless the configuration sets one. A BMv2 switch is a
/// process the host can hold up: every packet inside it then waits the 10–30 ms of the stall,
/// a breach of the threshold above on each flow it holds, on one switch or on all at once,
/// though nothing queued. Queueing lasts as long as its cause; a breach must outlast a stall to
/// be raised. 200 ms: what `kplane eval knowledge` holds a 100 Mb/s fabric's breaches to.
const BMV2_MIN_DURATION: Duration = Duration::from_millis(200);

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Build a fabric of BMv2 switches in network namespaces, provision it over P4Runtime,
    /// send hosts' traffic through it and run kplane's services on its telemetry, until
    /// Ctrl-C or --duration; then tear it all down (docs/lab.md).
    Up(LabUpArgs),
    /// Remove everything a lab left behind (switch processes, namespaces, veths), even after
    /// a crash.
    Down {
        /// The lab's name (the prefix of its interfaces and namespaces).
        #[arg(long, default_value = "kpl")]
        name: String,
    },
}

#[derive(Debug, Args)]
pub struct LabUpArgs {
    /// The fabric: `leaf-spine:SPINES,LEAVES[,HOSTS]` (hosts per leaf; default 2).
    #[arg(long, default_value = "leaf-spine:2,4,2")]
    topology: String,
    /// A topology file (TOML: switches, links, hosts; docs/lab.md), instead of --topology.
    #[arg(long, value_name = "FILE")]
    topology_file: Option<PathBuf>,
    /// The lab's name: the prefix of its interfaces and namespaces (2–5 lowercase letters).
    #[arg(long, default_value = "kpl")]
    name: String,
    /// Where the API and the web console listen.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8080")]
    api: SocketAddr,
    /// Where the store, state, switch logs and the attacks' truth go.
    #[arg(long, value_name = "DIR", default_value = "kplane-lab-data")]
    data_dir: PathBuf,
    /// No authentication (only on a loopback --api address).
    #[arg(long)]
    no_auth: bool,
    /// Background flow arrivals per second (Poisson), between random host pairs.
    #[arg(long, default_value_t = 5.0)]
    flows: f64,
    /// Share of the flows that are elephants (100 packets of 1000 bytes; mice: 10 of 200).
    #[arg(long, default_value_t = 0.2)]
    elephant_share: f64,
    /// Packets per second within one flow.
    #[arg(long, default_value_t = 50.0)]
    flow_pps: f64,
    /// A scripted attack, repeatable: `ddos:start=60s,duration=30s,victim=10.0.2.1,sources=3,pps=300`
    /// or `port-scan:start=60s,duration=20s,scanner=10.0.1.1,target=10.0.2.1,pps=100`.
    #[arg(long)]
    attack: Vec<String>,
    /// Seed of the traffic.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
}

pub fn run(source: ConfigSource, command: LabCommand) -> ExitCode {
    match command {
        LabCommand::Down { name } => match kplane_lab::net::clean(&name) {
            Ok(c) => {
                println!(
                    "kplane lab down: {name}: removed {} switch processes, {} namespaces, {} interfaces",
                    c.processes, c.namespaces, c.links
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("kplane lab down: {e}");
                ExitCode::FAILURE
            }
        },
        LabCommand::Up(a) => {
            let mut cfg = match load(&source) {
                Ok(c) => c,
                Err(e) => {
                    eprint!("kplane lab: {e}");
                    return ExitCode::from(EXIT_CONFIG);
                }
            };
            // The lab's switches are the drivers.
            cfg.intent_api.intents.drivers.clear();
            // BMv2's clock counts from each switch's start, not the wall clock: windows go by
            // when the collector received a report.
            cfg.stream_processor.event_time = kplane_stream_processor::config::EventTime::Received;
            fit_for_bmv2(&mut cfg.stream_processor.thresholds);
            let log = cfg.log.clone();
            run_service("lab", &log, move |shutdown| async move {
                up(cfg, a, shutdown).await
            })
        }
    }
}

/// BMv2's hop-latency threshold and minimum breach duration, where the configuration left the
/// defaults.
fn fit_for_bmv2(thresholds: &mut Thresholds) {
    let default = Thresholds::default();
    if thresholds.hop_latency_ns == default.hop_latency_ns {
        thresholds.hop_latency_ns = BMV2_HOP_LATENCY_NS;
    }
    if thresholds.min_duration == default.min_duration {
        thresholds.min_duration = BMV2_MIN_DURATION;
    }
}

async fn up(
    cfg: crate::config::KplaneConfig,
    a: LabUpArgs,
    shutdown: Shutdown,
) -> Result<(), BoxError> {
    let topology = match &a.topology_file {
        Some(f) => Topology::from_file(f)?,
        None => Topology::parse(&a.topology)?,
    };
    let attacks = a
        .attack
        .iter()
        .map(|s| Attack::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let spec = LabSpec {
        prefix: a.name.clone(),
        topology,
        dir: a.data_dir.join("lab"),
        background: Background {
            flows_per_second: a.flows,
            elephant_share: a.elephant_share,
            flow_pps: a.flow_pps,
        },
        attacks,
        seed: a.seed,
    };
    let (switches, hosts) = (spec.topology.switches.len(), spec.topology.hosts.len());
    let started = Instant::now();
    let mut lab = tokio::task::spawn_blocking(move || Lab::up(spec)).await??;
    let mut http = cfg.http.clone();
    http.no_auth = a.no_auth;
    let token = crate::up::admin_token(&mut http, "kplane-lab")?;
    let services = Services::start(
        cfg,
        http,
        &ServicesArgs {
            api: a.api,
            data_dir: a.data_dir.clone(),
            collector: lab.collectors().to_vec(),
            drivers: lab.drivers(),
            name: "kplane lab",
            token,
        },
    )
    .await?;
    // Traffic once every switch runs the pipeline with its configuration.
    let (api, token) = (services.api_addr, services.token.clone());
    tokio::task::spawn_blocking(move || provisioned(api, token.as_deref(), switches)).await??;
    lab.start_traffic()?;
    println!(
        "kplane lab: {switches} BMv2 switches and {hosts} hosts up and provisioned in {:.1} s; \
         traffic running; switch logs, truth.jsonl and received.json in {}; Ctrl-C stops",
        started.elapsed().as_secs_f64(),
        lab.spec.dir.display()
    );
    match a.duration {
        Some(d) => {
            tokio::select! {
                _ = shutdown.wait() => {}
                _ = tokio::time::sleep(d) => {}
            }
        }
        None => shutdown.wait().await,
    }
    // The services first (they flush what the switches sent), then the fabric.
    services.stop().await?;
    let sent = tokio::task::spawn_blocking(move || lab.down()).await??;
    println!(
        "kplane lab: stopped after {:.0} s; {sent} packets sent by the hosts; fabric removed; results in {}",
        started.elapsed().as_secs_f64(),
        a.data_dir.display()
    );
    Ok(())
}

/// Waits until the API reports every switch provisioned (`GET /v1/intents/switches`).
fn provisioned(api: SocketAddr, token: Option<&str>, switches: usize) -> Result<(), BoxError> {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| vec![("authorization", a)])
        .unwrap_or_default();
    let end = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    while Instant::now() < end {
        if let Ok(r) = kplane_runtime::probe::request(
            api,
            "GET",
            "/v1/intents/switches",
            &headers,
            "",
            Duration::from_secs(5),
        ) {
            let v: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
            let ok = v["switches"]
                .as_array()
                .map_or(0, |s| s.iter().filter(|s| s["status"] == "ok").count());
            if ok == switches {
                return Ok(());
            }
            last = r.body;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Err(format!("the lab's switches were not all provisioned within 60 s: {last}").into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lab_fits_the_default_thresholds_to_bmv2_and_keeps_those_that_were_set() {
        let mut t = Thresholds::default();
        fit_for_bmv2(&mut t);
        assert_eq!(t.hop_latency_ns, BMV2_HOP_LATENCY_NS);
        // A breach clears at 90 % of it, as with any threshold whose clear level is not set,
        // and is raised once it has outlasted a stall of the switch's process.
        let band = t.hop_latency();
        assert_eq!((band.raise, band.clear), (10_000_000, 9_000_000));
        assert_eq!(band.min_ns, 200_000_000);
        let mut set = Thresholds {
            hop_latency_ns: 2_000_000,
            min_duration: Duration::from_millis(50),
            ..Thresholds::default()
        };
        fit_for_bmv2(&mut set);
        assert_eq!(set.hop_latency_ns, 2_000_000);
        assert_eq!(set.min_duration, Duration::from_millis(50));
    }
}
