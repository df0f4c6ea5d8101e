-- One row per out-of-memory event, whatever its origin (message, structured, snapshot).
CREATE SEQUENCE IF NOT EXISTS oom_event_ids START 1;
CREATE TABLE IF NOT EXISTS oom_events (
    event_id                    BIGINT PRIMARY KEY DEFAULT nextval('oom_event_ids'),
    source_id                   INTEGER NOT NULL,
    line                        BIGINT,
    ts                          TIMESTAMP,
    instance                    VARCHAR,
    gpu_index                   INTEGER,
    model_version               VARCHAR,
    framework                   VARCHAR,
    origin                      VARCHAR NOT NULL,
    requested_bytes             BIGINT,
    total_capacity_bytes        BIGINT,
    free_bytes                  BIGINT,
    already_allocated_bytes     BIGINT,
    reserved_bytes              BIGINT,
    allocated_by_pytorch_bytes  BIGINT,
    reserved_unallocated_bytes  BIGINT,
    process_in_use_bytes        BIGINT,
    allowed_bytes               BIGINT,
    private_pool_bytes          BIGINT,
    other_processes             STRUCT(pid BIGINT, in_use_bytes BIGINT)[],
    batch_size                  BIGINT,
    input_sequence_length       BIGINT,
    output_sequence_length      BIGINT,
    message                     VARCHAR,
    request_id                  VARCHAR
);
