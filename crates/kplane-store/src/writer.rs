//! The store's one writer's local steps ([`crate::Store`] drives them): every file is written
//! to a staging directory and fsynced; on a local store it is then renamed into place and its
//! directory fsynced, so a reader never sees half a file and a published file survives a
//! power cut (a file renamed into an unsynced directory can vanish).

use std::fs::File;
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

/// A fresh file name in the staging directory `staging` (created if missing): unique in the
/// process, and across the processes and hosts that share the store.
pub fn staging_path(staging: &Path, extension: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(staging)?;
    Ok(staging.join(format!(
        "{}-{:016x}-{}.{extension}",
        std::process::id(),
        process_nonce(),
        STAGED.fetch_add(1, Ordering::Relaxed)
    )))
}

/// The store's Parquet writer (zstd) into `file`.
pub fn parquet_writer(file: File, schema: arrow_schema::SchemaRef) -> Result<ArrowWriter<File>> {
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    Ok(ArrowWriter::try_new(file, schema, Some(props))?)
}

/// Moves staged local files into place (creating their directories), then fsyncs each
/// directory they went to once (not once per file).
pub(crate) fn publish_all(staged: &[(PathBuf, PathBuf)]) -> std::io::Result<()> {
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

/// Reads a whole local Parquet file.
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
        let ours = staging_path(&root.join("_staging"), "parquet").unwrap();
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
        let store = crate::Store::local(&root);
        let key = "tables/t/date=1970-01-01/hour=00/x.parquet";
        let path = root.join(key);
        store.write_parquet(key, &[b.clone(), b]).unwrap();
        let rows: usize = read_parquet(&path)
            .unwrap()
            .iter()
            .map(|b| b.num_rows())
            .sum();
        assert_eq!(rows, 6);
        assert_eq!(std::fs::read_dir(root.join("_staging")).unwrap().count(), 0);
        store.write_parquet("empty.parquet", &[]).unwrap();
        assert!(!root.join("empty.parquet").exists(), "no batches, no file");
        let found: Vec<String> = store.list("").unwrap().into_iter().map(|f| f.key).collect();
        assert_eq!(found, [key], "staging is not listed");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
