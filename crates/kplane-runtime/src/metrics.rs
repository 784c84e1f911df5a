//! The Prometheus registry every service registers its metrics in, and its text encoding.
//! Names follow `kplane_<service>_<noun>_<unit>_total`; the `kplane_` prefix is added here.

use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// A shared registry. Services register at start-up; `/metrics` encodes it.
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Arc<Mutex<Registry>>,
}

impl Metrics {
    /// A registry with `kplane_build_info{version,service}`.
    pub fn new(service: &str) -> Self {
        let mut registry = Registry::with_prefix("kplane");
        let info = Family::<Vec<(String, String)>, Gauge>::default();
        info.get_or_create(&vec![
            ("version".into(), env!("CARGO_PKG_VERSION").into()),
            ("service".into(), service.into()),
        ])
        .set(1);
        registry.register("build_info", "kplane build information", info);
        Self {
            registry: Arc::new(Mutex::new(registry)),
        }
    }

    /// Registers metrics under a sub-registry (e.g. `collector` → `kplane_collector_…`).
    pub fn register(&self, f: impl FnOnce(&mut Registry)) {
        let mut r = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut r);
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let r = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &r);
        out
    }
}
