-- One row per memory snapshot file: its labels, allocator settings, totals and trace time range
-- (load/snapshot.py's _snapshot_row names the parameters as the columns).
INSERT INTO snapshots (snapshot_id, source_id, path, instance, model_version, tags, format, legacy_shapes,
    device, devices, allocator_settings, alloc_conf, expandable_segments, first_time_us, last_time_us,
    segment_count, block_count, trace_event_count, oom_count, stack_count,
    allocated_bytes, active_bytes, reserved_bytes, requested_bytes, external_annotations)
VALUES ($snapshot_id, $source_id, $path, $instance, $model_version, $tags, $format, $legacy_shapes,
    $device, $devices, $allocator_settings, $alloc_conf, $expandable_segments, $first_time_us, $last_time_us,
    $segment_count, $block_count, $trace_event_count, $oom_count, $stack_count,
    $allocated_bytes, $active_bytes, $reserved_bytes, $requested_bytes, $external_annotations);
