-- oom_events as the fct_ views and queries read them: every event of every origin, as stored (a thin
-- view: the layer that names the table, so that a cleaning rule has one place to go), and `contradiction`:
-- what in the event's own numbers cannot be, or NULL. A message is what the framework printed, so the event
-- is kept (its OOM happened); but a part of the card larger than the card's stated total capacity (real:
-- "total capacity of 6.00 GiB ... 20.56 GiB is allocated by PyTorch" under Windows' shared GPU memory) means
-- one of its sizes is not the card's, and such an event's total sets no device size (fct_oom_instance_limits,
-- fct_oom_context), so it cannot drive a level. The data-quality note counts them (q_data_quality).
CREATE OR REPLACE VIEW stg_oom_events AS
SELECT
    *,
    CASE WHEN free_bytes > total_capacity_bytes THEN 'free above the total capacity'
         WHEN coalesce(allocated_by_pytorch_bytes, already_allocated_bytes) > total_capacity_bytes
             THEN 'allocated above the total capacity'
         WHEN coalesce(reserved_bytes, allocated_by_pytorch_bytes + reserved_unallocated_bytes)
              > total_capacity_bytes THEN 'reserved above the total capacity'
         WHEN process_in_use_bytes > total_capacity_bytes THEN 'in use above the total capacity'
    END AS contradiction
FROM oom_events;
