//! The read side: a DataFusion `SessionContext` with every table of the store registered
//! (Parquet listing tables with `date` / `hour` partition columns) and kplane's SQL functions
//! — what the intent API, `kplane query` and the tests use.

mod any_value;
mod distribution;
mod view;

use std::sync::Arc;

use arrow_schema::DataType;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::ListingOptions;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::prelude::SessionContext;

pub use view::StoreView;

use crate::backend::Store;
use crate::layout::table_key;

/// How a store table's directory is listed: Parquet files under `date=` / `hour=`
/// partition directories.
pub fn listing_options() -> ListingOptions {
    ListingOptions::new(Arc::new(ParquetFormat::default()))
        .with_file_extension(".parquet")
        .with_table_partition_cols(vec![
            ("date".to_string(), DataType::Utf8),
            ("hour".to_string(), DataType::Utf8),
        ])
}

/// Makes `ctx` read `store` through [`StoreView`]: readers skip what a merge has replaced.
pub fn use_store_view(ctx: &SessionContext, store: &Store) {
    let (url, objects) = store.objects();
    let url = ObjectStoreUrl::parse(&url).expect("a store's URL is a URL");
    ctx.register_object_store(url.as_ref(), Arc::new(StoreView::new(objects)));
}

/// Registers every store table of `store` in `ctx` (local directories are created if
/// missing, so a query before the first window returns no rows rather than an error).
pub async fn register_store(ctx: &SessionContext, store: &Store) -> crate::Result<Vec<String>> {
    use_store_view(ctx, store);
    let mut names = Vec::new();
    for (name, schema) in crate::rollup::all_tables() {
        let url = store.dir_url(&table_key(&name))?;
        ctx.register_listing_table(&name, url, listing_options(), Some(schema), None)
            .await?;
        names.push(name);
    }
    Ok(names)
}

/// `ip_text(addr)`: the store's 16-byte addresses (IPv4 as IPv4-mapped) as text, e.g.
/// `SELECT ip_text(src_ip), reports FROM flows`.
pub fn ip_text_udf() -> datafusion::logical_expr::ScalarUDF {
    use arrow_array::cast::AsArray;
    use arrow_array::{Array, StringArray};
    use datafusion::logical_expr::{ColumnarValue, Volatility, create_udf};
    create_udf(
        "ip_text",
        vec![DataType::FixedSizeBinary(16)],
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| {
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let a = arrays[0].as_fixed_size_binary();
            let out: StringArray = (0..a.len())
                .map(|i| {
                    a.is_valid(i).then(|| {
                        let mut b = [0u8; 16];
                        b.copy_from_slice(a.value(i));
                        kplane_model::ip_from_16(b).to_string()
                    })
                })
                .collect();
            Ok(ColumnarValue::Array(Arc::new(out)))
        }),
    )
}

/// An address prefix (`10.0.0.0/8`, `2001:db8::/32`, or one address) as the 16-byte form
/// and a prefix length over it (IPv4 lengths shifted by the 96 bits of the mapping).
pub fn parse_prefix(s: &str) -> Option<([u8; 16], u32)> {
    let (ip, len) = match s.split_once('/') {
        Some((ip, len)) => (ip, Some(len.parse::<u32>().ok()?)),
        None => (s, None),
    };
    let ip: std::net::IpAddr = ip.trim().parse().ok()?;
    let (max, shift) = if ip.is_ipv4() { (32, 96) } else { (128, 0) };
    let len = len.unwrap_or(max);
    (len <= max).then(|| (kplane_model::ip_to_16(ip), len + shift))
}

fn in_prefix(addr: &[u8], (net, len): &([u8; 16], u32)) -> bool {
    let full = (*len / 8) as usize;
    if addr.len() != 16 || addr[..full] != net[..full] {
        return false;
    }
    let rest = len % 8;
    rest == 0 || (addr[full] ^ net[full]) >> (8 - rest) == 0
}

/// `ip_in(addr, 'prefix')`: whether a stored address is inside a prefix, e.g.
/// `WHERE ip_in(src_ip, '10.0.0.0/8')`. A malformed prefix is an error.
pub fn ip_in_udf() -> datafusion::logical_expr::ScalarUDF {
    use arrow_array::cast::AsArray;
    use arrow_array::{Array, BooleanArray};
    use datafusion::common::ScalarValue;
    use datafusion::error::DataFusionError;
    use datafusion::logical_expr::{ColumnarValue, Volatility, create_udf};
    create_udf(
        "ip_in",
        vec![DataType::FixedSizeBinary(16), DataType::Utf8],
        DataType::Boolean,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| {
            let prefix = match &args[1] {
                ColumnarValue::Scalar(ScalarValue::Utf8(Some(p))) => p.clone(),
                _ => {
                    return Err(DataFusionError::Plan(
                        "ip_in: the prefix must be a string literal".into(),
                    ));
                }
            };
            let net = parse_prefix(&prefix).ok_or_else(|| {
                DataFusionError::Plan(format!("ip_in: {prefix:?} is not an address prefix"))
            })?;
            let arrays = ColumnarValue::values_to_arrays(&args[..1])?;
            let a = arrays[0].as_fixed_size_binary();
            let out: BooleanArray = (0..a.len())
                .map(|i| a.is_valid(i).then(|| in_prefix(a.value(i), &net)))
                .collect();
            Ok(ColumnarValue::Array(Arc::new(out)))
        }),
    )
}

