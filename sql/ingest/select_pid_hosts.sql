-- The hosts whose nvidia-smi listed each pid within NEIGHBOUR_ROUND_MAX_AGE of an OOM (`oom_pids`: key, ts, pid,
-- registered by load/placement.py): an OOM whose files name no host is placed on the one host that ran its
-- process (a pid is unique on one host at one time; the message prints the host's pid where PyTorch runs in a
-- PID namespace). Keys with candidates on several hosts are returned with each, and left unplaced.
SELECT o.key, p.instance
FROM oom_pids AS o
JOIN stg_gpu_process_samples AS p
    ON p.pid = o.pid AND p.ts BETWEEN o.ts - NEIGHBOUR_ROUND_MAX_AGE() AND o.ts + NEIGHBOUR_ROUND_MAX_AGE()
WHERE p.instance IS NOT NULL
GROUP BY ALL
ORDER BY o.key, p.instance;
