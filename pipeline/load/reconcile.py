"""One event per real OOM, and every file on its device: rebuilt over the whole database after every ingest (and
when an aggregate set opens). oom_links decides which sightings are one failure; placement puts an event no file
placed, and each file that names no device, where the evidence says; this module writes both tables in one
transaction.
"""

from __future__ import annotations

import duckdb

from .oom_links import Event, Sighting, link, read_sightings
from .placement import place_by_pid, place_sources, read_sources
from .sql import rollback


def reconcile_oom_sightings(con: duckdb.DuckDBPyConnection) -> int:
    """Rebuild oom_event_links and source_placements over every sighting and file; returns the number of
    events."""
    events = link(read_sightings(con))
    place_by_pid(con, events)
    placements = place_sources(read_sources(con), events)
    rows = [
        (s.event_id, event.key.event_id, event.instance, _matched_by(event, s))
        for event in events
        for s in event.sightings
    ]
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM oom_event_links")
        if rows:
            con.register("new_oom_event_links", _links_table(rows))
            con.execute("INSERT INTO oom_event_links SELECT * FROM new_oom_event_links")
            con.unregister("new_oom_event_links")
        con.execute("DELETE FROM source_placements")
        if placements:
            con.executemany(
                "INSERT INTO source_placements VALUES (?, ?, ?)",
                [(source_id, device, how) for source_id, (device, how) in sorted(placements.items())],
            )
        con.execute("COMMIT")
    except BaseException:
        rollback(con)
        raise
    return len(events)


def _matched_by(event: Event, s: Sighting) -> str:
    if s is event.key:
        return "key" if len(event.sightings) > 1 else "alone"
    if any(x.source_id == s.source_id and x.line < s.line for x in event.sightings):
        return "a copy pasted in its document"  # only a document's pasted copies share an event with their file
    if s.ts is None:
        return "numbers, in its file's order"
    return "time and numbers"


def _links_table(rows: list[tuple[int, int, str | None, str]]):  # -> pyarrow.Table
    import pyarrow as pa

    event_ids, keys, instances, matched = zip(*rows, strict=True)
    return pa.table(
        {
            "event_id": pa.array(event_ids, pa.int64()),
            "event_key": pa.array(keys, pa.int64()),
            "instance": pa.array(instances, pa.string()),
            "matched_by": pa.array(matched, pa.string()),
        }
    )
