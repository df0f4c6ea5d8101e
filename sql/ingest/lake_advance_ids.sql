-- ingest --lake: move the working database's id sequences past the lake's highest ids (lake_max_ids); DuckDB
-- cannot restart a sequence a table default depends on, so each is drawn that many times (10^7 draws: 0.1 s).
SELECT
    (SELECT max(nextval('source_ids')) FROM range($sources)),
    (SELECT max(nextval('snapshot_ids')) FROM range($snapshots)),
    (SELECT max(nextval('oom_event_ids')) FROM range($events));
