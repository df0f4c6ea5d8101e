-- Recurring scheduled jobs from calendar files: a 5-field cron in UTC and how long each run lasts.
CREATE TABLE IF NOT EXISTS calendar_rules (
    source_id        INTEGER NOT NULL,
    line             BIGINT,
    name             VARCHAR NOT NULL,
    cron             VARCHAR NOT NULL,
    duration_minutes DOUBLE NOT NULL,
    hosts            VARCHAR[]
);
