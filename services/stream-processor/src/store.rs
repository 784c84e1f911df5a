//! The analytics store ([`Store`]: a local directory or a bucket of an S3-compatible object
//! store): Parquet files under `tables/<table>/date=YYYY-MM-DD/hour=HH/`, and per bus
//! partition ("lane") a checkpoint log `checkpoints/<lane>.jsonl`.
//!
//! * Files are staged and fsynced, then published whole (renamed into place, or uploaded
//!   with one PUT): a reader never sees a half-written file. On an object store, which has
//!   no appends, the checkpoint "log" is one object holding the last commit's line.
//! * Window files are named `<lane>-w<end of their first window>.parquet`; a commit writes its
//!   files, then appends the checkpoint line (fsynced). A lane re-opened after a crash deletes
//!   its window files past the checkpoint (`w<end>` with `end > emitted_until`): they are
//!   recomputed from the same messages, so the store is exactly the checkpoint's image.
//! * Compaction ([`Compaction`]) is tiered per lane and directory: `fan-in` files of one level
//!   are merged into one file of the next (`<lane>-c<first end>_<last end>.l<level>`), up to a
//!   target size; once the hour is complete (the lane's windows have passed it), its files are
//!   merged down to one per target size. A merge publishes its file and deletes the sources
//!   `grace` later (queries that listed them still find them); readers leave out what a merge
//!   has replaced ([`superseded`]), so nobody sees a row twice, and a re-opened lane deletes
//!   such leftovers.
//! * Alerts are appended as `<lane>-a<offset>.parquet` (at-least-once, never rolled back).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Instant;

use arrow_array::RecordBatch;
use serde::{Deserialize, Serialize};

use kplane_model::FlowHashKey;
use kplane_store::compaction::{Compaction, Stored, hour_end, merge};
use kplane_store::layout::{FileKind, partition_key, superseded};
use kplane_store::retention::Retention;
use kplane_store::{Listed, Staged, Store, rollup};

use crate::error::ProcessorError;
use crate::panes::Checkpoint;

/// One line of a checkpoint log.
#[derive(Debug, Deserialize, Serialize)]
pub struct CommitLine {
    pub lane: String,
    /// When the line was written (ns since the Unix epoch).
    pub written_ns: i64,
    pub windows: usize,
    pub checkpoint: Checkpoint,
}

/// A store file's place, for errors that name it.
fn place(store: &Store, key: &str) -> PathBuf {
    PathBuf::from(format!("{}/{key}", store.location()))
}

/// A checkpoint log read back.
#[derive(Debug, Default)]
pub struct CommitLog {
    /// Its complete lines, oldest first.
    pub commits: Vec<CommitLine>,
    /// Where a torn last line starts (a crash while it was appended): the log's valid
    /// length. `None` when the log ends with a complete line.
    pub torn_at: Option<u64>,
}

/// Reads a checkpoint log. A last line that does not parse is torn (a crash mid-append) and
/// left out; a line that does not parse *followed by lines that do* is corruption, an error
/// naming the file and line — resuming from an earlier checkpoint would double windows.
fn read_commits(store: &Store, key: &str) -> Result<CommitLog, ProcessorError> {
    let text = store.get(key)?.unwrap_or_default();
    let mut log = CommitLog::default();
    let mut bad: Option<(usize, u64, String)> = None;
    let mut start = 0usize;
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let at = start as u64;
        start += line.len() + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<CommitLine>(line) {
            Ok(c) => {
                if let Some((n, _, e)) = bad {
                    return Err(ProcessorError::Corrupt {
                        path: place(store, key),
                        reason: format!(
                            "line {n} is corrupt ({e}) but later lines are intact; refusing to \
                             resume from a damaged checkpoint log (restore the file or remove \
                             the lane's data to rebuild it)"
                        ),
                    });
                }
                log.commits.push(c);
            }
            Err(e) => {
                bad.get_or_insert((i + 1, at, e.to_string()));
            }
        }
    }
    log.torn_at = bad.map(|(_, at, _)| at);
    Ok(log)
}

/// The checkpoint log of `lane` (`reports-p3`) in `store`.
pub fn lane_log(store: &Store, lane: &str) -> Result<CommitLog, ProcessorError> {
    read_commits(store, &log_key(lane))
}

/// A lane's saved detector state: its offset (8 bytes, little-endian), then the detectors'
/// encoding. Written whole by rename, so it is never torn.
fn read_detectors(store: &Store, key: &str) -> Result<Option<DetectorState>, ProcessorError> {
    let bytes = store.get(key)?.unwrap_or_default();
    if bytes.is_empty() {
        return Ok(None);
    }
    let (offset, rest) = bytes
        .split_first_chunk::<8>()
        .ok_or_else(|| ProcessorError::Corrupt {
            path: place(store, key),
            reason: "too short for detector state; remove it to start the lane's detectors empty"
                .into(),
        })?;
    Ok(Some(DetectorState {
        through_offset: i64::from_le_bytes(*offset),
        bytes: rest.to_vec(),
    }))
}

