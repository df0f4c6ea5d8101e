-- One row per serving-engine start-up memory report found in a text log (vLLM's profiling lines, SGLang's,
-- TGI's, llama.cpp's, ollama's, ...): how the engine split the card at start, per device where its lines name
-- one. NULL where its lines do not say.
CREATE TABLE IF NOT EXISTS engine_memory (
    source_id              INTEGER NOT NULL,
    line                   BIGINT,
    ts                     TIMESTAMP,
    instance               VARCHAR,
    framework              VARCHAR NOT NULL,
    variant                VARCHAR,
    weights_bytes          BIGINT,
    non_torch_bytes        BIGINT,
    consumed_bytes         BIGINT,
    activation_peak_bytes  BIGINT,
    cuda_graph_bytes       BIGINT,
    kv_cache_bytes         BIGINT,
    kv_cache_tokens        BIGINT,
    device_total_bytes     BIGINT,
    device_free_bytes      BIGINT,
    gpu_memory_utilization DOUBLE,
    budget_bytes           BIGINT,
    loaded_weights_bytes   BIGINT,
    message                VARCHAR,
    device                 VARCHAR,
    kv_cache_blocks_gpu    BIGINT
);
-- A database an earlier version wrote: the same columns (tables are created once, so they are added here).
ALTER TABLE engine_memory ADD COLUMN IF NOT EXISTS device VARCHAR;
ALTER TABLE engine_memory ADD COLUMN IF NOT EXISTS kv_cache_blocks_gpu BIGINT;
