-- ingest --lake: the lake's manifest ($manifest, its sources/data_0.parquet) as the sources of the working
-- database, so that an unchanged file is skipped and a changed one replaced exactly as in a database.
INSERT INTO sources BY NAME SELECT * FROM read_parquet($manifest);
