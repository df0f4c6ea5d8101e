-- Every allocator option a process was seen to run with, one row per option and sighting, wherever it was
-- seen: a text log or request log that stated PYTORCH_CUDA_ALLOC_CONF (stg_allocator_settings; `origin`
-- `text log` or `request log`) and the allocator settings a snapshot recorded (`snapshot`). A snapshot's
-- settings are the allocator's own parse of the variable, so they are what the process really ran with; its
-- defaults are not settings (max_split_size -1 is "no limit", garbage_collection_threshold 0 is "off",
-- roundup_power2_divisions all 0 is "no rounding"), and a snapshot of a PyTorch that recorded no settings still
-- shows expandable segments when one of its segments is expandable. `ts`: the line's time, or the first time
-- of the snapshot's trace; NULL when unknown (a setting of unknown time holds for the whole history).
CREATE OR REPLACE VIEW fct_allocator_settings AS
WITH stated AS (
    SELECT
        s.instance,
        s.ts,
        s.setting,
        s.value,
        CASE WHEN src.kind = 'text' THEN 'text log' ELSE 'request log' END AS origin,
        s.source_id,
        s.line
    FROM stg_allocator_settings AS s
    LEFT JOIN stg_sources AS src USING (source_id)
), snapshots AS (
    SELECT
        instance,
        CASE WHEN first_time_us IS NOT NULL THEN make_timestamp(first_time_us) END AS ts,
        allocator_settings AS s,
        expandable_segments,
        source_id
    FROM stg_snapshots
), recorded AS (
    SELECT instance, ts, 'expandable_segments' AS setting,
           CASE WHEN s ->> 'expandable_segments' IS NOT NULL THEN lower(s ->> 'expandable_segments')
                WHEN expandable_segments THEN 'true' END AS value,
           source_id
    FROM snapshots
    UNION ALL
    -- bytes in the snapshot, MiB as PYTORCH_CUDA_ALLOC_CONF writes it
    SELECT instance, ts, 'max_split_size_mb',
           CASE WHEN TRY_CAST(s ->> 'max_split_size' AS HUGEINT) > 0
                THEN (TRY_CAST(s ->> 'max_split_size' AS HUGEINT) // 1048576)::VARCHAR END,
           source_id
    FROM snapshots
    UNION ALL
    SELECT instance, ts, 'garbage_collection_threshold',
           CASE WHEN TRY_CAST(s ->> 'garbage_collection_threshold' AS DOUBLE) > 0
                THEN TRY_CAST(s ->> 'garbage_collection_threshold' AS DOUBLE)::VARCHAR END,
           source_id
    FROM snapshots
    UNION ALL
    -- a map of size -> divisions (or one number in older versions): set when any division is not 0
    SELECT instance, ts, 'roundup_power2_divisions',
           CASE WHEN regexp_matches(coalesce((s -> 'roundup_power2_divisions')::VARCHAR, ''), '(^|[:,\[]\s*)[1-9]')
                THEN (s -> 'roundup_power2_divisions')::VARCHAR END,
           source_id
    FROM snapshots
)
SELECT instance, ts, setting, value, origin, source_id, line FROM stated
UNION ALL
SELECT instance, ts, setting, value, 'snapshot' AS origin, source_id, NULL::BIGINT AS line
FROM recorded
WHERE value IS NOT NULL;
