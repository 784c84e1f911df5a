//! Rollups: once a writer's hour of `flows`, `queues` or `links` is complete, its windows are
//! summed into 1-minute and 1-hour windows, written to `<table>_1m` and `<table>_1h` with the
//! table's own schema (one file per writer and hour: `<writer>-r<start of the hour>`), so that
//! a query over days reads minutes or hours instead of seconds, and the same SQL runs on any
//! resolution. Sums, minima and maxima stay exact; means are weighted by what they were means
//! of (reports, samples), so a rolled-up mean is the mean over its seconds. What does not sum
//! is not rolled up: per-flow hop-latency percentiles (`hop_latency`) and distinct counts
//! (`sources`, `destinations`).
//!
//! Readers take each partition's rollups up to the newest hour its writer rolled up and the
//! table itself after that ([`source_sql`]), so a range ending now is whole.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use datafusion::datasource::MemTable;
use datafusion::prelude::{ParquetReadOptions, SessionContext};

use crate::backend::Store;
use crate::error::Result;
use crate::layout::{FileKind, date_hour, partition_key, table_key};

/// A rolled-up resolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The window tables themselves (1 s windows by default).
    Windows,
    Minute,
    Hour,
}

impl Resolution {
    /// The suffix of its tables' names (`flows_1m`); none for the windows.
    fn suffix(self) -> Option<&'static str> {
        match self {
            Self::Windows => None,
            Self::Minute => Some("1m"),
            Self::Hour => Some("1h"),
        }
    }

    /// What a reader uses for a time range of `span_ns`: the windows for up to 6 hours,
    /// minutes up to 7 days, hours beyond (a few thousand rows per entity at most).
    pub fn for_span(span_ns: i64) -> Self {
        const HOUR: i64 = 3_600_000_000_000;
        if span_ns <= 6 * HOUR {
            Self::Windows
        } else if span_ns <= 7 * 24 * HOUR {
            Self::Minute
        } else {
            Self::Hour
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Windows => "window",
            Self::Minute => "1m",
            Self::Hour => "1h",
        }
    }
}

/// How one table rolls up: its grouping keys and its aggregates (SQL over a `b` column, the
/// coarser window's start).
struct Rolled {
    table: &'static str,
    keys: &'static str,
    aggregates: &'static str,
}

const ROLLED: [Rolled; 3] = [
    Rolled {
        table: "flows",
        keys: "partition, src_ip, dst_ip, src_port, dst_port, protocol, path_id, flow_id",
        aggregates: "sum(reports) AS reports, sum(bytes) AS bytes, \
            first_value(path ORDER BY window_start) AS path, \
            sum(e2e_latency_mean_ns * reports) \
              / nullif(sum(CASE WHEN e2e_latency_mean_ns IS NULL THEN 0 ELSE reports END), 0) \
              AS e2e_latency_mean_ns, \
            max(e2e_latency_max_ns) AS e2e_latency_max_ns, \
            sum(transit_mean_ns * reports) \
              / nullif(sum(CASE WHEN transit_mean_ns IS NULL THEN 0 ELSE reports END), 0) \
              AS transit_mean_ns, \
            max(transit_max_ns) AS transit_max_ns, \
            min(first_seen) AS first_seen, max(last_seen) AS last_seen, \
            first_value(previous_path ORDER BY window_start) AS previous_path, \
            bool_or(path_changed) AS path_changed",
    },
    Rolled {
        table: "queues",
        keys: "partition, node_id, egress_port, queue_id",
        aggregates: "sum(samples) AS samples, \
            sum(occupancy_mean * samples) / nullif(sum(samples), 0) AS occupancy_mean, \
            max(occupancy_max) AS occupancy_max, \
            sum(congested_samples) AS congested_samples, sum(congested_ns) AS congested_ns",
    },
    Rolled {
        table: "links",
        keys: "partition, node_id, egress_port, next_node_id",
        aggregates: "sum(samples) AS samples, \
            sum(tx_utilization_mean * samples) / nullif(sum(samples), 0) AS tx_utilization_mean, \
            max(tx_utilization_max) AS tx_utilization_max, \
            last_value(end_samples ORDER BY window_start) AS end_samples, \
            last_value(tx_utilization_end_mean ORDER BY window_start) \
              AS tx_utilization_end_mean",
    },
];

/// The name of `table` at `resolution` (`flows_1m`; `flows` for the windows).
pub fn table_at(table: &str, resolution: Resolution) -> String {
    match resolution.suffix() {
        Some(suffix) => format!("{table}_{suffix}"),
        None => table.to_string(),
    }
}

