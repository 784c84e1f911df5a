//! `kplane bench history`: days of `flows` and `queues` windows as a finished store holds
//! them (one merged file per lane and hour, the real schemas), rolled up by the processor's
//! own rollup (every hour but the newest, which a live store has not finished), then the
//! API's two heaviest reads — the top flows of a range and a switch's queues per window —
//! over the last hour, day, week and month: at the windows' resolution (no rollups) and at the one
//! the API chooses, side by side, with their sums checked equal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use arrow_array::builder::{FixedSizeBinaryBuilder, ListBuilder, UInt32Builder};
use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, TimestampNanosecondArray,
    UInt8Array, UInt16Array, UInt32Array, UInt64Array,
};
use clap::Args;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use kplane_store::Store;
use kplane_store::layout::{FileKind, date_filter, partition_key, table_key};
use kplane_store::query::{scalar, session};
use kplane_store::rollup::{Resolution, roll_up, source_sql};
use kplane_store::tables::window_schemas;

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Days of 1 s windows written (ranges of an hour, a day, a week and 30 days are queried
    /// where the history is that long).
    #[arg(long, default_value_t = 7)]
    days: u32,
    /// Lanes (bus partitions) writing.
    #[arg(long, default_value_t = 1)]
    lanes: u32,
    /// Flows a lane sees in every window (and as many queues).
    #[arg(long, default_value_t = 20)]
    rows: u32,
    /// Runs of each query (the median is printed).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Where the history is written: an empty local directory or `s3://bucket/prefix` (an
    /// S3-compatible object store, configured by the `AWS_*` environment variables). Its
    /// files are removed at the end. Default: a fresh temporary directory.
    #[arg(long)]
    store: Option<std::path::PathBuf>,
}

const SECOND: i64 = 1_000_000_000;
const HOUR: i64 = 3_600 * SECOND;
/// 2026-11-01T00:00:00Z: the first hour written.
const START: i64 = 1_793_491_200 * SECOND;

/// Columns that change from window to window; the others name the entity (flow, queue).
const MEASURES: [&str; 12] = [
    "reports",
    "bytes",
    "samples",
    "e2e_latency_mean_ns",
    "e2e_latency_max_ns",
    "transit_mean_ns",
    "transit_max_ns",
    "occupancy_mean",
    "occupancy_max",
    "congested_samples",
    "congested_ns",
    "tx_utilization_mean",
];

