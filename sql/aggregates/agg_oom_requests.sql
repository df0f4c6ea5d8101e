-- The aggregate tier (see agg_request_minutes): every request that ended in out-of-memory, whole: an OOM event
-- from a request log is matched to its row by (source_id, line) for the failing request's baseline, model
-- version and card. Bounded by the OOMs, not by the traffic.
CREATE OR REPLACE VIEW agg_oom_requests AS
SELECT *
FROM stg_requests
WHERE is_oom;
