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
    /// The bus partition its windows come from (its switch's).
    pub partition: u32,
    /// The longest gap since the controller's last observation.
    #[serde(skip)]
    pub pending_gap_ns: u64,
    /// The window end the controller last observed it at.
    #[serde(skip)]
    pub observed_ns: i64,
}

/// One observation for Pro's controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observation {
    pub key: (u32, u32),
    /// The window end it is observed at: its partition's newest.
    pub at_ns: i64,
    /// When its newest update arrived.
    pub last_received_ns: i64,
    /// The longest gap between its labels since the last observation.
    pub gap_ns: u64,
}

#[derive(Debug, Default)]
struct Inner {
    ports: BTreeMap<(u32, u32), PortView>,
    /// The newest `int_label` window end seen, per partition (ns).
    through: BTreeMap<u32, i64>,
}

impl Inner {
    fn newest(&self) -> i64 {
        self.through.values().copied().max().unwrap_or(0)
    }
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
            Some(partition),
        ) = (
            u32s("node_id"),
            u32s("egress_port"),
            b.column_by_name("updates")
                .and_then(|c| c.as_primitive_opt::<Int64Type>()),
            u64s("last_label_ns"),
            u64s("max_gap_ns"),
            times("last_received"),
            times("window_end"),
            u32s("partition"),
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
            p.partition = partition.value(i);
            let t = g.through.entry(partition.value(i)).or_default();
            *t = (*t).max(end.value(i));
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
        (g.newest(), g.ports.values().cloned().collect())
    }

    /// For Pro's controller: every port whose partition has a newer window than when it was
    /// last observed, so each port is observed once per window of its own lane however far
    /// the lanes are apart. (A lane whose every port fell silent publishes no rows, and its
    /// ports wait: their switches are then down, which is not Pro's to mend.)
    pub fn observations(&self) -> Vec<Observation> {
        let mut g = self.lock();
        let Inner { ports, through } = &mut *g;
        ports
            .iter_mut()
            .filter_map(|(k, p)| {
                let at = through.get(&p.partition).copied().unwrap_or(0);
                (at > p.observed_ns).then(|| {
                    p.observed_ns = at;
                    Observation {
                        key: *k,
                        at_ns: at,
                        last_received_ns: p.last_received_ns,
                        gap_ns: std::mem::take(&mut p.pending_gap_ns),
                    }
                })
            })
            .collect()
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
