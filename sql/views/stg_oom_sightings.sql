-- Every oom_events row as stored: one sighting of an OOM (a request-log row, a message in a text log, a
-- snapshot's `oom` entry). stg_oom_events makes them one row per real OOM; this view adds to each sighting:
--
-- `contradiction`: what in its own numbers cannot be, or NULL. A message is what the framework printed, so
-- the event is kept (its OOM happened); but a part of the card larger than the card's stated total capacity
-- (real: "total capacity of 6.00 GiB ... 20.56 GiB is allocated by PyTorch" under Windows' shared GPU memory)
-- means one of its sizes is not the card's, and such an event's total sets no device size
-- (fct_oom_instance_limits, fct_oom_context), so it cannot drive a level. The data-quality note counts them.
--
-- `self_pid`, `self_bytes`, `self_basis`: a listed `Process P has M memory in use` that is the failing process
-- itself. Inside a container NVML reports host PIDs, so PyTorch 2.1+ cannot tell its own entry from others'
-- and prints itself as `Process P` with no "this process has" clause (real: tests/cases/oom 016, 017). The
-- numbers tell: this process holds at least what PyTorch reserved (allocated + reserved-but-unallocated); if
-- that beside everything listed would need more than the card has in use (total - free), within the print
-- rounding of every figure involved, the two cannot be different processes, and the listed one holding at
-- least the reserved bytes (the smallest such) is this process. So is a lone listed process holding at least
-- that: NVML lists every process with a context on the device, the failing one included (it is allocating
-- there), and PyTorch prints the "this process" clause when it finds its own pid among them; without the
-- clause, the one entry is this process under another pid (real: case 123, 969 MiB listed beside a process
-- that holds nothing yet, where the sum alone leaves room). Otherwise every listed process is a neighbour.
-- Where several listed processes hold at least the reserved bytes (a job's process larger than the service),
-- this process is the one whose excess over them is what the service's processes hold outside PyTorch (CUDA
-- context, libraries) on that instance, as the messages with a single candidate show; without such messages,
-- the smallest.
-- `neighbours` is other_processes without it.

CREATE OR REPLACE VIEW stg_oom_sightings AS
WITH sized AS (
    SELECT
        *,
        oomlab_reserved_at_oom(reserved_bytes, allocated_by_pytorch_bytes, reserved_unallocated_bytes) AS own_reserved,
        list_sum([p.in_use_bytes FOR p IN other_processes]) AS listed_bytes,
        coalesce(total_capacity_bytes - free_bytes, total_capacity_bytes) AS used_on_card,
        oomlab_printed_slack(total_capacity_bytes) + oomlab_printed_slack(free_bytes)
            + oomlab_printed_slack(allocated_by_pytorch_bytes) + oomlab_printed_slack(reserved_unallocated_bytes)
            + oomlab_printed_slack(reserved_bytes)
            + coalesce(list_sum([oomlab_printed_slack(p.in_use_bytes) FOR p IN other_processes]), 0) AS slack
    FROM oom_events
),
candidates AS (
    SELECT
        *,
        CASE WHEN process_in_use_bytes IS NULL AND own_reserved IS NOT NULL AND used_on_card IS NOT NULL
                  AND (listed_bytes + own_reserved > used_on_card + slack OR len(other_processes) = 1)
             THEN list_sort(
                      [[p.in_use_bytes, p.pid] FOR p IN other_processes IF p.in_use_bytes + slack >= own_reserved]
                  )
        END AS self_candidates
    FROM sized
),
known_context AS (
    -- what a process of the service holds beside PyTorch's reserved memory (the CUDA context and libraries) on
    -- each instance, from the messages with one candidate: the same for every process of one service on one
    -- card, so where a neighbour (a job's process larger than the service) could also hold what PyTorch
    -- reserved, this process is the candidate whose excess over the reserved bytes is that context
    SELECT instance, median(self_candidates[1][1] - own_reserved)::BIGINT AS context_bytes
    FROM candidates
    WHERE len(self_candidates) = 1 AND instance IS NOT NULL
    GROUP BY instance
),
judged AS (
    SELECT
        c.* EXCLUDE (self_candidates),
        CASE WHEN len(c.self_candidates) > 1 AND k.context_bytes IS NOT NULL
             THEN list_sort(
                      [[abs(e[1] - c.own_reserved - k.context_bytes), e[1], e[2]] FOR e IN c.self_candidates]
                  )[1][2:3]
             ELSE c.self_candidates[1]
        END AS self_entry,
        CASE WHEN len(c.self_candidates) > 1 AND k.context_bytes IS NOT NULL THEN k.context_bytes END AS self_context
    FROM candidates c
    LEFT JOIN known_context k ON k.instance = c.instance
)
SELECT
    * EXCLUDE (own_reserved, listed_bytes, used_on_card, slack, self_entry, self_context),
    CASE WHEN free_bytes > total_capacity_bytes THEN 'free above the total capacity'
         WHEN coalesce(allocated_by_pytorch_bytes, already_allocated_bytes) > total_capacity_bytes
             THEN 'allocated above the total capacity'
         WHEN oomlab_reserved_at_oom(reserved_bytes, allocated_by_pytorch_bytes, reserved_unallocated_bytes)
              > total_capacity_bytes THEN 'reserved above the total capacity'
         WHEN process_in_use_bytes > total_capacity_bytes THEN 'in use above the total capacity'
    END AS contradiction,
    self_entry[2] AS self_pid,
    self_entry[1] AS self_bytes,
    CASE WHEN self_entry IS NULL THEN NULL
         WHEN listed_bytes + own_reserved > used_on_card + slack THEN
             'process ' || self_entry[2] || ' (' || oomlab_format_bytes(self_entry[1]) || ') is this process '
             || 'seen through a PID namespace, not a neighbour: with the ' || oomlab_format_bytes(own_reserved)
             || ' PyTorch reserved, two processes would need ' || oomlab_format_bytes(listed_bytes + own_reserved)
             || ' of the ' || oomlab_format_bytes(used_on_card) || ' in use on the card'
             || CASE WHEN self_context IS NOT NULL THEN
                    '; of the processes that could hold that, it is the one whose '
                    || oomlab_format_bytes(self_entry[1] - own_reserved) || ' beyond it is the '
                    || oomlab_format_bytes(self_context) || ' this service holds outside PyTorch on ' || instance
                ELSE '' END
         ELSE
             'process ' || self_entry[2] || ' (' || oomlab_format_bytes(self_entry[1]) || ') is this process '
             || 'seen through a PID namespace, not a neighbour: it is the only process the driver listed on the '
             || 'card and the message has no "this process" clause, so PyTorch did not find its own pid'
    END AS self_basis,
    CASE WHEN other_processes IS NULL THEN NULL
         WHEN self_entry IS NULL THEN other_processes
         ELSE [p FOR p IN other_processes IF p.pid <> self_entry[2]] END AS neighbours
FROM judged;
