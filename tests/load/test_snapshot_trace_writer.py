"""A snapshot's trace streamed into DuckDB as it is read (load.trace_writer.TraceWriter): the same rows as
the file read whole and inserted at once, while the Arrow memory held stays bounded by a chunk, and no spool
file is left behind.

Every case is a real H200 capture or DERIVED FROM ONE (loaded with the safe unpickler, re-pickled with the
change each docstring names). Chunks are made small so that each case crosses many of them.
"""

from __future__ import annotations

import gzip
import os
import pickle
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from oomlab.load.connection import connect
from oomlab.load.snapshot import insert_snapshot, load_snapshot
from oomlab.load.trace_writer import TraceWriter
from oomlab.parse.snapshot import safe_pickle
from oomlab.parse.snapshot.read import read_snapshot, snapshot_from_object
from oomlab.parse.snapshot.safe_pickle import load_plain_pickle_sized
from oomlab.parse.snapshot.stream import TraceChunks

from snapshot_cases import raw_case, repeated_trace_pickle, snapshot_path

pytestmark = pytest.mark.skipif(
    safe_pickle._stream is None and os.environ.get("OOMLAB_REQUIRE_NATIVE") != "1",
    reason="the streaming reader is not compiled here (no C compiler when the package was built)",
)
_DETAIL = ("segments", "blocks", "trace_events", "stacks", "frames", "snapshot_ooms", "snapshots")


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TraceChunks, "CHUNK_ENTRIES", 3000)


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    connection = connect(tmp_path / "streamed.duckdb")
    yield connection
    connection.close()
    assert not list(tmp_path.glob("streamed.duckdb.tmp/*")), "a spool file was left behind"


def _rows(con: duckdb.DuckDBPyConnection, snapshot_id: int) -> dict[str, list[tuple[Any, ...]]]:
    """Every detail row of one snapshot, without its id, in a stable order."""
    found = {}
    for table in _DETAIL:
        # table names come from this module's constant
        rows = con.execute(f"SELECT * EXCLUDE (snapshot_id) FROM {table} WHERE snapshot_id = $id", {"id": snapshot_id})
        found[table] = sorted(rows.fetchall(), key=repr)
    return found


def _assert_streamed_as_whole(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """`path` loaded through the writer as snapshot 1 holds what the whole read inserted as snapshot 2 does."""
    meta = load_snapshot(con, path, 1)
    obj, size = load_plain_pickle_sized(path)
    whole = snapshot_from_object(obj, str(path), "pickle", input_bytes=size)
    insert_snapshot(con, whole, 2)
    assert meta == whole.meta
    assert _rows(con, 1) == _rows(con, 2)


def _dump(path: Path, obj: Any) -> Path:
    path.write_bytes(gzip.compress(pickle.dumps(obj, protocol=4), 1))
    return path


def test_a_real_trace_streamed_in_chunks_is_the_whole_read(con: duckdb.DuckDBPyConnection) -> None:
    """serve_mixed: 40,000 events in 14 chunks, every row as a whole read inserts it."""
    assert read_snapshot(snapshot_path("serve_mixed"), TraceWriter(con, 9)).trace_events is None
    assert con.execute("SELECT count(*) FROM trace_events WHERE snapshot_id = 9").fetchone() == (40000,)
    _assert_streamed_as_whole(con, snapshot_path("serve_mixed"))


def test_devices_without_a_trace_are_set_in_the_database(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    """serve_mixed's trace as devices 1 and 3 of four (0 and 2 empty): the streamed rows carry the lists'
    ordinals 0 and 1 until the writer maps them to 1 and 3."""
    raw = raw_case("serve_mixed")
    entries = raw["device_traces"][0]
    raw["device_traces"] = [[], entries, [], [dict(e) for e in entries[:500]]]
    path = _dump(tmp_path / "devices.pickle.gz", raw)
    _assert_streamed_as_whole(con, path)
    counts = con.execute("SELECT device, count(*) FROM trace_events WHERE snapshot_id = 1 GROUP BY 1 ORDER BY 1")
    assert counts.fetchall() == [(1, 40000), (3, 500)]


def test_a_stream_declined_half_way_leaves_only_the_whole_read(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    """serve_mixed with one entry dict appended again at the end: the streaming reader declines it after
    13 chunks were written, the file is read whole, and the database holds each row once."""
    raw = raw_case("serve_mixed")
    raw["device_traces"][0].append(raw["device_traces"][0][0])
    path = tmp_path / "twice.pickle"
    path.write_bytes(pickle.dumps(raw, protocol=4))
    written: list[int] = []

    class Counting(TraceWriter):
        def write(self, events: pa.Table) -> None:
            written.append(events.num_rows)
            super().write(events)

    data = read_snapshot(path, Counting(con, 1))
    assert sum(written) >= 36000  # chunks were spooled before the reader met the repeated entry
    assert data.trace_events is not None and data.trace_events.num_rows == 40001
    assert con.execute("SELECT count(*) FROM trace_events").fetchone() == (0,)  # and the spool is gone


def test_the_arrow_memory_held_is_bounded_by_a_chunk(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    """serve_leak's 60,000-entry trace repeated 6x (360,000 entries, new dicts and frames lists per copy):
    while it streams in, Arrow never holds more than a chunk or two, a small fraction of the trace_events
    table a whole read builds."""
    path = repeated_trace_pickle("serve_leak", 6, tmp_path / "repeated.pickle")
    held: list[int] = []

    class Measuring(TraceWriter):
        def write(self, events: pa.Table) -> None:
            held.append(pa.total_allocated_bytes())
            super().write(events)

    before = pa.total_allocated_bytes()
    assert read_snapshot(path, Measuring(con, 1)).trace_events is None
    whole = read_snapshot(path).trace_events
    assert whole is not None and whole.num_rows == 360000
    assert len(held) == 120
    assert max(held) - before < whole.nbytes / 20, (max(held) - before, whole.nbytes)
    assert con.execute("SELECT count(*) FROM trace_events WHERE snapshot_id = 1").fetchone() == (360000,)


def test_a_failing_database_ends_the_read_with_its_own_error(con: duckdb.DuckDBPyConnection) -> None:
    """A write that fails (a full disk, say) is that failure, raised as it is: not a reason to read the
    file again whole, which would hide it and cost the memory streaming saves."""

    class FullDisk(TraceWriter):
        def write(self, events: pa.Table) -> None:
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        read_snapshot(snapshot_path("serve_mixed"), FullDisk(con, 1))
