//! # kplane-runtime
//!
//! What every kplane service shares: layered configuration ([`config`]), logging
//! ([`logging`]), the Prometheus registry ([`metrics`]), the admin router serving
//! `/metrics`, `/healthz` and `/readyz` ([`admin`]), graceful shutdown ([`shutdown`]) and the
//! hot paths' CPU hints ([`hint`]).

pub mod admin;
pub mod config;
mod error;
pub mod hint;
pub mod id_table;
pub mod logging;
pub mod metrics;
pub mod packet_socket;
pub mod probe;
pub mod service;
pub mod shutdown;

pub use admin::{AdminState, AdminTask, serve_admin, serve_admin_with};
pub use config::{ConfigSource, Validate, load, load_section};
pub use error::{ConfigError, RuntimeError};
pub use logging::{LogConfig, LogFormat, init_logging};
pub use metrics::Metrics;
pub use service::{
    AdminOnlyConfig, AdminPort, BoxError, EXIT_CONFIG, ServiceResult, run_admin_only, run_service,
    serve_until_shutdown, service_main, service_main_with_bus,
};
pub use shutdown::Shutdown;
