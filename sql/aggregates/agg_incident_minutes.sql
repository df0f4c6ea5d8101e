-- The aggregate tier (see agg_request_minutes): per instance, GPU and minute (UTC), the three requests the incident
-- timeline draws of a busy minute (q_incident_requests): the first, the one with the highest and the one with the
-- lowest peak (peak_allocated, else allocated_after, as the timeline plots it), each whole as a struct
-- (stg_incident_requests defines its fields). These are the rows report/downsample.py keeps of a bucket, at a grain
-- finer than the chart's 43 s buckets would be over the 6 hours it draws, within a bucket's width. Bounded by
-- instances x minutes. Ties are broken by time, then file and line, so that both engines pick the same request; a
-- struct value is never NULL, so DuckDB's arg_max and Spark's max_by see the same rows.
CREATE OR REPLACE VIEW agg_incident_minutes AS
SELECT
    instance,
    gpu_index,
    minute,
    count(*) AS requests,
    arg_min(request, (ts, source_id, line)) AS first_request,
    -- a request without any reading sorts below every size for the highest and above it for the lowest
    arg_max(request, (coalesce(plotted_peak, -1), ts, source_id, line)) AS highest_request,
    arg_min(request, (coalesce(plotted_peak, 9223372036854775807), ts, source_id, line)) AS lowest_request
FROM stg_incident_requests
GROUP BY instance, gpu_index, minute;
