-- One row per GPU (or MIG instance) and sampling moment from telemetry: nvidia-smi --query-gpu CSV, the
-- default `nvidia-smi` table and `nvidia-smi -q` (origin `nvidia-smi`), `nvidia-smi dmon` (`nvidia-smi dmon`),
-- the DCGM exporter's Prometheus fields and `dcgmi dmon` (`dcgm`) or rocm-smi (`rocm-smi`). Memory is what
-- the driver sees: every process on the card plus its contexts. NULL where the source does not state a value.
-- `ts` is NULL when the source states no time of its own and no --at was given: such a sample is kept, but
-- never placed in time (it is not the file's modification time). A MIG instance's row has `mig_instance_id`.
CREATE TABLE IF NOT EXISTS gpu_samples (
    source_id             INTEGER NOT NULL,
    ts                    TIMESTAMP,
    instance              VARCHAR,
    gpu_index             INTEGER,
    gpu_name              VARCHAR,
    memory_used_bytes     BIGINT,
    memory_total_bytes    BIGINT,
    memory_free_bytes     BIGINT,
    utilization_gpu       DOUBLE,
    utilization_memory    DOUBLE,
    temperature           DOUBLE,
    power_w               DOUBLE,
    memory_reserved_bytes BIGINT,
    gpu_uuid              VARCHAR,
    gpu_bus_id            VARCHAR,
    origin                VARCHAR NOT NULL,
    line                  BIGINT,
    mig_instance_id       INTEGER,
    mig_profile           VARCHAR,
    hostname              VARCHAR,
    pod                   VARCHAR,
    namespace             VARCHAR,
    container             VARCHAR
);
-- A database an earlier version wrote: the same columns (tables are created once, so they are added here).
ALTER TABLE gpu_samples ALTER COLUMN ts DROP NOT NULL;
ALTER TABLE gpu_samples ADD COLUMN IF NOT EXISTS mig_instance_id INTEGER;
ALTER TABLE gpu_samples ADD COLUMN IF NOT EXISTS mig_profile VARCHAR;
ALTER TABLE gpu_samples ADD COLUMN IF NOT EXISTS hostname VARCHAR;
ALTER TABLE gpu_samples ADD COLUMN IF NOT EXISTS pod VARCHAR;
ALTER TABLE gpu_samples ADD COLUMN IF NOT EXISTS namespace VARCHAR;
ALTER TABLE gpu_samples ADD COLUMN IF NOT EXISTS container VARCHAR;
