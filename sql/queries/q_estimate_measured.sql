-- What one model version measured, per card size: the largest successful request's peak allocated memory and
-- its shape, the allocated memory at rest (weights and buffers: the least any request started from), the
-- bytes per token (least-squares slope of what a request added against batch x (input + output), merged from the
-- devices' sums in agg_estimate_cards) and the devices it ran on. What `oomlab estimate --db` sets beside the
-- estimate. Used by oomlab.analyses.estimate.
WITH cards AS (
    SELECT
        device_total,
        list({'instance': instance, 'gpu_index': gpu_index} ORDER BY instance, gpu_index) AS devices,
        CAST(sum(requests) AS BIGINT) AS requests,
        max(peak_allocated_bytes) AS peak_allocated_bytes,
        arg_max({'batch': peak_batch, 'input_len': peak_input_len, 'output_len': peak_output_len},
                (peak_allocated_bytes, instance, gpu_index)) AS peak_request,
        min(at_rest_bytes) AS at_rest_bytes,
        sum(fit_n) AS n, sum(fit_x) AS sx, sum(fit_y) AS sy, sum(fit_xx) AS sxx, sum(fit_xy) AS sxy,
        sum(fit_yy) AS syy
    FROM agg_estimate_cards
    WHERE model_version = $model_version
    GROUP BY device_total
)
SELECT
    device_total, devices, requests, peak_allocated_bytes, peak_request, at_rest_bytes,
    (n * sxy - sx * sy) / nullif(n * sxx - sx * sx, 0) AS bytes_per_token,
    -- r2 is 1 where every need lies on the line, as regr_r2 returns for a constant need
    CASE WHEN n * syy - sy * sy = 0 AND n * sxx - sx * sx <> 0 THEN 1.0
         ELSE (n * sxy - sx * sy) * (n * sxy - sx * sy) / nullif((n * sxx - sx * sx) * (n * syy - sy * sy), 0)
    END AS bytes_per_token_r2
FROM cards
ORDER BY device_total;
