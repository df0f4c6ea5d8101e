-- The allocator level a request line states without saying before or after (`allocated`, `memory_reserved`),
-- read as the level after the request: the line is written when its work is done. NULL on an OOM line, whose
-- level is the one the failed allocation met (stg_requests).
CREATE OR REPLACE MACRO oomlab_level_logged(status, error, level) AS
    CASE WHEN NOT coalesce(oomlab_is_oom(status, error), false) THEN level END;
