-- OOM events without a time: no --since/--until window holds them, so findings over a window leave them out.
-- Used by oomlab.api.
SELECT count(*) FROM stg_oom_events WHERE ts IS NULL;
