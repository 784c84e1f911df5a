//! `kplane bench store`: an hour of window results written the way the stream processor
//! writes them (every lane commits one file per window, fsynced, with its checkpoint line),
//! with the configured tiered compaction and without any, then the same SQL over the hour
//! on each: files a query lists, and its time from a cold listing, side by side.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use arrow_array::{RecordBatch, TimestampNanosecondArray, UInt32Array, UInt64Array};
use clap::Args;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::prelude::SessionContext;
use kplane_store::Store;
use kplane_store::compaction::Compaction;
use kplane_store::layout::{partition_key, table_key};
use kplane_store::query::{listing_options, use_store_view};
use kplane_stream_processor::config::Config;
use kplane_stream_processor::panes::Checkpoint;
use kplane_stream_processor::store::LaneStore;

#[derive(Debug, Args)]
pub struct StoreArgs {
    /// Lanes (bus partitions) writing, each one file per window.
    #[arg(long, default_value_t = 8)]
    lanes: u32,
    /// Minutes of 1 s windows to write (the queried hour; one more window of the next hour
    /// completes it).
    #[arg(long, default_value_t = 60)]
    minutes: u32,
    /// Rows per window per lane (e.g. the flows a lane sees in a window).
    #[arg(long, default_value_t = 1000)]
    rows: u32,
    /// Runs of the query per layout (the median is printed).
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

const SECOND: i64 = 1_000_000_000;
/// 2026-11-26T00:00:00Z: the hour written.
const HOUR_START: i64 = 1_795_651_200 * SECOND;
const QUERY: &str = "SELECT switch_id, count(*) AS windows, max(latency_p99_ns) AS worst \
                     FROM t GROUP BY switch_id ORDER BY switch_id";

fn schema() -> SchemaRef {
    let ts = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
    Arc::new(Schema::new(vec![
        Field::new("window_start", ts.clone(), false),
        Field::new("window_end", ts, false),
        Field::new("switch_id", DataType::UInt32, false),
        Field::new("flow_id", DataType::UInt64, false),
        Field::new("latency_p99_ns", DataType::UInt64, false),
    ]))
}

/// One lane's rows of the window ending at `end` (deterministic).
fn window_rows(lane: u32, end: i64, rows: u32) -> RecordBatch {
    let n = rows as usize;
    let mix = |i: u64| {
        (i ^ (end as u64).rotate_left(17) ^ u64::from(lane) << 40)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
    };
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(TimestampNanosecondArray::from(vec![end - SECOND; n]).with_timezone("UTC")),
            Arc::new(TimestampNanosecondArray::from(vec![end; n]).with_timezone("UTC")),
            Arc::new(UInt32Array::from_iter_values(
                (0..n as u64).map(|i| (mix(i) % 20) as u32),
            )),
            Arc::new(UInt64Array::from_iter_values(
                (0..n as u64).map(|i| u64::from(lane) << 32 | i),
            )),
            Arc::new(UInt64Array::from_iter_values(
                (0..n as u64).map(|i| 1_000 + mix(i) % 200_000),
            )),
        ],
    )
    .expect("columns match the schema")
}

/// What writing the hour gave.
struct Written {
    seconds: f64,
    data_bytes: u64,
    merged_bytes: u64,
    merges: u64,
}

