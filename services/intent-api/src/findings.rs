//! The knowledge service's findings, as the API serves them: anomaly episodes (the latest
//! record of each, from `int.anomalies`, with the store's `anomalies` table read at
//! start for history) and forecasts (a bounded history per series and entity, from
//! `int.forecasts`). New and updated anomalies are fanned out to the SSE stream and to the
//! recommendation follower ([`crate::intents::recommendations`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use kplane_model::knowledge_tables::{ANOMALIES, anomalies_from_batch};
use kplane_model::results::{Anomaly, Forecast};
use tokio::sync::broadcast;

/// Forecasts kept per (series, entity): what the console plots against what happened.
pub const FORECAST_HISTORY: usize = 600;

#[derive(Clone, Debug)]
pub struct Findings {
    inner: Arc<Mutex<Inner>>,
    tx: broadcast::Sender<Arc<Anomaly>>,
    capacity: usize,
}

#[derive(Debug, Default)]
struct Inner {
    /// id → the latest record of the episode.
    anomalies: BTreeMap<String, Arc<Anomaly>>,
    /// Episode ids, oldest first (eviction order).
    order: VecDeque<String>,
    /// (series, entity) → forecasts, oldest first.
    forecasts: BTreeMap<(String, String), VecDeque<Forecast>>,
    anomalies_seen: u64,
    forecasts_seen: u64,
    undecodable: u64,
}

/// `GET /v1/anomalies` filters.
#[derive(Debug, Default)]
pub struct AnomalyFilter<'a> {
    pub anomaly_type: Option<&'a str>,
    pub entity_kind: Option<&'a str>,
    pub entity: Option<&'a str>,
    /// Only open (`Some(true)`) or closed (`Some(false)`) episodes.
    pub open: Option<bool>,
    /// Episodes still open at or ending after this time (ns).
    pub since_ns: Option<i64>,
}

impl AnomalyFilter<'_> {
    pub fn matches(&self, a: &Anomaly) -> bool {
        self.anomaly_type
            .is_none_or(|t| a.anomaly_type.as_str() == t)
            && self.entity_kind.is_none_or(|k| a.entity_kind.as_str() == k)
            && self.entity.is_none_or(|e| a.entity == e)
            && self.open.is_none_or(|o| a.end_ns.is_none() == o)
            && self
                .since_ns
                .is_none_or(|s| a.end_ns.is_none_or(|end| end >= s))
    }
}

