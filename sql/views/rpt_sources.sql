-- What `oomlab sources` lists: every ingested file, oldest first, with the device its rows are on where the file
-- names none of its own (`device`) and what placed it (`placed_by`: its rows, its OOMs, its folder, or its name
-- when nothing does and the file's name stands in for a device; source_placements). A calendar (of any kind) is
-- on no device: its `device` says which hosts its jobs run on ('every host' where one names none; 'no job' for
-- a calendar of rejects alone), placed by 'its jobs'.
CREATE OR REPLACE VIEW rpt_sources AS
WITH job_hosts AS (
    SELECT source_id,
           CASE WHEN bool_or(hosts IS NULL) THEN 'every host'
                ELSE array_to_string(list_sort(list_distinct(flatten(list(hosts)))), ', ') END AS hosts
    FROM (SELECT source_id, hosts FROM stg_calendar_rules
          UNION ALL
          SELECT source_id, hosts FROM stg_job_occurrences WHERE origin = 'calendar')
    GROUP BY source_id
)
SELECT s.source_id, s.path, s.kind, s.rows, s.rejects, s.ingested_at, s.size_bytes, s.content_hash, s.hash_algorithm,
       s.note,
       CASE WHEN oomlab_is_calendar(s.kind) THEN coalesce(j.hosts, 'no job')
            WHEN p.placed_by = 'its rows' THEN NULL
            ELSE coalesce(p.instance, s.labels ->> 'instance') END AS device,
       CASE WHEN oomlab_is_calendar(s.kind) THEN 'its jobs'
            ELSE p.placed_by END AS placed_by
FROM stg_sources AS s
LEFT JOIN stg_source_placements AS p USING (source_id)
LEFT JOIN job_hosts AS j USING (source_id)
ORDER BY s.source_id;
