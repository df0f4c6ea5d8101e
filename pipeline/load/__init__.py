"""Load stage: the DuckDB file, its schema from `sql/`, one transaction per source, and the inserts."""
