-- pull prometheus --lake: the lake's engine_samples of the pulled range ($since..$until), so that a sample the lake holds
-- is not added again (ingest/series.py merges against them). Never written back: only rows of new sources are.
INSERT INTO engine_samples BY NAME
SELECT COLUMNS(lambda c: c <> 'date') FROM read_parquet($glob, hive_partitioning = true, union_by_name = true)
WHERE ts BETWEEN $since AND $until ;
