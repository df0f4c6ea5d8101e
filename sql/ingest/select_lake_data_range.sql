-- ingest --lake: the time the lake's requests and OOM events cover ($requests, $ooms: their files), with the
-- same bounds as select_data_range; the runs of recurring jobs are expanded over it and the new files' time.
SELECT min(lo), max(hi) FROM (
    SELECT min(ts) AS lo, max(ts) AS hi FROM read_parquet($requests, hive_partitioning = true)
    WHERE ts >= TS_EARLIEST() AND ts < TS_LATEST()
    UNION ALL
    SELECT min(ts), max(ts) FROM read_parquet($ooms, hive_partitioning = true)
    WHERE ts >= TS_EARLIEST() AND ts < TS_LATEST()
);
