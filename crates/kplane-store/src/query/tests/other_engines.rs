//! Other engines read the store in the middle of merges as kplane does: DuckDB through
//! `deploy/duckdb/kplane.sql`'s `kplane_files`, Spark through the list `kplane files` prints
//! ([`Store::table_files`]). Each reads its whole directory too, to show the list matters.
//! Skip without the Python module unless `KPLANE_REQUIRE_DUCKDB=1` / `KPLANE_REQUIRE_SPARK=1`
//! (CI).

use std::path::Path;
use std::process::Command;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;

use super::{kplane_reads, local_store, mid_merge_store};
use crate::layout::table_key;

/// kplane's count and sum of `t`, through the store view: 4 rows, sum 70.
fn kplane_counts(store: &crate::Store) -> [i64; 2] {
    let b = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(kplane_reads(store, "SELECT count(*), sum(v) FROM t"));
    let counts = [
        b[0].column(0).as_primitive::<Int64Type>().value(0),
        b[0].column(1).as_primitive::<Int64Type>().value(0),
    ];
    assert_eq!(counts, [4, 70]);
    counts
}

/// The numbers `script` prints, run by python3 with `args`; `None` when `module` is missing
/// and `require` (an environment variable) is not set.
fn python(script: &str, args: &[&str], module: &str, require: &str) -> Option<Vec<i64>> {
    let out = Command::new("python3")
        .args(["-c", script])
        .args(args)
        .output()
        .expect("python3");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && stderr.contains(&format!("No module named '{module}'")) {
        assert!(
            std::env::var(require).as_deref() != Ok("1"),
            "{require}=1 but the {module} module is missing (pip install {module})"
        );
        eprintln!("{module} missing: skipping (pip install {module})");
        return None;
    }
    assert!(out.status.success(), "{stderr}");
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect(),
    )
}

#[test]
fn duckdb_reads_a_store_in_the_middle_of_a_merge_as_kplane_does() {
    let script = r#"
import sys, duckdb
table, macros = sys.argv[1], sys.argv[2]
con = duckdb.connect()
con.execute(open(macros).read())
con.execute(f"SET VARIABLE files = (SELECT list(file) FROM kplane_files('{table}'))")
rule = con.sql("SELECT count(*), sum(v) FROM read_parquet(getvariable('files'), hive_partitioning = true)").fetchall()[0]
glob = con.sql(f"SELECT count(*), sum(v) FROM read_parquet('{table}/**/*.parquet', hive_partitioning = true)").fetchall()[0]
print(*rule, *glob)
"#;
    let (root, store) = local_store("duckdb");
    mid_merge_store(&store);
    let macros = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/duckdb/kplane.sql");
    let table = root.join(table_key("t"));
    let args = [table.to_str().unwrap(), macros.to_str().unwrap()];
    if let Some(counts) = python(script, &args, "duckdb", "KPLANE_REQUIRE_DUCKDB") {
        assert_eq!(
            counts[..2],
            kplane_counts(&store),
            "DuckDB through kplane_files"
        );
        assert_eq!(
            counts[2..],
            [9, 160],
            "DuckDB's plain glob counts merged rows again"
        );
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn spark_reads_a_store_in_the_middle_of_a_merge_as_kplane_does() {
    // `basePath` keeps the `date=` and `hour=` directories as partition columns; Spark reads
    // nanosecond timestamps only as integers (ns since the epoch), when told to.
    let script = r#"
import sys
from pyspark.sql import SparkSession
table, files = sys.argv[1], sys.argv[2:]
spark = (SparkSession.builder.master("local[1]").appName("kplane-files")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.legacy.parquet.nanosAsLong", "true").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
def counts(df):
    r = df.selectExpr("count(*)", "sum(v)", "count(distinct hour)").first()
    return [r[0], r[1], r[2]]
listed = counts(spark.read.option("basePath", table).parquet(*files))
whole = counts(spark.read.parquet(table))
print(*listed, *whole)
spark.stop()
"#;
    let (root, store) = local_store("spark");
    mid_merge_store(&store);
    let files = store.table_files("t").unwrap();
    assert_eq!(
        files.len(),
        2,
        "the level-2 merge and lane p1's window: {files:?}"
    );
    let table = root.canonicalize().unwrap().join(table_key("t"));
    let mut args = vec![table.to_str().unwrap()];
    args.extend(files.iter().map(String::as_str));
    if let Some(counts) = python(script, &args, "pyspark", "KPLANE_REQUIRE_SPARK") {
        let [n, sum] = kplane_counts(&store);
        assert_eq!(counts[..3], [n, sum, 1], "Spark through the listed files");
        assert_eq!(
            counts[3..5],
            [9, 160],
            "Spark over the directory counts merged rows again"
        );
    }
    std::fs::remove_dir_all(&root).unwrap();
}

/// The list names the same files on an object store, as `s3://bucket/key`.
#[test]
fn the_listed_files_on_an_object_store_are_its_urls() {
    let Some(s3) = crate::s3_test::Server::start() else {
        return;
    };
    let store = s3.store("files");
    mid_merge_store(&store);
    let files = store.table_files("t").unwrap();
    let names: Vec<&str> = files
        .iter()
        .map(|f| f.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(
        names,
        ["reports-p0-c10_30.l2.parquet", "reports-p1-w10.parquet"]
    );
    assert!(
        files
            .iter()
            .all(|f| f.starts_with("s3://") && f.contains("/tables/t/date=")),
        "{files:?}"
    );
}
