-- Memory held by every request of a device (instance x GPU) whose card size is known, in time order, with
-- its process lifetime. `held_bytes` is what the process keeps between requests (reserved_after: what
-- nvidia-smi would show, less the CUDA context); `peak_bytes` the most it held during the request;
-- `need_bytes` what the request itself added at its peak.
-- A lifetime starts at the first request, at a model version change (a deploy restarts the process) or
-- where allocated memory drops well below what the previous request left (a restart: inside one process,
-- allocated_before continues allocated_after).
-- Levels are fractions of the card and never above 1: ingest sets aside rows with sizes no device can have
-- (sql/macros/oomlab_request_impossible.sql), and a row that still has them (loaded by an earlier version) is
-- left out here, not capped: its numbers are no reading of the card, and a capped level would show a full card
-- nobody saw (and fire the 95 % alert). The data-quality note counts these rows (q_data_quality).
CREATE OR REPLACE VIEW fct_water_requests AS
WITH ordered AS (
    SELECT
        r.instance,
        r.gpu_index,
        r.model_version,
        r.ts,
        r.request_id,
        r.is_oom,
        r.device_total,
        r.batch_size,
        r.input_sequence_length,
        r.output_sequence_length,
        r.allocated_before,
        r.allocated_after,
        r.reserved_before,
        r.reserved_after,
        r.peak_allocated,
        coalesce(r.reserved_after, r.allocated_after) AS held_bytes,
        greatest(r.peak_allocated, r.reserved_before, r.reserved_after, r.allocated_after) AS peak_bytes,
        greatest(r.peak_allocated - r.allocated_before, 0) AS need_bytes,
        r.source_id,
        r.line,
        -- every window here has the same partition and order, so DuckDB sorts once
        lead(r.ts) OVER w AS next_ts,
        coalesce(
            lag(r.ts) OVER w IS NULL
            OR r.model_version IS DISTINCT FROM lag(r.model_version) OVER w
            -- 256 MiB or 2 % of the card: well above allocator rounding and request jitter
            -- (where a log states no allocated_after, the previous request's allocated_before stands in)
            OR r.allocated_before < coalesce(lag(r.allocated_after) OVER w, lag(r.allocated_before) OVER w)
                                    - greatest(RESTART_DROP_MIN_BYTES(), RESTART_DROP_SHARE() * r.device_total),
            false) AS starts_lifetime
    FROM stg_requests AS r
    WHERE r.device_total > 0 AND r.instance IS NOT NULL
      AND r.sizes_possible
    -- requests of one microsecond in file and line order, as agg_water_hours orders them
    WINDOW w AS (PARTITION BY r.instance, r.gpu_index ORDER BY r.ts, r.source_id, r.line)
)
SELECT
    *,
    sum(starts_lifetime::INTEGER) OVER (PARTITION BY instance, gpu_index ORDER BY ts, source_id, line
                                        ROWS UNBOUNDED PRECEDING) AS lifetime,
    held_bytes / device_total AS held_level,
    peak_bytes / device_total AS peak_level,
    allocated_after / device_total AS allocated_level
FROM ordered;