fn write_hour(dir: &Path, a: &StoreArgs, compaction: Compaction) -> anyhow::Result<Written> {
    let mut lanes = (0..a.lanes)
        .map(|p| {
            LaneStore::open(&Store::local(dir), &format!("reports-p{p}"), compaction)
                .map(|(s, _)| s)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let started = Instant::now();
    let windows = i64::from(a.minutes) * 60;
    // The hour's windows, then the next hour's first (it completes the hour).
    let ends = (1..=windows)
        .map(|i| HOUR_START + i * SECOND)
        .chain([HOUR_START + 3_601 * SECOND]);
    for (offset, end) in ends.enumerate() {
        for (p, lane) in lanes.iter_mut().enumerate() {
            let checkpoint = Checkpoint {
                through_offset: offset as i64,
                read_until: offset as i64,
                emitted_until_ns: end,
            };
            let rows = window_rows(p as u32, end, a.rows);
            lane.commit(
                vec![("t", end - SECOND, end, rows)],
                Vec::new(),
                1,
                checkpoint,
                None,
            )?;
        }
    }
    Ok(Written {
        seconds: started.elapsed().as_secs_f64(),
        data_bytes: lanes.iter().map(|l| l.counts.bytes_written).sum(),
        merged_bytes: lanes.iter().map(|l| l.counts.merged_bytes).sum(),
        merges: lanes.iter().map(|l| l.counts.compactions).sum(),
    })
}

/// Files of the queried hour, and the median time of the query from a fresh context.
async fn query_hour(dir: &Path, runs: usize) -> anyhow::Result<(usize, Duration, u64)> {
    let store = Store::local(dir);
    let files = store
        .current_parquet(&partition_key("t", HOUR_START))?
        .len();
    let mut times = Vec::new();
    let mut rows = 0;
    for _ in 0..runs {
        let started = Instant::now();
        let ctx = SessionContext::new();
        use_store_view(&ctx, &store);
        let url = store.dir_url(&table_key("t"))?;
        ctx.register_listing_table("t", url, listing_options(), Some(schema()), None)
            .await?;
        let batches = ctx
            .sql(&QUERY.replace("FROM t", "FROM t WHERE date = '2026-11-26' AND hour = '00'"))
            .await?
            .collect()
            .await?;
        times.push(started.elapsed());
        rows = batches
            .iter()
            .map(|b| {
                let c = b.column_by_name("windows").expect("selected");
                let c = c
                    .as_any()
                    .downcast_ref::<arrow_array::Int64Array>()
                    .expect("count is Int64");
                c.values().iter().map(|&v| v as u64).sum::<u64>()
            })
            .sum();
    }
    times.sort();
    Ok((files, times[times.len() / 2], rows))
}

pub fn run(a: StoreArgs) -> anyhow::Result<()> {
    // Sources deleted at once, as the merges make them: the bench measures all the work.
    let configured = Compaction {
        grace: std::time::Duration::ZERO,
        ..Config::default().compaction()
    };
    // Nothing is below a target of 0 bytes: no file is ever merged.
    let none = Compaction {
        target_bytes: 0,
        ..configured
    };
    println!(
        "kplane bench store: {} lanes × {} min of 1 s windows × {} rows, one file per lane per window, each commit fsynced; query: {QUERY} over the hour (median of {}, fresh context and listing each)",
        a.lanes, a.minutes, a.rows, a.runs
    );
    println!(
        "{:<44} {:>8} {:>10} {:>12} {:>8} {:>12} {:>10}",
        "layout", "files", "write s", "merged/data", "merges", "query ms", "rows"
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    for (name, compaction) in [
        ("per-window files (no compaction)", none),
        (
            &*format!(
                "tiered (fan-in {}, target {} MiB)",
                configured.fan_in,
                configured.target_bytes >> 20
            ),
            configured,
        ),
    ] {
        let dir = std::env::temp_dir().join(format!("kplane-bench-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let w = write_hour(&dir, &a, compaction).context("writing the hour")?;
        let (files, median, rows) = rt
            .block_on(query_hour(&dir, a.runs))
            .context("querying the hour")?;
        let expected = u64::from(a.lanes) * u64::from(a.minutes) * 60 * u64::from(a.rows);
        anyhow::ensure!(
            rows == expected,
            "{name}: the query counted {rows} rows, {expected} were written"
        );
        println!(
            "{:<44} {:>8} {:>10.1} {:>12.2} {:>8} {:>12.1} {:>10}",
            name,
            files,
            w.seconds,
            w.merged_bytes as f64 / w.data_bytes as f64,
            w.merges,
            median.as_secs_f64() * 1e3,
            rows
        );
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}
