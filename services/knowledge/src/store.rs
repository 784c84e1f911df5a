//! The service's results in the Parquet store, beside the stream processor's tables
//! (`kplane_model::knowledge_tables`): `anomalies` (every phase of every episode) and
//! `forecasts`. Rows are buffered and written every `store-every` and at shutdown, one file
//! per table and hour (`knowledge-<first time>-<sequence>.parquet`), staged, fsynced and
//! published whole by the store's one writer (`kplane_store::Store`, local or on an object
//! store): a query never reads half a file, and a written file survives a power cut.

use std::time::{Duration, Instant};

use kplane_model::knowledge_tables::{self as tables, ANOMALIES, FORECASTS};
use kplane_model::results::{Anomaly, Forecast};
use kplane_store::Store;
use kplane_store::layout::partition_key;

/// Buffered rows past this many are written at once.
const MAX_BUFFERED: usize = 100_000;

#[derive(Debug)]
pub struct ResultStore {
    store: Store,
    every: Duration,
    anomalies: Vec<Anomaly>,
    forecasts: Vec<Forecast>,
    since: Instant,
    /// Distinguishes files written in the same nanosecond-named hour by one process.
    sequence: u64,
}

impl ResultStore {
    pub fn new(store: Store, every: Duration) -> Self {
        Self {
            store,
            every,
            anomalies: Vec::new(),
            forecasts: Vec::new(),
            since: Instant::now(),
            sequence: 0,
        }
    }

    pub fn add(&mut self, anomalies: &[Anomaly], forecasts: &[Forecast]) {
        if self.anomalies.is_empty() && self.forecasts.is_empty() {
            self.since = Instant::now();
        }
        self.anomalies.extend_from_slice(anomalies);
        self.forecasts.extend_from_slice(forecasts);
    }

    /// Whether the buffered rows should be written now.
    pub fn due(&self) -> bool {
        let n = self.anomalies.len() + self.forecasts.len();
        n > 0 && (self.since.elapsed() >= self.every || n >= MAX_BUFFERED)
    }

    /// Writes the buffered rows; returns how many. On an error the rows stay buffered (and
    /// are tried again), up to [`MAX_BUFFERED`] of each table.
    pub fn flush(&mut self) -> std::io::Result<usize> {
        let (root, seq) = (&self.store, &mut self.sequence);
        let a = write_table(
            root,
            seq,
            ANOMALIES,
            &mut self.anomalies,
            |a| a.last_ns,
            tables::anomalies_batch,
        )?;
        let f = write_table(
            root,
            seq,
            FORECASTS,
            &mut self.forecasts,
            |f| f.window_end_ns,
            tables::forecasts_batch,
        )?;
        Ok(a + f)
    }
}

/// Writes `rows` (in time order) to `table`, one file per hour, and empties it; on an error
/// keeps the last [`MAX_BUFFERED`] of them.
fn write_table<T>(
    store: &Store,
    sequence: &mut u64,
    table: &str,
    rows: &mut Vec<T>,
    time: impl Fn(&T) -> i64,
    batch: impl Fn(&[T]) -> Result<arrow_array::RecordBatch, arrow_schema::ArrowError>,
) -> std::io::Result<usize> {
    const HOUR_NS: i64 = 3_600_000_000_000;
    let hour = |r: &T| time(r).div_euclid(HOUR_NS);
    let mut start = 0;
    while start < rows.len() {
        let first = &rows[start];
        let end = start
            + rows[start..]
                .iter()
                .position(|r| hour(r) != hour(first))
                .unwrap_or(rows.len() - start);
        let written = batch(&rows[start..end])
            .map_err(std::io::Error::other)
            .and_then(|b| {
                *sequence += 1;
                let name = format!(
                    "knowledge-{}-{}-{}.parquet",
                    time(first),
                    std::process::id(),
                    sequence
                );
                store
                    .write_parquet(
                        &format!("{}/{name}", partition_key(table, time(first))),
                        &[b],
                    )
                    .map_err(std::io::Error::other)
            });
        if let Err(e) = written {
            // What was written stays written; the rest is tried again.
            rows.drain(..start);
            let skip = rows.len().saturating_sub(MAX_BUFFERED);
            rows.drain(..skip);
            return Err(e);
        }
        start = end;
    }
    let n = rows.len();
    rows.clear();
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kplane_model::results::{AnomalyPhase, AnomalyType, EntityKind, Explanation};

    fn anomaly(id: &str, last_ns: i64) -> Anomaly {
        Anomaly {
            id: id.into(),
            entity_kind: EntityKind::Link,
            entity: "1:2".into(),
            anomaly_type: AnomalyType::LinkFailure,
            confidence: 1.0,
            score: 9.0,
            threshold: 4.0,
            start_ns: last_ns,
            end_ns: None,
            last_ns,
            windows: 1,
            detected_ns: 0,
            phase: AnomalyPhase::Start,
            model_version: 1,
            explanation: Explanation::default(),
            recommendations: Vec::new(),
            settled: false,
        }
    }

    #[test]
    fn results_are_written_per_hour_and_read_back() {
        let root = std::env::temp_dir().join(format!("kplane-kstore-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let mut s = ResultStore::new(Store::local(&root), Duration::from_secs(3600));
        let hour = 3_600_000_000_000;
        s.add(&[anomaly("a", hour - 1), anomaly("b", hour + 1)], &[]);
        assert!(!s.due(), "not yet");
        assert_eq!(s.flush().unwrap(), 2);
        assert!(!s.due(), "nothing buffered");
        // One file per hour, each holding its hour's record.
        let mut ids = Vec::new();
        for hour in ["00", "01"] {
            let dir = root.join(format!("tables/anomalies/date=1970-01-01/hour={hour}"));
            for f in std::fs::read_dir(&dir).unwrap() {
                let file = std::fs::File::open(f.unwrap().path()).unwrap();
                let reader =
                    parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
                        .unwrap()
                        .build()
                        .unwrap();
                for b in reader {
                    let (rows, bad) = tables::anomalies_from_batch(&b.unwrap());
                    assert_eq!(bad, 0);
                    ids.extend(rows.into_iter().map(|a| a.id));
                }
            }
        }
        assert_eq!(ids, ["a", "b"]);
        let _ = std::fs::remove_dir_all(&root);
    }
}
