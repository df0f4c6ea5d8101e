-- Live bytes and blocks per allocation site in the final state of snapshot $snapshot_id, with the part older
-- than the trace (every block when there is no trace) and the oldest allocation the trace saw.
-- Used by oomlab.analyses.snapshot.leak_evidence.
SELECT site, sum(size)::BIGINT AS live_bytes, count(*) AS live_blocks,
       coalesce(sum(size) FILTER (WHERE before_trace), 0)::BIGINT AS before_trace_bytes,
       count(*) FILTER (WHERE before_trace) AS before_trace_blocks,
       min(alloc_time_us) AS oldest_in_trace_time_us
FROM fct_snapshot_live_blocks WHERE snapshot_id = $snapshot_id
GROUP BY site;