impl Findings {
    /// Keeps the latest `capacity` episodes.
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(1_024);
        Self {
            inner: Arc::default(),
            tx,
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records one phase of an episode; `announce`: also to the SSE stream and the
    /// recommendation follower (not for history read at start).
    pub fn anomaly(&self, a: Anomaly, announce: bool) {
        let a = Arc::new(a);
        let mut g = self.lock();
        g.anomalies_seen += 1;
        if g.anomalies.insert(a.id.clone(), a.clone()).is_none() {
            g.order.push_back(a.id.clone());
            while g.order.len() > self.capacity {
                if let Some(old) = g.order.pop_front() {
                    g.anomalies.remove(&old);
                }
            }
        }
        drop(g);
        if announce {
            let _ = self.tx.send(a);
        }
    }

    pub fn forecast(&self, f: Forecast) {
        let mut g = self.lock();
        g.forecasts_seen += 1;
        let h = g
            .forecasts
            .entry((f.series.clone(), f.entity.clone()))
            .or_default();
        if h.back()
            .is_some_and(|last| last.window_end_ns >= f.window_end_ns)
        {
            // A replay or a restart of the knowledge service: keep the series in time order.
            h.retain(|x| x.window_end_ns < f.window_end_ns);
        }
        h.push_back(f);
        if h.len() > FORECAST_HISTORY {
            h.pop_front();
        }
    }

    pub fn undecodable(&self) {
        self.lock().undecodable += 1;
    }

    /// Matching episodes, most recently started first.
    pub fn anomalies(&self, filter: &AnomalyFilter<'_>, limit: usize) -> Vec<Arc<Anomaly>> {
        let g = self.lock();
        let mut v: Vec<Arc<Anomaly>> = g
            .anomalies
            .values()
            .filter(|a| filter.matches(a))
            .cloned()
            .collect();
        v.sort_by(|a, b| b.start_ns.cmp(&a.start_ns).then_with(|| a.id.cmp(&b.id)));
        v.truncate(limit);
        v
    }

    pub fn get(&self, id: &str) -> Option<Arc<Anomaly>> {
        self.lock().anomalies.get(id).cloned()
    }

    /// Per (series, entity) matching the filters: the forecasts of the last `windows` windows.
    pub fn forecasts(
        &self,
        series: Option<&str>,
        entity: Option<&str>,
        windows: usize,
    ) -> Vec<(String, String, Vec<Forecast>)> {
        self.lock()
            .forecasts
            .iter()
            .filter(|((s, e), _)| series.is_none_or(|x| x == s) && entity.is_none_or(|x| x == e))
            .map(|((s, e), h)| {
                let skip = h.len().saturating_sub(windows);
                (s.clone(), e.clone(), h.iter().skip(skip).cloned().collect())
            })
            .collect()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Anomaly>> {
        self.tx.subscribe()
    }

    /// (anomaly records, forecasts, undecodable records) read so far.
    pub fn seen(&self) -> (u64, u64, u64) {
        let g = self.lock();
        (g.anomalies_seen, g.forecasts_seen, g.undecodable)
    }

    /// Reads the latest [`HISTORY_RECORDS`] anomaly records of the store's `anomalies` table
    /// (written by the knowledge service), oldest first. Returns the records read and the rows
    /// skipped as undecodable.
    pub async fn load_history(
        &self,
        store: &datafusion::prelude::SessionContext,
    ) -> Result<(usize, usize), datafusion::error::DataFusionError> {
        let batches = store
            .sql(&format!(
                "SELECT record FROM {ANOMALIES} ORDER BY \"last\" DESC, \
                 CASE phase WHEN 'end' THEN 2 WHEN 'update' THEN 1 ELSE 0 END DESC \
                 LIMIT {HISTORY_RECORDS}"
            ))
            .await?
            .collect()
            .await?;
        let (mut read, mut bad) = (Vec::new(), 0);
        for b in &batches {
            let (rows, undecodable) = anomalies_from_batch(b);
            read.extend(rows);
            bad += undecodable;
        }
        for _ in 0..bad {
            self.undecodable();
        }
        let n = read.len();
        for a in read.into_iter().rev() {
            self.anomaly(a, false);
        }
        Ok((n, bad))
    }
}

/// Anomaly records read from the store at start.
pub const HISTORY_RECORDS: usize = 100_000;

/// Applies one `int.anomalies` or `int.forecasts` message (JSON lines); `also` sees each
/// anomaly record first.
pub fn apply(findings: &Findings, topic: &str, payload: &[u8], mut also: impl FnMut(&Anomaly)) {
    let anomalies = topic == kplane_bus::topics::ANOMALIES;
    for line in payload.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let ok = if anomalies {
            serde_json::from_slice::<Anomaly>(line).map(|a| {
                also(&a);
                findings.anomaly(a, true);
            })
        } else {
            serde_json::from_slice::<Forecast>(line).map(|f| findings.forecast(f))
        };
        if let Err(e) = ok {
            findings.undecodable();
            tracing::warn!(error = %e, topic, "undecodable knowledge record skipped");
        }
    }
}

#[cfg(test)]
mod tests {
    use kplane_model::results::{AnomalyPhase, AnomalyType, EntityKind, Explanation, Forecast};

    use super::*;

    pub(crate) fn anomaly(id: &str, start: i64, end: Option<i64>) -> Anomaly {
        Anomaly {
            id: id.into(),
            entity_kind: EntityKind::Destination,
            entity: "10.0.0.2".into(),
            anomaly_type: AnomalyType::Ddos,
            confidence: 0.9,
            score: 12.0,
            threshold: 4.0,
            start_ns: start,
            end_ns: end,
            last_ns: end.unwrap_or(start),
            windows: 1,
            detected_ns: start,
            phase: if end.is_some() {
                AnomalyPhase::End
            } else {
                AnomalyPhase::Start
            },
            model_version: 1,
            explanation: Explanation::default(),
            recommendations: Vec::new(),
            settled: false,
        }
    }

