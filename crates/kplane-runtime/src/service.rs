//! Running a service: logging, the async runtime, signals, exit codes — and the `main` of
//! each service's own binary.

use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;
use serde::de::DeserializeOwned;

use kplane_bus::BusConfig;

use crate::config::{ConfigSource, Validate, load_section};
use crate::http::HttpConfig;
use crate::logging::{LogConfig, init_logging};
use crate::shutdown::Shutdown;

/// Exit code for configuration errors (sysexits `EX_CONFIG`).
pub const EXIT_CONFIG: u8 = 78;

/// `main` for a service's own binary: `kplane-<name> [--config FILE]`. Loads `[log]`,
/// `[http]`, `[bus]` and `[<name>]` (defaults < file < `KPLANE__…` env), installs logging and
/// signal handling, runs.
pub fn service_main_with_bus<T, F, Fut>(name: &str, run: F) -> ExitCode
where
    T: DeserializeOwned + Serialize + Default + Validate + Listeners,
    F: FnOnce(T, BusConfig, Shutdown) -> Fut,
    Fut: Future<Output = ServiceResult>,
{
    let source = match parse_args(name) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let loaded = load_section::<LogConfig>(&source, "log").and_then(|log| {
        let mut cfg = load_section::<T>(&source, name)?;
        let bus = load_section::<BusConfig>(&source, "bus")?;
        let http = load_section::<HttpConfig>(&source, "http")?;
        let mut problems = Vec::new();
        cfg.set_http(http);
        cfg.validate_listeners(&mut problems);
        if !problems.is_empty() {
            return Err(crate::ConfigError { problems });
        }
        Ok((log, cfg, bus))
    });
    match loaded {
        Ok((log, cfg, bus)) => run_service(name, &log, |shutdown| run(cfg, bus, shutdown)),
        Err(e) => {
            eprintln!("kplane-{name}: {e}");
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

/// `[--config FILE] [--help]`; `Err` is the exit code after `--help` or a bad argument.
fn parse_args(name: &str) -> Result<ConfigSource, ExitCode> {
    let mut args = std::env::args().skip(1);
    let mut source = ConfigSource::default();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--config" | "-c" => source.file = args.next().map(PathBuf::from),
            "--help" | "-h" => {
                println!(
                    "kplane-{name} [--config FILE]\n\nRuns the {name} service. Configuration: \
                     section [{name}] of FILE, overridden by KPLANE__{}__<KEY> variables.\n\
                     The `kplane {name}` subcommand is the same service with more flags.",
                    name.to_uppercase().replace('-', "_")
                );
                return Err(ExitCode::SUCCESS);
            }
            other => {
                eprintln!("kplane-{name}: unknown argument {other:?} (try --help)");
                return Err(ExitCode::from(2));
            }
        }
    }
    Ok(source)
}

/// Installs logging, starts the async runtime and signal handling, runs the service until it
/// returns, and maps the outcome to an exit code. Shared by every binary that runs a service.
pub fn run_service<F, Fut>(name: &str, log: &LogConfig, run: F) -> ExitCode
where
    F: FnOnce(Shutdown) -> Fut,
    Fut: Future<Output = ServiceResult>,
{
    if let Err(e) = init_logging(log) {
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
    rt.block_on(async {
        let shutdown = Shutdown::new();
        shutdown.on_signals();
        match run(shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(service = name, error = %e, "service failed");
                ExitCode::FAILURE
            }
        }
    })
}

/// A service configuration whose listeners follow `[http]` (tokens, limits): set from the
/// document's `[http]` section, which every service shares.
pub trait Listeners {
    fn set_http(&mut self, http: HttpConfig);
    /// Problems of the listeners under `[http]` (e.g. `no-auth` on a public address).
    fn validate_listeners(&self, problems: &mut Vec<String>);
}

/// What a service's `run` returns: any error, reported by `Display`.
pub type ServiceResult = Result<(), BoxError>;

/// Any error a service may end with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A service's default admin port (serde can't take it as a const generic).
pub trait AdminPort {
    const PORT: u16;
}

/// Runs a service whose work is one blocking worker (the stream processor, the knowledge
/// service), the start-up every such service shares: the admin endpoints on `admin`
/// (`/metrics` from `registry`, `/healthz`, `/readyz`), `worker` on a blocking thread, its
/// stop flag raised when `shutdown` fires, and not ready once it has returned. The worker
/// says when it is ready (`AdminState::set_ready`).
pub async fn run_worker<W>(
    name: &str,
    admin: std::net::SocketAddr,
    http: &HttpConfig,
    registry: crate::Metrics,
    shutdown: Shutdown,
    worker: W,
) -> ServiceResult
where
    W: FnOnce(crate::AdminState, &std::sync::atomic::AtomicBool) -> ServiceResult + Send + 'static,
{
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let admin_state = crate::AdminState::new(registry);
    let (addr, admin_task) =
        crate::serve_admin(admin, admin_state.clone(), http, shutdown.clone()).await?;
    tracing::info!(service = name, admin = %addr, "admin listening (/metrics /healthz /readyz)");
    let stop = Arc::new(AtomicBool::new(false));
    let work = {
        let (stop, admin_state) = (stop.clone(), admin_state.clone());
        tokio::task::spawn_blocking(move || worker(admin_state, &stop))
    };
    tokio::pin!(work);
    let result = tokio::select! {
        r = &mut work => r?,
        () = shutdown.wait() => {
            stop.store(true, Ordering::Release);
            work.await?
        }
    };
    admin_state.set_ready(false);
    shutdown.trigger();
    admin_task.await??;
    tracing::info!(service = name, "stopped");
    result
}
