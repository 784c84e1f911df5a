#!/usr/bin/env bash
# The analytics store read by other engines: `kplane up` (debug build) runs for 40 s and stops,
# then DuckDB (PyPI) reads every window table's current Parquet files straight from the store
# directory (listed by deploy/duckdb/kplane.sql's kplane_files) and Spark (PyPI pyspark, with
# Java 17) reads the files `kplane files <table>` prints; both engines' row counts and sums
# must equal `kplane query`'s.
# An engine whose Python module is missing is skipped (exit 0) unless KPLANE_REQUIRE_DUCKDB=1
# / KPLANE_REQUIRE_SPARK=1 (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
engines=()
for e in duckdb:DUCKDB pyspark:SPARK; do
    module=${e%%:*} require=KPLANE_REQUIRE_${e##*:}
    if python3 -c "import $module" 2>/dev/null; then
        engines+=("$module")
    elif [[ ${!require:-} == 1 ]]; then
        echo "engines check: the $module Python module is missing (pip install $module)" >&2
        exit 1
    else
        echo "engines check: $module skipped (pip install $module; CI installs it)"
    fi
done
((${#engines[@]})) || exit 0
source scripts/lib.sh
bin=$(test_binary)
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
"$bin" up --api "127.0.0.1:$(free_port)" --data-dir "$data" --duration 40s >"$data/up.log" 2>&1 \
    || { cat "$data/up.log" >&2; exit 1; }
store="$data/stream-processor"

# Per table: rows, and a sum of a column that every row carries.
checks=(
    "flows reports"
    "queues samples"
    "links samples"
    "destinations reports"
    "sources reports"
    "hop_latency samples"
)
tables=()
for check in "${checks[@]}"; do
    read -r table column <<<"$check"
    tables+=("$table:$column")
    "$bin" files --data-dir "$store" "$table" >"$data/$table.files"
done

# Each engine prints "table rows sum" per table.
duckdb() {
    python3 - "$store/tables" "${tables[@]}" <<'PY'
import sys, duckdb
root, checks = sys.argv[1], sys.argv[2:]
con = duckdb.connect()
con.execute(open("deploy/duckdb/kplane.sql").read())
for check in checks:
    table, column = check.split(":")
    con.execute(f"SET VARIABLE files = (SELECT list(file) FROM kplane_files('{root}/{table}'))")
    n, s = con.sql(
        f"SELECT count(*), CAST(sum({column}) AS BIGINT) "
        f"FROM read_parquet(getvariable('files'), hive_partitioning = true)"
    ).fetchall()[0]
    print(table, n, s)
PY
}
pyspark() {
    python3 - "$store/tables" "$data" "${tables[@]}" 2>"$data/spark.log" <<'PY'
import sys
from pyspark.sql import SparkSession
root, lists, checks = sys.argv[1], sys.argv[2], sys.argv[3:]
spark = (SparkSession.builder.master("local[1]").appName("kplane-engines-check")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.legacy.parquet.nanosAsLong", "true").getOrCreate())
for check in checks:
    table, column = check.split(":")
    files = open(f"{lists}/{table}.files").read().split()
    df = spark.read.option("basePath", f"{root}/{table}").parquet(*files)
    r = df.selectExpr("count(*)", f"CAST(sum({column}) AS BIGINT)").first()
    print(table, r[0], r[1])
spark.stop()
PY
}

failed=0
for engine in "${engines[@]}"; do
    "$engine" >"$data/$engine.out" || { cat "$data/spark.log" >&2 2>/dev/null; exit 1; }
done
flows=0
for check in "${checks[@]}"; do
    read -r table column <<<"$check"
    ours=$("$bin" query --data-dir "$store" \
        "SELECT count(*) AS n, CAST(sum($column) AS BIGINT) AS s FROM $table" |
        awk -F'|' '/^\|[ 0-9]+\|/ { gsub(/ /, ""); print $2, $3 }')
    for engine in "${engines[@]}"; do
        theirs=$(awk -v t="$table" '$1 == t { print $2, $3 }' "$data/$engine.out")
        if [[ -z $ours || $ours != "$theirs" ]]; then
            echo "engines check: $table: kplane query says [$ours], $engine [$theirs]" >&2
            failed=1
        fi
    done
    echo "engines check: $table: $ours (rows, sum of $column) in kplane query and ${engines[*]}"
    [[ $table == flows ]] && flows=$(awk '{print $1}' <<<"$ours")
done
[[ ${flows:-0} -gt 0 ]] || { echo "engines check: no flows in the store" >&2; exit 1; }
exit $failed
