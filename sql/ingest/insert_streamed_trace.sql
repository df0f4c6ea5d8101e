-- A streamed snapshot trace, spooled by load/trace_writer.py and scanned as _oomlab_streamed_trace, in one
-- INSERT (DuckDB writes a scan's rows out as it goes; rows appended by many INSERTs wait in memory until the
-- commit). Its rows carry the ordinal of their trace list: ordinal k is device $devices[k + 1] (lists in
-- DuckDB count from 1), not k where a device before a streamed one had no trace.
INSERT INTO trace_events (snapshot_id, device, seq, action, addr, size, stream, time_us, stack_id)
SELECT $snapshot_id, $devices[device + 1], seq, action, addr, size, stream, time_us, stack_id
FROM _oomlab_streamed_trace;
