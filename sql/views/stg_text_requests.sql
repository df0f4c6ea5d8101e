-- text_requests as the analyses read them: the device is the one the file is on (source_placements: a pod's log is
-- on its node), on the GPU its OOM messages name when they all name one (else 0, as for a request log that names
-- none), and `tokens` is batch x (input + output), as for an OOM (fct_oom_context).
CREATE OR REPLACE VIEW stg_text_requests AS
WITH gpus AS (
    SELECT source_id, min(gpu_index) AS gpu_index
    FROM oom_events
    WHERE gpu_index IS NOT NULL
    GROUP BY source_id
    HAVING count(DISTINCT gpu_index) = 1
)
SELECT t.* REPLACE (coalesce(p.instance, t.instance) AS instance),
       coalesce(g.gpu_index, 0) AS gpu_index,
       t.batch_size * (coalesce(t.input_sequence_length, 0) + coalesce(t.output_sequence_length, 0)) AS tokens
FROM text_requests AS t
LEFT JOIN source_placements AS p USING (source_id)
LEFT JOIN gpus AS g USING (source_id);
