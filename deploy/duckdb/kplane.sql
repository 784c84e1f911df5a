-- kplane's store for DuckDB: `kplane_files(table_dir)` lists a table's current Parquet files,
-- leaving out those a merge has replaced. A processor lane merges its files by publishing the
-- merged file and deleting the sources later (`compact-grace`); the merged file's name says
-- what it replaced (`<lane>-c<first end>_<last end>.l<level>.parquet` replaces the lane's `<lane>-w<end>` files
-- with an end in that range, and its smaller merged files, in the same directory). Reading
-- these files only, a query sees every row once, in the middle of a merge too — the rule
-- kplane's own readers apply (kplane_store::layout::superseded).
--
--   .read deploy/duckdb/kplane.sql
--   SET VARIABLE files = (SELECT list(file) FROM kplane_files('kplane-data/stream-processor/tables/flows'));
--   SELECT count(*) FROM read_parquet(getvariable('files'), hive_partitioning = true);
CREATE OR REPLACE MACRO kplane_files(table_dir) AS TABLE
WITH named AS (
    SELECT
        file,
        regexp_replace(file, '/[^/]*$', '') AS dir,
        regexp_extract(file, '([^/]*)-w([0-9]+)\.parquet$', 1) AS w_writer,
        TRY_CAST(regexp_extract(file, '-w([0-9]+)\.parquet$', 1) AS BIGINT) AS w_end,
        regexp_extract(file, '([^/]*)-c([0-9]+)_([0-9]+)\.l[0-9]+\.parquet$', 1) AS c_writer,
        TRY_CAST(regexp_extract(file, '-c([0-9]+)_([0-9]+)\.l[0-9]+\.parquet$', 1) AS BIGINT) AS c_first,
        TRY_CAST(regexp_extract(file, '-c([0-9]+)_([0-9]+)\.l[0-9]+\.parquet$', 2) AS BIGINT) AS c_last
    FROM glob(table_dir || '/**/*.parquet')
)
SELECT f.file
FROM named f
WHERE NOT EXISTS (
    SELECT 1
    FROM named m
    WHERE m.c_writer <> '' AND m.dir = f.dir
      AND (
          (f.w_writer = m.c_writer AND f.w_end BETWEEN m.c_first AND m.c_last)
          OR (f.c_writer = m.c_writer AND m.c_first <= f.c_first AND f.c_last <= m.c_last
              AND (m.c_first <> f.c_first OR m.c_last <> f.c_last))
      )
)
ORDER BY f.file;
