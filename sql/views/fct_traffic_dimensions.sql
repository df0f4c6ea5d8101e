-- Requests and OOMs in long form, one row per dimension and traffic row (a request minute, a minute's requests in
-- one prompt-size bucket, an OOM event), so that one query (filtered on `dimension`) cuts OOM rates by any of
-- them. `key` is the label shown (NULL: not recorded), `key_order` sorts it (hour, ISO weekday, bucket lower
-- bound; NULL for names). `requests` counts the requests of the row, `ooms` its OOM events (0 or 1);
-- `ooms_with_traffic` counts only OOMs of instances with a request log (the numerator of a rate). Instance,
-- version and time come from fct_traffic_events; the requests' prompt-size buckets from agg_request_buckets.
CREATE OR REPLACE VIEW fct_traffic_dimensions AS
WITH timed_dims(dimension) AS (
    VALUES ('instance'), ('model_version'), ('hour_of_day'), ('day_of_week')
), sized_dims(dimension) AS (
    VALUES ('input_length'), ('output_length'), ('batch_size'), ('batch_tokens')
), labelled AS (
    SELECT
        d.dimension, e.ts, e.kind, e.has_request_log, e.requests, e.ooms,
        CASE d.dimension WHEN 'hour_of_day' THEN e.hour_of_day WHEN 'day_of_week' THEN e.day_of_week END
            AS key_order,
        CASE d.dimension
            WHEN 'instance' THEN e.instance
            WHEN 'model_version' THEN e.model_version
            WHEN 'hour_of_day' THEN lpad(e.hour_of_day::VARCHAR, 2, '0') || ':00'
            WHEN 'day_of_week' THEN strftime(e.ts, '%a')
        END AS name_key
    FROM fct_traffic_events e CROSS JOIN timed_dims d
    UNION ALL
    SELECT
        d.dimension, e.ts, e.kind, e.has_request_log, e.requests, e.ooms,
        CASE d.dimension
            WHEN 'input_length' THEN e.input_bucket
            WHEN 'output_length' THEN e.output_bucket
            WHEN 'batch_size' THEN e.batch_bucket
            WHEN 'batch_tokens' THEN e.batch_tokens_bucket
        END,
        NULL
    FROM fct_traffic_events e CROSS JOIN sized_dims d
    WHERE e.kind = 'oom'
    UNION ALL
    SELECT dimension, minute, 'request', true, requests, 0, key_order, NULL
    FROM agg_request_buckets
)
SELECT
    dimension,
    CASE
        WHEN dimension IN ('instance', 'model_version', 'hour_of_day', 'day_of_week') THEN name_key
        WHEN key_order = 0 THEN '0'
        ELSE key_order::VARCHAR || '-' || (2 * key_order - 1)::VARCHAR
    END AS key,
    key_order,
    ts,
    requests,
    ooms,
    (kind = 'oom' AND has_request_log)::INTEGER AS ooms_with_traffic
FROM labelled;
