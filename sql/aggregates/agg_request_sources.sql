-- The aggregate tier (see agg_request_minutes): per source (file) and model version, the requests, the first and
-- last request's time, and the rows whose values no device can have (oomlab_request_possible false: loaded by an
-- earlier version, which ingest now sets aside; the water levels leave them out and the data-quality note counts
-- them). Bounded by files x versions.
CREATE OR REPLACE VIEW agg_request_sources AS
SELECT
    source_id,
    model_version,
    count(*) AS requests,
    min(ts) AS first_ts,
    max(ts) AS last_ts,
    count(*) FILTER (WHERE NOT sizes_possible) AS impossible_rows
FROM stg_requests
GROUP BY source_id, model_version;
