-- requests as the fleet views read them: the device index defaults to 0 (a log that names no GPU ran on one),
-- and `is_oom` says whether the request ended in an out-of-memory error (an oom status or an OOM message).
CREATE OR REPLACE VIEW stg_requests AS
SELECT * REPLACE (coalesce(gpu_index, 0) AS gpu_index),
       coalesce(oomlab_is_oom(status, error), false) AS is_oom
FROM requests;
