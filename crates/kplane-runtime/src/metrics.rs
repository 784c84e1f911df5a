//! The Prometheus registry every service registers its metrics in, and its text encoding.
//! Names follow `kplane_<service>_<noun>_<unit>_total`; the `kplane_` prefix is added here.

use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use kplane_model::id_table::Evictions;

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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateTable {
    pub table: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateEviction {
    pub table: &'static str,
    pub reason: &'static str,
}

/// `<service>_state_entries{table}` and `<service>_state_evictions_total{table,reason}`: the
/// bounded state tables ([`crate::id_table`]) of a service.
#[derive(Clone, Debug, Default)]
pub struct StateMetrics {
    entries: Family<StateTable, Gauge>,
    evictions: Family<StateEviction, Counter>,
}

impl StateMetrics {
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "state_entries",
            "Entries of each bounded state table",
            self.entries.clone(),
        );
        r.register(
            "state_evictions",
            "Entries evicted from each bounded state table, by reason (idle, capacity)",
            self.evictions.clone(),
        );
    }

    pub fn entries(&self, table: &'static str, n: usize) {
        self.entries
            .get_or_create(&StateTable { table })
            .set(n as i64);
    }

    /// Counts the evictions between two readings of a table's cumulative [`Evictions`].
    pub fn evicted(&self, table: &'static str, before: Evictions, now: Evictions) {
        for ((reason, n), (_, was)) in now.by_reason().into_iter().zip(before.by_reason()) {
            self.evictions
                .get_or_create(&StateEviction { table, reason })
                .inc_by(n.saturating_sub(was));
        }
    }
}
