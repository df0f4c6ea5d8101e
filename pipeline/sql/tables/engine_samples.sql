-- One row per sample of a serving engine's Prometheus metrics (`vllm:` families), labels kept as JSON.
CREATE TABLE IF NOT EXISTS engine_samples (
    source_id  INTEGER NOT NULL,
    line       BIGINT,
    ts         TIMESTAMP NOT NULL,
    instance   VARCHAR,
    framework  VARCHAR NOT NULL,
    model_name VARCHAR,
    metric     VARCHAR NOT NULL,
    value      DOUBLE,
    labels     JSON
);
