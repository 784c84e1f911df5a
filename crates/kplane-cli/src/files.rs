//! `kplane files TABLE`: the current Parquet files of a table, one per line, for another
//! engine (Spark, Trino, DuckDB, pandas) to read. A merge publishes the merged file before it
//! removes its sources; reading this list rather than the directory sees every row once.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kplane_runtime::{ConfigSource, EXIT_CONFIG};

#[derive(Debug, Args)]
pub struct FilesArgs {
    /// The table, e.g. `flows`, `queues_1m`, `alerts`, `anomalies`.
    table: String,
    /// The store: a directory, or `s3://bucket/prefix` on an S3-compatible object store
    /// (configured by the `AWS_*` environment variables). Default: the configured
    /// `stream-processor.data-dir`.
    #[arg(long, value_name = "DIR|URL")]
    data_dir: Option<PathBuf>,
}

pub fn run(source: ConfigSource, a: FilesArgs) -> ExitCode {
    let names: Vec<String> = kplane_store::rollup::all_tables()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    if !names.contains(&a.table) {
        eprintln!(
            "kplane files: no table {:?}; the store's tables: {}",
            a.table,
            names.join(", ")
        );
        return ExitCode::from(2);
    }
    let dir = match a.data_dir {
        Some(d) => d,
        None => match crate::config::load(&source) {
            Ok(c) => c.stream_processor.data_dir,
            Err(e) => {
                eprint!("kplane: {e}");
                return ExitCode::from(EXIT_CONFIG);
            }
        },
    };
    let store = match kplane_store::Store::open(&dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kplane files: {e}");
            return ExitCode::from(2);
        }
    };
    if store.local_root().is_some_and(|d| !d.is_dir()) {
        eprintln!(
            "kplane files: no analytics store at {} (run the stream processor, or pass --data-dir)",
            dir.display()
        );
        return ExitCode::from(2);
    }
    match store.table_files(&a.table) {
        Ok(files) => {
            for f in files {
                println!("{f}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kplane files: {e}");
            ExitCode::FAILURE
        }
    }
}
