"""A snapshot's trace streamed into trace_events as it is read, without holding it: its chunks are spooled to
an Arrow IPC stream in DuckDB's temp directory, and go into the table in one INSERT when the read ends."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.ipc as ipc

from .sql import run_file

# The name the spooled trace is scanned under by sql/ingest/insert_streamed_trace.sql.
SPOOL_VIEW = "_oomlab_streamed_trace"


class TraceWriter:
    """parse.snapshot.stream.TraceSink for one snapshot id.

    Why a spool file rather than an INSERT per chunk: inside the file's transaction DuckDB keeps rows that
    many INSERTs append uncompressed in memory until the commit (16M trace rows in 1M-row INSERTs held
    ~1 GB), while one INSERT that scans its rows writes them out as it goes, into buffers it may evict
    (64M rows scanned from a spool held 0.44 GB under a 300 MB memory limit). The spool is the IPC stream
    format because each chunk brings its own `action` dictionary, which the file format cannot replace."""

    def __init__(self, con: duckdb.DuckDBPyConnection, snapshot_id: int) -> None:
        self._con = con
        self._snapshot_id = snapshot_id
        self._path: Path | None = None
        self._writer: ipc.RecordBatchStreamWriter | None = None

    def write(self, events: pa.Table) -> None:
        if self._writer is None:
            self._path = _spool_path(self._con)
            self._writer = ipc.new_stream(str(self._path), events.schema)
        self._writer.write_table(events)

    def finish(self, devices: list[int]) -> None:
        """One INSERT of every spooled row, each list ordinal replaced by its device index."""
        if self._writer is None:
            return
        self._writer.close()
        try:
            with ipc.open_stream(pa.OSFile(str(self._path))) as reader:
                self._con.register(SPOOL_VIEW, reader)
                try:
                    params = {"snapshot_id": self._snapshot_id, "devices": devices}
                    run_file(self._con, "insert_streamed_trace", params)
                finally:
                    self._con.unregister(SPOOL_VIEW)
        finally:
            self._remove()

    def discard(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._remove()

    def _remove(self) -> None:
        self._writer = None
        if self._path is not None:
            self._path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # the folder made for it, unless DuckDB's own spills are in it now
                self._path.parent.rmdir()
            self._path = None


def _spool_path(con: duckdb.DuckDBPyConnection) -> Path:
    """A new file in DuckDB's temp directory (beside the database, where its own spills go: the disk the
    user gave the data), created if missing."""
    (directory,) = con.execute("SELECT current_setting('temp_directory')").fetchall()[0]
    os.makedirs(directory, exist_ok=True)
    handle, path = tempfile.mkstemp(prefix="oomlab-trace-", suffix=".arrows", dir=directory)
    os.close(handle)
    return Path(path)
