-- ingest --lake: the highest source, snapshot and OOM event id the lake holds, so that the working database
-- numbers its new rows after them and ids stay unique across every source of the lake. Parquet's column
-- statistics answer these without reading the rows.
SELECT
    coalesce((SELECT max(source_id) FROM read_parquet($manifest)), 0),
    coalesce((SELECT max(snapshot_id) FROM read_parquet($snapshots, hive_partitioning = true)), 0),
    coalesce((SELECT max(event_id) FROM read_parquet($events, hive_partitioning = true)), 0);
