//! `kplane <service>`: load the configuration, apply flags, run until SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Args;
use kplane_runtime::{ConfigSource, EXIT_CONFIG, run_service};

use crate::config::{KplaneConfig, load};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Admin listener for /metrics, /healthz and /readyz (overrides `[<service>] admin`).
    #[arg(long, value_name = "ADDR:PORT")]
    admin: Option<SocketAddr>,
}

pub fn run(source: ConfigSource, name: &str, args: ServeArgs) -> ExitCode {
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
    let log = cfg.log.clone();
    run_service(name, &log, |shutdown| async move {
        match name {
            kplane_collector::NAME => kplane_collector::run(cfg.collector, shutdown).await,
            kplane_stream_processor::NAME => {
                kplane_stream_processor::run(cfg.stream_processor, shutdown).await
            }
            kplane_knowledge::NAME => kplane_knowledge::run(cfg.knowledge, shutdown).await,
            _ => kplane_intent_api::run(cfg.intent_api, shutdown).await,
        }
    })
}
