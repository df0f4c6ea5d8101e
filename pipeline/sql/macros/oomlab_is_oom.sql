-- A request that ended in out-of-memory: an oom status, or an error that says so.
CREATE OR REPLACE MACRO oomlab_is_oom(status, error) AS
    lower(status) IN ('oom', 'out_of_memory', 'outofmemory', 'cuda_oom', 'oom_error')
    OR error ILIKE '%out of memory%';
