//! # kplane-runtime
//!
//! What every kplane service shares: layered configuration ([`config`]), logging
//! ([`logging`]), the Prometheus registry ([`metrics`]), tokens and roles ([`auth`]), the
//! hardened HTTP server every listener runs ([`http`]), the admin listener serving `/metrics`,
//! `/healthz` and `/readyz` ([`admin`]), graceful shutdown ([`shutdown`]) and the hot paths'
//! CPU hints ([`hint`]).

pub mod admin;
pub mod auth;
pub mod config;
mod error;
pub mod http;
pub mod limits;
pub mod logging;
pub mod metrics;
pub mod probe;
pub mod service;
pub mod shutdown;

pub use admin::{AdminState, AdminTask, serve_admin, serve_admin_with};
pub use config::{ConfigSource, Validate, load, load_section};
pub use error::{ConfigError, RuntimeError};
pub use http::HttpConfig;
pub use logging::{LogConfig, LogFormat, init_logging};
pub use metrics::Metrics;
pub use service::{
    BoxError, EXIT_CONFIG, Listeners, ServiceResult, run_service, run_worker, service_main_with_bus,
};
pub use shutdown::Shutdown;
