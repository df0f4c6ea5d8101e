-- One row per process and sampling moment: nvidia-smi --query-compute-apps, or the Processes section of the
-- default `nvidia-smi` table and of `nvidia-smi -q`: who holds memory on the card. `ts` is NULL when the source
-- states no time and no --at was given. `gpu_index` and `mig_instance_id` where the source names them (the
-- table's GPU and GI ID columns); the CSV names its GPU by uuid or bus id instead.
CREATE TABLE IF NOT EXISTS gpu_process_samples (
    source_id       INTEGER NOT NULL,
    ts              TIMESTAMP,
    instance        VARCHAR,
    pid             BIGINT,
    process_name    VARCHAR,
    used_bytes      BIGINT,
    gpu_uuid        VARCHAR,
    gpu_bus_id      VARCHAR,
    origin          VARCHAR NOT NULL,
    line            BIGINT,
    gpu_index       INTEGER,
    mig_instance_id INTEGER
);
-- A database an earlier version wrote: the same columns (tables are created once, so they are added here).
ALTER TABLE gpu_process_samples ALTER COLUMN ts DROP NOT NULL;
ALTER TABLE gpu_process_samples ADD COLUMN IF NOT EXISTS gpu_index INTEGER;
ALTER TABLE gpu_process_samples ADD COLUMN IF NOT EXISTS mig_instance_id INTEGER;
