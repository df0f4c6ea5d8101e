-- Which device each file's rows are on, and what says so: rebuilt over the whole database after every ingest with
-- oom_event_links (load/reconcile.py). `its rows`: the file names its devices itself (instance NULL: its rows keep
-- theirs). A file that names none (its instance only repeats its file's or folder's name) is on the one device its
-- OOMs were linked to (`its OOMs`), else on the one device every other file of its folder is on (`its folder`: a
-- capture folder's snapshots and memory printouts beside its logs), else its name stands in for a device
-- (`its name`: nothing places it; instance NULL). A file not listed (ingested by an earlier version, or with no
-- rows) keeps its own instance.
CREATE TABLE IF NOT EXISTS source_placements (
    source_id INTEGER PRIMARY KEY,
    instance  VARCHAR,
    placed_by VARCHAR NOT NULL
);
