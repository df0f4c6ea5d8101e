-- One oom_events row (origin `snapshot`) per `oom` entry of a snapshot's trace: the request that failed
-- and the device's free memory at that moment. time_us is wall-clock microseconds since the epoch.
INSERT INTO oom_events (source_id, snapshot_id, line, ts, instance, gpu_index, model_version, framework, origin,
                        requested_bytes, free_bytes, message)
SELECT s.source_id, o.snapshot_id, NULL, make_timestamp(o.time_us), s.instance, o.device, s.model_version,
       'pytorch', 'snapshot', o.requested_bytes, o.device_free_bytes, NULL
FROM snapshot_ooms o
JOIN snapshots s USING (snapshot_id)
WHERE o.snapshot_id = $snapshot_id
ORDER BY o.seq;
