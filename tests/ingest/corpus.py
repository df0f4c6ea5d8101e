"""The real-world corpus of tests/cases/realworld/: artifacts copied verbatim from public pages (each case's
`source` is its URL) with the facts each must yield, and how to check them.

A case is a folder `<family>/<NNN>_<slug>/` with one `artifact.*` and a `case.json` whose `expect` maps a
table (requests, oom_events, gpu_samples, gpu_process_samples, allocator_stats, engine_memory, engine_samples,
snapshots, calendar_rules, rejects) to the rows it must hold, in order, each with the columns the artifact states.
`ingest_case` loads one artifact into its own database (with the options its case.json `ingest` names: instance,
tz, columns, map, at, job_duration) and
`check_case` lists what differs (empty: the case lands with the right facts).
Used by tests/ingest/test_realworld_corpus.py and bench/corpus.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

ROOT = Path(__file__).resolve().parent.parent / "cases" / "realworld"
# Row order of each table as the expectations list them.
# A case's OOM events are the key sighting of each (load/oom_links.py): copies of one failure in a document
# count once, as its events do.
_ROWS = {"oom_events": "(SELECT * FROM oom_events WHERE event_id IN (SELECT event_key FROM oom_event_links))"}
_ORDER = {
    "requests": "line NULLS LAST, ts",
    "oom_events": "line NULLS LAST, event_id",
    "gpu_samples": "line NULLS LAST, ts, gpu_index",
    "gpu_process_samples": "line NULLS LAST, ts, pid",
    "allocator_stats": "moment, CASE pool WHEN 'all' THEN 0 WHEN 'large' THEN 1 ELSE 2 END",
    "engine_memory": "line NULLS LAST",
    "engine_samples": "line NULLS LAST, metric",
    "snapshots": "snapshot_id",
    "calendar_rules": "line, name",
    "rejects": "line",
}
# A byte amount printed in a unit is rounded to it; the expectation and the parser may round a half apart.
_BYTE_SLACK = 1


@dataclass(frozen=True)
class Case:
    name: str  # `<family>/<folder>`
    folder: Path
    spec: dict[str, Any]

    @property
    def artifact(self) -> Path:
        (path,) = [p for p in self.folder.iterdir() if p.name.startswith("artifact.")]
        return path


def cases(root: Path = ROOT) -> list[Case]:
    """Every case of the corpus (or of another folder laid out the same way), in name order."""
    found = []
    for spec_path in sorted(root.glob("*/*/case.json")):
        folder = spec_path.parent
        found.append(Case(f"{folder.parent.name}/{folder.name}", folder, json.loads(spec_path.read_text())))
    return found


def known_misses() -> dict[str, str]:
    """Case name -> why it does not land yet: each family's `known_misses.json` (folder name -> reason)."""
    misses: dict[str, str] = {}
    for path in sorted(ROOT.glob("*/known_misses.json")):
        misses |= {f"{path.parent.name}/{name}": why for name, why in json.loads(path.read_text()).items()}
    return misses


def ingest_case(case: Case, db: Path) -> duckdb.DuckDBPyConnection:
    """The case's artifact ingested alone into `db` (labels from its case.json `ingest`); a read-only
    connection to it."""
    from oomlab import api
    from oomlab.config import IngestOptions
    from oomlab.fields import parse_map_options, with_mapping

    options = case.spec.get("ingest") or {}
    columns = tuple(options.get("columns") or ())
    # --map options as a user writes them (`ts=timestamp:ms`), and --at (naive UTC)
    maps = tuple(f"{canonical}={theirs}" for canonical, theirs in (options.get("map") or {}).items())
    at = datetime.fromisoformat(options["at"]) if options.get("at") else None
    chosen = IngestOptions(
        instance=options.get("instance"),
        tz=options.get("tz"),
        columns=columns,
        fields=with_mapping(parse_map_options(maps)),
        at=at,
        job_duration_minutes=options.get("job_duration"),
    )
    api.ingest(db, [str(case.artifact)], chosen)
    return duckdb.connect(str(db), read_only=True)


