-- What a request on each device can use: the card, less a per-process cap (`X allowed;` in its OOM
-- messages) and less a neighbour process that every one of its OOM messages names. A neighbour named in
-- every OOM is part of the device's environment (a co-tenant), so its requests are judged against the
-- memory left; one named only in some OOMs is intermittent (a backup, a job) and those OOMs are left out
-- of the threshold instead (fct_prompt_requests).
CREATE OR REPLACE VIEW fct_prompt_capacity AS
WITH cards AS (
    SELECT instance, gpu_index, max(device_total) AS device_total
    FROM stg_requests
    WHERE device_total > 0 AND instance IS NOT NULL
    GROUP BY ALL
),
ooms AS (
    SELECT
        instance,
        coalesce(gpu_index, 0) AS gpu_index,
        count(*) AS ooms,
        count(*) FILTER (WHERE len(other_processes) > 0) AS neighbour_ooms,
        median(list_sum(list_transform(other_processes, lambda p: p.in_use_bytes)))::BIGINT AS neighbour_bytes,
        max(allowed_bytes) AS cap_bytes
    FROM stg_oom_events
    WHERE instance IS NOT NULL
    GROUP BY ALL
)
SELECT
    c.instance,
    c.gpu_index,
    c.device_total,
    coalesce(o.ooms, 0) AS ooms,
    coalesce(o.neighbour_ooms, 0) AS neighbour_ooms,
    CASE WHEN o.ooms > 0 AND o.neighbour_ooms = o.ooms THEN o.neighbour_bytes ELSE 0 END
        AS persistent_neighbour_bytes,
    o.cap_bytes,
    least(c.device_total, coalesce(o.cap_bytes, c.device_total))
        - CASE WHEN o.ooms > 0 AND o.neighbour_ooms = o.ooms THEN o.neighbour_bytes ELSE 0 END
        AS capacity_bytes
FROM cards AS c
LEFT JOIN ooms AS o USING (instance, gpu_index);
