-- Memory in use on the card at an OOM that this process does not account for: total less free less what it holds
-- (its `this process has X in use`, else what PyTorch reserved and the largest context, CONTEXT_MAX_BYTES). Held by
-- processes its message does not name (ROCm's and pre-2.1 messages list none), so NULL unless it counts: the card
-- was short of the request (with room on the card a cap or the allocator decided, not a neighbour), and the memory
-- is more than the figures' print rounding and would have covered the shortfall (without it the request fits).
-- One rule for the classifier's context (fct_oom_context), the prompt thresholds' clean requests
-- (stg_prompt_requests) and a device's persistent neighbour (fct_prompt_capacity).
CREATE OR REPLACE MACRO oomlab_unnamed_bytes(total, free, own_in_use, reserved, requested) AS
    CASE WHEN requested > free
              AND total - free - coalesce(own_in_use, reserved + CONTEXT_MAX_BYTES())
                  >= greatest(requested - free,
                              oomlab_printed_slack(total) + oomlab_printed_slack(free)
                              + oomlab_printed_slack(coalesce(own_in_use, reserved)))
         THEN total - free - coalesce(own_in_use, reserved + CONTEXT_MAX_BYTES())
    END;
