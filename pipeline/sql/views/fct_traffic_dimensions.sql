-- fct_traffic_events in long form, one row per event and dimension, so that one query (filtered on
-- `dimension`) cuts OOM rates by any of them. `key` is the label shown (NULL: not recorded), `key_order`
-- sorts it (hour, ISO weekday, bucket lower bound; NULL for names). `requests` and `ooms` are 0/1 per row;
-- `ooms_with_traffic` counts only OOMs of instances with a request log (the numerator of a rate).
CREATE OR REPLACE VIEW fct_traffic_dimensions AS
WITH dims(dimension) AS (
    VALUES ('instance'), ('model_version'), ('hour_of_day'), ('day_of_week'),
           ('input_length'), ('output_length'), ('batch_size'), ('batch_tokens')
), labelled AS (
    SELECT
        d.dimension, e.ts, e.kind, e.has_request_log,
        CASE d.dimension
            WHEN 'hour_of_day' THEN e.hour_of_day
            WHEN 'day_of_week' THEN e.day_of_week
            WHEN 'input_length' THEN e.input_bucket
            WHEN 'output_length' THEN e.output_bucket
            WHEN 'batch_size' THEN e.batch_bucket
            WHEN 'batch_tokens' THEN e.batch_tokens_bucket
        END AS key_order,
        CASE d.dimension
            WHEN 'instance' THEN e.instance
            WHEN 'model_version' THEN e.model_version
            WHEN 'hour_of_day' THEN lpad(e.hour_of_day::VARCHAR, 2, '0') || ':00'
            WHEN 'day_of_week' THEN strftime(e.ts, '%a')
        END AS name_key
    FROM fct_traffic_events e CROSS JOIN dims d
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
    (kind = 'request')::INTEGER AS requests,
    (kind = 'oom')::INTEGER AS ooms,
    (kind = 'oom' AND has_request_log)::INTEGER AS ooms_with_traffic
FROM labelled;