/// The store's flow-hash key (`flow-hash.key` at its root), drawn at random the first time:
/// restored per-flow detector state is found by the same `flow_id`s after a restart.
pub fn flow_hash_key(store: &Store) -> Result<FlowHashKey, ProcessorError> {
    const KEY: &str = "flow-hash.key";
    match store.get(KEY)? {
        Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| ProcessorError::Corrupt {
            path: place(store, KEY),
            reason: format!("not a flow-hash key ({e}); delete it to draw a new one"),
        }),
        None => {
            // Of processors starting together on one store, the first key written wins and
            // the others read it.
            store.put_new(KEY, &serde_json::to_vec(&FlowHashKey::random())?)?;
            flow_hash_key(store)
        }
    }
}

/// Window results of one commit: `(table, window start, window end, rows)`.
pub type WindowRows = (&'static str, i64, i64, RecordBatch);

/// A file's name and what it says.
type Named = (String, FileKind);

/// The store of one lane (a bus partition of one topic).
#[derive(Debug)]
pub struct LaneStore {
    store: Store,
    lane: String,
    checkpoint: Checkpoint,
    compaction: Compaction,
    /// Directories with files of this lane that may still be merged.
    open_dirs: Vec<OpenDir>,
    /// Merges' sources, deleted once the grace period has passed, oldest first.
    replaced: VecDeque<Replaced>,
    /// What it has written, merged and removed since it opened (for metrics).
    pub counts: StoreCounts,
    retention: Retention,
    /// Event time of the last retention sweep.
    swept_ns: i64,
    /// Torn last lines found in the checkpoint log on opening (0 or 1).
    pub torn_lines: u64,
    /// The last message the detectors' durable state includes (`-1`: none).
    detectors_through: i64,
}

/// A directory whose files a lane may still merge.
#[derive(Debug)]
struct OpenDir {
    /// Its key.
    dir: String,
    /// The end of its hour.
    hour_end: i64,
    /// The lane's committed, current files in it, oldest first, as commits and merges left
    /// them — so that compaction lists nothing at a commit. `None`: to be listed (on
    /// opening, for a new directory, after a failed merge or a retention sweep).
    files: Option<Vec<Stored>>,
}

impl OpenDir {
    fn new(dir: String, hour_end: i64) -> Self {
        Self {
            dir,
            hour_end,
            files: None,
        }
    }
}

/// The sources of one merge, kept for readers that listed them before it.
#[derive(Debug)]
struct Replaced {
    due: Instant,
    dir: String,
    keys: Vec<String>,
}

/// What a lane's store has written, merged and removed since it opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreCounts {
    /// Window and alert files commits wrote, and their bytes.
    pub files_written: u64,
    pub bytes_written: u64,
    pub compactions: u64,
    /// Bytes of the files merges wrote (the write amplification of compaction).
    pub merged_bytes: u64,
    /// Merges that failed (logged; their sources stay and are merged later).
    pub compaction_failures: u64,
    /// Files removed past their table's retention, and sweeps that failed (logged; the
    /// files go at the next sweep).
    pub files_expired: u64,
    pub expiry_failures: u64,
    /// Hours rolled up into minutes and hours, and rollups that failed (logged; retried).
    pub rollups: u64,
    pub rollup_failures: u64,
}

/// The immediate detectors' state as of a message: restored on open, the detectors skip
/// every message up to `through_offset` (their state already includes it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DetectorState {
    pub through_offset: i64,
    /// The detectors' own encoding ([`crate::detect::Detector::snapshot`]).
    pub bytes: Vec<u8>,
}

/// Rows a lane's detectors raised since its last commit, for one table (`alerts`,
/// `switch_changes`): stored with the commit in a file named after the first message that
/// raised any, so a restart that reads that message again removes the file first.
#[derive(Debug)]
pub struct Immediate {
    pub table: &'static str,
    /// The earliest row's time: the file's hour directory.
    pub time_ns: i64,
    pub first_offset: i64,
    pub batch: RecordBatch,
}

/// What a lane resumes from.
#[derive(Debug)]
pub struct Resume {
    pub checkpoint: Checkpoint,
    pub detectors: Option<DetectorState>,
}

