-- One row per process and sampling moment of nvidia-smi --query-compute-apps: who holds memory on the card.
CREATE TABLE IF NOT EXISTS gpu_process_samples (
    source_id    INTEGER NOT NULL,
    ts           TIMESTAMP NOT NULL,
    instance     VARCHAR,
    pid          BIGINT,
    process_name VARCHAR,
    used_bytes   BIGINT,
    gpu_uuid     VARCHAR,
    gpu_bus_id   VARCHAR,
    origin       VARCHAR NOT NULL,
    line         BIGINT
);
