-- The aggregate tier (see agg_request_minutes): per model version, card size and device, what `oomlab estimate
-- --db` sets beside an estimate, from the successful requests with a logged peak and a whole shape (batch > 0,
-- input and output lengths) on a card of known size: their count, the largest peak_allocated and the shape of the
-- request that reached it (ties: the one logged last, by file and line), the least allocated_before (the
-- weights and buffers at rest), and the sums a least-squares line of need (peak_allocated - allocated_before, at
-- least 0) over batch x (input + output) tokens is merged from across devices. Rows with sizes no device can have
-- are left out, as in the water levels.
CREATE OR REPLACE VIEW agg_estimate_cards AS
WITH measured AS (
    SELECT
        model_version, device_total, instance, gpu_index, source_id, line, peak_allocated, allocated_before,
        batch_size, input_sequence_length, output_sequence_length,
        CAST(greatest(peak_allocated - allocated_before, 0) AS DOUBLE) AS need,
        CAST(batch_size * (input_sequence_length + output_sequence_length) AS DOUBLE) AS tokens
    FROM stg_requests
    WHERE device_total > 0 AND instance IS NOT NULL AND NOT is_oom AND peak_allocated IS NOT NULL
      AND batch_size > 0 AND input_sequence_length IS NOT NULL AND output_sequence_length IS NOT NULL
      AND sizes_possible
)
SELECT
    model_version,
    device_total,
    instance,
    gpu_index,
    count(*) AS requests,
    max(peak_allocated) AS peak_allocated_bytes,
    arg_max(batch_size, (peak_allocated, source_id, line)) AS peak_batch,
    arg_max(input_sequence_length, (peak_allocated, source_id, line)) AS peak_input_len,
    arg_max(output_sequence_length, (peak_allocated, source_id, line)) AS peak_output_len,
    min(allocated_before) AS at_rest_bytes,
    -- the sums of the least-squares line (need is never NULL: greatest passes over a NULL allocated_before)
    count(*) AS fit_n,
    sum(tokens) AS fit_x,
    sum(need) AS fit_y,
    sum(tokens * tokens) AS fit_xx,
    sum(tokens * need) AS fit_xy,
    sum(need * need) AS fit_yy
FROM measured
GROUP BY model_version, device_total, instance, gpu_index;
