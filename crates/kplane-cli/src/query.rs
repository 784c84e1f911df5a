//! `kplane query "SQL"`: read-only SQL over the stream processor's analytics store.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use datafusion::arrow::util::pretty::pretty_format_batches;
use kplane_runtime::{ConfigSource, EXIT_CONFIG};

#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The query, e.g. "SELECT ip_text(src_ip), sum(reports) FROM flows GROUP BY 1".
    sql: String,
    /// The store: a directory, or `s3://bucket/prefix` on an S3-compatible object store
    /// (configured by the `AWS_*` environment variables). Default: the configured
    /// `stream-processor.data-dir`.
    #[arg(long, value_name = "DIR|URL")]
    data_dir: Option<PathBuf>,
}

pub fn run(source: ConfigSource, a: QueryArgs) -> ExitCode {
    let store = match open_store(&source, a.data_dir, "query") {
        Ok(s) => s,
        Err(code) => return code,
    };
    match kplane_store::query::sql_blocking(&store, &a.sql)
        .map_err(|e| e.to_string())
        .and_then(|b| pretty_format_batches(&b).map_err(|e| e.to_string()))
    {
        Ok(table) => {
            println!("{table}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kplane query: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The store of `--data-dir`, or of the configured `stream-processor.data-dir`; the exit code
/// when there is none (the problem printed, prefixed with `kplane <command>`).
pub(crate) fn open_store(
    source: &ConfigSource,
    data_dir: Option<PathBuf>,
    command: &str,
) -> Result<kplane_store::Store, ExitCode> {
    let dir = match data_dir {
        Some(d) => d,
        None => match crate::config::load(source) {
            Ok(c) => c.stream_processor.data_dir,
            Err(e) => {
                eprint!("kplane: {e}");
                return Err(ExitCode::from(EXIT_CONFIG));
            }
        },
    };
    let store = kplane_store::Store::open(&dir).map_err(|e| {
        eprintln!("kplane {command}: {e}");
        ExitCode::from(2)
    })?;
    if store.local_root().is_some_and(|d| !d.is_dir()) {
        eprintln!(
            "kplane {command}: no analytics store at {} (run the stream processor, or pass --data-dir)",
            dir.display()
        );
        return Err(ExitCode::from(2));
    }
    Ok(store)
}
