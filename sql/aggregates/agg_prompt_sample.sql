-- The aggregate tier (see agg_request_minutes): a deterministic, even sample of the requests the prompt-risk model
-- may learn from (stg_prompt_requests on a fresh baseline, no fragmentation; an OOM naming a neighbour is kept with
-- its flag, since whether that neighbour is intermittent is the device's to say: fct_prompt_capacity). Per UTC day,
-- the requests whose sample_key (an md5, so uniform and the same on every engine) falls below a cut that keeps
-- about 2 x PROMPT_MODEL_ROWS of the day's N (oomlab_sample_cut), all of them when N is no more than that. A
-- window of whole days then finds its PROMPT_MODEL_ROWS lowest keys below every day's cut (it holds at least each
-- day's requests, so its K-th key is near K / N_window, half of any day's cut): exactly the window's lowest keys,
-- drawn evenly over its days. Bounded by 2 x PROMPT_MODEL_ROWS a day
-- (the count is binomial: a few hundred more at most), not by the requests.
CREATE OR REPLACE VIEW agg_prompt_sample AS
WITH candidates AS (
    SELECT instance, gpu_index, ts, CAST(ts AS DATE) AS day, request_id, model_version, device_total, is_oom,
           names_neighbour, batch_size, input_sequence_length, output_sequence_length, batch_x_input,
           batch_x_tokens, sample_key
    FROM stg_prompt_requests
    WHERE at_fresh_baseline AND NOT fragmented
),
cuts AS (
    SELECT day, oomlab_sample_cut(count(*), 2 * PROMPT_MODEL_ROWS()) AS key_below
    FROM candidates
    GROUP BY day
)
-- cuts is a row per day: joined by broadcast on Spark (load/portable.py), not by a shuffle of every request
SELECT /*+ BROADCAST(k) */ c.instance, c.gpu_index, c.ts, c.day, c.request_id, c.model_version, c.device_total, c.is_oom,
       c.names_neighbour, c.batch_size, c.input_sequence_length, c.output_sequence_length, c.batch_x_input,
       c.batch_x_tokens, c.sample_key
FROM candidates AS c
JOIN cuts AS k ON k.day = c.day
WHERE k.key_below IS NULL OR substr(c.sample_key, 1, 15) < k.key_below;