/// One lane's rows of one hour of `schema`'s table: `rows` entities in each 1 s window.
fn hour_rows(schema: &SchemaRef, lane: u32, hour: i64, rows: u32) -> anyhow::Result<RecordBatch> {
    let windows = 3_600i64;
    let n = (windows * i64::from(rows)) as usize;
    // Row k: window k / rows, entity k % rows.
    let window = |k: usize| hour + (k as i64 / i64::from(rows)) * SECOND;
    let entity = |k: usize| (k % rows as usize) as u64 + u64::from(lane) * 1_000;
    let measure = |k: usize| {
        (window(k) as u64 ^ entity(k).rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 44
    };
    let columns = schema
        .fields()
        .iter()
        .map(|f| {
            let name = f.name().as_str();
            let varies = MEASURES.contains(&name);
            let v = |k: usize| if varies { measure(k) + 1 } else { entity(k) };
            let column: ArrayRef = match f.data_type() {
                DataType::Timestamp(..) => {
                    let at_end = !matches!(name, "window_start" | "first_seen");
                    Arc::new(
                        TimestampNanosecondArray::from_iter_values(
                            (0..n).map(|k| window(k) + if at_end { SECOND } else { 0 }),
                        )
                        .with_timezone("UTC"),
                    )
                }
                DataType::UInt32 if name == "partition" => {
                    Arc::new(UInt32Array::from(vec![lane; n]))
                }
                DataType::UInt8 => {
                    Arc::new(UInt8Array::from_iter_values((0..n).map(|k| v(k) as u8)))
                }
                DataType::UInt16 => {
                    Arc::new(UInt16Array::from_iter_values((0..n).map(|k| v(k) as u16)))
                }
                DataType::UInt32 => {
                    Arc::new(UInt32Array::from_iter_values((0..n).map(|k| v(k) as u32)))
                }
                DataType::UInt64 => Arc::new(UInt64Array::from_iter_values((0..n).map(v))),
                DataType::Int64 => {
                    Arc::new(Int64Array::from_iter_values((0..n).map(|k| v(k) as i64)))
                }
                DataType::Float64 => {
                    Arc::new(Float64Array::from_iter_values((0..n).map(|k| v(k) as f64)))
                }
                DataType::Boolean => Arc::new(BooleanArray::from(vec![false; n])),
                DataType::FixedSizeBinary(16) => {
                    let mut b = FixedSizeBinaryBuilder::with_capacity(n, 16);
                    let net = if name == "src_ip" { 1 } else { 2 };
                    for k in 0..n {
                        let e = entity(k);
                        let ip = std::net::Ipv4Addr::new(10, net, (e >> 8) as u8, e as u8);
                        b.append_value(kplane_model::ip_to_16(ip.into()))?;
                    }
                    Arc::new(b.finish())
                }
                DataType::List(_) => {
                    let mut b = ListBuilder::new(UInt32Builder::new());
                    for k in 0..n {
                        let spine = 2 + (entity(k) % 4) as u32;
                        b.append_value([Some(1), Some(spine), Some(6)]);
                    }
                    Arc::new(b.finish())
                }
                other => anyhow::bail!("{name}: no generator for {other}"),
            };
            Ok(column)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// Writes the history: per table, lane and hour one merged file; then rolls every hour but
/// the newest up. Returns the seconds spent writing and rolling up.
fn write_history(root: &Store, a: &HistoryArgs) -> anyhow::Result<(f64, f64)> {
    let hours = i64::from(a.days) * 24;
    let started = Instant::now();
    let mut rolled = Duration::ZERO;
    for (table, schema) in window_schemas()
        .iter()
        .filter(|(t, _)| matches!(*t, "flows" | "queues"))
    {
        for h in 0..hours {
            let hour = START + h * HOUR;
            let dir = partition_key(table, hour);
            for lane in 0..a.lanes {
                let writer = format!("reports-p{lane}");
                let name = FileKind::Compacted {
                    first_end: hour + SECOND,
                    last_end: hour + HOUR,
                    level: 3,
                }
                .file_name(&writer);
                let batch = hour_rows(schema, lane, hour, a.rows)?;
                root.write_parquet(&format!("{dir}/{name}"), &[batch])?;
                if h + 1 < hours {
                    let t = Instant::now();
                    roll_up(root, &writer, table, &dir, hour)?;
                    rolled += t.elapsed();
                }
            }
        }
    }
    let total = started.elapsed().as_secs_f64();
    Ok((total - rolled.as_secs_f64(), rolled.as_secs_f64()))
}

/// The two reads, as the API's routes make them, over `[from, to)` from `source`.
fn reads(source_flows: &str, source_queues: &str, from: i64, to: i64) -> [(String, String); 2] {
    // As the API's ranges: the time, and the date partitions that can hold it.
    let range = format!(
        "window_start >= to_timestamp_nanos({from}) AND window_start < to_timestamp_nanos({to}) \
         AND {}",
        date_filter(from, Some(to))
    );
    [
        (
            format!(
                "SELECT src_ip, dst_ip, src_port, dst_port, protocol, sum(reports) AS reports, \
                   sum(bytes) AS bytes, max(e2e_latency_max_ns) AS latency_max_ns \
                 FROM {source_flows} AS flows WHERE {range} \
                 GROUP BY src_ip, dst_ip, src_port, dst_port, protocol \
                 ORDER BY reports DESC LIMIT 100"
            ),
            format!("SELECT sum(reports) FROM {source_flows} AS flows WHERE {range}"),
        ),
        (
            format!(
                "SELECT window_start, node_id, egress_port, queue_id, sum(samples) AS samples, \
                   max(occupancy_max) AS occupancy_max \
                 FROM {source_queues} AS queues WHERE {range} \
                 GROUP BY window_start, node_id, egress_port, queue_id"
            ),
            format!("SELECT sum(samples) FROM {source_queues} AS queues WHERE {range}"),
        ),
    ]
}

/// Median time of `sql` from a fresh context, its rows, and the check sum.
async fn measure(
    root: &Store,
    sql: &str,
    check: &str,
    runs: usize,
) -> anyhow::Result<(Duration, usize, f64)> {
    let mut times = Vec::new();
    let mut rows = 0;
    for _ in 0..runs {
        let started = Instant::now();
        let ctx = session(root).await?;
        let batches = ctx.sql(sql).await?.collect().await?;
        times.push(started.elapsed());
        rows = batches.iter().map(RecordBatch::num_rows).sum();
    }
    let ctx = session(root).await?;
    let sum = scalar(&ctx.sql(check).await?.collect().await?);
    times.sort();
    Ok((times[times.len() / 2], rows, sum))
}

pub fn run(a: HistoryArgs) -> anyhow::Result<()> {
    ensure!(
        a.days >= 1 && a.runs >= 1,
        "--days and --runs must be at least 1"
    );
    let location = a.store.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("kplane-bench-history-{}", std::process::id()))
    });
    let root = Store::open(&location)?;
    ensure!(
        root.list("")?.is_empty(),
        "{} is not empty: the bench writes a history of its own and removes it",
        location.display()
    );
    let (wrote, rolled) = write_history(&root, &a).context("writing the history")?;
    let bytes = |t: &str| -> u64 {
        let files = root.list(&table_key(t)).unwrap_or_default();
        files.iter().map(|f| f.bytes).sum()
    };
    println!("store: {}", root.location());
    println!(
        "kplane bench history: {} days × {} lanes × {} flows and {} queues per 1 s window \
         ({:.1} M rows per table); written in {wrote:.1} s, rolled up in {rolled:.1} s \
         (every hour but the newest); on disk: flows {} MiB, flows_1m {} MiB, flows_1h {} MiB, \
         queues {} MiB, queues_1m {} MiB, queues_1h {} MiB",
        a.days,
        a.lanes,
        a.rows,
        a.rows,
        f64::from(a.days) * 86_400.0 * f64::from(a.lanes) * f64::from(a.rows) / 1e6,
        bytes("flows") >> 20,
        bytes("flows_1m") >> 20,
        bytes("flows_1h") >> 20,
        bytes("queues") >> 20,
        bytes("queues_1m") >> 20,
        bytes("queues_1h") >> 20,
    );
    println!(
        "{:<6} {:<28} {:>10} {:>12} {:>10} {:>12} {:>8}",
        "range", "read", "windows ms", "rows", "chosen", "chosen ms", "rows"
    );
    let end = START + i64::from(a.days) * 24 * HOUR;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let spans = [
        ("hour", HOUR),
        ("day", 24 * HOUR),
        ("week", 7 * 24 * HOUR),
        ("month", 30 * 24 * HOUR),
    ];
    for (span_name, span) in spans.into_iter().filter(|(_, s)| *s <= end - START) {
        let from = end - span;
        let chosen = Resolution::for_span(span);
        let raw = reads("flows", "queues", from, end);
        let picked = reads(
            &source_sql(&root, "flows", chosen, from),
            &source_sql(&root, "queues", chosen, from),
            from,
            end,
        );
        for (name, ((raw_sql, raw_check), (sql, check))) in ["top 100 flows", "queues per window"]
            .iter()
            .zip(raw.iter().zip(&picked))
        {
            let (t0, rows0, sum0) = rt.block_on(measure(&root, raw_sql, raw_check, a.runs))?;
            let (t1, rows1, sum1) = rt.block_on(measure(&root, sql, check, a.runs))?;
            ensure!(
                sum0 == sum1,
                "{span_name} {name}: the windows sum to {sum0}, the {} rows to {sum1}",
                chosen.as_str()
            );
            println!(
                "{:<6} {:<28} {:>10.0} {:>12} {:>10} {:>12.0} {:>8}",
                span_name,
                name,
                t0.as_secs_f64() * 1e3,
                rows0,
                chosen.as_str(),
                t1.as_secs_f64() * 1e3,
                rows1
            );
        }
    }
    for f in root.list("")? {
        root.delete(&f.key)?;
    }
    if let Some(dir) = root.local_root() {
        std::fs::remove_dir_all(dir)?;
    }
    Ok(())
}