def check_case(case: Case, con: duckdb.DuckDBPyConnection) -> list[str]:
    """What the database holds that differs from the case's expectations (empty when it lands right)."""
    problems: list[str] = []
    for table, expected in (case.spec.get("expect") or {}).items():
        if table == "unreadable":
            continue
        if table == "series":  # what a Prometheus answer or export holds, read from the artifact itself
            from corpus_series import check_series

            problems += check_series(case, expected)
            continue
        if table == "entries":  # what a log store's envelope holds, read from the artifact itself
            from corpus_envelope import check_entries

            problems += check_entries(case, expected)
            continue
        if table not in _ORDER:
            problems.append(f"unknown table {table!r} in case.json")
            continue
        problems += _check_table(con, table, expected)
    return problems


def _check_table(
    con: duckdb.DuckDBPyConnection, table: str, expected: list[dict[str, Any]] | dict[str, Any]
) -> list[str]:
    """The rows of `table` against the expected ones: every row in order, or (`{"count": n, "first": [...],
    "last": {...}}`, for a long log) how many, the first ones and the last."""
    columns = {name for (name,) in con.execute(f"SELECT column_name FROM (DESCRIBE {table})").fetchall()}
    rows = con.sql(f"SELECT * FROM {_ROWS.get(table, table)} ORDER BY {_ORDER[table]}").pl().to_dicts()
    if isinstance(expected, dict):
        if len(rows) != expected["count"]:
            return [f"{table}: {len(rows)} rows, expected {expected['count']}"]
        first = expected["first"]
        rows, expected = rows[: len(first)] + rows[-1:], [*first, expected["last"]]
    if len(rows) != len(expected):
        return [f"{table}: {len(rows)} rows, expected {len(expected)}"]
    problems = []
    for number, (want, got) in enumerate(zip(expected, rows, strict=True), start=1):
        for key, value in want.items():
            problem = _check_value(key, value, got, columns)
            if problem:
                problems.append(f"{table} row {number}: {problem}")
    return problems


def _check_value(key: str, want: Any, row: dict[str, Any], columns: set[str]) -> str | None:
    if key == "ts_no_year":
        return _check_no_year(want, row.get("ts"))
    if key not in columns:
        return f"{key}: no such column"
    got = row[key]
    if key == "ts":
        got = None if got is None else got.isoformat()
        return None if got is not None and got.startswith(str(want)) else f"ts {got!r}, expected {want!r}"
    if key == "labels" and isinstance(got, str):
        got = json.loads(got)
        return None if all(got.get(k) == v for k, v in want.items()) else f"labels {got!r} lack {want!r}"
    if key == "other_processes":
        got = [{"pid": p["pid"], "in_use_bytes": p["in_use_bytes"]} for p in got or []]
        return None if got == want else f"other_processes {got!r}, expected {want!r}"
    if isinstance(want, int) and isinstance(got, int | float) and key.endswith("_bytes"):
        return None if abs(got - want) <= _BYTE_SLACK else f"{key} {got!r}, expected {want!r}"
    if isinstance(want, float) and isinstance(got, int | float):
        return None if abs(got - want) <= 1e-6 * max(1.0, abs(want)) else f"{key} {got!r}, expected {want!r}"
    return None if got == want else f"{key} {got!r}, expected {want!r}"


def _check_no_year(want: str, got: Any) -> str | None:
    """A line without a year: its month, day and time, in a year that is not in the future."""
    if got is None:
        return f"ts NULL, expected {want} of some year"
    if got.strftime("%m-%d %H:%M:%S") != want:
        return f"ts {got.isoformat()}, expected {want} of some year"
    if got > datetime.now(UTC).replace(tzinfo=None):
        return f"ts {got.isoformat()} is in the future"
    return None
