#!/usr/bin/env bash
# The analytics store read by another engine: `kplane up` (debug build) runs for 40 s and
# stops, then DuckDB (PyPI) reads every table's current Parquet files straight from the store
# directory (listed by deploy/duckdb/kplane.sql's kplane_files), and its row counts and sums
# must equal `kplane query`'s.
# Skips (exit 0) without the duckdb Python module unless KPLANE_REQUIRE_DUCKDB=1 (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c 'import duckdb' 2>/dev/null; then
    if [[ ${KPLANE_REQUIRE_DUCKDB:-} == 1 ]]; then
        echo "duckdb check: the duckdb Python module is missing (pip install duckdb)" >&2
        exit 1
    fi
    echo "duckdb check: skipped (pip install duckdb; CI installs it)"
    exit 0
fi
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
failed=0
flows=0
for check in "${checks[@]}"; do
    read -r table column <<<"$check"
    ours=$("$bin" query --data-dir "$store" \
        "SELECT count(*) AS n, CAST(sum($column) AS BIGINT) AS s FROM $table" |
        awk -F'|' '/^\|[ 0-9]+\|/ { gsub(/ /, ""); print $2, $3 }')
    theirs=$(python3 - "$store/tables/$table" "$column" <<'PY'
import sys, duckdb
path, column = sys.argv[1], sys.argv[2]
con = duckdb.connect()
con.execute(open("deploy/duckdb/kplane.sql").read())
con.execute(f"SET VARIABLE files = (SELECT list(file) FROM kplane_files('{path}'))")
n, s = con.sql(
    f"SELECT count(*), CAST(sum({column}) AS BIGINT) "
    f"FROM read_parquet(getvariable('files'), hive_partitioning = true)"
).fetchall()[0]
print(n, s)
PY
)
    if [[ -z $ours || $ours != "$theirs" ]]; then
        echo "duckdb check: $table: kplane query says [$ours], DuckDB [$theirs]" >&2
        failed=1
    else
        echo "duckdb check: $table: $ours (rows, sum of $column) in both"
    fi
    [[ $table == flows ]] && flows=$(awk '{print $1}' <<<"$ours")
done
[[ ${flows:-0} -gt 0 ]] || { echo "duckdb check: no flows in the store" >&2; exit 1; }
exit $failed
