-- Every instance the database knows: named by a request, an OOM event, a GPU or GPU-process sample, or a
-- snapshot. Scheduled jobs' host selectors are matched against these (fct_job_hosts), so a selector that
-- matches none of them names no host we have data from.
CREATE OR REPLACE VIEW fct_instances AS
SELECT instance FROM agg_request_devices WHERE instance IS NOT NULL
UNION
SELECT instance FROM stg_oom_events WHERE instance IS NOT NULL
UNION
SELECT instance FROM stg_gpu_samples WHERE instance IS NOT NULL
UNION
SELECT instance FROM stg_gpu_process_samples WHERE instance IS NOT NULL
UNION
SELECT instance FROM stg_snapshots WHERE instance IS NOT NULL;
