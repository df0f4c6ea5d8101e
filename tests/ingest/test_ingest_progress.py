"""The progress bar hears how far a text log is read, whoever searches it and whatever its compression."""

from __future__ import annotations

import gzip
import lzma
import random
import time
from pathlib import Path

import pytest
import zstandard

from oomlab.config import IngestOptions
from oomlab.ingest.progress import ReadPosition, polling
from oomlab.ingest.run import ingest_file
from oomlab.load.tables import connect
from oomlab.parse.text.ripgrep import RIPGREP_ENV
from oomlab.parse.text.textlog import scan_text_log
from oomlab.parse.text.textscan import Window

from conftest import H200

MESSAGE = gzip.decompress((H200 / "serve_mixed" / "oom_messages.txt.gz").read_bytes()).split(b"\n")[1]
PACK = {
    "plain": lambda data: data,
    "gzip": gzip.compress,
    "xz": lambda data: lzma.compress(data, preset=0),
    "zstd": zstandard.ZstdCompressor().compress,
}


def service_log(tmp_path: Path, kind: str, messages: int = 3000) -> Path:
    """A log of filler and OOM messages (a few MB), stored as `kind`; random request ids keep it from
    compressing to a few KB that a decompressor would read in one go."""
    rng = random.Random(5)
    data = b"".join(
        b"".join(b"2026-11-30T01:00:00Z INFO request %032x done\n" % rng.getrandbits(128) for _ in range(20))
        + MESSAGE
        + b"\n"
        for _ in range(messages)
    )
    path = tmp_path / f"service.log.{kind}"
    path.write_bytes(PACK[kind](data))
    return path


@pytest.mark.parametrize(
    ("kind", "search"), [("plain", "ripgrep"), ("plain", "in-process"), ("gzip", ""), ("xz", ""), ("zstd", "")]
)
def test_windows_say_how_far_the_file_is_read(
    tmp_path: Path, kind: str, search: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if search == "in-process":
        monkeypatch.setenv(RIPGREP_ENV, "off")
    seen: list[float] = []

    def note(window: Window) -> None:
        seen.append(window.progress)

    found = list(scan_text_log(service_log(tmp_path, kind), chunk_size=200_000, on_window=note))
    assert len(found) == 3000
    assert seen == sorted(seen) and seen[-1] == 1.0
    assert any(0 < share < 1 for share in seen), seen  # several windows, each a step further


def test_a_text_log_reports_its_position_to_the_bar(tmp_path: Path) -> None:
    position = ReadPosition()
    with connect(tmp_path / "db.duckdb") as con:
        result = ingest_file(con, str(service_log(tmp_path, "gzip")), IngestOptions(), position=position)
    assert (result.status, result.rows) == ("ingested", 3000)
    assert position.fraction == 1.0


class _Recorder:
    """A Progress that keeps what it is told."""

    def __init__(self) -> None:
        self.fractions: list[float] = []

    def begin(self, total_bytes: int) -> bool:
        return True

    def start(self, path: str, size: int) -> None: ...

    def update(self, fraction: float) -> None:
        self.fractions.append(fraction)

    def finish(self) -> None: ...


class _Connection:
    """The one method the poller calls, answering as DuckDB does: -1 while no statement runs."""

    def __init__(self, percent: float) -> None:
        self.percent = percent

    def query_progress(self) -> float:
        return self.percent


@pytest.mark.parametrize(("percent", "read", "expected"), [(-1, 0.4, 0.4), (30.0, 0.0, 0.3), (-1, 0.0, None)])
def test_the_poller_takes_duckdb_or_the_reader(percent: float, read: float, expected: float | None) -> None:
    position, bar = ReadPosition(), _Recorder()
    position.fraction = read
    with polling(_Connection(percent), bar, position, every=0.01):  # type: ignore[arg-type]
        time.sleep(0.1)
    assert set(bar.fractions) == ({expected} if expected is not None else set())
