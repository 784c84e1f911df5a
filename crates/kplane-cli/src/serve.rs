//! `kplane <service>`: load the configuration, apply flags, run until SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Args;
use kplane_runtime::{ConfigSource, EXIT_CONFIG, Shutdown, init_logging};

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
    if let Err(e) = init_logging(&cfg.log) {
        eprintln!("kplane {name}: {e}");
        return ExitCode::FAILURE;
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kplane {name}: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async move {
        let shutdown = Shutdown::new();
        shutdown.on_signals();
        match name {
            kplane_collector::NAME => kplane_collector::run(cfg.collector, shutdown).await,
            kplane_stream_processor::NAME => {
                kplane_stream_processor::run(cfg.stream_processor, shutdown).await
            }
            kplane_knowledge::NAME => kplane_knowledge::run(cfg.knowledge, shutdown).await,
            _ => kplane_intent_api::run(cfg.intent_api, shutdown).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kplane {name}: {e}");
            ExitCode::FAILURE
        }
    }
}
