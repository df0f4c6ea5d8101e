-- Every run of a scheduled job: listed in a calendar (origin `calendar`) or expanded from a rule over the
-- time the data covers (origin `cron`, rebuilt after each ingest). NULL hosts means every host.
CREATE TABLE IF NOT EXISTS job_occurrences (
    source_id INTEGER NOT NULL,
    line      BIGINT,
    name      VARCHAR NOT NULL,
    start_ts  TIMESTAMP NOT NULL,
    end_ts    TIMESTAMP NOT NULL,
    hosts     VARCHAR[],
    origin    VARCHAR NOT NULL
);
