-- Hourly water levels per device (the aggregate tier's agg_water_hours): the highest memory held between requests
-- (reserved_after / card), the highest allocated after a request (the part a restart or a leak moves), the highest
-- peak during a request, and the largest need. `lifetime` is the process lifetime of the hour's first request
-- (the lifetimes started before it, and by it): an hour with a restart belongs to the old process,
-- whose level it shows. The forecast fits its trends on these maxima.
CREATE OR REPLACE VIEW fct_water_hourly AS
SELECT
    instance,
    gpu_index,
    hour,
    CAST(coalesce(sum(lifetime_starts) OVER (PARTITION BY instance, gpu_index ORDER BY hour
                                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
         + starts_at_first AS BIGINT) AS lifetime,
    model_version,
    device_total,
    requests,
    ooms,
    held_level,
    allocated_level,
    peak_level,
    need_bytes
FROM agg_water_hours;