/// A fresh context over `store`, with kplane's SQL functions.
pub async fn session(store: &Store) -> crate::Result<SessionContext> {
    let ctx = SessionContext::new();
    register_udfs(&ctx);
    register_store(&ctx, store).await?;
    Ok(ctx)
}

/// Registers kplane's SQL functions (`ip_text`, `ip_in`, `distribution`, and `any_value` in
/// place of DataFusion's: see any_value.rs) in `ctx`.
pub fn register_udfs(ctx: &SessionContext) {
    ctx.register_udf(ip_text_udf());
    ctx.register_udf(ip_in_udf());
    ctx.register_udaf(distribution::distribution_udaf());
    ctx.register_udaf(any_value::any_value_udaf());
}

/// Runs `sql` over `store` on a private runtime (tests, tools).
pub fn sql_blocking(store: &Store, sql: &str) -> crate::Result<Vec<arrow_array::RecordBatch>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let ctx = session(store).await?;
        // A running processor compacts the store while it is read: planning again lists it
        // afresh.
        let mut retries = 0;
        loop {
            // Planning reads files' footers too (statistics): it meets a merge as often.
            match async { ctx.sql(sql).await?.collect().await }.await {
                Err(e) if retries < 10 && is_compacted_away(&e.to_string()) => {
                    retries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                done => return Ok(done?),
            }
        }
    })
}

/// Whether a query failed because a file its plan listed was compacted away (or expired by
/// retention) before it was read: a processor changes the store while it is read; planning
/// again lists it afresh.
pub fn is_compacted_away(error: &str) -> bool {
    error.contains(".parquet not found")
}

