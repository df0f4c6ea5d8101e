-- One row per OOM event with what its classification needs: the message's numbers made comparable
-- (reserved-but-unallocated, memory of other processes, non-PyTorch memory), the failing request's
-- size and allocated baseline from its request-log row, and the device size and per-process cap known
-- for the instance from any of its rows.
CREATE OR REPLACE VIEW fct_oom_context AS
SELECT
    o.event_id,
    o.ts,
    o.instance,
    coalesce(o.gpu_index, 0) AS gpu_index,
    coalesce(o.model_version, r.model_version) AS model_version,
    o.framework,
    o.origin,
    o.source_id,
    o.line,
    o.snapshot_id,
    o.request_id,
    o.requested_bytes,
    o.free_bytes,
    -- the event's own total only where its sizes agree with it (stg_oom_events.contradiction)
    coalesce(r.device_total, l.device_total, CASE WHEN o.contradiction IS NULL THEN o.total_capacity_bytes END)
        AS device_total_bytes,
    coalesce(o.allowed_bytes, l.cap_bytes) AS cap_bytes,
    coalesce(o.allocated_by_pytorch_bytes, o.already_allocated_bytes) AS allocated_bytes,
    oomlab_reserved_at_oom(o.reserved_bytes, o.allocated_by_pytorch_bytes, o.reserved_unallocated_bytes)
        AS reserved_bytes,
    coalesce(o.reserved_unallocated_bytes,
             o.reserved_bytes - coalesce(o.allocated_by_pytorch_bytes, o.already_allocated_bytes))
        AS reserved_unallocated_bytes,
    -- a listed process that is this process seen through a PID namespace (stg_oom_sightings) says what it holds
    coalesce(o.process_in_use_bytes, o.self_bytes) AS process_in_use_bytes,
    coalesce(o.process_in_use_bytes, o.self_bytes)
        - oomlab_reserved_at_oom(o.reserved_bytes, o.allocated_by_pytorch_bytes, o.reserved_unallocated_bytes)
        AS non_pytorch_bytes,
    CASE WHEN o.neighbours IS NULL THEN NULL
         ELSE coalesce(list_sum([p.in_use_bytes FOR p IN o.neighbours]), 0)::BIGINT END AS other_bytes,
    [p.pid FOR p IN o.neighbours] AS other_pids,
    -- memory in use on the card that neither this process nor a listed neighbour accounts for, where the message
    -- names no neighbour (oomlab_unnamed_bytes)
    CASE WHEN coalesce(len(o.neighbours), 0) = 0 THEN
        oomlab_unnamed_bytes(o.total_capacity_bytes, o.free_bytes, coalesce(o.process_in_use_bytes, o.self_bytes),
                             oomlab_reserved_at_oom(o.reserved_bytes, o.allocated_by_pytorch_bytes,
                                                    o.reserved_unallocated_bytes),
                             o.requested_bytes)
    END::BIGINT AS unnamed_other_bytes,
    o.total_capacity_bytes - o.free_bytes AS in_use_on_card_bytes,
    o.self_pid,
    o.self_basis,
    o.sightings,
    o.origins,
    o.snapshot_ts,
    o.snapshot_requested_bytes,
    o.batch_size,
    o.input_sequence_length,
    o.output_sequence_length,
    o.batch_size * (coalesce(o.input_sequence_length, 0) + coalesce(o.output_sequence_length, 0)) AS tokens,
    r.allocated_before,
    r.line IS NOT NULL AS has_request_row
FROM stg_oom_events AS o
LEFT JOIN agg_oom_requests AS r
    ON o.origin = 'structured' AND r.source_id = o.source_id AND r.line = o.line
LEFT JOIN fct_oom_instance_limits AS l
    ON l.instance = o.instance AND l.gpu_index = coalesce(o.gpu_index, 0);
