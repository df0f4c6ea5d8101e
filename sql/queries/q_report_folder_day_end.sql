-- Midnight after the last request logged by files under the folder $prefix: where the demo's week ends.
-- Used by oomlab.report.demo_choices.
SELECT date_trunc('day', max(r.last_ts)) + INTERVAL 1 DAY
FROM agg_request_sources AS r
JOIN stg_sources AS s USING (source_id)
WHERE starts_with(s.path, $prefix);
