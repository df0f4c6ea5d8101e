"""Where a file's rows and an OOM no file placed are: the device, when the files themselves do not say.

After reconcile.link has made one event of each real OOM, an event no file placed is put on the one host whose
nvidia-smi listed its process's pid at the time (`place_by_pid`), and every file that names no device of its own
is placed on its OOMs' device, or its folder's (`place_sources`, written to source_placements by reconcile).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import duckdb

from ..config import IngestOptions
from .oom_links import Event, is_placed
from .sql import sql_text


def place_by_pid(con: duckdb.DuckDBPyConnection, events: list[Event]) -> None:
    """An event no file placed, whose message names this process's pid (the host's, through a PID namespace):
    on the one host whose nvidia-smi listed that pid at the time, if exactly one did."""
    import pyarrow as pa

    asked = [
        (i, e.ts, pid)
        for i, e in enumerate(events)
        if not e.placed and e.ts is not None and (pid := next((s.self_pid for s in e.sightings if s.self_pid), None))
    ]
    if not asked:
        return
    keys, times, pids = zip(*asked, strict=True)
    table = pa.table({"key": pa.array(keys, pa.int64()), "ts": pa.array(times), "pid": pa.array(pids, pa.int64())})
    con.register("oom_pids", table)
    try:
        hosts: dict[int, list[str]] = defaultdict(list)
        for key, instance in con.execute(sql_text("select_pid_hosts")).fetchall():
            hosts[key].append(instance)
    finally:
        con.unregister("oom_pids")
    for key, found in hosts.items():
        if len(found) == 1:
            events[key].host = found[0]


@dataclass(frozen=True)
class Source:
    """A file as placement reads it: its folder, and the devices its rows name (None: only its own name)."""

    source_id: int
    folder: str
    devices: frozenset[str]
    name: str = ""  # the instance its name stands for when it names none (IngestOptions.instance_for)
    kind: str = ""  # the rest of its file name after `name`: `.log.gz` for `a10-02.log.gz`

    @property
    def sort(self) -> tuple[str, str]:
        """Its folder and kind: files of one sort in one folder are named alike."""
        return self.folder, self.kind


def read_sources(con: duckdb.DuckDBPyConnection) -> list[Source]:
    out = []
    for source_id, path, instances in con.execute(sql_text("select_source_instances")).fetchall():
        named = frozenset(i for i in instances or () if is_placed(i, path))
        name, file = IngestOptions().instance_for(path), Path(path).name
        kind = file[len(name) :] if file.startswith(name) else file
        out.append(Source(source_id, str(Path(path).parent), named, name, kind))
    return out


def place_sources(sources: list[Source], events: list[Event]) -> dict[int, tuple[str | None, str]]:
    """(device, what says so) for every file: None and `its rows` for a file that names its devices; for one that
    names none, the one device its OOMs were linked to, else the one device every file of its folder is on, else
    None and `its name` (its name stands in). Evidence naming two devices places nothing."""
    linked: dict[int, set[str]] = defaultdict(set)
    for event in events:
        # an event seen by several files ties them to one process: on its placed device, else on the device its
        # key sighting's file names (a capture folder whose files name no host at all is still one process)
        if event.instance is not None and (event.placed or len({s.source_id for s in event.sightings}) > 1):
            for s in event.sightings:
                linked[s.source_id].add(event.instance)
    by_folder: dict[str, set[str]] = defaultdict(set)
    # files of one sort named after the devices they are on (`a10-01.log.gz` on a10-01, `a10-02.log.gz` beside it):
    # there a file's name is its device, not a sibling's (fleet 109712 of bench/truth.py: a10-02's log, and the
    # request logs of three MI300X hosts, had been put on a10-01, the one device their folders' files were linked
    # to). A capture folder's printouts are of another sort than the request log named after its device.
    by_name: set[tuple[str, str]] = set()
    for source in sources:
        devices = source.devices or linked.get(source.source_id, set())
        by_folder[source.folder] |= devices
        if source.name in devices:
            by_name.add(source.sort)
    placed: dict[int, tuple[str | None, str]] = {}
    for source in sources:
        own, folder = linked.get(source.source_id, set()), by_folder[source.folder]
        if source.devices:
            placed[source.source_id] = (None, "its rows")
        elif len(own) == 1:
            placed[source.source_id] = (next(iter(own)), "its OOMs")
        elif not own and len(folder) == 1 and source.sort not in by_name:
            placed[source.source_id] = (next(iter(folder)), "its folder")
        else:
            placed[source.source_id] = (None, "its name")
    return placed
