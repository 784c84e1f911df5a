//! Tiered compaction of one writer's files in one directory: `fan-in` files of one level are
//! merged into one file of the next (`<writer>-c<first end>_<last end>.l<level>`), up to a
//! target size; once the hour is complete, its files are merged down to one per target size.
//! Each row is so rewritten about log_fan-in(files per hour) times, not once per merge as a
//! single growing file would be. A merge publishes its file and leaves its sources; readers
//! leave out what a merge has replaced ([`crate::layout::superseded`]), and the writer deletes
//! the sources once `grace` has passed, so that a query that listed them just before the
//! merge still finds them.

use std::fs::File;

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::TimestampNanosecondType;
use parquet::arrow::ArrowWriter;

use crate::backend::Store;
use crate::error::Result;
use crate::layout::FileKind;
use crate::writer::parquet_writer;

/// How a writer merges its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compaction {
    /// Files of one level merged into one file of the next level (`compact-files`).
    pub fan_in: usize,
    /// Files this large are not merged again; a merge stops adding files once it reaches it
    /// (`compact-target-bytes`).
    pub target_bytes: u64,
    /// The window length: an hour directory is complete once the writer has emitted the
    /// windows ending one window past the hour.
    pub window_ns: i64,
    /// How long a merge's sources stay after the merged file is published
    /// (`compact-grace`).
    pub grace: std::time::Duration,
}

/// A committed file, as compaction sees it.
#[derive(Clone, Debug)]
pub struct Stored {
    /// Its key in the store.
    pub key: String,
    pub first_end: i64,
    /// Window files are level 0.
    pub level: u32,
    pub bytes: u64,
}

impl Compaction {
    /// The next merge among a writer's files of one directory (sorted oldest first), as a
    /// range of them. While the hour is open: the newest run of files of one level below
    /// the target size, once there are `fan_in` of them. Once it is complete: any run of
    /// two or more files below the target size.
    pub fn next_merge(&self, files: &[Stored], complete: bool) -> Option<std::ops::Range<usize>> {
        let small = |f: &Stored| f.bytes < self.target_bytes;
        // From `start`, the small files a merge takes: until their size reaches the target.
        let take = |start: usize| {
            let mut bytes = 0;
            let mut end = start;
            while end < files.len() && small(&files[end]) && bytes < self.target_bytes {
                bytes += files[end].bytes;
                end += 1;
            }
            end
        };
        if complete {
            let mut i = 0;
            while i < files.len() {
                let end = take(i);
                if end - i >= 2 {
                    return Some(i..end);
                }
                i = end.max(i + 1);
            }
            return None;
        }
        let level = files.last()?.level;
        let start = files
            .iter()
            .rposition(|f| f.level != level || !small(f))
            .map_or(0, |p| p + 1);
        (files.len() - start >= self.fan_in).then(|| start..take(start))
    }
}

/// Start of the hour after the one holding `ns`.
pub fn hour_end(ns: i64) -> i64 {
    const HOUR: i64 = 3_600_000_000_000;
    (ns.div_euclid(HOUR) + 1) * HOUR
}

/// Latest `window_end` in a batch of a window table.
fn last_window_end(batch: &RecordBatch) -> Option<i64> {
    let ends = batch
        .column_by_name("window_end")?
        .as_primitive_opt::<TimestampNanosecondType>()?;
    ends.values().iter().copied().max()
}

/// Merges `sources` (consecutive files of `writer` in the directory `dir`, oldest first)
/// into one file of the next level, written a batch at a time, and publishes it. Returns the
/// merged file; the sources stay, replaced (readers leave them out), for the caller to
/// delete once [`Compaction::grace`] has passed.
pub fn merge(store: &Store, writer: &str, dir: &str, sources: &[Stored]) -> Result<Stored> {
    let (file, staged) = store.stage_file("parquet")?;
    let mut file = Some(file);
    let mut out: Option<ArrowWriter<File>> = None;
    let mut last_end = sources[0].first_end;
    for source in sources {
        let reader = store.parquet(&source.key)?;
        if let Some(file) = file.take() {
            out = Some(parquet_writer(file, reader.schema().clone())?);
        }
        let w = out.as_mut().expect("created above");
        for batch in reader.build()? {
            let batch = batch?;
            last_end = last_end.max(last_window_end(&batch).unwrap_or(last_end));
            w.write(&batch)?;
        }
    }
    let file = out.expect("at least one source").into_inner()?;
    file.sync_all()?;
    let bytes = file.metadata()?.len();
    let level = sources.iter().map(|s| s.level).max().unwrap_or(0) + 1;
    let name = FileKind::Compacted {
        first_end: sources[0].first_end,
        last_end,
        level,
    }
    .file_name(writer);
    let key = format!("{dir}/{name}");
    store.publish_all(vec![(staged, key.clone())])?;
    Ok(Stored {
        key,
        first_end: sources[0].first_end,
        level,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(level: u32, bytes: u64) -> Stored {
        Stored {
            key: String::new(),
            first_end: 0,
            level,
            bytes,
        }
    }

    #[test]
    fn a_merge_stops_at_the_target_size_and_skips_full_files() {
        let c = Compaction {
            fan_in: 3,
            target_bytes: 100,
            window_ns: 10,
            grace: std::time::Duration::ZERO,
        };
        // Open hour: the newest run of one level, once it has fan-in files.
        let files = [at(2, 50), at(1, 10), at(0, 10), at(0, 10)];
        assert_eq!(c.next_merge(&files, false), None);
        let files = [at(2, 50), at(1, 10), at(0, 10), at(0, 10), at(0, 10)];
        assert_eq!(c.next_merge(&files, false), Some(2..5));
        // A run of big files: the merge takes them until the target size is reached.
        let files = [at(0, 60), at(0, 60), at(0, 60)];
        assert_eq!(c.next_merge(&files, false), Some(0..2));
        // Files at the target size are never merged again.
        let files = [at(1, 120), at(0, 10), at(0, 10)];
        assert_eq!(c.next_merge(&files, false), None);
        // Complete hour: any run of two or more small files, around full ones.
        let files = [at(1, 120), at(2, 30), at(0, 10), at(1, 150), at(0, 5)];
        assert_eq!(c.next_merge(&files, true), Some(1..3));
        let files = [at(1, 120), at(3, 40), at(1, 150), at(0, 5)];
        assert_eq!(c.next_merge(&files, true), None);
    }

    #[test]
    fn hours_end_on_the_hour() {
        assert_eq!(hour_end(0), 3_600_000_000_000);
        assert_eq!(hour_end(3_600_000_000_000), 7_200_000_000_000);
        assert_eq!(hour_end(-1), 0);
    }
}
