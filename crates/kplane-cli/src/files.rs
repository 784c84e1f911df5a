//! `kplane files TABLE`: the current Parquet files of a table, one per line, for another
//! engine (Spark, Trino, DuckDB, pandas) to read. A merge publishes the merged file before it
//! removes its sources; reading this list rather than the directory sees every row once.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kplane_runtime::ConfigSource;

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
    let store = match crate::query::open_store(&source, a.data_dir, "files") {
        Ok(s) => s,
        Err(code) => return code,
    };
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
