//! Live views: the result topics read into memory — the stream processor's (`int.windows`,
//! `int.alerts`: the latest window of every table per partition, and the recent alerts and
//! their episodes, which the SSE stream also fans out as they arrive) and the knowledge
//! service's (`int.anomalies`,
//! `int.forecasts`: [`Findings`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use arrow_array::RecordBatch;
use kplane_model::results::Alert;
use tokio::sync::broadcast;

use crate::findings::Findings;
use crate::incidents::Incidents;
use kplane_model::incidents::{Episode, EpisodeBook, Phase};

/// Anomaly episodes kept in memory (the oldest are forgotten; the store keeps them all).
pub const ANOMALIES_KEPT: usize = 10_000;

/// The latest results, shared by the handlers and the topic reader.
#[derive(Clone, Debug)]
pub struct Live {
    inner: Arc<Mutex<Inner>>,
    alerts_tx: broadcast::Sender<Arc<Alert>>,
    /// Episode news (start, update, end) as alerts arrive.
    episodes_tx: broadcast::Sender<Arc<(Phase, Episode)>>,
    capacity: usize,
    /// Anomalies and forecasts of the knowledge service.
    pub findings: Findings,
    /// Episodes and anomalies correlated by root.
    pub incidents: Incidents,
    /// INT-label's ports from the processor's `int_label` windows.
    pub int_label: kplane_control_plane::LabelPorts,
    /// Signalled when a `flows` window arrives: verification need not wait for its interval.
    fresh_flows: Arc<tokio::sync::Notify>,
}

#[derive(Debug, Default)]
struct Inner {
    /// table → partition → (window end ns, rows).
    tables: BTreeMap<String, BTreeMap<u32, (i64, RecordBatch)>>,
    alerts: VecDeque<Arc<Alert>>,
    episodes: Option<EpisodeBook>,
    /// Window results and alerts read so far.
    windows_seen: u64,
    alerts_seen: u64,
}

impl Live {
    pub fn new(capacity: usize) -> Self {
        let (alerts_tx, _) = broadcast::channel(1_024);
        let (episodes_tx, _) = broadcast::channel(1_024);
        Self {
            inner: Arc::default(),
            alerts_tx,
            episodes_tx,
            capacity: capacity.max(1),
            findings: Findings::new(ANOMALIES_KEPT),
            incidents: Incidents::default(),
            int_label: Default::default(),
            fresh_flows: Arc::default(),
        }
    }

    /// Returns once a `flows` window has arrived (since the last call).
    pub async fn flows_arrived(&self) {
        self.fresh_flows.notified().await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A window result of `table` (its rows carry `partition` and `window_end`).
    pub fn window(&self, table: &str, batch: RecordBatch) {
        use arrow_array::cast::AsArray;
        use arrow_array::types::{TimestampNanosecondType, UInt32Type};
        let (Some(p), Some(end)) = (
            batch
                .column_by_name("partition")
                .and_then(|c| c.as_primitive_opt::<UInt32Type>())
                .and_then(|c| c.values().first().copied()),
            batch
                .column_by_name("window_end")
                .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>())
                .and_then(|c| c.values().iter().copied().max()),
        ) else {
            return;
        };
        if table == "int_label" {
            self.int_label.window(&batch);
        }
        let mut g = self.lock();
        g.windows_seen += 1;
        let slot = g.tables.entry(table.to_string()).or_default();
        if slot.get(&p).is_none_or(|(e, _)| *e <= end) {
            slot.insert(p, (end, batch));
        }
        if table == "flows" {
            self.fresh_flows.notify_one();
        }
    }

    pub fn alert(&self, a: Alert) {
        let a = Arc::new(a);
        let mut g = self.lock();
        g.alerts_seen += 1;
        if g.alerts.len() == self.capacity {
            g.alerts.pop_front();
        }
        g.alerts.push_back(a.clone());
        let capacity = self.capacity;
        let news = g
            .episodes
            .get_or_insert_with(|| EpisodeBook::new(capacity))
            .apply(&a);
        drop(g);
        // No subscriber is fine.
        let _ = self.alerts_tx.send(a);
        if let Some(news) = news {
            self.incidents.episode(&news.1);
            let _ = self.episodes_tx.send(Arc::new(news));
        }
    }

    /// The episodes of the alerts read so far (open ones, and the latest ended), newest
    /// first.
    pub fn episodes(&self) -> Vec<Episode> {
        self.lock()
            .episodes
            .as_ref()
            .map(EpisodeBook::episodes)
            .unwrap_or_default()
    }

    pub fn subscribe_episodes(&self) -> broadcast::Receiver<Arc<(Phase, Episode)>> {
        self.episodes_tx.subscribe()
    }

    /// The latest window rows of `table`, every partition.
    pub fn latest(&self, table: &str) -> Vec<RecordBatch> {
        self.lock()
            .tables
            .get(table)
            .map(|t| t.values().map(|(_, b)| b.clone()).collect())
            .unwrap_or_default()
    }

    /// The most recent alerts, newest last.
    pub fn alerts(&self) -> Vec<Arc<Alert>> {
        self.lock().alerts.iter().cloned().collect()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Alert>> {
        self.alerts_tx.subscribe()
    }

    /// (window results, alerts) read so far.
    pub fn seen(&self) -> (u64, u64) {
        let g = self.lock();
        (g.windows_seen, g.alerts_seen)
    }
}

/// Applies one result-topic message to `live`.
pub fn apply(live: &Live, topic: &str, schema: Option<&str>, payload: &[u8]) {
    if topic == kplane_bus::topics::ANOMALIES || topic == kplane_bus::topics::FORECASTS {
        crate::findings::apply(&live.findings, topic, payload, |a| {
            live.incidents.anomaly(a);
        });
        return;
    }
    if topic == kplane_bus::topics::ALERTS {
        for line in payload.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            match serde_json::from_slice::<Alert>(line) {
                Ok(a) => live.alert(a),
                Err(e) => tracing::warn!(error = %e, "undecodable alert skipped"),
            }
        }
        return;
    }
    let Some(table) = schema.and_then(|s| s.strip_suffix("/v1")) else {
        return;
    };
    // A lane's progress message (`lane-progress/v1`) carries no rows.
    if payload.is_empty() {
        return;
    }
    match arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(payload), None)
        .and_then(|r| r.collect::<Result<Vec<_>, _>>())
    {
        Ok(batches) => {
            for b in batches {
                live.window(table, b);
            }
        }
        Err(e) => tracing::warn!(error = %e, table, "undecodable window result skipped"),
    }
}
/// The control plane verifies intents against these views and follows their anomalies.
impl kplane_control_plane::Telemetry for Live {
    fn latest_flows(&self) -> Vec<RecordBatch> {
        self.latest("flows")
    }

    fn flows_arrived(&self) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(Live::flows_arrived(self))
    }

    fn anomalies(&self) -> broadcast::Receiver<Arc<kplane_model::results::Anomaly>> {
        self.findings.subscribe()
    }

    fn link_forecasts(&self) -> Vec<kplane_model::results::Forecast> {
        self.findings
            .forecasts(Some("link_utilization"), None, 1)
            .into_iter()
            .flat_map(|(_, _, f)| f)
            .collect()
    }
}
