-- What a request on each device can use: the card, less a per-process cap (`X allowed;` in its OOM
-- messages) and less a neighbour process that every one of its OOMs shows (named in the message, or, where the
-- message names none, memory in use that this process does not hold: oomlab_unnamed_bytes). A neighbour shown in
-- every OOM is part of the device's environment (a co-tenant), so its requests are judged against the
-- memory left; one shown only in some OOMs is intermittent (a backup, a job) and those OOMs are left out
-- of the threshold instead (fct_prompt_requests). So is one named in every OOM when a successful request
-- held more than the card less the neighbour (`max_ok_peak_bytes`): it was not there then, so it comes and
-- goes, and the OOMs only happen while it is there (a job's process).
CREATE OR REPLACE VIEW fct_prompt_capacity AS
WITH cards AS (
    SELECT instance, gpu_index, device_total, max_ok_held_bytes AS max_ok_peak_bytes
    FROM agg_request_devices
    WHERE device_total > 0 AND instance IS NOT NULL
),
ooms AS (
    SELECT
        instance,
        coalesce(gpu_index, 0) AS gpu_index,
        count(*) AS ooms,
        count(neighbour_bytes) AS neighbour_ooms,
        median(neighbour_bytes)::BIGINT AS neighbour_bytes,
        max(allowed_bytes) AS cap_bytes
    FROM (
        SELECT instance, gpu_index, allowed_bytes,
               CASE WHEN len(neighbours) > 0 THEN list_sum(list_transform(neighbours, lambda p: p.in_use_bytes))
                    ELSE oomlab_unnamed_bytes(
                             total_capacity_bytes, free_bytes, coalesce(process_in_use_bytes, self_bytes),
                             oomlab_reserved_at_oom(reserved_bytes, allocated_by_pytorch_bytes,
                                                    reserved_unallocated_bytes),
                             requested_bytes) END AS neighbour_bytes
        FROM stg_oom_events
        WHERE instance IS NOT NULL
    ) AS shown
    GROUP BY ALL
),
persistent AS (
    SELECT c.*, o.ooms, o.neighbour_ooms, o.cap_bytes,
           CASE WHEN o.ooms > 0 AND o.neighbour_ooms = o.ooms
                     AND coalesce(c.max_ok_peak_bytes, 0) + o.neighbour_bytes <= c.device_total
                THEN o.neighbour_bytes ELSE 0 END AS persistent_neighbour_bytes
    FROM cards AS c
    LEFT JOIN ooms AS o USING (instance, gpu_index)
)
SELECT
    instance,
    gpu_index,
    device_total,
    coalesce(ooms, 0) AS ooms,
    coalesce(neighbour_ooms, 0) AS neighbour_ooms,
    max_ok_peak_bytes,
    persistent_neighbour_bytes,
    cap_bytes,
    least(device_total, coalesce(cap_bytes, device_total)) - persistent_neighbour_bytes AS capacity_bytes
FROM persistent;
