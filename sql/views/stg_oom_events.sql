-- One row per real OOM, whatever number of files saw it (docs/schema.md, "One event per real OOM"): the
-- sightings of stg_oom_sightings grouped by the event they are sightings of (stg_oom_event_links; a sighting it
-- does not list is an event of its own). The event takes its key sighting's event_id, origin, source_id and line (the request-log row where
-- there is one: fct_oom_context finds the failing request through them) and the device reconcile placed it on;
-- every other fact is the key sighting's, else the first sighting's that states it, in the order request-log
-- row, message, snapshot (logged values are exact, a message rounds them, a snapshot states the fewest). The
-- listed processes and what was judged of them come whole from one sighting, so they stay consistent.
-- `sightings` counts the rows behind the event, `origins` names their kinds, `snapshot_id` / `snapshot_ts` /
-- `snapshot_requested_bytes` are the snapshot's record of it (a snapshot states the size before the
-- allocator rounds it: analyses/fleet/classify.py finds the allocator's own verdict by them).
CREATE OR REPLACE VIEW stg_oom_events AS
WITH linked AS (
    SELECT
        s.*,
        coalesce(k.event_key, s.event_id) AS key,
        k.instance AS event_instance,
        [CASE WHEN s.event_id = coalesce(k.event_key, s.event_id) THEN 0 ELSE 1 END,
         CASE s.origin WHEN 'structured' THEN 0 WHEN 'message' THEN 1 WHEN 'snapshot' THEN 2 ELSE 3 END,
         s.source_id, coalesce(s.line, 0)] AS rank_key
    FROM stg_oom_sightings AS s
    LEFT JOIN stg_oom_event_links AS k USING (event_id)
)
SELECT
    key AS event_id,
    arg_min(source_id, rank_key) AS source_id,
    arg_min(line, rank_key) AS line,
    arg_min(ts, rank_key) FILTER (WHERE ts IS NOT NULL) AS ts,
    coalesce(any_value(event_instance), arg_min(instance, rank_key)) AS instance,
    arg_min(gpu_index, rank_key) FILTER (WHERE gpu_index IS NOT NULL) AS gpu_index,
    arg_min(model_version, rank_key) FILTER (WHERE model_version IS NOT NULL) AS model_version,
    arg_min(framework, rank_key) FILTER (WHERE framework IS NOT NULL) AS framework,
    arg_min(l.origin, rank_key) AS origin,
    arg_min(requested_bytes, rank_key) FILTER (WHERE requested_bytes IS NOT NULL) AS requested_bytes,
    arg_min(total_capacity_bytes, rank_key) FILTER (WHERE total_capacity_bytes IS NOT NULL) AS total_capacity_bytes,
    arg_min(free_bytes, rank_key) FILTER (WHERE free_bytes IS NOT NULL) AS free_bytes,
    arg_min(already_allocated_bytes, rank_key) FILTER (WHERE already_allocated_bytes IS NOT NULL)
        AS already_allocated_bytes,
    arg_min(reserved_bytes, rank_key) FILTER (WHERE reserved_bytes IS NOT NULL) AS reserved_bytes,
    arg_min(allocated_by_pytorch_bytes, rank_key) FILTER (WHERE allocated_by_pytorch_bytes IS NOT NULL)
        AS allocated_by_pytorch_bytes,
    arg_min(reserved_unallocated_bytes, rank_key) FILTER (WHERE reserved_unallocated_bytes IS NOT NULL)
        AS reserved_unallocated_bytes,
    arg_min(process_in_use_bytes, rank_key) FILTER (WHERE process_in_use_bytes IS NOT NULL) AS process_in_use_bytes,
    arg_min(allowed_bytes, rank_key) FILTER (WHERE allowed_bytes IS NOT NULL) AS allowed_bytes,
    arg_min(private_pool_bytes, rank_key) FILTER (WHERE private_pool_bytes IS NOT NULL) AS private_pool_bytes,
    arg_min(other_processes, rank_key) FILTER (WHERE other_processes IS NOT NULL) AS other_processes,
    arg_min(batch_size, rank_key) FILTER (WHERE batch_size IS NOT NULL) AS batch_size,
    arg_min(input_sequence_length, rank_key) FILTER (WHERE input_sequence_length IS NOT NULL)
        AS input_sequence_length,
    arg_min(output_sequence_length, rank_key) FILTER (WHERE output_sequence_length IS NOT NULL)
        AS output_sequence_length,
    arg_min(message, rank_key) FILTER (WHERE message IS NOT NULL) AS message,
    arg_min(request_id, rank_key) FILTER (WHERE request_id IS NOT NULL) AS request_id,
    arg_min(snapshot_id, rank_key) FILTER (WHERE snapshot_id IS NOT NULL) AS snapshot_id,
    arg_min(contradiction, rank_key) FILTER (WHERE contradiction IS NOT NULL) AS contradiction,
    arg_min(self_pid, rank_key) FILTER (WHERE other_processes IS NOT NULL) AS self_pid,
    arg_min(self_bytes, rank_key) FILTER (WHERE other_processes IS NOT NULL) AS self_bytes,
    arg_min(self_basis, rank_key) FILTER (WHERE other_processes IS NOT NULL) AS self_basis,
    arg_min(neighbours, rank_key) FILTER (WHERE other_processes IS NOT NULL) AS neighbours,
    count(*) AS sightings,
    list_sort(list_distinct(list(l.origin))) AS origins,
    arg_min(ts, rank_key) FILTER (WHERE l.origin = 'snapshot') AS snapshot_ts,
    arg_min(requested_bytes, rank_key) FILTER (WHERE l.origin = 'snapshot') AS snapshot_requested_bytes
-- `l.origin`, not `origin`: a table macro's parameter of that name (oomlab_oom_periods) would replace it
FROM linked AS l
GROUP BY key;
