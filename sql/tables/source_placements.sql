-- The device a file's rows are on when the file itself names none (its instance only repeats its file's or
-- folder's name): rebuilt over the whole database after every ingest with oom_event_links (load/reconcile.py).
-- A file whose OOMs were linked to OOMs placed on one device is on that device; so is every other such file in
-- a folder whose files are all on that one device (a capture folder: a process's snapshots and memory_summary
-- printouts beside its logs). A file not listed keeps its own instance.
CREATE TABLE IF NOT EXISTS source_placements (
    source_id INTEGER PRIMARY KEY,
    instance  VARCHAR NOT NULL,
    placed_by VARCHAR NOT NULL
);
