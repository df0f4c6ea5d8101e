-- Ooms of one snapshot (parameters are positional).
-- Used by oomlab.analyses.snapshot_ooms.
SELECT seq, device, time_us, requested_bytes, device_free_bytes
FROM snapshot_ooms WHERE snapshot_id = ? ORDER BY seq;
