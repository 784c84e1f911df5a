//! The service's results in the Parquet store, beside the stream processor's tables
//! (`kplane_model::knowledge_tables`): `anomalies` (every phase of every episode) and
//! `forecasts`. Rows are buffered and written every `store-every` and at shutdown, one file
//! per table and hour (`knowledge-<first time>-<sequence>.parquet`), staged in
//! `<store-dir>/_staging/` and renamed into place so that a query never reads half a file.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kplane_model::knowledge_tables::{self as tables, ANOMALIES, FORECASTS};
use kplane_model::results::{Anomaly, Forecast};
use kplane_model::store_layout::partition_dir;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

/// Buffered rows past this many are written at once.
const MAX_BUFFERED: usize = 100_000;

#[derive(Debug)]
pub struct ResultStore {
    root: PathBuf,
    every: Duration,
    anomalies: Vec<Anomaly>,
    forecasts: Vec<Forecast>,
    since: Instant,
    /// Distinguishes files written in the same nanosecond-named hour by one process.
    sequence: u64,
}

impl ResultStore {
    pub fn new(root: &Path, every: Duration) -> Self {
        Self {
            root: root.to_path_buf(),
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
        let mut written = 0;
        let anomalies = std::mem::take(&mut self.anomalies);
        match self.write_by_hour(
            ANOMALIES,
            &anomalies,
            |a| a.last_ns,
            tables::anomalies_batch,
        ) {
            Ok(()) => written += anomalies.len(),
            Err(e) => {
                self.anomalies = keep_last(anomalies);
                return Err(e);
            }
        }
        let forecasts = std::mem::take(&mut self.forecasts);
        match self.write_by_hour(
            FORECASTS,
            &forecasts,
            |f| f.window_end_ns,
            tables::forecasts_batch,
        ) {
            Ok(()) => written += forecasts.len(),
            Err(e) => {
                self.forecasts = keep_last(forecasts);
                return Err(e);
            }
        }
        Ok(written)
    }

    fn write_by_hour<T>(
        &mut self,
        table: &str,
        rows: &[T],
        time: impl Fn(&T) -> i64,
        batch: impl Fn(&[T]) -> Result<arrow_array::RecordBatch, arrow_schema::ArrowError>,
    ) -> std::io::Result<()> {
        // Rows arrive in time order: consecutive runs of one hour go to one file.
        let mut start = 0;
        while start < rows.len() {
            let dir = partition_dir(&self.root, table, time(&rows[start]));
            let end = start
                + rows[start..]
                    .iter()
                    .position(|r| partition_dir(&self.root, table, time(r)) != dir)
                    .unwrap_or(rows.len() - start);
            let b = batch(&rows[start..end]).map_err(std::io::Error::other)?;
            self.sequence += 1;
            let name = format!(
                "knowledge-{}-{}-{}.parquet",
                time(&rows[start]),
                std::process::id(),
                self.sequence
            );
            write_file(&self.root, &dir, &name, &b)?;
            start = end;
        }
        Ok(())
    }
}

fn keep_last<T>(mut rows: Vec<T>) -> Vec<T> {
    let skip = rows.len().saturating_sub(MAX_BUFFERED);
    rows.drain(..skip);
    rows
}

fn write_file(
    root: &Path,
    dir: &Path,
    name: &str,
    b: &arrow_array::RecordBatch,
) -> std::io::Result<()> {
    let staging = root.join("_staging");
    std::fs::create_dir_all(&staging)?;
    std::fs::create_dir_all(dir)?;
    let tmp = staging.join(name);
    let file = std::fs::File::create(&tmp)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    let mut w =
        ArrowWriter::try_new(file, b.schema(), Some(props)).map_err(std::io::Error::other)?;
    w.write(b).map_err(std::io::Error::other)?;
    w.into_inner().map_err(std::io::Error::other)?.sync_all()?;
    std::fs::rename(tmp, dir.join(name))
}

/// The anomaly records in the store, oldest file first, and the rows or files that did not
/// read (counted, skipped).
pub fn read_anomalies(root: &Path) -> (Vec<Anomaly>, usize) {
    let mut files = Vec::new();
    crate::history::parquet_files(
        &kplane_model::store_layout::tables_dir(root).join(ANOMALIES),
        &mut files,
    );
    files.sort();
    let mut out = Vec::new();
    let mut bad = 0;
    for f in files {
        let reader = std::fs::File::open(&f)
            .map_err(|e| e.to_string())
            .and_then(|file| {
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
                    .and_then(|b| b.build())
                    .map_err(|e| e.to_string())
            });
        let Ok(reader) = reader else {
            bad += 1;
            continue;
        };
        for batch in reader {
            let Ok(batch) = batch else {
                bad += 1;
                break;
            };
            let (rows, undecodable) = tables::anomalies_from_batch(&batch);
            out.extend(rows);
            bad += undecodable;
        }
    }
    // Files are named by their first row's time, which does not sort as text across lengths.
    out.sort_by_key(|a| (a.last_ns, a.phase as u8));
    (out, bad)
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
        }
    }

    #[test]
    fn results_are_written_per_hour_and_read_back() {
        let root = std::env::temp_dir().join(format!("kplane-kstore-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let mut s = ResultStore::new(&root, Duration::from_secs(3600));
        let hour = 3_600_000_000_000;
        s.add(&[anomaly("a", hour - 1), anomaly("b", hour + 1)], &[]);
        assert!(!s.due(), "not yet");
        assert_eq!(s.flush().unwrap(), 2);
        assert!(!s.due(), "nothing buffered");
        let (read, bad) = read_anomalies(&root);
        assert_eq!(bad, 0);
        let ids: Vec<&str> = read.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert!(
            root.join("tables/anomalies/date=1970-01-01/hour=00")
                .is_dir()
        );
        assert!(
            root.join("tables/anomalies/date=1970-01-01/hour=01")
                .is_dir()
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
