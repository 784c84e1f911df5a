//! The store's one writer: every file is written to `<root>/_staging/`, fsynced, renamed into
//! place, and its directory fsynced, so a reader never sees half a file and a published file
//! survives a power cut (a file renamed into an unsynced directory can vanish).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::error::Result;

static STAGED: AtomicU64 = AtomicU64::new(0);

/// This process's mark in staged names: random, drawn once. A process id alone is not
/// unique on a shared volume — processors in containers are each PID 1 — and two writers
/// staging under one name would publish each other's files.
fn process_nonce() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    static NONCE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *NONCE.get_or_init(|| {
        // RandomState is seeded from the OS's random source, freshly per process.
        RandomState::new().hash_one((std::process::id(), std::time::SystemTime::now()))
    })
}

/// A fresh file name in `<root>/_staging/`: unique in the process, and across the processes
/// and hosts that share the store.
pub fn staging_path(root: &Path, extension: &str) -> std::io::Result<PathBuf> {
    let staging = root.join("_staging");
    std::fs::create_dir_all(&staging)?;
    Ok(staging.join(format!(
        "{}-{:016x}-{}.{extension}",
        std::process::id(),
        process_nonce(),
        STAGED.fetch_add(1, Ordering::Relaxed)
    )))
}

/// `bytes` written and fsynced to a fresh staging file; returns its path.
pub fn stage_bytes(root: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let tmp = staging_path(root, "tmp")?;
    let mut file = File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(tmp)
}

/// The store's Parquet writer (zstd) into `file`.
pub fn parquet_writer(file: File, schema: arrow_schema::SchemaRef) -> Result<ArrowWriter<File>> {
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    Ok(ArrowWriter::try_new(file, schema, Some(props))?)
}

/// Writes `batches` as a Parquet staging file and fsyncs it (through the writer's own
/// handle); `None` without batches.
pub fn stage_parquet(root: &Path, batches: &[RecordBatch]) -> Result<Option<PathBuf>> {
    let Some(first) = batches.first() else {
        return Ok(None);
    };
    let tmp = staging_path(root, "parquet")?;
    let mut w = parquet_writer(File::create(&tmp)?, first.schema())?;
    for b in batches {
        w.write(b)?;
    }
    w.into_inner()?.sync_all()?;
    Ok(Some(tmp))
}

/// Moves staged files into place (creating their directories), then fsyncs each directory
/// they went to once.
pub fn publish_all(staged: &[(PathBuf, PathBuf)]) -> std::io::Result<()> {
    let mut dirs: Vec<&Path> = Vec::new();
    for (tmp, path) in staged {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        std::fs::rename(tmp, path)?;
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    for dir in dirs {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Moves one staged file to `path` and fsyncs its directory.
pub fn publish(tmp: &Path, path: &Path) -> std::io::Result<()> {
    publish_all(&[(tmp.to_path_buf(), path.to_path_buf())])
}

/// Writes `batches` as one Parquet file at `path`, atomically and durably (staging, fsync,
/// rename, fsync of the directory). Nothing is written without batches.
pub fn write_parquet(root: &Path, path: &Path, batches: &[RecordBatch]) -> Result<()> {
    if let Some(tmp) = stage_parquet(root, batches)? {
        publish(&tmp, path)?;
    }
    Ok(())
}

/// Reads a whole Parquet file.
pub fn read_parquet(path: &Path) -> Result<Vec<RecordBatch>> {
    let reader =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(File::open(path)?)?
            .build()?;
    Ok(reader.collect::<Result<Vec<_>, _>>()?)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::Int64Array;
    use arrow_schema::{DataType, Field, Schema};

    use super::*;

    /// Processes in containers are each PID 1 on a shared volume: their staged names must
    /// still differ (they did not, and two processors published each other's files).
    #[test]
    fn staged_names_differ_between_processes_with_one_pid() {
        let root = std::env::temp_dir().join(format!("kplane-store-s-{}", std::process::id()));
        let ours = staging_path(&root, "parquet").unwrap();
        let name = ours.file_name().unwrap().to_str().unwrap().to_string();
        let mark = name.split('-').nth(1).unwrap().to_string();
        assert_eq!(mark, format!("{:016x}", process_nonce()));
        // Another process draws its mark afresh: a second RandomState stands for it.
        use std::hash::{BuildHasher, RandomState};
        let other = RandomState::new().hash_one((std::process::id(), std::time::SystemTime::now()));
        assert_ne!(format!("{other:016x}"), mark);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_written_file_is_in_place_whole_and_staging_is_empty() {
        let root = std::env::temp_dir().join(format!("kplane-store-w-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let b =
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1, 2, 3]))]).unwrap();
        let path = root.join("tables/t/date=1970-01-01/hour=00/x.parquet");
        write_parquet(&root, &path, &[b.clone(), b]).unwrap();
        let rows: usize = read_parquet(&path)
            .unwrap()
            .iter()
            .map(|b| b.num_rows())
            .sum();
        assert_eq!(rows, 6);
        assert_eq!(std::fs::read_dir(root.join("_staging")).unwrap().count(), 0);
        write_parquet(&root, &root.join("empty.parquet"), &[]).unwrap();
        assert!(!root.join("empty.parquet").exists(), "no batches, no file");
        let mut found = Vec::new();
        crate::layout::parquet_files(&root, &mut found).unwrap();
        assert_eq!(found, [path]);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
