-- Hourly water levels per device: the highest memory held between requests (reserved_after / card), the
-- highest allocated after a request (the part a restart or a leak moves), the highest peak during a
-- request, and the largest need. `lifetime` is the process lifetime of the hour's first request: an hour
-- with a restart belongs to the old process, whose level it shows. It is counted from the lifetime starts
-- (a narrow sort) rather than read from fct_water_requests.lifetime (a second sort of every column), which
-- matters on fleets of millions of requests. The forecast fits its trends on these maxima.
CREATE OR REPLACE VIEW fct_water_hourly AS
WITH hours AS (
    SELECT
        instance,
        gpu_index,
        date_trunc('hour', ts) AS hour,
        min(ts) AS first_ts,
        arg_min(model_version, (ts, model_version)) AS model_version,
        max(device_total) AS device_total,
        count(*) AS requests,
        count(*) FILTER (WHERE is_oom) AS ooms,
        max(held_level) AS held_level,
        max(allocated_level) AS allocated_level,
        max(peak_level) AS peak_level,
        max(need_bytes) AS need_bytes
    FROM fct_water_requests
    GROUP BY instance, gpu_index, date_trunc('hour', ts)
),
starts AS (
    SELECT instance, gpu_index, ts FROM fct_water_requests WHERE starts_lifetime
)
SELECT
    h.instance,
    h.gpu_index,
    h.hour,
    (SELECT count(*) FROM starts AS s
     WHERE s.instance = h.instance AND s.gpu_index = h.gpu_index AND s.ts <= h.first_ts) AS lifetime,
    h.model_version,
    h.device_total,
    h.requests,
    h.ooms,
    h.held_level,
    h.allocated_level,
    h.peak_level,
    h.need_bytes
FROM hours AS h;
