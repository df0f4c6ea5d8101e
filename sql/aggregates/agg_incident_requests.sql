-- The aggregate tier (see agg_request_minutes): the requests an incident timeline draws (q_incident_requests), per
-- instance and minute (UTC), each whole as a struct `request`:
-- * every request of the minutes around a request that ended in out-of-memory (its minute and the one either
--   side): the moments a reader studies at full resolution, bounded by the OOMs;
-- * elsewhere each GPU's minute by its first request and those with the highest and the lowest peak
--   (peak_allocated, else allocated_after, as the timeline plots it): the rows report/downsample.py keeps of a
--   bucket. Three hours either side of an OOM in 1500 points are 43 s buckets of three rows, so three rows a
--   minute draw that chart within a bucket's width; a minute of two requests keeps both.
-- Bounded by instances x minutes plus the OOMs' minutes. Ties are broken by time, then file and line, so that both
-- engines pick the same request; a struct value is never NULL, so DuckDB's arg_max and Spark's max_by see the same
-- rows. A pick that is also a detail row is kept once.
CREATE OR REPLACE VIEW agg_incident_requests AS
WITH plotted AS (
    SELECT
        instance,
        gpu_index,
        date_trunc('minute', ts) AS minute,
        ts,
        source_id,
        line,
        is_oom,
        coalesce(peak_allocated, allocated_after) AS plotted_peak,
        struct_pack(
            ts := ts,
            request_id := request_id,
            gpu_index := gpu_index,
            model_version := model_version,
            is_oom := is_oom,
            batch_size := batch_size,
            input_sequence_length := input_sequence_length,
            output_sequence_length := output_sequence_length,
            allocated_after := allocated_after,
            reserved_after := reserved_after,
            peak_allocated := coalesce(peak_allocated, allocated_after),
            device_total := device_total
        ) AS request
    FROM stg_requests
    WHERE instance IS NOT NULL AND ts IS NOT NULL
), oom_minutes AS (
    SELECT instance, minute FROM plotted WHERE is_oom
    UNION
    SELECT instance, minute - INTERVAL 1 MINUTE FROM plotted WHERE is_oom
    UNION
    SELECT instance, minute + INTERVAL 1 MINUTE FROM plotted WHERE is_oom
), picks AS (
    SELECT
        instance,
        minute,
        arg_min(request, (ts, source_id, line)) AS first_request,
        -- a request without any reading sorts below every size for the highest and above it for the lowest
        arg_max(request, (coalesce(plotted_peak, -1), ts, source_id, line)) AS highest_request,
        arg_min(request, (coalesce(plotted_peak, 9223372036854775807), ts, source_id, line)) AS lowest_request
    FROM plotted
    GROUP BY instance, gpu_index, minute
)
SELECT instance, minute, first_request AS request FROM picks
UNION
SELECT instance, minute, highest_request FROM picks
UNION
SELECT instance, minute, lowest_request FROM picks
UNION
SELECT p.instance, p.minute, p.request
FROM plotted AS p
JOIN oom_minutes AS o ON o.instance = p.instance AND o.minute = p.minute;