/// Every rollup table with its schema (the rolled table's).
pub fn rollup_tables() -> Vec<(String, SchemaRef)> {
    let mut out = Vec::new();
    for r in &ROLLED {
        let schema = schema_of(r.table);
        for res in [Resolution::Minute, Resolution::Hour] {
            out.push((table_at(r.table, res), schema.clone()));
        }
    }
    out
}

/// Every table a reader finds in the store: [`crate::tables::all`] and the rollups.
pub fn all_tables() -> Vec<(String, SchemaRef)> {
    crate::tables::all()
        .into_iter()
        .map(|(n, s)| (n.to_string(), s))
        .chain(rollup_tables())
        .collect()
}

fn schema_of(table: &str) -> SchemaRef {
    crate::tables::window_schemas()
        .iter()
        .find(|(n, _)| *n == table)
        .map(|(_, s)| s.clone())
        .expect("every rolled table is a window table")
}

/// The SQL rolling `source` (a table of `r.table`'s schema) up into windows of `interval`.
fn roll_sql(r: &Rolled, source: &str, interval: &str) -> String {
    format!(
        "SELECT b AS window_start, b + INTERVAL '{interval}' AS window_end, {keys}, {aggregates} \
         FROM (SELECT date_bin(INTERVAL '{interval}', window_start) AS b, * FROM {source}) \
         GROUP BY b, {keys}",
        keys = r.keys,
        aggregates = r.aggregates,
    )
}

/// Rolls `writer`'s current files of `table` in `dir` — one complete hour, starting at
/// `hour_start` — up into minutes and the hour. Does nothing when `table` is not rolled up,
/// when both rollups are there already (a reopened lane meets its old hours again) or when
/// the writer has no files there. Returns whether it wrote.
pub fn roll_up(
    store: &Store,
    writer: &str,
    table: &str,
    dir: &str,
    hour_start: i64,
) -> Result<bool> {
    let Some(r) = ROLLED.iter().find(|r| r.table == table) else {
        return Ok(false);
    };
    let name = FileKind::Rollup { hour_start }.file_name(writer);
    let targets: Vec<String> = [Resolution::Minute, Resolution::Hour]
        .iter()
        .map(|&res| {
            format!(
                "{}/{name}",
                partition_key(&table_at(table, res), hour_start)
            )
        })
        .collect();
    if targets
        .iter()
        .map(|k| store.exists(k))
        .collect::<Result<Vec<_>>>()?
        .iter()
        .all(|&there| there)
    {
        return Ok(false);
    }
    let sources = writer_files(store, dir, writer)?;
    if sources.is_empty() {
        return Ok(false);
    }
    let schema = schema_of(table);
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    let (minutes, hours) = rt.block_on(async {
        let ctx = SessionContext::new();
        crate::query::use_store_view(&ctx, store);
        let paths = sources
            .iter()
            .map(|k| store.url_of(k))
            .collect::<Result<Vec<_>>>()?;
        let windows = ctx
            .read_parquet(paths, ParquetReadOptions::default().schema(&schema))
            .await?;
        ctx.register_table("windows", windows.into_view())?;
        let minutes = ctx
            .sql(&roll_sql(r, "windows", "1 minute"))
            .await?
            .collect()
            .await?;
        let minutes = conform(&schema, minutes)?;
        let table = MemTable::try_new(schema.clone(), vec![minutes.clone()])?;
        ctx.register_table("minutes", Arc::new(table))?;
        let hours = ctx
            .sql(&roll_sql(r, "minutes", "1 hour"))
            .await?
            .collect()
            .await?;
        Ok::<_, crate::StoreError>((minutes, conform(&schema, hours)?))
    })?;
    store.write_parquet(&targets[0], &minutes)?;
    store.write_parquet(&targets[1], &hours)?;
    Ok(true)
}

/// `writer`'s current window and merged files in `dir`.
fn writer_files(store: &Store, dir: &str, writer: &str) -> Result<Vec<String>> {
    Ok(store
        .current_parquet(dir)?
        .into_iter()
        .filter(|f| {
            matches!(
                FileKind::parse(f.name()),
                Some((w, FileKind::Window { .. } | FileKind::Compacted { .. })) if w == writer
            )
        })
        .map(|f| f.key)
        .collect())
}

