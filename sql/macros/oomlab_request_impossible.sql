-- Why a request-log row holds values no device can have, or NULL: the reasons ingest sets the row aside with
-- (sql/ingest/insert_stage_rejects.sql passes each canonical value, NULL for a field the log lacks). Written
-- only where oomlab_request_possible, the same conditions as one boolean, is false: that is what every row is
-- checked with (at ingest, and in fct_water_requests and q_data_quality for a database an earlier version
-- loaded), as DuckDB takes about 0.15 s to plan the text of this one. Each reason names the field and both
-- numbers, so that a user can find the unit or field mix-up ('allocated_after 26.10 GiB above device_total
-- 24.00 GiB'). Bounds, all from the caching allocator's own counters (checked on the real H200 captures):
-- - no size, count, latency or device index is negative;
-- - with the card's size known (device_total > 0; 0 is read as unknown), nothing allocated, reserved, free or
--   at its peak exceeds it (requested_size may: a request for more than the card fails with an OOM);
-- - reserved (allocated + cached free blocks) is never below allocated at the same moment. A request's peak
--   may exceed reserved_after (the cache may be emptied after the peak), and the reserved and allocated
--   numbers of a failure (reserved_memory, allocator_allocated) are not compared: logs fill them from the
--   OOM message, whose reserved figure is often the unallocated part.
CREATE OR REPLACE MACRO oomlab_request_impossible(
    gpu_index, latency_ms, batch_size, input_sequence_length, output_sequence_length,
    requested_size, available_memory, allocator_allocated, reserved_memory,
    allocated_before, allocated_after, reserved_before, reserved_after, peak_allocated, device_total
) AS CASE WHEN NOT oomlab_request_possible(
    gpu_index, latency_ms, batch_size, input_sequence_length, output_sequence_length,
    requested_size, available_memory, allocator_allocated, reserved_memory,
    allocated_before, allocated_after, reserved_before, reserved_after, peak_allocated, device_total
) THEN nullif(concat_ws('; ',
    CASE WHEN latency_ms < 0 THEN 'latency_ms ' || latency_ms || ' is negative' END,
    -- each check is written once, over a list of the fields it applies to
    nullif(array_to_string(
        [x.field || ' ' || CASE WHEN x.is_bytes THEN oomlab_format_bytes(x.value) ELSE x.value::VARCHAR END
             || ' is negative'
         FOR x IN [{'field': 'gpu_index', 'value': gpu_index::BIGINT, 'is_bytes': false},
                   {'field': 'batch_size', 'value': batch_size, 'is_bytes': false},
                   {'field': 'input_sequence_length', 'value': input_sequence_length, 'is_bytes': false},
                   {'field': 'output_sequence_length', 'value': output_sequence_length, 'is_bytes': false},
                   {'field': 'requested_size', 'value': requested_size, 'is_bytes': true},
                   {'field': 'available_memory', 'value': available_memory, 'is_bytes': true},
                   {'field': 'allocator_allocated', 'value': allocator_allocated, 'is_bytes': true},
                   {'field': 'reserved_memory', 'value': reserved_memory, 'is_bytes': true},
                   {'field': 'allocated_before', 'value': allocated_before, 'is_bytes': true},
                   {'field': 'allocated_after', 'value': allocated_after, 'is_bytes': true},
                   {'field': 'reserved_before', 'value': reserved_before, 'is_bytes': true},
                   {'field': 'reserved_after', 'value': reserved_after, 'is_bytes': true},
                   {'field': 'peak_allocated', 'value': peak_allocated, 'is_bytes': true},
                   {'field': 'device_total', 'value': device_total, 'is_bytes': true}]
         IF x.value < 0], '; '), ''),
    nullif(array_to_string(
        [x.field || ' ' || oomlab_bytes_against(x.value, device_total) || ' above device_total '
             || oomlab_bytes_against(device_total, x.value)
         FOR x IN [{'field': 'available_memory', 'value': available_memory},
                   {'field': 'allocator_allocated', 'value': allocator_allocated},
                   {'field': 'reserved_memory', 'value': reserved_memory},
                   {'field': 'allocated_before', 'value': allocated_before},
                   {'field': 'allocated_after', 'value': allocated_after},
                   {'field': 'reserved_before', 'value': reserved_before},
                   {'field': 'reserved_after', 'value': reserved_after},
                   {'field': 'peak_allocated', 'value': peak_allocated}]
         IF device_total > 0 AND x.value > device_total], '; '), ''),
    nullif(array_to_string(
        [x.reserved || ' ' || oomlab_bytes_against(x.reserved_value, x.allocated_value) || ' below '
             || x.allocated || ' ' || oomlab_bytes_against(x.allocated_value, x.reserved_value)
         FOR x IN [{'reserved': 'reserved_before', 'reserved_value': reserved_before,
                    'allocated': 'allocated_before', 'allocated_value': allocated_before},
                   {'reserved': 'reserved_after', 'reserved_value': reserved_after,
                    'allocated': 'allocated_after', 'allocated_value': allocated_after}]
         IF x.reserved_value < x.allocated_value], '; '), '')
), '') END;