    #[test]
    fn an_episode_is_one_row_updated_in_place_and_the_oldest_are_evicted() {
        let f = Findings::new(2);
        f.anomaly(anomaly("a", 1, None), true);
        f.anomaly(anomaly("a", 1, Some(5)), true);
        f.anomaly(anomaly("b", 2, None), true);
        let all = f.anomalies(&AnomalyFilter::default(), 10);
        assert_eq!(
            all.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
            ["b", "a"]
        );
        assert_eq!(f.get("a").unwrap().end_ns, Some(5));
        let open = AnomalyFilter {
            open: Some(true),
            ..Default::default()
        };
        assert_eq!(f.anomalies(&open, 10).len(), 1);
        f.anomaly(anomaly("c", 3, None), true);
        assert!(f.get("a").is_none(), "capacity 2 evicts the oldest episode");
        assert_eq!(f.seen().0, 4);
    }

    #[test]
    fn forecasts_stay_in_time_order_and_bounded() {
        let f = Findings::new(10);
        let fc = |t: i64| Forecast {
            series: "link_utilization".into(),
            entity: "5:2".into(),
            window_end_ns: t,
            horizon_windows: 1,
            predicted: t as f64,
            last_value: 0.0,
            observed_end_ns: t - 1,
            ewma: 0.0,
            model_version: 1,
        };
        for t in 0..(FORECAST_HISTORY as i64 + 10) {
            f.forecast(fc(t));
        }
        // A restarted knowledge service publishes an earlier window again.
        f.forecast(fc(100));
        let v = f.forecasts(Some("link_utilization"), None, 5);
        assert_eq!(v.len(), 1);
        let ends: Vec<i64> = v[0].2.iter().map(|x| x.window_end_ns).collect();
        assert_eq!(ends.last(), Some(&100));
        assert!(ends.windows(2).all(|w| w[0] < w[1]));
    }

    #[tokio::test]
    async fn history_is_read_from_the_store_and_bad_rows_are_counted() {
        use arrow_array::{ArrayRef, RecordBatch, StringArray};
        use kplane_model::knowledge_tables::anomalies_batch;
        let dir = std::env::temp_dir().join(format!("kplane-findings-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let part = dir.join("tables/anomalies/date=1970-01-01/hour=00");
        std::fs::create_dir_all(&part).unwrap();
        let mut end = anomaly("a", 1, Some(9));
        end.phase = kplane_model::results::AnomalyPhase::End;
        // The end record's row comes first in the file: the order is the records' times'.
        let b = anomalies_batch(&[end, anomaly("a", 1, None), anomaly("z", 1, None)]).unwrap();
        // The third row's record is corrupt.
        let i = b.schema().index_of("record").unwrap();
        let mut cols = b.columns().to_vec();
        let mut records: Vec<String> = (0..2)
            .map(|r| {
                cols[i]
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .unwrap()
                    .value(r)
                    .to_string()
            })
            .collect();
        records.push("{not json".into());
        cols[i] = std::sync::Arc::new(StringArray::from(records)) as ArrayRef;
        let b = RecordBatch::try_new(b.schema(), cols).unwrap();
        let file = std::fs::File::create(part.join("k.parquet")).unwrap();
        let mut w =
            datafusion::parquet::arrow::ArrowWriter::try_new(file, b.schema(), None).unwrap();
        w.write(&b).unwrap();
        w.close().unwrap();
        let ctx = datafusion::prelude::SessionContext::new();
        kplane_store::query::register_store(&ctx, &kplane_store::Store::local(&dir))
            .await
            .unwrap();
        let f = Findings::new(10);
        let mut rx = f.subscribe();
        assert_eq!(f.load_history(&ctx).await.unwrap(), (2, 1));
        assert_eq!(f.get("a").unwrap().end_ns, Some(9));
        assert!(f.get("z").is_none());
        assert!(rx.try_recv().is_err(), "history is not announced");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn undecodable_topic_records_are_counted_and_skipped() {
        let f = Findings::new(10);
        let mut payload = serde_json::to_vec(&anomaly("x", 1, None)).unwrap();
        payload.extend_from_slice(b"\n{\"id\": 3}\n");
        let mut seen = Vec::new();
        apply(&f, kplane_bus::topics::ANOMALIES, &payload, |a| {
            seen.push(a.id.clone())
        });
        assert_eq!(seen, ["x"], "the decodable record is also handed on");
        assert!(f.get("x").is_some());
        assert_eq!(f.seen(), (1, 0, 1));
    }
}
