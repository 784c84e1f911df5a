//! `kplane up`: the whole system in one process on the embedded bus — the emulator (fat-tree
//! k=4 in real time, recurring microbursts, a link failing and recovering every 3 minutes)
//! with its control channel on loopback, the collector, the stream processor and the API with
//! the web console, whose intents reach the emulator through its `emulator` switch driver.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use kplane_runtime::auth::Role;
use kplane_runtime::{
    BoxError, ConfigSource, EXIT_CONFIG, Listeners, Shutdown, Validate, run_service,
};

use crate::config::load;

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Where the API and the web console listen.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8080")]
    api: SocketAddr,
    /// Where the analytics store and checkpoints go.
    #[arg(long, value_name = "DIR", default_value = "kplane-data")]
    data_dir: PathBuf,
    /// No authentication (only on a loopback --api address).
    #[arg(long)]
    no_auth: bool,
    /// Emulated flow arrivals per second.
    #[arg(long, default_value_t = 200.0)]
    flows: f64,
    /// Share of the emulated flows that are elephants (1000 packets; mice: 10).
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
    /// Emulated link rate, Gb/s.
    #[arg(long, default_value_t = 10.0)]
    link_gbps: f64,
    /// Emulated fabric (docs/emulator.md): `fat-tree:K`, `leaf-spine:S,L,H`,
    /// `watts-strogatz:N,K,P,SEED`.
    #[arg(long, default_value = "fat-tree:4")]
    topology: String,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// What the emulator injects (docs/emulator.md): `live` (recurring microbursts, a link
    /// failing every 3 minutes), or any scenario with parameters, joined by `+`, e.g.
    /// `live+ddos:start=0.5,rate=0.01` (times are fractions of --duration).
    #[arg(long, default_value = "live")]
    scenario: String,
    /// The emulator's seed (its traffic's draws, and what seeded scenarios choose).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(source: ConfigSource, a: UpArgs) -> ExitCode {
    let cfg = match load(&source) {
        Ok(c) => c,
        Err(e) => {
            eprint!("kplane up: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let log = cfg.log.clone();
    run_service("up", &log, move |shutdown| async move {
        up(cfg, a, shutdown).await
    })
}

async fn up(
    cfg: crate::config::KplaneConfig,
    a: UpArgs,
    shutdown: Shutdown,
) -> Result<(), BoxError> {
    let loopback = "127.0.0.1:0".parse::<SocketAddr>()?;
    let rc = kplane_emulator::run::RunConfig {
        topology: a.topology.clone(),
        duration: a.duration.unwrap_or(Duration::from_secs(365 * 86_400)),
        scenario: a.scenario.clone(),
        realtime: true,
        flows_per_second: a.flows,
        elephant_share: a.elephant_share,
        flow_rate_bps: (a.flow_mbps * 1e6) as u64,
        jobs: a.jobs,
        job_rate_bps: (a.job_mbps * 1e6) as u64,
        link: kplane_emulator::topology::LinkSpec {
            rate_bps: (a.link_gbps * 1e9) as u64,
            ..kplane_emulator::topology::LinkSpec::default()
        },
        sim: kplane_emulator::sim::SimConfig {
            seed: a.seed,
            ..Default::default()
        },
        ..kplane_emulator::run::RunConfig::default()
    };
    let sim = Arc::new(Mutex::new(kplane_emulator::run::build(&rc)?));
    let mut http = cfg.http.clone();
    http.no_auth = a.no_auth;
    // Before the control channel takes its copy of `[http]`: the printed admin token works
    // there too (the ground truth, the emulator's writes).
    let token = admin_token(&mut http, "kplane-up")?;
    // An operator token the API's emulator driver writes to the control channel with.
    let driver_token = if a.no_auth {
        None
    } else {
        Some(http.add_internal_token("emulator-driver", Role::Operator)?)
    };
    // The emulator's control channel: what the API's intents are written to.
    let control = tokio::net::TcpListener::bind(loopback).await?;
    let control_addr = control.local_addr()?;
    let control_router = crate::emulate::control_router(sim.clone(), &http);
    let (control_http, control_stop) = (http.clone(), shutdown.clone());
    tokio::spawn(async move {
        let _ =
            kplane_runtime::http::serve(control, control_router, &control_http, control_stop).await;
    });
    let drivers = vec![kplane_southbound::DriverConfig::Emulator(
        kplane_southbound::emulator::Config {
            control: control_addr,
            timeout: Duration::from_secs(5),
            token: driver_token,
        },
    )];
    let services = Services::start(
        cfg,
        http,
        &ServicesArgs {
            api: a.api,
            data_dir: a.data_dir.clone(),
            // The emulator sends to an ephemeral loopback port.
            collector: vec![loopback],
            drivers,
            name: "kplane up",
            token,
        },
    )
    .await?;
    println!(
        "kplane up: data in {}; emulating fat-tree:4, scenario {} (live: microbursts, a link failing every 3 min; control channel http://{control_addr}); Ctrl-C stops",
        a.data_dir.display(),
        a.scenario
    );

    let rc = kplane_emulator::run::RunConfig {
        collectors: services.collector_udp.clone(),
        ..rc
    };
    // Reports carry wall-clock time from the moment the emulation starts, so that telemetry,
    // the ground truth (`/v1/truth`) and the API's records share one clock.
    sim.lock()
        .map_err(|_| "emulator poisoned")?
        .cfg
        .clock_base_ns = kplane_model::unix_time_ns();
    let stop = shutdown.clone();
    let emulator = tokio::task::spawn_blocking(move || {
        kplane_emulator::run::run(&rc, sim, || stop.is_triggered())
    });
    let summary = emulator.await??;
    shutdown.trigger();
    tracing::info!(reports = summary.reports_sent, "emulator stopped; flushing");
    services.stop().await?;
    println!(
        "kplane up: stopped after {:.0} s; {} reports emulated; results in {}",
        summary.wall_seconds,
        summary.reports_sent,
        a.data_dir.display()
    );
    Ok(())
}

/// What the services of a one-process kplane need besides the configuration.
pub(crate) struct ServicesArgs {
    /// Where the API and the console listen.
    pub api: SocketAddr,
    pub data_dir: PathBuf,
    /// Where the collector listens for reports.
    pub collector: Vec<SocketAddr>,
    /// The switch drivers, unless the configuration names its own.
    pub drivers: Vec<kplane_southbound::DriverConfig>,
    /// What prints (`kplane up`, `kplane lab`).
    pub name: &'static str,
    /// The admin token to print, already in `[http]` ([`admin_token`]).
    pub token: Option<String>,
}

/// A fresh admin token added to `http` for the person who started the process (none without
/// authentication).
pub(crate) fn admin_token(
    http: &mut kplane_runtime::HttpConfig,
    name: &str,
) -> Result<Option<String>, BoxError> {
    Ok(if http.no_auth {
        None
    } else {
        Some(http.add_internal_token(name, Role::Admin)?)
    })
}

/// The collector, the stream processor, the knowledge service and the API (with the control
/// plane) on the embedded bus in this process: what `kplane up` and `kplane lab up` run.
pub(crate) struct Services {
    /// Where the collector receives reports.
    pub collector_udp: Vec<SocketAddr>,
    pub api_addr: SocketAddr,
    /// The printed admin token (none without authentication).
    pub token: Option<String>,
    collector: kplane_collector::Collector,
    processor: tokio::task::JoinHandle<Result<(), BoxError>>,
    knowledge: tokio::task::JoinHandle<Result<(), BoxError>>,
    api: kplane_intent_api::Running,
    follower: std::thread::JoinHandle<()>,
    follow_stop: Arc<std::sync::atomic::AtomicBool>,
    stops: [Shutdown; 4],
}

impl Services {
    /// Starts them, prints the console's URL with its token.
    pub(crate) async fn start(
        cfg: crate::config::KplaneConfig,
        http: kplane_runtime::HttpConfig,
        a: &ServicesArgs,
    ) -> Result<Self, BoxError> {
        let loopback = "127.0.0.1:0".parse::<SocketAddr>()?;
        // Every report published.
        let mut collector_cfg = kplane_collector::Config {
            listen: a.collector.clone(),
            admin: loopback,
            publish_reports: true,
            ..cfg.collector
        };
        let mut processor_cfg = kplane_stream_processor::Config {
            admin: loopback,
            data_dir: a.data_dir.join("stream-processor"),
            // One process: reports of a lane arrive in order within milliseconds.
            lateness: Duration::from_millis(200),
            ..cfg.stream_processor
        };
        let mut knowledge_cfg = kplane_knowledge::Config {
            admin: loopback,
            store_dir: processor_cfg.data_dir.clone(),
            state_dir: a.data_dir.join("knowledge"),
            window: processor_cfg.window,
            ..cfg.knowledge
        };
        // One `[http]` for every listener of the process, with the printed admin token.
        let token = a.token.clone();
        let mut intents = cfg.intent_api.intents.clone();
        if intents.drivers.is_empty() {
            intents.drivers = a.drivers.clone();
        }
        intents.state_dir = a.data_dir.join("intent-api");
        let mut api_cfg = kplane_intent_api::Config {
            admin: loopback,
            listen: a.api,
            store_dir: processor_cfg.data_dir.clone(),
            knowledge_dir: knowledge_cfg.state_dir.clone(),
            intents,
            ..cfg.intent_api
        };
        let mut problems = Vec::new();
        http.validate(&mut problems);
        for c in [
            &mut collector_cfg as &mut dyn Listeners,
            &mut processor_cfg,
            &mut knowledge_cfg,
            &mut api_cfg,
        ] {
            c.set_http(http.clone());
            c.validate_listeners(&mut problems);
        }
        collector_cfg.validate(&mut problems);
        processor_cfg.validate(&mut problems);
        api_cfg.validate(&mut problems);
        knowledge_cfg.validate(&mut problems);
        if !problems.is_empty() {
            return Err(problems.join("; ").into());
        }

        let bus = kplane_collector::embedded_bus(&collector_cfg);
        kplane_stream_processor::create_result_topics(&bus, &processor_cfg, 4_096);
        // Each stage stops after the one feeding it has flushed.
        let stops = [
            Shutdown::new(),
            Shutdown::new(),
            Shutdown::new(),
            Shutdown::new(),
        ];
        let collector =
            kplane_collector::start(collector_cfg, Arc::new(bus.clone()), stops[0].clone()).await?;
        let processor = tokio::spawn(kplane_stream_processor::run_embedded(
            processor_cfg,
            bus.clone(),
            stops[1].clone(),
        ));
        kplane_knowledge::create_topics(&bus, 4_096);
        let knowledge = tokio::spawn(kplane_knowledge::run_embedded(
            knowledge_cfg,
            bus.clone(),
            stops[2].clone(),
        ));
        // Telemetry backpressure reads the collector's drops (the embedded bus has no lag).
        let backpressure = &mut api_cfg.intents.backpressure;
        if backpressure.enabled && backpressure.sources.is_empty() {
            backpressure.sources = vec![collector.admin.to_string()];
        }
        let live = kplane_intent_api::live::Live::new(api_cfg.live_alerts);
        let follow_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let follower = kplane_intent_api::follow(
            Box::new(kplane_bus::EmbeddedGroup::subscribe(
                &bus,
                &kplane_intent_api::FOLLOWED,
                kplane_intent_api::NAME,
            )?),
            live.clone(),
            follow_stop.clone(),
        );
        let api = kplane_intent_api::start(api_cfg, live, stops[3].clone()).await?;
        let url = format!("http://{}/", api.addr);
        let name = a.name;
        match &token {
            Some(t) => {
                println!("{name}: console  {url}#token={t}");
                println!("{name}: API      {url}v1/…  (Authorization: Bearer {t})");
            }
            None => println!("{name}: console  {url}  (no authentication)"),
        }
        Ok(Self {
            collector_udp: collector.udp.clone(),
            api_addr: api.addr,
            token,
            collector,
            processor,
            knowledge,
            api,
            follower,
            follow_stop,
            stops,
        })
    }

    /// Stops them in order, each after the one feeding it has flushed.
    pub(crate) async fn stop(self) -> Result<(), BoxError> {
        let [collector_stop, processor_stop, knowledge_stop, api_stop] = self.stops;
        // The API's streams and connections end while the pipeline flushes (its grace runs
        // beside the flush, not after it).
        api_stop.trigger();
        collector_stop.trigger();
        self.collector.wait().await?;
        processor_stop.trigger();
        self.processor.await??;
        knowledge_stop.trigger();
        self.knowledge.await??;
        self.api.wait().await?;
        self.follow_stop
            .store(true, std::sync::atomic::Ordering::Release);
        let _ = self.follower.join();
        Ok(())
    }
}
