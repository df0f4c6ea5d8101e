-- One row per request line of a text log (parse/text/request_line.py): the line a service writes about how each
-- request it served or failed ended, with its size (`req-28 done status=200 model=chat-7b batch=2 prompt_tokens=693
-- max_new_tokens=389 latency_ms=6864.6`, or the same as JSON). They state no memory levels; they say what a device
-- served and how large (analyses/fleet/served.py). `succeeded` is whether the status says the request succeeded
-- (2xx, ok, done, ...).
CREATE TABLE IF NOT EXISTS text_requests (
    source_id              INTEGER NOT NULL,
    line                   BIGINT,
    ts                     TIMESTAMP,
    instance               VARCHAR,
    model_version          VARCHAR,
    request_id             VARCHAR,
    status                 VARCHAR,
    succeeded              BOOLEAN,
    latency_ms             DOUBLE,
    batch_size             BIGINT,
    input_sequence_length  BIGINT,
    output_sequence_length BIGINT
);
