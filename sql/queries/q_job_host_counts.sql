-- Per scheduled job and instance: requests and OOMs inside and outside the job's windows, over the minutes
-- nothing else explains. A minute is explained for a job, and counts on neither side of its test, when a job
-- found causal other than it ($causal) runs then on that instance, or when an OOM a neighbour process explains
-- fell in it ($neighbour_instances / $neighbour_minutes / $neighbour_labels, one element per such OOM) and the
-- job does not bring that neighbour on that instance ($owner_names / $owner_instances / $owner_labels); a
-- control instance brings none. `intrinsic_in` / `intrinsic_out`: of the OOMs counted, those the serving process
-- explains by itself ($intrinsic_instances / $intrinsic_minutes, one element per such OOM). Inside the windows,
-- what was set aside: `explained_minutes_in`, `explained_oom_minutes_in` of the `oom_minutes_in` (minutes with
-- an OOM beyond the process's own), `explained_ooms_in`, and what explains them: `explained_by_jobs` (causal
-- jobs), `explained_by_neighbours` (neighbour labels, for minutes no causal job explains). `minutes_in`: the
-- minutes inside that stay.
-- Used by oomlab.analyses.fleet.jobs.
WITH causal_minutes AS (
    -- fct_job_windows merges a job's runs per host, so no minute of one job repeats
    SELECT host AS instance, name AS cause,
           unnest(range(date_trunc('minute', start_ts), end_ts, INTERVAL 1 MINUTE)) AS minute
    FROM fct_job_windows
    WHERE on_job_host AND list_contains($causal::VARCHAR[], name)
), causal_at AS (
    SELECT instance, minute, list(cause) AS causes FROM causal_minutes GROUP BY instance, minute
), neighbour_hits AS (
    SELECT unnest($neighbour_instances::VARCHAR[]) AS instance, unnest($neighbour_minutes::TIMESTAMP[]) AS minute,
           unnest($neighbour_labels::VARCHAR[]) AS label
), neighbour_at AS (
    SELECT instance, minute, list(DISTINCT label) AS labels FROM neighbour_hits GROUP BY instance, minute
), owners AS (
    SELECT unnest($owner_names::VARCHAR[]) AS name, unnest($owner_instances::VARCHAR[]) AS instance,
           unnest($owner_labels::VARCHAR[]) AS label
), owned AS (
    SELECT name, instance, list(label) AS labels FROM owners GROUP BY name, instance
), intrinsic_hits AS (
    SELECT unnest($intrinsic_instances::VARCHAR[]) AS instance, unnest($intrinsic_minutes::TIMESTAMP[]) AS minute
), intrinsic_at AS (
    SELECT instance, minute, count(*) AS intrinsic FROM intrinsic_hits GROUP BY instance, minute
), judged AS (
    SELECT m.*, coalesce(i.intrinsic, 0) AS intrinsic,
           list_filter(coalesce(c.causes, []), lambda x: x <> m.name) AS by_jobs,
           list_filter(coalesce(n.labels, []),
                       lambda x: NOT (m.on_job_host AND list_contains(coalesce(o.labels, []), x))) AS by_neighbours
    FROM fct_job_minutes m
    LEFT JOIN causal_at c ON c.instance = m.instance AND c.minute = m.minute
    LEFT JOIN neighbour_at n ON n.instance = m.instance AND n.minute = m.minute
    LEFT JOIN owned o ON o.name = m.name AND o.instance = m.instance
    LEFT JOIN intrinsic_at i ON i.instance = m.instance AND i.minute = m.minute
    WHERE ($since IS NULL OR m.minute >= $since::TIMESTAMP) AND ($until IS NULL OR m.minute < $until::TIMESTAMP)
), marked AS (
    SELECT *, len(by_jobs) > 0 OR len(by_neighbours) > 0 AS explained, ooms > intrinsic AS open_oom FROM judged
)
SELECT name, instance, on_job_host, any_value(traffic_source) AS traffic_source,
       coalesce(sum(requests) FILTER (WHERE inside AND NOT explained), 0)::BIGINT AS requests_in,
       coalesce(sum(requests) FILTER (WHERE NOT inside AND NOT explained), 0)::BIGINT AS requests_out,
       coalesce(sum(ooms) FILTER (WHERE inside AND NOT explained), 0)::BIGINT AS ooms_in,
       coalesce(sum(ooms) FILTER (WHERE NOT inside AND NOT explained), 0)::BIGINT AS ooms_out,
       coalesce(sum(intrinsic) FILTER (WHERE inside AND NOT explained), 0)::BIGINT AS intrinsic_in,
       coalesce(sum(intrinsic) FILTER (WHERE NOT inside AND NOT explained), 0)::BIGINT AS intrinsic_out,
       coalesce(sum(exposure) FILTER (WHERE inside AND NOT explained), 0.0) AS exposure_in,
       coalesce(sum(exposure) FILTER (WHERE NOT inside AND NOT explained), 0.0) AS exposure_out,
       count(*) FILTER (WHERE inside AND NOT explained) AS minutes_in,
       count(*) FILTER (WHERE inside AND explained) AS explained_minutes_in,
       count(*) FILTER (WHERE inside AND open_oom) AS oom_minutes_in,
       count(*) FILTER (WHERE inside AND open_oom AND explained) AS explained_oom_minutes_in,
       coalesce(sum(ooms - intrinsic) FILTER (WHERE inside AND explained), 0)::BIGINT AS explained_ooms_in,
       list_sort(list_distinct(flatten(coalesce(list(by_jobs) FILTER (WHERE inside AND open_oom), []))))
           AS explained_by_jobs,
       list_sort(list_distinct(flatten(coalesce(
           list(by_neighbours) FILTER (WHERE inside AND open_oom AND len(by_jobs) = 0), []))))
           AS explained_by_neighbours
FROM marked
GROUP BY name, instance, on_job_host
ORDER BY name, instance;