impl LaneStore {
    /// Opens the lane's checkpoint, rolls the store back to it and finishes interrupted
    /// compactions; returns the store and what to resume from.
    pub fn open(
        store: &Store,
        lane: &str,
        compaction: Compaction,
    ) -> Result<(Self, Resume), ProcessorError> {
        let log = log_key(lane);
        let read = read_commits(store, &log)?;
        let checkpoint = read
            .commits
            .last()
            .map(|c| c.checkpoint)
            .unwrap_or_default();
        if let Some(at) = read.torn_at {
            // Cut the torn line off, so the next line appended starts clean.
            tracing::warn!(log = %place(store, &log).display(), at, "checkpoint log ends in a torn line (a crash mid-write): ignored");
            store.truncate(&log, at)?;
        }
        let detectors = read_detectors(store, &detectors_key(lane))?;
        let mut lane_store = Self {
            store: store.clone(),
            lane: lane.to_string(),
            checkpoint,
            compaction,
            open_dirs: Vec::new(),
            replaced: VecDeque::new(),
            counts: StoreCounts::default(),
            retention: Retention::default(),
            swept_ns: i64::MIN,
            torn_lines: u64::from(read.torn_at.is_some()),
            // Without saved state the detectors rebuild theirs from the checkpoint's messages
            // and raise nothing up to `read_until` (those alerts are stored).
            detectors_through: detectors
                .as_ref()
                .map_or(checkpoint.read_until, |d| d.through_offset),
        };
        lane_store.recover()?;
        Ok((
            lane_store,
            Resume {
                checkpoint,
                detectors,
            },
        ))
    }

    /// Removes the lane's files past their table's retention from now on
    /// (`stream-processor.retention`).
    pub fn with_retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// Where the lane's detector state is saved (for errors that name it).
    pub fn detectors_path(&self) -> PathBuf {
        place(&self.store, &detectors_key(&self.lane))
    }

    /// The lane's files in every directory, by directory.
    fn lane_files(&self) -> Result<Vec<(String, Vec<Named>)>, ProcessorError> {
        let mut dirs: Vec<(String, Vec<Named>)> = Vec::new();
        for f in self.store.list("tables")? {
            let Some((writer, kind)) = FileKind::parse(f.name()) else {
                continue;
            };
            if writer != self.lane {
                continue;
            }
            let entry = (f.name().to_string(), kind);
            match dirs.iter_mut().find(|d| d.0 == f.dir()) {
                Some(d) => d.1.push(entry),
                None => dirs.push((f.dir().to_string(), vec![entry])),
            }
        }
        Ok(dirs)
    }

    /// Deletes what the checkpoint does not include and what a merge replaced, and notes
    /// the directories whose files may still be merged.
    fn recover(&mut self) -> Result<(), ProcessorError> {
        let emitted = self.checkpoint.emitted_until_ns;
        for (dir, files) in self.lane_files()? {
            let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
            let replaced = superseded(&names);
            let mut first_end = None::<i64>;
            for ((name, kind), replaced) in files.iter().zip(replaced) {
                let remove = replaced
                    || match *kind {
                        FileKind::Window { first_end } => first_end > emitted,
                        FileKind::Compacted { .. } | FileKind::Rollup { .. } => false,
                        // Immediate rows of messages the detectors will read again are raised again.
                        FileKind::Immediate { first_offset } => {
                            first_offset > self.detectors_through
                        }
                    };
                let key = format!("{dir}/{name}");
                if remove {
                    tracing::info!(file = %key, "removing a file past the checkpoint or already merged");
                    self.store.delete(&key)?;
                } else if let FileKind::Window { first_end: e }
                | FileKind::Compacted { first_end: e, .. } = *kind
                {
                    first_end = Some(first_end.map_or(e, |f| f.min(e)));
                }
            }
            if let Some(e) = first_end {
                let end = hour_end(e - self.compaction.window_ns);
                self.open_dirs.push(OpenDir::new(dir, end));
            }
        }
        Ok(())
    }

    fn file_key(&self, table: &str, ns: i64, name: &str) -> String {
        format!("{}/{name}", partition_key(table, ns))
    }

