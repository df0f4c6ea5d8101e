-- Whether a request-log row's values could be a device's: the conditions of oomlab_request_impossible (where
-- they are explained) as one boolean, with no text built. Every row is checked with it: at ingest
-- (ingest/normalize.py; false sets the row aside), in fct_water_requests and in q_data_quality (a reason string
-- per row made fct_water_requests 15 times slower). A test checks that the two macros agree on every condition.
CREATE OR REPLACE MACRO oomlab_request_possible(
    gpu_index, latency_ms, batch_size, input_sequence_length, output_sequence_length,
    requested_size, available_memory, allocator_allocated, reserved_memory,
    allocated_before, allocated_after, reserved_before, reserved_after, peak_allocated, device_total
) AS NOT coalesce(
    gpu_index < 0 OR latency_ms < 0 OR batch_size < 0 OR input_sequence_length < 0 OR output_sequence_length < 0
    OR least(requested_size, available_memory, allocator_allocated, reserved_memory, allocated_before,
             allocated_after, reserved_before, reserved_after, peak_allocated, device_total) < 0
    OR (device_total > 0
        AND greatest(available_memory, allocator_allocated, reserved_memory, allocated_before, allocated_after,
                     reserved_before, reserved_after, peak_allocated) > device_total)
    OR reserved_before < allocated_before
    OR reserved_after < allocated_after,
    false);
