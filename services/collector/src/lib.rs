//! # kplane collector
//!
//! Turns telemetry reports into a few meaningful records: UDP (recvmmsg, SO_REUSEPORT) or
//! pcap input → decode ([`kplane_wire`]) → loss accounting per (node, hw_id) → event
//! detection (INTCollector thresholds, watchlist algorithms) → per-partition micro-batches
//! (Arrow IPC or JSON lines) → the bus (`int.events`, optionally `int.reports`).
//! See `docs/collector.md`.

pub mod detect;
pub mod loss;
pub mod partition;
pub mod watchlist;

use kplane_runtime::{AdminOnlyConfig, AdminPort, ServiceResult, Shutdown, run_admin_only};

/// The service's name: its config section, metric prefix and subcommand.
pub const NAME: &str = "collector";

/// `[collector]`: admin listener, default 127.0.0.1:9101.
pub type Config = AdminOnlyConfig<DefaultAdmin>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefaultAdmin;

impl AdminPort for DefaultAdmin {
    const PORT: u16 = 9101;
}

/// Runs until `shutdown` fires.
pub async fn run(cfg: Config, shutdown: Shutdown) -> ServiceResult {
    run_admin_only(NAME, cfg.admin, shutdown).await
}
