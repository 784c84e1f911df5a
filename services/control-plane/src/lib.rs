//! # kplane control-plane
//!
//! Intents — operators' and the knowledge service's requests — compiled into table entries of
//! `p4/kplane_int.p4`, checked for conflicts and safety bounds, persisted, pushed through the
//! switch drivers ([`kplane_southbound`]), verified against fresh telemetry and rolled back
//! when their effect does not show; and the controllers that submit intents themselves:
//! backpressure, the knowledge service's recommendations, INT-label Pro. Probe plans for
//! GPINT are computed over the fabric the drivers report.
//!
//! The API mounts [`router`] (`kplane up` runs everything in one process) and provides the
//! telemetry the control plane verifies against ([`Telemetry`]). See `docs/intents.md`.

/// Benchmark fixtures for `kplane bench` and criterion, not part of the service (feature
/// `bench`).
#[cfg(feature = "bench")]
pub mod bench;
mod error;
mod intents;
pub mod label_ports;
mod probe_plans;
mod routes;
mod telemetry;

use kplane_runtime::Shutdown;
use kplane_runtime::auth::Auth;
use kplane_runtime::limits::Limits;

pub use error::ControlError;
pub use intents::backpressure::BackpressureConfig;
pub use intents::traffic_engineering::TrafficEngineeringConfig;
pub use intents::{CONTROLLERS, Intents, IntentsConfig, label_pro, model, store};
pub use label_ports::LabelPorts;
pub use telemetry::Telemetry;

/// The control plane's HTTP routes — intents, policy, switches, audit log, probe plans — each
/// behind its role; intent changes spend `intent_rate` per token and minute from `limits`.
pub fn router(intents: Intents, auth: Auth, limits: Limits, intent_rate: u32) -> axum::Router {
    routes::router(auth.clone())
        .merge(probe_plans::router(auth))
        .with_state(routes::Routes {
            intents,
            limits,
            intent_rate,
            probe_findings: Default::default(),
        })
}

/// Learns the fabric from the drivers, then runs the reconcile loop and the controllers
/// (backpressure, INT-label Pro over `labels`, the knowledge service's recommendations
/// when `follow-recommendations` is on, traffic engineering when it is enabled) until `shutdown`. The handle ends with the reconcile
/// loop.
pub async fn start(
    intents: &Intents,
    labels: LabelPorts,
    shutdown: Shutdown,
) -> tokio::task::JoinHandle<()> {
    // Intents are compiled against the fabric: learn it before the first request.
    intents::engine::refresh_topology(intents).await;
    let cfg = &intents.cfg;
    tokio::spawn(intents::backpressure::run(
        intents.clone(),
        cfg.backpressure.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(intents::label_pro::run(
        intents.clone(),
        labels,
        cfg.int_label_pro.clone(),
        shutdown.clone(),
    ));
    if cfg.follow_recommendations {
        tokio::spawn(intents::recommendations::run(
            intents.clone(),
            &*intents.telemetry,
            cfg.recommendation_max_age,
            shutdown.clone(),
        ));
    }
    tokio::spawn(intents::traffic_engineering::run(
        intents.clone(),
        cfg.traffic_engineering.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(intents::engine::run(intents.clone(), shutdown))
}
