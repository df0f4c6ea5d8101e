-- The time the ingested data covers (requests and OOM events): what recurring jobs are expanded over. Times
-- no GPU log can carry (oomlab_settings: TS_EARLIEST, TS_LATEST; a database an earlier version loaded may hold
-- them) are left out, so that one year-9999 row cannot stretch the expansion over eight millennia.
SELECT min(lo), max(hi) FROM (
    SELECT min(ts) AS lo, max(ts) AS hi FROM requests
    WHERE ts >= TS_EARLIEST() AND ts < TS_LATEST()
    UNION ALL
    SELECT min(ts), max(ts) FROM oom_events
    WHERE ts >= TS_EARLIEST() AND ts < TS_LATEST()
);
