-- ingest --lake: every recurring job the lake holds ($glob: its calendar_rules files), so that the runs of all
-- of them are rebuilt over the time the whole lake covers (they are written apart, as cron_N.parquet files).
-- Only rows of new sources are written back to the lake, so these never are.
INSERT INTO calendar_rules BY NAME
SELECT COLUMNS(lambda c: c <> 'date') FROM read_parquet($glob, hive_partitioning = true, union_by_name = true);
