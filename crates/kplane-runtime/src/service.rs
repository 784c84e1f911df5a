//! Running a service: admin router up, ready, wait for shutdown, stop cleanly — and the
//! `main` of each service's own binary.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;
use serde::de::DeserializeOwned;

use kplane_bus::BusConfig;

use crate::admin::{AdminState, serve_admin};
use crate::config::{ConfigSource, Validate, load_section};
use crate::error::RuntimeError;
use crate::logging::{LogConfig, init_logging};
use crate::shutdown::Shutdown;

/// Exit code for configuration errors (sysexits `EX_CONFIG`).
pub const EXIT_CONFIG: u8 = 78;

/// Serves the admin router on `addr`, marks the service ready, and returns once `shutdown`
/// fires and the server has stopped. Services whose pipeline is elsewhere run this alongside.
pub async fn serve_until_shutdown(
    name: &str,
    addr: SocketAddr,
    admin: AdminState,
    shutdown: Shutdown,
) -> Result<(), RuntimeError> {
    let (bound, task) = serve_admin(addr, admin.clone(), shutdown.clone()).await?;
    tracing::info!(service = name, admin = %bound, "admin listening (/metrics /healthz /readyz)");
    admin.set_ready(true);
    shutdown.wait().await;
    admin.set_ready(false);
    tracing::info!(service = name, "stopping");
    task.await
        .map_err(|e| RuntimeError::AdminServe(std::io::Error::other(e)))??;
    tracing::info!(service = name, "stopped");
    Ok(())
}

/// `main` for a service's own binary: `kplane-<name> [--config FILE]`. Loads `[log]` and
/// `[<name>]` (defaults < file < `KPLANE__…` env), installs logging and signal handling, runs.
pub fn service_main<T, F, Fut>(name: &str, run: F) -> ExitCode
where
    T: DeserializeOwned + Serialize + Default + Validate,
    F: FnOnce(T, Shutdown) -> Fut,
    Fut: Future<Output = ServiceResult>,
{
    service_main_with_bus(name, |cfg, _bus, shutdown| run(cfg, shutdown))
}

/// [`service_main`] for a service that talks to the bus: also loads `[bus]`.
pub fn service_main_with_bus<T, F, Fut>(name: &str, run: F) -> ExitCode
where
    T: DeserializeOwned + Serialize + Default + Validate,
    F: FnOnce(T, BusConfig, Shutdown) -> Fut,
    Fut: Future<Output = ServiceResult>,
{
    let source = match parse_args(name) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let loaded = load_section::<LogConfig>(&source, "log").and_then(|log| {
        let cfg = load_section::<T>(&source, name)?;
        let bus = load_section::<BusConfig>(&source, "bus")?;
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

/// What a service's `run` returns: any error, reported by `Display`.
pub type ServiceResult = Result<(), BoxError>;

/// Any error a service may end with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A service's default admin port (serde can't take it as a const generic).
pub trait AdminPort {
    const PORT: u16;
}

/// `[<service>]` of a service that so far only serves its admin router.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case", bound = "")]
pub struct AdminOnlyConfig<P: AdminPort> {
    /// Admin listener for /metrics, /healthz and /readyz.
    pub admin: SocketAddr,
    #[serde(skip)]
    port: std::marker::PhantomData<P>,
}

impl<P: AdminPort> Default for AdminOnlyConfig<P> {
    fn default() -> Self {
        Self {
            admin: SocketAddr::from(([127, 0, 0, 1], P::PORT)),
            port: std::marker::PhantomData,
        }
    }
}

impl<P: AdminPort> AdminOnlyConfig<P> {
    pub fn with_admin(admin: SocketAddr) -> Self {
        Self {
            admin,
            ..Self::default()
        }
    }
}

impl<P: AdminPort> Validate for AdminOnlyConfig<P> {
    fn validate(&self, _problems: &mut Vec<String>) {}
}

/// Runs a service that so far only serves its admin router, until `shutdown`.
pub async fn run_admin_only(name: &str, admin: SocketAddr, shutdown: Shutdown) -> ServiceResult {
    let state = AdminState::new(crate::Metrics::new(name));
    serve_until_shutdown(name, admin, state, shutdown).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn admin_only_service_starts_and_stops_cleanly() {
        let shutdown = Shutdown::new();
        let task = tokio::spawn(run_admin_only(
            "test",
            "127.0.0.1:0".parse().unwrap(),
            shutdown.clone(),
        ));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!task.is_finished());
        shutdown.trigger();
        tokio::time::timeout(std::time::Duration::from_secs(5), task)
            .await
            .expect("stops promptly")
            .unwrap()
            .unwrap();
    }
}
