-- One allocator option a process stated (ingest/alloc_conf.py); positional: source_id, line, ts, instance,
-- setting, value.
INSERT INTO allocator_settings (source_id, line, ts, instance, setting, value) VALUES (?, ?, ?, ?, ?, ?);
