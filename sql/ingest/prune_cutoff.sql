-- The moment `oomlab prune --before` cuts at, kept for prune_counts.sql and prune_rows.sql in the same transaction.
CREATE OR REPLACE TEMP TABLE prune_cutoff AS SELECT CAST($before AS TIMESTAMP) AS before_ts;
