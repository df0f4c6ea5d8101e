-- One row per GPU and sampling moment from telemetry: nvidia-smi --query-gpu CSV (origin `nvidia-smi`) or
-- the DCGM exporter's Prometheus fields (origin `dcgm`). Memory is what the driver sees: every process on
-- the card plus its contexts. NULL where the source does not state a value.
CREATE TABLE IF NOT EXISTS gpu_samples (
    source_id             INTEGER NOT NULL,
    ts                    TIMESTAMP NOT NULL,
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
    line                  BIGINT
);
