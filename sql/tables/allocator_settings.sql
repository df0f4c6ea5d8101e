-- One row per option of PyTorch's allocator configuration (PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF, split
-- at its commas) that a process stated: a text log line that sets the variable, or the `alloc_conf` field
-- oomlab.capture writes into request lines. `setting` is the option in lower case (`expandable_segments`,
-- `max_split_size_mb`, `garbage_collection_threshold`, `roundup_power2_divisions`, `backend`, ...), `value` as
-- written (switches as `true` / `false`). `ts` is the line's time (the first request's, for a request log), NULL
-- when the line has none. Snapshots keep their own in snapshots.allocator_settings; fct_allocator_settings
-- reads both.
CREATE TABLE IF NOT EXISTS allocator_settings (
    source_id INTEGER NOT NULL,
    line      BIGINT,
    ts        TIMESTAMP,
    instance  VARCHAR,
    setting   VARCHAR NOT NULL,
    value     VARCHAR
);