/// The single `Int64`/`UInt64`/`Float64` value of a one-row, one-column result (0 when empty
/// or null) — `SELECT sum(…)` in tests and tools.
pub fn scalar(batches: &[arrow_array::RecordBatch]) -> f64 {
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int64Type, UInt64Type};
    let Some(c) = batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .map(|b| b.column(0))
    else {
        return 0.0;
    };
    if c.is_null(0) {
        return 0.0;
    }
    if let Some(a) = c.as_primitive_opt::<Int64Type>() {
        a.value(0) as f64
    } else if let Some(a) = c.as_primitive_opt::<UInt64Type>() {
        a.value(0) as f64
    } else if let Some(a) = c.as_primitive_opt::<Float64Type>() {
        a.value(0)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod other_engines;

    #[test]
    fn a_file_compacted_away_mid_query_is_told_from_other_errors() {
        // DataFusion's message when a listed file is gone (seen during a compaction).
        assert!(is_compacted_away(
            "Parquet error: External: Object at location /d/tables/flows/date=2026-11-25/hour=14/reports-p7-w1.parquet not found: No such file or directory (os error 2)"
        ));
        assert!(!is_compacted_away("table 'flowz' not found"));
    }

    /// A store in the middle of merges, table `t` (columns `window_start`, `window_end`,
    /// `v`): lane p0's windows 10, 20, 30, its level-1 merge of 10–20 and level-2 merge of
    /// 10–30 published beside their sources; lane p1's window 10. Each value once: 10, 10
    /// (p1), 20, 30.
    pub(super) fn local_store(tag: &str) -> (std::path::PathBuf, Store) {
        let root = std::env::temp_dir().join(format!("kplane-store-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        (root.clone(), Store::local(root))
    }

    pub(super) fn mid_merge_store(store: &Store) {
        use arrow_array::{Int64Array, RecordBatch, TimestampNanosecondArray};
        use arrow_schema::{Field, Schema, TimeUnit};

        let ts = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
        let schema = Arc::new(Schema::new(vec![
            Field::new("window_start", ts.clone(), false),
            Field::new("window_end", ts, false),
            Field::new("v", DataType::Int64, false),
        ]));
        let rows = |ends: &[i64]| {
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(
                        TimestampNanosecondArray::from(
                            ends.iter().map(|e| e - 10).collect::<Vec<_>>(),
                        )
                        .with_timezone("UTC"),
                    ),
                    Arc::new(TimestampNanosecondArray::from(ends.to_vec()).with_timezone("UTC")),
                    Arc::new(Int64Array::from(ends.to_vec())),
                ],
            )
            .unwrap()
        };
        let dir = crate::layout::partition_key("t", 0);
        for (name, ends) in [
            ("reports-p0-w10", &[10][..]),
            ("reports-p0-w20", &[20]),
            ("reports-p0-w30", &[30]),
            ("reports-p1-w10", &[10]),
            ("reports-p0-c10_20.l1", &[10, 20]),
            ("reports-p0-c10_30.l2", &[10, 20, 30]),
        ] {
            store
                .write_parquet(&format!("{dir}/{name}.parquet"), &[rows(ends)])
                .unwrap();
        }
    }

    /// `sql` over table `t` of `store`, read as kplane reads it (through the store view).
    pub(super) async fn kplane_reads(store: &Store, sql: &str) -> Vec<arrow_array::RecordBatch> {
        let ctx = SessionContext::new();
        use_store_view(&ctx, store);
        let url = store.dir_url(&table_key("t")).unwrap();
        ctx.register_listing_table("t", url, listing_options(), None, None)
            .await
            .unwrap();
        ctx.sql(sql).await.unwrap().collect().await.unwrap()
    }

    /// Merges published their files and have not deleted their sources yet: a query over
    /// the store reads every row once.
    #[tokio::test]
    async fn a_query_in_the_middle_of_a_merge_reads_each_row_once() {
        let (root, store) = local_store("view");
        reads_each_row_once(&store).await;
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A store written before a column was added to its table (a queue's `egress_port`) reads
    /// as the table is now, the column null in the old files' rows.
    #[tokio::test]
    async fn a_file_written_before_a_column_was_added_reads_it_as_null() {
        use arrow_array::{Array, RecordBatch};
        use datafusion::common::ScalarValue;

        let (root, store) = local_store("old-columns");
        let (_, queues) = crate::tables::window_schemas()
            .iter()
            .find(|(name, _)| *name == "queues")
            .unwrap();
        let old = Arc::new(arrow_schema::Schema::new(
            queues
                .fields()
                .iter()
                .filter(|f| f.name() != "egress_port")
                .cloned()
                .collect::<Vec<_>>(),
        ));
        let one = |dt: &DataType| {
            ScalarValue::new_one(dt)
                .or_else(|_| ScalarValue::new_zero(dt))
                .and_then(|v| v.to_array_of_size(1))
                .unwrap()
        };
        let row = RecordBatch::try_new(
            old.clone(),
            old.fields().iter().map(|f| one(f.data_type())).collect(),
        )
        .unwrap();
        let dir = crate::layout::partition_key("queues", 0);
        store
            .write_parquet(&format!("{dir}/reports-p0-w1.parquet"), &[row])
            .unwrap();
        let ctx = session(&store).await.unwrap();
        let batches = ctx
            .sql("SELECT node_id, egress_port, queue_id FROM queues")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let b = &batches[0];
        assert_eq!(b.num_rows(), 1);
        assert_eq!(b.column(1).data_type(), &DataType::UInt16);
        assert!(b.column(1).is_null(0), "no port in the old file: null");
        assert!(b.column(0).is_valid(0) && b.column(2).is_valid(0));
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// The same in a bucket of an S3-compatible object store.
    #[tokio::test]
    async fn a_query_in_the_middle_of_a_merge_reads_each_row_once_on_an_object_store() {
        let Some(s3) = crate::s3_test::Server::start() else {
            return;
        };
        reads_each_row_once(&s3.store("view")).await;
    }

    async fn reads_each_row_once(store: &Store) {
        use arrow_array::Int64Array;

        mid_merge_store(store);
        let batches = kplane_reads(store, "SELECT v FROM t ORDER BY v").await;
        let values: Vec<i64> = batches
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect();
        assert_eq!(values, [10, 10, 20, 30]);
    }

    #[test]
    fn prefixes_match_v4_and_v6() {
        let p = parse_prefix("10.1.0.0/16").unwrap();
        let ip = |s: &str| kplane_model::ip_to_16(s.parse().unwrap());
        assert!(in_prefix(&ip("10.1.200.3"), &p));
        assert!(!in_prefix(&ip("10.2.0.1"), &p));
        assert!(!in_prefix(&ip("2001:db8::1"), &p));
        let p6 = parse_prefix("2001:db8::/33").unwrap();
        assert!(in_prefix(&ip("2001:db8:7fff::1"), &p6));
        assert!(!in_prefix(&ip("2001:db8:8000::1"), &p6));
        assert!(in_prefix(
            &ip("10.0.0.9"),
            &parse_prefix("10.0.0.9").unwrap()
        ));
        assert!(parse_prefix("10.0.0.0/33").is_none());
        assert!(parse_prefix("nonsense").is_none());
    }
}
