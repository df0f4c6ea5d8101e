-- rejects as the data-quality note reads them: every row read but not loaded, with `category`, its first reason
-- in a few words (what the note counts: 'allocated above the card', 'invalid JSON'), and `impossible`: the row
-- was read but holds values no device can have (sql/macros/oomlab_request_impossible.sql for request logs,
-- parse/telemetry/memory.py for telemetry), as opposed to input that could not be read at all. The patterns
-- follow the reasons oomlab writes; one it does not know keeps its words, digits shown as N.
CREATE OR REPLACE VIEW stg_rejects AS
WITH firsts AS (
    SELECT *, split_part(reason, '; ', 1) AS first_reason
    FROM rejects
),
categorized AS (
    SELECT
        *,
        CASE
            WHEN regexp_matches(first_reason, '^\S+ .* is negative$')
                THEN 'negative ' || regexp_extract(first_reason, '^(\S+)', 1)
            WHEN regexp_matches(first_reason, '^(allocated_\w+|allocator_allocated) .* above device_total ')
                THEN 'allocated above the card'
            WHEN regexp_matches(first_reason, '^(reserved_\w+) .* above device_total ')
                THEN 'reserved above the card'
            WHEN regexp_matches(first_reason, '^peak_allocated .* above device_total ')
                THEN 'peak above the card'
            WHEN regexp_matches(first_reason, '^reserved_\w+ .* below allocated_\w+ ')
                THEN 'reserved below allocated'
            WHEN regexp_matches(first_reason, '^(available_memory|memory\.free|DCGM_FI_DEV_FB_FREE) .* above ')
                THEN 'free above the card'
            WHEN regexp_matches(first_reason, '^(memory\.used|DCGM_FI_DEV_FB_USED) .* above ')
                THEN 'used above the card'
        END AS impossible_category
    FROM firsts
)
SELECT
    source_id,
    line,
    reason,
    raw,
    coalesce(
        impossible_category,
        CASE
            WHEN regexp_matches(first_reason, '^\S+: .* is not (a timestamp|an integer|a number|a byte size)$')
                THEN 'unreadable ' || regexp_extract(first_reason, '^(\S+):', 1)
            WHEN regexp_matches(first_reason, '\bfields?\b.*\b(header|found)\b') THEN 'wrong number of fields'
            WHEN regexp_matches(first_reason, '^[\w.:]+: ')
                THEN 'unreadable ' || regexp_extract(first_reason, '^([\w.:]+?):', 1)
            ELSE regexp_replace(regexp_replace(first_reason, '\s*\(.*$', ''), '[0-9]+', 'N', 'g')
        END
    ) AS category,
    impossible_category IS NOT NULL AS impossible
FROM categorized;
