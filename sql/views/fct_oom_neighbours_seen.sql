-- Per OOM event on a device with compute-apps samples: the processes nvidia-smi listed on it in the last
-- sampling round at or before the failure (at most 15 minutes before). The failing service is the process
-- whose memory is nearest to what the message or the request log says this process held (in use, else
-- reserved); the others are its neighbours. With one process listed there is no neighbour; with several and
-- nothing to tell the service by, own_pid and the neighbour columns are NULL.
CREATE OR REPLACE VIEW fct_oom_neighbours_seen AS
WITH events AS (
    SELECT event_id, ts, instance, gpu_index, coalesce(process_in_use_bytes, reserved_bytes) AS own_hint_bytes
    FROM fct_oom_context
    WHERE ts IS NOT NULL AND instance IS NOT NULL
),
rounds AS (
    SELECT DISTINCT instance, gpu_index, ts AS round_ts
    FROM stg_gpu_process_samples
    WHERE gpu_index IS NOT NULL
),
nearest AS (
    SELECT e.*, r.round_ts
    FROM events AS e
    ASOF JOIN rounds AS r ON r.instance = e.instance AND r.gpu_index = e.gpu_index AND e.ts >= r.round_ts
    WHERE e.ts - r.round_ts <= NEIGHBOUR_ROUND_MAX_AGE()
),
seen AS (
    SELECT n.event_id, n.round_ts, n.own_hint_bytes, p.pid, p.process_name, p.used_bytes
    FROM nearest AS n
    JOIN stg_gpu_process_samples AS p
        ON p.instance = n.instance AND p.gpu_index = n.gpu_index AND p.ts = n.round_ts
),
own AS (
    SELECT event_id,
           CASE WHEN count(*) = 1 THEN min(pid) ELSE arg_min(pid, abs(used_bytes - own_hint_bytes)) END AS own_pid
    FROM seen
    GROUP BY event_id
)
SELECT
    s.event_id,
    min(s.round_ts) AS seen_at,
    count(*) AS processes,
    o.own_pid,
    max(s.used_bytes) FILTER (WHERE s.pid = o.own_pid) AS own_bytes,
    CASE WHEN o.own_pid IS NOT NULL
         THEN coalesce(sum(s.used_bytes) FILTER (WHERE s.pid <> o.own_pid), 0) END::BIGINT AS other_bytes,
    CASE WHEN o.own_pid IS NOT NULL
         THEN coalesce(list(s.pid ORDER BY s.used_bytes DESC, s.pid) FILTER (WHERE s.pid <> o.own_pid), [])
    END AS other_pids,
    CASE WHEN o.own_pid IS NOT NULL
         THEN coalesce(list(s.process_name ORDER BY s.used_bytes DESC, s.pid) FILTER (WHERE s.pid <> o.own_pid), [])
    END AS other_names
FROM seen AS s
JOIN own AS o USING (event_id)
GROUP BY s.event_id, o.own_pid;