/// The batches in `schema`'s column order and types (the SQL's sums and divisions may widen).
fn conform(schema: &SchemaRef, batches: Vec<RecordBatch>) -> Result<Vec<RecordBatch>> {
    batches
        .into_iter()
        .map(|b| {
            let columns = schema
                .fields()
                .iter()
                .map(|f| {
                    let c = b.column_by_name(f.name()).ok_or_else(|| {
                        arrow_schema::ArrowError::SchemaError(format!(
                            "rollup has no column {}",
                            f.name()
                        ))
                    })?;
                    datafusion::arrow::compute::cast(c, f.data_type())
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(RecordBatch::try_new(schema.clone(), columns)?)
        })
        .collect()
}

/// For each partition (the `partition` column; writer `<topic>-p<n>` writes partition `n`),
/// the end of the newest hour its writer rolled `table` up to — among the hours from
/// `from_ns` on. Only the days that can hold them are walked: a partition whose newest
/// rolled-up hour ended before `from_ns` reads its windows for the whole range either way.
pub fn coverage(store: &Store, table: &str, from_ns: i64) -> BTreeMap<u32, i64> {
    const HOUR: i64 = 3_600_000_000_000;
    let first = format!("date={}", date_hour(from_ns.saturating_sub(HOUR)).0);
    let dir = table_key(&table_at(table, Resolution::Hour));
    // Unlistable days are left out: their windows are read instead, a whole answer still.
    let mut files = Vec::new();
    for day in store.subdirs(&dir).unwrap_or_default() {
        if day >= first {
            files.extend(store.list(&format!("{dir}/{day}")).unwrap_or_default());
        }
    }
    let mut out: BTreeMap<u32, i64> = BTreeMap::new();
    for f in &files {
        let Some((writer, FileKind::Rollup { hour_start })) = FileKind::parse(f.name()) else {
            continue;
        };
        let Some(partition) = writer
            .rsplit_once("-p")
            .and_then(|(_, p)| p.parse::<u32>().ok())
        else {
            continue;
        };
        let end = out.entry(partition).or_insert(i64::MIN);
        *end = (*end).max(hour_start + HOUR);
    }
    out
}

/// A SQL table expression with `table`'s rows at `resolution` for a range starting at
/// `from_ns`: each partition's rollups up to the end of its newest rolled-up hour, the
/// windows after it. At the windows' resolution, or with no rollups in the range, the table
/// itself.
pub fn source_sql(store: &Store, table: &str, resolution: Resolution, from_ns: i64) -> String {
    if resolution == Resolution::Windows {
        return table.to_string();
    }
    let covered = coverage(store, table, from_ns);
    if covered.is_empty() {
        return table.to_string();
    }
    let mut until = String::from("CASE partition");
    for (p, end) in &covered {
        until += &format!(" WHEN {p} THEN to_timestamp_nanos({end})");
    }
    until += " ELSE to_timestamp_nanos(0) END";
    format!(
        "(SELECT * FROM {rolled} WHERE window_start < {until} \
         UNION ALL SELECT * FROM {table} WHERE window_start >= {until})",
        rolled = table_at(table, resolution),
    )
}

#[cfg(test)]
mod tests {
    use arrow_array::{
        ArrayRef, Float64Array, Int64Array, TimestampNanosecondArray, UInt8Array, UInt16Array,
        UInt32Array,
    };

    use super::*;
    use crate::query::{scalar, sql_blocking};

    const S: i64 = 1_000_000_000;
    const HOUR: i64 = 3_600 * S;
    // 2026-11-30T10:00:00Z
    const T0: i64 = 1_796_032_800 * S;

    /// `queues` rows of partition 3, one queue, for the 1 s windows starting at `starts`.
    fn queue_windows(starts: std::ops::Range<i64>) -> RecordBatch {
        let n = (starts.end - starts.start) as usize;
        let ts = |off: i64| {
            Arc::new(
                TimestampNanosecondArray::from_iter_values(
                    starts.clone().map(|i| T0 + (i + off) * S),
                )
                .with_timezone("UTC"),
            ) as ArrayRef
        };
        let columns: Vec<ArrayRef> = vec![
            ts(0),
            ts(1),
            Arc::new(UInt32Array::from(vec![3; n])),
            Arc::new(UInt32Array::from(vec![7; n])),
            Arc::new(UInt16Array::from(vec![2; n])),
            Arc::new(UInt8Array::from(vec![0; n])),
            Arc::new(Int64Array::from_iter_values(
                starts.clone().map(|i| 1 + i % 5),
            )),
            Arc::new(Float64Array::from_iter_values(
                starts.clone().map(|i| (i % 7) as f64),
            )),
            Arc::new(UInt32Array::from_iter_values(
                starts.clone().map(|i| (i % 11) as u32),
            )),
            Arc::new(Int64Array::from_iter_values(starts.clone().map(|i| i % 2))),
            Arc::new(Int64Array::from_iter_values(starts.map(|i| i % 3 * 1000))),
        ];
        RecordBatch::try_new(schema_of("queues"), columns).unwrap()
    }

    #[test]
    fn an_hour_rolls_up_into_minutes_and_the_hour_and_readers_take_the_windows_after_it() {
        let root = std::env::temp_dir().join(format!("kplane-store-rollup-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        rolls_up_and_reads(&Store::local(&root));
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// The same on an S3-compatible object store (moto's server; skipped without it unless
    /// `KPLANE_REQUIRE_S3` is set).
    #[test]
    fn an_hour_rolls_up_on_an_object_store_too() {
        let Some(s3) = crate::s3_test::Server::start() else {
            return;
        };
        rolls_up_and_reads(&s3.store("rollup"));
    }

    fn rolls_up_and_reads(store: &Store) {
        let dir = partition_key("queues", T0);
        // The hour in four files, and 90 s of the next hour not rolled up yet.
        for q in 0..4 {
            let first_end = T0 + (q * 900 + 1) * S;
            let name = FileKind::Window { first_end }.file_name("reports-p3");
            store
                .write_parquet(
                    &format!("{dir}/{name}"),
                    &[queue_windows(q * 900..(q + 1) * 900)],
                )
                .unwrap();
        }
        let next = partition_key("queues", T0 + HOUR);
        let name = FileKind::Window {
            first_end: T0 + HOUR + S,
        }
        .file_name("reports-p3");
        store
            .write_parquet(&format!("{next}/{name}"), &[queue_windows(3600..3690)])
            .unwrap();

        assert!(roll_up(store, "reports-p3", "queues", &dir, T0).unwrap());
        assert!(
            !roll_up(store, "reports-p3", "queues", &dir, T0).unwrap(),
            "done once"
        );
        assert!(!roll_up(store, "reports-p3", "hop_latency", &dir, T0).unwrap());

        let q = |sql: &str| scalar(&sql_blocking(store, sql).unwrap());
        let hour = "window_start < to_timestamp_nanos(1796036400000000000)";
        assert_eq!(q("SELECT count(*) FROM queues_1m"), 60.0);
        assert_eq!(q("SELECT count(*) FROM queues_1h"), 1.0);
        for table in ["queues_1m", "queues_1h"] {
            for column in ["samples", "congested_samples", "congested_ns"] {
                assert_eq!(
                    q(&format!("SELECT sum({column}) FROM {table}")),
                    q(&format!("SELECT sum({column}) FROM queues WHERE {hour}")),
                    "{table}.{column}"
                );
            }
            assert_eq!(
                q(&format!("SELECT max(occupancy_max) FROM {table}")),
                q(&format!(
                    "SELECT max(occupancy_max) FROM queues WHERE {hour}"
                ))
            );
        }
        // The hour's mean is the samples-weighted mean of its seconds.
        let mean = q(&format!(
            "SELECT sum(occupancy_mean * samples) / sum(samples) FROM queues WHERE {hour}"
        ));
        assert!((q("SELECT occupancy_mean FROM queues_1h") - mean).abs() < 1e-9);
        // Windows of the same minute and hour.
        assert_eq!(
            q(
                "SELECT count(*) FROM queues_1m WHERE window_end - window_start = INTERVAL '1 minute'"
            ),
            60.0
        );

        assert_eq!(
            coverage(store, "queues", T0),
            BTreeMap::from([(3, T0 + HOUR)])
        );
        // A range starting days after the newest rolled-up hour walks none of its days.
        assert_eq!(coverage(store, "queues", T0 + 48 * HOUR), BTreeMap::new());
        for res in [Resolution::Minute, Resolution::Hour] {
            let source = source_sql(store, "queues", res, T0);
            assert!(source.contains(&table_at("queues", res)), "{source}");
            assert_eq!(
                q(&format!("SELECT sum(samples) FROM {source} AS q")),
                q("SELECT sum(samples) FROM queues"),
                "{res:?}: the rollup's hour and the windows after it, each once"
            );
        }
        assert_eq!(
            source_sql(store, "queues", Resolution::Windows, T0),
            "queues"
        );
        assert_eq!(source_sql(store, "links", Resolution::Hour, T0), "links");
    }

    #[test]
    fn the_resolution_follows_the_span() {
        let h = 3_600_000_000_000;
        assert_eq!(Resolution::for_span(h), Resolution::Windows);
        assert_eq!(Resolution::for_span(24 * h), Resolution::Minute);
        assert_eq!(Resolution::for_span(30 * 24 * h), Resolution::Hour);
    }
}