    /// Writes one commit: the windows' rows (one file per table and hour), the immediate
    /// rows, then the checkpoint line; then merges what compaction asks for.
    pub fn commit(
        &mut self,
        windows: Vec<WindowRows>,
        immediate: Vec<Immediate>,
        n_windows: usize,
        checkpoint: Checkpoint,
        detectors: Option<&DetectorState>,
    ) -> Result<Vec<String>, ProcessorError> {
        // (table, date/hour dir) → (first start, first end, batches)
        let mut groups: Vec<(&'static str, String, i64, i64, Vec<RecordBatch>)> = Vec::new();
        for (table, start, end, batch) in windows {
            let dir = partition_key(table, start);
            match groups.iter_mut().find(|g| g.0 == table && g.1 == dir) {
                Some(g) => {
                    g.2 = g.2.min(start);
                    g.3 = g.3.min(end);
                    g.4.push(batch);
                }
                None => groups.push((table, dir, start, end, vec![batch])),
            }
        }
        // Every file is staged and fsynced, then all are renamed into place and each
        // directory they went to is fsynced once (not once per file).
        let mut staged_files: Vec<(Staged, String)> = Vec::new();
        // What compaction will know of the window files: (directory, file).
        let mut window_files: Vec<(String, Stored)> = Vec::new();
        let mut written_bytes = 0;
        for (_, dir, _, first_end, batches) in &groups {
            let name = FileKind::Window {
                first_end: *first_end,
            }
            .file_name(&self.lane);
            if let Some(staged) = self.store.stage_parquet(batches)? {
                let key = format!("{dir}/{name}");
                let bytes = staged.bytes()?;
                written_bytes += bytes;
                let stored = Stored {
                    key: key.clone(),
                    first_end: *first_end,
                    level: 0,
                    bytes,
                };
                window_files.push((dir.clone(), stored));
                staged_files.push((staged, key));
            }
        }
        for i in immediate.into_iter().filter(|i| i.batch.num_rows() > 0) {
            let name = FileKind::Immediate {
                first_offset: i.first_offset,
            }
            .file_name(&self.lane);
            let key = self.file_key(i.table, i.time_ns, &name);
            if let Some(staged) = self.store.stage_parquet(&[i.batch])? {
                written_bytes += staged.bytes()?;
                staged_files.push((staged, key));
            }
        }
        let written: Vec<String> = staged_files.iter().map(|(_, k)| k.clone()).collect();
        // After the immediate rows (a restored state must not raise stored ones again), before the
        // line (the line's windows must not be recomputed on a state that includes them).
        if let Some(d) = detectors {
            let mut bytes = Vec::with_capacity(8 + d.bytes.len());
            bytes.extend_from_slice(&d.through_offset.to_le_bytes());
            bytes.extend_from_slice(&d.bytes);
            staged_files.push((self.store.stage_bytes(&bytes)?, detectors_key(&self.lane)));
        }
        self.store.publish_all(staged_files)?;
        if let Some(d) = detectors {
            self.detectors_through = d.through_offset;
        }
        let mut line = serde_json::to_vec(&CommitLine {
            lane: self.lane.clone(),
            written_ns: kplane_model::unix_time_ns() as i64,
            windows: n_windows,
            checkpoint,
        })?;
        line.push(b'\n');
        self.store.append_line(&log_key(&self.lane), &line)?;
        self.checkpoint = checkpoint;
        self.counts.files_written += written.len() as u64;
        self.counts.bytes_written += written_bytes;
        for (_, dir, start, _, _) in groups {
            if !self.open_dirs.iter().any(|d| d.dir == dir) {
                self.open_dirs.push(OpenDir::new(dir, hour_end(start)));
            }
        }
        for (dir, stored) in window_files {
            let open = self.open_dirs.iter_mut().find(|d| d.dir == dir);
            if let Some(files) = open.and_then(|d| d.files.as_mut()) {
                files.push(stored);
            }
        }
        self.compact();
        self.expire();
        Ok(written)
    }

    /// Removes the lane's files in partitions past their table's retention, at most once a
    /// minute of event time. A failed sweep is logged and counted; the next one retries.
    fn expire(&mut self) {
        const EVERY_NS: i64 = 60_000_000_000;
        let now = self.checkpoint.emitted_until_ns;
        if self.retention.keep.is_empty() || now < self.swept_ns.saturating_add(EVERY_NS) {
            return;
        }
        self.swept_ns = now;
        match self.retention.sweep(&self.store, &self.lane, now) {
            Ok(n) => {
                self.counts.files_expired += n;
                if n > 0 {
                    // Compaction lists what is left.
                    self.open_dirs.iter_mut().for_each(|d| d.files = None);
                }
            }
            Err(e) => {
                self.counts.expiry_failures += 1;
                tracing::warn!(lane = %self.lane, error = %e, "retention sweep failed; retried at the next");
            }
        }
    }

    /// Runs the merges compaction asks for in every open directory; forgets directories
    /// whose hour is complete once they are merged down. A failed merge is logged and
    /// counted: its sources are committed data and stay readable.
    fn compact(&mut self) {
        let emitted = self.checkpoint.emitted_until_ns;
        let mut open = std::mem::take(&mut self.open_dirs);
        open.retain_mut(|d| {
            let complete = emitted >= d.hour_end + self.compaction.window_ns;
            match self.merge_dir(d, complete) {
                // A complete hour, merged down (or emptied by retention), is rolled up and
                // forgotten.
                Ok(()) => !(complete && self.roll_up(&d.dir, d.hour_end)),
                Err(e) => {
                    d.files = None;
                    self.counts.compaction_failures += 1;
                    tracing::warn!(dir = %d.dir, error = %e, "compaction failed; its files stay as they are and are merged later");
                    true
                }
            }
        });
        self.open_dirs = open;
        self.delete_replaced();
    }

    /// Runs the merges compaction asks for in one open directory.
    fn merge_dir(&mut self, d: &mut OpenDir, complete: bool) -> Result<(), ProcessorError> {
        let files = match &mut d.files {
            Some(files) => files,
            None => d.files.insert(self.committed_files(&d.dir)?),
        };
        while let Some(range) = self.compaction.next_merge(files, complete) {
            let merged = merge(&self.store, &self.lane, &d.dir, &files[range.clone()])?;
            self.counts.merged_bytes += merged.bytes;
            self.counts.compactions += 1;
            let sources = files.splice(range, [merged]);
            self.replaced.push_back(Replaced {
                due: Instant::now() + self.compaction.grace,
                dir: d.dir.clone(),
                keys: sources.map(|f| f.key).collect(),
            });
        }
        Ok(())
    }

    /// Deletes the sources of merges published at least the grace period ago. A failed
    /// deletion is logged and tried again at the next commit (the files are replaced:
    /// readers leave them out, and reopening the lane deletes them).
    fn delete_replaced(&mut self) {
        let now = Instant::now();
        while let Some(r) = self.replaced.front().filter(|r| r.due <= now) {
            let deleted = r
                .keys
                .iter()
                .try_for_each(|k| self.store.delete(k))
                .and_then(|()| self.store.settle_dir(&r.dir, false));
            if let Err(e) = deleted {
                tracing::warn!(dir = %r.dir, error = %e, "deleting merged files failed; retried at the next commit");
                return;
            }
            self.replaced.pop_front();
        }
    }

    /// Rolls a complete, merged-down hour directory up into minutes and the hour
    /// ([`kplane_store::rollup`]); false when that failed (logged and counted; the directory
    /// stays open and is rolled up at the next commit).
    fn roll_up(&mut self, dir: &str, hour_end: i64) -> bool {
        const HOUR: i64 = 3_600_000_000_000;
        // tables/<table>/date=…/hour=…
        let Some(table) = dir.split('/').nth(1) else {
            return true;
        };
        match rollup::roll_up(&self.store, &self.lane, table, dir, hour_end - HOUR) {
            Ok(wrote) => {
                self.counts.rollups += u64::from(wrote);
                true
            }
            Err(e) => {
                self.counts.rollup_failures += 1;
                tracing::warn!(dir = %dir, error = %e, "rollup failed; retried at the next commit");
                false
            }
        }
    }

    /// The lane's committed, current files in the directory `dir`, oldest first (none once
    /// retention has removed the directory).
    fn committed_files(&self, dir: &str) -> Result<Vec<Stored>, ProcessorError> {
        let emitted = self.checkpoint.emitted_until_ns;
        let listed: Vec<Listed> = self.store.list(dir)?;
        let names: Vec<&str> = listed.iter().map(Listed::name).collect();
        let replaced = superseded(&names);
        let mut files: Vec<Stored> = listed
            .iter()
            .zip(replaced)
            .filter(|(_, replaced)| !replaced)
            .filter_map(|(f, _)| {
                let (writer, kind) = FileKind::parse(f.name())?;
                let (first_end, level) = match kind {
                    FileKind::Window { first_end } if first_end <= emitted => (first_end, 0),
                    FileKind::Compacted {
                        first_end, level, ..
                    } => (first_end, level),
                    _ => return None,
                };
                (writer == self.lane).then(|| Stored {
                    key: f.key.clone(),
                    first_end,
                    level,
                    bytes: f.bytes,
                })
            })
            .collect();
        files.sort_by_key(|f| f.first_end);
        Ok(files)
    }
}

/// The key of a lane's checkpoint log.
fn log_key(lane: &str) -> String {
    format!("checkpoints/{lane}.jsonl")
}

/// The key of a lane's saved detector state.
fn detectors_key(lane: &str) -> String {
    format!("checkpoints/{lane}.detectors")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use arrow_array::{Int64Array, TimestampNanosecondArray};
    use arrow_schema::{DataType, Field, Schema, TimeUnit};
    use kplane_testkit::s3::S3;

    use super::*;

    /// The stores a test runs on: a fresh local directory, and a fresh bucket of an
    /// S3-compatible server when moto is installed (required in CI: `KPLANE_REQUIRE_S3`).
    /// Keep the server while the stores are used.
    fn stores(tag: &str) -> (Option<S3>, Vec<Store>) {
        let root = std::env::temp_dir().join(format!("kplane-sp-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let mut stores = vec![Store::local(root)];
        let s3 = S3::start();
        if let Some(s3) = &s3 {
            let location = s3.bucket(&tag.replace('_', "-"));
            stores.push(Store::open_with(std::path::Path::new(&location), &s3.options()).unwrap());
        }
        (s3, stores)
    }

    fn rows(end: i64) -> RecordBatch {
        let ts = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
        let schema = Arc::new(Schema::new(vec![
            Field::new("window_start", ts.clone(), false),
            Field::new("window_end", ts, false),
            Field::new("v", DataType::Int64, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(TimestampNanosecondArray::from(vec![end - 10]).with_timezone("UTC")),
                Arc::new(TimestampNanosecondArray::from(vec![end]).with_timezone("UTC")),
                Arc::new(Int64Array::from(vec![end])),
            ],
        )
        .unwrap()
    }

    /// Windows of 10 ns; merges of `fan_in` files; no size limit.
    fn tiered(fan_in: usize) -> Compaction {
        Compaction {
            fan_in,
            target_bytes: u64::MAX,
            window_ns: 10,
            grace: std::time::Duration::ZERO,
        }
    }

    fn cp(emitted: i64) -> Checkpoint {
        Checkpoint {
            through_offset: emitted,
            read_until: emitted,
            emitted_until_ns: emitted,
        }
    }

    fn stored(store: &Store) -> Vec<i64> {
        let files = store.list("tables").unwrap();
        let mut v: Vec<i64> = files
            .iter()
            .flat_map(|f| store.read_parquet(&f.key).unwrap())
            .flat_map(|b| {
                let c = b
                    .column_by_name("v")
                    .unwrap()
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .clone();
                c.values().to_vec()
            })
            .collect();
        v.sort_unstable();
        v
    }

    /// Commits the one window ending at `end` (rows of table `t`).
    fn commit_window(s: &mut LaneStore, end: i64) {
        s.commit(
            vec![("t", end - 10, end, rows(end))],
            Vec::new(),
            1,
            cp(end),
            None,
        )
        .unwrap();
    }

    #[test]
    fn a_reopened_lane_is_the_checkpoints_image_and_compaction_loses_nothing() {
        let (_s3, stores) = stores("reopened");
        for root in &stores {
            reopens_to_the_checkpoint(root);
        }
    }

    fn reopens_to_the_checkpoint(root: &Store) {
        let (mut s, r) = LaneStore::open(root, "reports-p0", tiered(3)).unwrap();
        assert_eq!(r.checkpoint, Checkpoint::default());
        for end in [10, 20] {
            commit_window(&mut s, end);
        }
        // A crash after writing the files of window 30 but before its checkpoint line.
        let key = s.file_key("t", 20, "reports-p0-w30.parquet");
        assert_eq!(s.open_dirs.len(), 1);
        root.write_parquet(&key, &[rows(30)]).unwrap();
        drop(s);
        let (mut s, r) = LaneStore::open(root, "reports-p0", tiered(3)).unwrap();
        assert_eq!(r.checkpoint, cp(20));
        assert_eq!(stored(root), vec![10, 20], "the uncommitted window is gone");
        for end in [30, 40, 50] {
            commit_window(&mut s, end);
        }
        assert!(s.counts.compactions >= 1);
        assert_eq!(stored(root), vec![10, 20, 30, 40, 50]);
    }

    /// The file names in the directory of table `t` holding `ns`, sorted.
    fn names(store: &Store, ns: i64) -> Vec<String> {
        let mut v: Vec<String> = store
            .list(&partition_key("t", ns))
            .unwrap()
            .iter()
            .map(|f| f.name().to_string())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn merges_are_tiered_and_a_complete_hour_is_merged_down_to_one_file() {
        let (_s3, stores) = stores("tiers");
        for root in &stores {
            merges_in_tiers(root);
        }
    }

    fn merges_in_tiers(root: &Store) {
        let (mut s, _) = LaneStore::open(root, "reports-p0", tiered(3)).unwrap();
        for end in (1..=8).map(|i| i * 10) {
            commit_window(&mut s, end);
        }
        // 8 windows, fan-in 3: two level-1 merges of three, two windows not yet merged.
        assert_eq!(
            names(root, 0),
            [
                "reports-p0-c10_30.l1.parquet",
                "reports-p0-c40_60.l1.parquet",
                "reports-p0-w70.parquet",
                "reports-p0-w80.parquet",
            ]
        );
        commit_window(&mut s, 90);
        // The third level-1 file completes a run of three: one level-2 file.
        assert_eq!(names(root, 0), ["reports-p0-c10_90.l2.parquet"]);
        commit_window(&mut s, 100);
        assert_eq!(
            names(root, 0),
            ["reports-p0-c10_90.l2.parquet", "reports-p0-w100.parquet"]
        );
        // The next hour's first window: hour 0 is complete once the lane has passed its end
        // by a window, and is merged into one file whatever the levels.
        const HOUR: i64 = 3_600_000_000_000;
        commit_window(&mut s, HOUR + 10);
        assert_eq!(names(root, 0), ["reports-p0-c10_100.l3.parquet"]);
        assert_eq!(s.open_dirs.len(), 1, "only the new hour is open");
        let mut expected: Vec<i64> = (1..=10).map(|i| i * 10).collect();
        expected.push(HOUR + 10);
        assert_eq!(stored(root), expected);
        assert_eq!((s.counts.compactions, s.counts.compaction_failures), (5, 0));
    }

    #[test]
    fn a_merges_sources_stay_for_the_grace_period_and_readers_leave_them_out() {
        let (_s3, stores) = stores("grace");
        for root in &stores {
            keeps_sources_for_the_grace(root);
        }
    }

    fn keeps_sources_for_the_grace(root: &Store) {
        let grace = std::time::Duration::from_millis(300);
        let compaction = Compaction { grace, ..tiered(3) };
        let (mut s, _) = LaneStore::open(root, "reports-p0", compaction).unwrap();
        for end in [10, 20, 30] {
            commit_window(&mut s, end);
        }
        // Merged, the sources still there for a query that listed them: the store's readers
        // (and `kplane files`) leave them out.
        assert_eq!(
            names(root, 0),
            [
                "reports-p0-c10_30.l1.parquet",
                "reports-p0-w10.parquet",
                "reports-p0-w20.parquet",
                "reports-p0-w30.parquet"
            ]
        );
        let current: Vec<String> = root
            .table_files("t")
            .unwrap()
            .iter()
            .map(|f| f.rsplit('/').next().unwrap().to_string())
            .collect();
        assert_eq!(current, ["reports-p0-c10_30.l1.parquet"]);
        // The first commit after the grace period deletes them.
        std::thread::sleep(grace);
        commit_window(&mut s, 40);
        assert_eq!(
            names(root, 0),
            ["reports-p0-c10_30.l1.parquet", "reports-p0-w40.parquet"]
        );
        // Sources left by a crash within the grace period go when the lane reopens.
        for end in [50, 60] {
            commit_window(&mut s, end);
        }
        assert_eq!(names(root, 0).len(), 5, "{:?}", names(root, 0));
        drop(s);
        let (_s, _) = LaneStore::open(root, "reports-p0", compaction).unwrap();
        assert_eq!(
            names(root, 0),
            [
                "reports-p0-c10_30.l1.parquet",
                "reports-p0-c40_60.l1.parquet"
            ]
        );
    }

    #[test]
    fn hours_past_their_tables_retention_are_removed_as_the_lane_moves_on() {
        let (_s3, stores) = stores("retention");
        for root in &stores {
            expires_old_hours(root);
        }
    }

    fn expires_old_hours(root: &Store) {
        const HOUR: i64 = 3_600_000_000_000;
        let (s, _) = LaneStore::open(root, "reports-p0", tiered(3)).unwrap();
        let mut s = s.with_retention(Retention {
            keep: [("t".to_string(), Duration::from_secs(2 * 3_600))].into(),
        });
        // A window in each of hours 0 to 3: hour 0 ended two hours before the last.
        for h in 0..4 {
            commit_window(&mut s, h * HOUR + 10);
        }
        assert_eq!(stored(root), [HOUR + 10, 2 * HOUR + 10, 3 * HOUR + 10]);
        // Half an hour into hour 4: hour 1 ended more than two hours before; 2 and 3 did not.
        commit_window(&mut s, 4 * HOUR + HOUR / 2);
        assert_eq!(
            stored(root),
            [2 * HOUR + 10, 3 * HOUR + 10, 4 * HOUR + HOUR / 2]
        );
        assert!(root.subdirs(&partition_key("t", 0)).unwrap().is_empty());
        if let Some(dir) = root.local_root() {
            assert!(
                !dir.join(partition_key("t", 0)).exists(),
                "emptied, removed"
            );
        }
        assert_eq!((s.counts.files_expired, s.counts.expiry_failures), (2, 0));
    }

    #[test]
    fn an_interrupted_merge_is_finished_on_reopening() {
        let (_s3, stores) = stores("merge");
        for root in &stores {
            finishes_a_merge(root);
        }
    }

    fn finishes_a_merge(root: &Store) {
        let (mut s, _) = LaneStore::open(root, "reports-p0", tiered(64)).unwrap();
        for end in [10, 20, 30] {
            commit_window(&mut s, end);
        }
        // A crash after a merge of the first two published its file, before the sources went.
        let merged = s.file_key("t", 0, "reports-p0-c10_20.l1.parquet");
        root.write_parquet(&merged, &[rows(10), rows(20)]).unwrap();
        drop(s);
        let (mut s, _) = LaneStore::open(root, "reports-p0", tiered(2)).unwrap();
        assert_eq!(
            names(root, 0),
            ["reports-p0-c10_20.l1.parquet", "reports-p0-w30.parquet"]
        );
        assert_eq!(stored(root), [10, 20, 30]);
        // The reopened lane knows the directory is open and merges it with the next commit.
        commit_window(&mut s, 40);
        assert_eq!(stored(root), [10, 20, 30, 40]);
    }

    #[test]
    fn a_torn_last_line_is_cut_off_and_a_corrupt_middle_refuses_to_open() {
        let root = std::env::temp_dir().join(format!("kplane-sp-torn-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let store = Store::local(&root);
        let (mut s, _) = LaneStore::open(&store, "reports-p0", tiered(64)).unwrap();
        for end in [10, 20] {
            commit_window(&mut s, end);
        }
        drop(s);
        let log = root.join("checkpoints/reports-p0.jsonl");
        let whole = std::fs::read(&log).unwrap();
        // A crash in the middle of appending the third line.
        let mut torn = whole.clone();
        torn.extend_from_slice(br#"{"lane":"reports-p0","written_ns":1,"win"#);
        std::fs::write(&log, &torn).unwrap();
        let (mut s, r) = LaneStore::open(&store, "reports-p0", tiered(64)).unwrap();
        assert_eq!(r.checkpoint, cp(20));
        assert_eq!(s.torn_lines, 1);
        assert_eq!(
            std::fs::read(&log).unwrap(),
            whole,
            "cut back to the last line"
        );
        commit_window(&mut s, 30);
        drop(s);
        let (s, r) = LaneStore::open(&store, "reports-p0", tiered(64)).unwrap();
        assert_eq!((r.checkpoint, s.torn_lines), (cp(30), 0));
        drop(s);

        // Damage in the middle, intact lines after it: refuse, naming file and line.
        let text = String::from_utf8(std::fs::read(&log).unwrap()).unwrap();
        let damaged = text.replacen("\"lane\"", "\"la~e\"", 1);
        std::fs::write(&log, damaged).unwrap();
        let e = LaneStore::open(&store, "reports-p0", tiered(64))
            .unwrap_err()
            .to_string();
        assert!(e.contains("reports-p0.jsonl: line 1 is corrupt"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn immediate_rows_the_restored_detectors_will_raise_again_are_removed() {
        let (_s3, stores) = stores("alerts");
        for root in &stores {
            removes_immediate_rows_raised_again(root);
        }
    }

    fn removes_immediate_rows_raised_again(root: &Store) {
        let (mut s, _) = LaneStore::open(root, "events-p0", tiered(64)).unwrap();
        let tables = ["alerts", "switch_changes"];
        let immediate = |offset: i64| {
            tables
                .map(|table| Immediate {
                    table,
                    time_ns: 10,
                    first_offset: offset,
                    batch: rows(10),
                })
                .into()
        };
        let state = |through_offset| DetectorState {
            through_offset,
            bytes: vec![1, 2, 3],
        };
        s.commit(vec![], immediate(3), 0, cp(10), Some(&state(5)))
            .unwrap();
        // A crash after the next commit's rows were written, before its state and line.
        for table in tables {
            let late = s.file_key(table, 10, "events-p0-a6.parquet");
            root.write_parquet(&late, &[rows(10)]).unwrap();
        }
        drop(s);
        let (_, r) = LaneStore::open(root, "events-p0", tiered(64)).unwrap();
        assert_eq!(r.detectors, Some(state(5)));
        for table in tables {
            let key = |name: &str| format!("{}/{name}", partition_key(table, 10));
            assert!(
                !root.exists(&key("events-p0-a6.parquet")).unwrap(),
                "{table}: offset 6 comes again and raises its rows again"
            );
            assert!(
                root.exists(&key("events-p0-a3.parquet")).unwrap(),
                "{table}: offset 3 is in the state: its rows stay"
            );
        }
    }
}
