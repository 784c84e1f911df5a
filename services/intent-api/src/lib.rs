//! # kplane intent-api
//!
//! Will provide: the northbound HTTP API and intents (issue 7).
//! Today it only starts, serves the shared admin router (`/metrics`, `/healthz`,
//! `/readyz`) and stops cleanly on SIGINT/SIGTERM: nothing here pretends to do the work yet.

use kplane_runtime::{AdminOnlyConfig, AdminPort, ServiceResult, Shutdown, run_admin_only};

/// The service's name: its config section, metric prefix and subcommand.
pub const NAME: &str = "intent-api";

/// `[intent-api]`: admin listener, default 127.0.0.1:9104.
pub type Config = AdminOnlyConfig<DefaultAdmin>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefaultAdmin;

impl AdminPort for DefaultAdmin {
    const PORT: u16 = 9104;
}

/// Runs until `shutdown` fires.
pub async fn run(cfg: Config, shutdown: Shutdown) -> ServiceResult {
    run_admin_only(NAME, cfg.admin, shutdown).await
}
