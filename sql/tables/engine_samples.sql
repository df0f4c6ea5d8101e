-- One row per sample of a serving engine's Prometheus metrics (`vllm:`, `sglang:` / `sglang_`, `tgi_`
-- families), labels kept as JSON. `ts` is the sample's timestamp, else --at, else NULL (a scrape saved without
-- timestamps states no time; the file's modification time is not its time).
CREATE TABLE IF NOT EXISTS engine_samples (
    source_id  INTEGER NOT NULL,
    line       BIGINT,
    ts         TIMESTAMP,
    instance   VARCHAR,
    framework  VARCHAR NOT NULL,
    model_name VARCHAR,
    metric     VARCHAR NOT NULL,
    value      DOUBLE,
    labels     JSON
);
-- A database an earlier version wrote: ts may be NULL now.
ALTER TABLE engine_samples ALTER COLUMN ts DROP NOT NULL;
