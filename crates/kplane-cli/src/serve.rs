//! `kplane <service>`: load the configuration, apply flags, run until SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Args;
use kplane_runtime::{ConfigSource, EXIT_CONFIG, run_service};

use crate::config::{KplaneConfig, load};

/// `kplane collector` flags (each overrides its `[collector]` key).
#[derive(Debug, Args)]
pub struct CollectorArgs {
    /// UDP listener for telemetry reports (repeatable; default 0.0.0.0:32766).
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Vec<SocketAddr>,
    /// Where live reports are taken from: `udp` sockets, or `af-xdp` (an XDP program on
    /// `--interface` steering the `--listen` ports to AF_XDP sockets; needs root).
    #[arg(long, value_enum)]
    input: Option<Input>,
    /// The interface reports arrive on, for `--input af-xdp`.
    #[arg(long, value_name = "IF")]
    interface: Option<String>,
    /// Replay a pcap/pcapng capture through the pipeline instead of listening.
    #[arg(long, value_name = "FILE")]
    pcap: Option<std::path::PathBuf>,
    /// pcap replay pace.
    #[arg(long, value_enum)]
    speed: Option<Speed>,
    /// Print what the collector publishes (JSON lines) on stdout.
    #[arg(long)]
    print: bool,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Input {
    Udp,
    AfXdp,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Speed {
    Recorded,
    Max,
}

/// Applies the collector's flags to the configuration layers.
pub fn collector(source: ConfigSource, args: CollectorArgs) -> ExitCode {
    let mut source = source;
    if !args.listen.is_empty() {
        let v: Vec<String> = args.listen.iter().map(ToString::to_string).collect();
        source = source.set("collector.listen", v);
    }
    if let Some(i) = args.input {
        let i = match i {
            Input::Udp => "udp",
            Input::AfXdp => "af-xdp",
        };
        source = source.set("collector.input", i);
    }
    if let Some(i) = &args.interface {
        source = source.set("collector.af-xdp.interface", i.clone());
    }
    if let Some(p) = &args.pcap {
        source = source.set("collector.pcap", p.display().to_string());
    }
    if let Some(s) = args.speed {
        let s = match s {
            Speed::Recorded => "recorded",
            Speed::Max => "max",
        };
        source = source.set("collector.speed", s);
    }
    let print = args.print;
    run_with(source, kplane_collector::NAME, args.serve, print)
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Admin listener for /metrics, /healthz and /readyz (overrides `[<service>] admin`).
    #[arg(long, value_name = "ADDR:PORT")]
    admin: Option<SocketAddr>,
}

pub fn run(source: ConfigSource, name: &str, args: ServeArgs) -> ExitCode {
    run_with(source, name, args, false)
}

fn run_with(source: ConfigSource, name: &str, args: ServeArgs, print: bool) -> ExitCode {
    let source = match args.admin {
        Some(a) => source.set(&format!("{name}.admin"), a.to_string()),
        None => source,
    };
    let cfg: KplaneConfig = match load(&source) {
        Ok(c) => c,
        Err(e) => {
            eprint!("kplane {name}: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let mut problems = Vec::new();
    {
        use kplane_runtime::Listeners;
        match name {
            kplane_collector::NAME => cfg.collector.validate_listeners(&mut problems),
            kplane_stream_processor::NAME => cfg.stream_processor.validate_listeners(&mut problems),
            kplane_knowledge::NAME => cfg.knowledge.validate_listeners(&mut problems),
            _ => cfg.intent_api.validate_listeners(&mut problems),
        }
    }
    if !problems.is_empty() {
        eprint!(
            "kplane {name}: {}",
            kplane_runtime::ConfigError { problems }
        );
        return ExitCode::from(EXIT_CONFIG);
    }
    let log = cfg.log.clone();
    run_service(name, &log, |shutdown| async move {
        match name {
            kplane_collector::NAME if print => {
                kplane_collector::run_printing(cfg.collector, shutdown).await
            }
            kplane_collector::NAME => kplane_collector::run(cfg.collector, cfg.bus, shutdown).await,
            kplane_stream_processor::NAME => {
                kplane_stream_processor::run(cfg.stream_processor, cfg.bus, shutdown).await
            }
            kplane_knowledge::NAME => kplane_knowledge::run(cfg.knowledge, cfg.bus, shutdown).await,
            _ => kplane_intent_api::run(cfg.intent_api, cfg.bus, shutdown).await,
        }
    })
}
