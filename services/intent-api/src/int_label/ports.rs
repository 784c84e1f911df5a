//! Per (switch, egress port): what the processor's `int_label` windows say — updates, the
//! newest label and arrival, gaps — and Pro's frequency state, shared by the topic reader
//! (which fills it), Pro's controller (which decides on it) and `GET /v1/int-label/ports`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampNanosecondType, UInt32Type, UInt64Type};
use arrow_array::{Array, RecordBatch};
use serde::Serialize;
use tokio::sync::Notify;

/// One port as the API shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PortView {
    pub switch: u32,
    pub port: u32,
    /// Database updates over the windows seen.
    pub updates: u64,
    /// The newest label time (ns, the switch's clock).
    pub last_label_ns: u64,
    /// When the newest update reached the collector (ns since the Unix epoch).
    pub last_received_ns: i64,
    /// The longest gap between consecutive label times in the latest window (ns).
    pub max_gap_ns: Option<u64>,
    /// Pro's S: the port labels every T / 2^S.
    pub shift: u8,
    /// Observations of Pro's controller that found the port stale.
    pub stale: u64,
    /// The `label-frequency` intent carrying its S (none while S = 0).
    pub intent: Option<String>,
    /// The longest gap since the controller's last observation.
    #[serde(skip)]
    pub pending_gap_ns: u64,
}

#[derive(Debug, Default)]
struct Inner {
    ports: BTreeMap<(u32, u32), PortView>,
    /// The newest `int_label` window end seen (ns).
    through_ns: i64,
}

/// The shared per-port state; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct LabelPorts {
    inner: Arc<Mutex<Inner>>,
    arrived: Arc<Notify>,
}

impl LabelPorts {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One `int_label` window result (one partition's).
    pub fn window(&self, b: &RecordBatch) {
        let u32s = |name: &str| {
            b.column_by_name(name)
                .and_then(|c| c.as_primitive_opt::<UInt32Type>())
        };
        let u64s = |name: &str| {
            b.column_by_name(name)
                .and_then(|c| c.as_primitive_opt::<UInt64Type>())
        };
        let times = |name: &str| {
            b.column_by_name(name)
                .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>())
        };
        let (
            Some(node),
            Some(port),
            Some(updates),
            Some(label),
            Some(gap),
            Some(received),
            Some(end),
        ) = (
            u32s("node_id"),
            u32s("egress_port"),
            b.column_by_name("updates")
                .and_then(|c| c.as_primitive_opt::<Int64Type>()),
            u64s("last_label_ns"),
            u64s("max_gap_ns"),
            times("last_received"),
            times("window_end"),
        )
        else {
            tracing::warn!(schema = ?b.schema(), "int_label window of an unknown shape skipped");
            return;
        };
        let mut g = self.lock();
        for i in 0..b.num_rows() {
            let key = (node.value(i), port.value(i));
            let p = g.ports.entry(key).or_insert_with(|| PortView {
                switch: key.0,
                port: key.1,
                ..PortView::default()
            });
            p.updates += updates.value(i).max(0) as u64;
            p.last_label_ns = p.last_label_ns.max(label.value(i));
            p.last_received_ns = p.last_received_ns.max(received.value(i));
            p.max_gap_ns = gap.is_valid(i).then(|| gap.value(i));
            p.pending_gap_ns = p.pending_gap_ns.max(p.max_gap_ns.unwrap_or(0));
            g.through_ns = g.through_ns.max(end.value(i));
        }
        drop(g);
        self.arrived.notify_one();
    }

    /// Returns once a window has arrived (since the last call).
    pub async fn arrived(&self) {
        self.arrived.notified().await;
    }

    /// The newest window end and every port, sorted.
    pub fn snapshot(&self) -> (i64, Vec<PortView>) {
        let g = self.lock();
        (g.through_ns, g.ports.values().cloned().collect())
    }

    /// For Pro's controller: the newest window end and, per port, (key, newest arrival,
    /// longest gap since the last call), the gaps then forgotten.
    pub fn observations(&self) -> (i64, Vec<((u32, u32), i64, u64)>) {
        let mut g = self.lock();
        let through = g.through_ns;
        let obs = g
            .ports
            .iter_mut()
            .map(|(k, p)| {
                (
                    *k,
                    p.last_received_ns,
                    std::mem::take(&mut p.pending_gap_ns),
                )
            })
            .collect();
        (through, obs)
    }

    /// Pro's decision about a port, for the view.
    pub fn set_frequency(&self, key: (u32, u32), shift: u8, stale: u64, intent: Option<String>) {
        if let Some(p) = self.lock().ports.get_mut(&key) {
            p.shift = shift;
            p.stale = stale;
            p.intent = intent;
        }
    }
}
