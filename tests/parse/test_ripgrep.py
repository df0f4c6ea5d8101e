"""The rg marker search: which rg runs, what it reports, and how its failures surface."""

from __future__ import annotations

import contextlib
import gzip
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from oomlab.errors import InputError
from oomlab.parse.oom.message import OOM_MARKERS
from oomlab.parse.text import textscan
from oomlab.parse.text.ripgrep import RIPGREP_ENV, RipgrepSearch, ripgrep_binary
from oomlab.parse.text.textlog import scan_text_log
from oomlab.records import TextOom

from conftest import H200

H200_MESSAGES = H200 / "serve_mixed" / "oom_messages.txt.gz"


def expected_marks(data: bytes, markers: tuple[bytes, ...]) -> list[tuple[int, int]]:
    """(line start, line number) of every line of `data` holding a marker, the slow obvious way."""
    marks, start = [], 0
    for number, line in enumerate(data.split(b"\n"), start=1):
        if any(m in line for m in markers):
            marks.append((start, number))
        start += len(line) + 1
    return marks


def test_the_installed_rg_is_found_and_runs() -> None:
    binary = ripgrep_binary()
    assert binary is not None, "the ripgrep wheel is a dependency: its rg should be installed"
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith("ripgrep ")


def test_the_setting_picks_another_rg_or_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    installed = ripgrep_binary()
    monkeypatch.setenv(RIPGREP_ENV, "off")
    assert ripgrep_binary() is None
    monkeypatch.setenv(RIPGREP_ENV, str(tmp_path / "no-such-rg"))
    assert ripgrep_binary() is None
    monkeypatch.setenv(RIPGREP_ENV, str(installed))
    assert ripgrep_binary() == installed


def lines_hit(data: bytes, hits: list[tuple[int, int, bytes]]) -> list[tuple[int, int]]:
    """(line start, line number) of the lines that `hits` fall on, each once."""
    return sorted({(data.rfind(b"\n", 0, at) + 1, number) for at, number, _ in hits})


def test_hits_are_where_their_literal_is_on_the_numbered_line(tmp_path: Path) -> None:
    messages = gzip.decompress(H200_MESSAGES.read_bytes()).split(b"\n")
    filler = [b"INFO step 1 ok", b"\x00\x01 binary junk \xff", b"GPU KV cache usage: 3%\r", b""]
    data = b"\n".join(filler[i % 4] if i % 3 else messages[i % len(messages)] for i in range(20_000))
    path = tmp_path / "mixed.log"
    path.write_bytes(data)
    binary = ripgrep_binary()
    assert binary is not None
    with contextlib.closing(RipgrepSearch(binary, path, OOM_MARKERS)) as search:
        batches = list(search)
    hits = [hit for batch in batches for hit in batch]
    assert all(data[at : at + len(literal)] == literal and literal in OOM_MARKERS for at, _, literal in hits)
    assert lines_hit(data, hits) == expected_marks(data, OOM_MARKERS)
    assert [number for _, number, _ in hits] == sorted(number for _, number, _ in hits)
    assert len(batches) > 1


def test_a_byte_order_mark_is_not_taken_as_utf16(tmp_path: Path) -> None:
    message = gzip.decompress(H200_MESSAGES.read_bytes()).split(b"\n")[1]
    path = tmp_path / "bom.log"
    path.write_bytes(b"\xff\xfe\n" + message + b"\n")
    binary = ripgrep_binary()
    assert binary is not None
    with contextlib.closing(RipgrepSearch(binary, path, OOM_MARKERS)) as search:
        hits = [hit for batch in search for hit in batch]
    assert hits == [(3 + message.index(literal), 2, literal) for literal in (b"ut of memory", b"to allocate")]


def test_an_error_of_rg_is_raised_after_its_output(tmp_path: Path) -> None:
    binary = ripgrep_binary()
    assert binary is not None
    with pytest.raises(OSError, match=r"ripgrep failed: .*no-such\.log"):
        list(RipgrepSearch(binary, tmp_path / "no-such.log", OOM_MARKERS))


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("echo 'rg: something went wrong' >&2\nexit 2", "rg: something went wrong"),  # rg's own error
        ("echo '1:13:ut of memory'\nkill -9 $$", "killed by signal 9"),  # cut short: no partial result
    ],
)
def test_a_failing_rg_makes_the_log_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, reason: str
) -> None:
    fake = tmp_path / "rg"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    monkeypatch.setenv(RIPGREP_ENV, str(fake))
    log = tmp_path / "service.log"
    log.write_text("CUDA error: out of memory\n" * 3)
    with pytest.raises(InputError, match=f"cannot read the log: ripgrep failed: {reason}"):
        list(scan_text_log(log))


def test_a_reader_may_stop_early(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_bytes(b"CUDA error: out of memory\n" * 200_000)
    binary = ripgrep_binary()
    assert binary is not None
    search = RipgrepSearch(binary, path, OOM_MARKERS)
    assert next(iter(search))[0] == (13, 1, b"ut of memory")
    search.close()  # kills rg instead of waiting for it
    assert search.child.returncode == -9


def test_lines_rg_finds_past_the_mapped_end_are_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    message = gzip.decompress(H200_MESSAGES.read_bytes()).split(b"\n")[1]
    log = tmp_path / "growing.log"
    log.write_bytes(b"start\n" + message + b"\n")

    class Grown(RipgrepSearch):
        """What rg reports when the log grew by one message after it was mapped."""

        def __iter__(self) -> Iterator[list[tuple[int, int, bytes]]]:
            yield from super().__iter__()
            yield [(log.stat().st_size + 6, 3, b"ut of memory")]

    monkeypatch.setattr(textscan, "RipgrepSearch", Grown)
    (item,) = list(scan_text_log(log))
    assert isinstance(item, TextOom) and item.line == 2


def test_an_rg_that_cannot_run_here_leaves_the_search_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    foreign = tmp_path / "rg"
    foreign.write_bytes(b"\x7fELF not for this machine")  # executable bit, but exec fails
    foreign.chmod(0o755)
    message = gzip.decompress(H200_MESSAGES.read_bytes()).split(b"\n")[1]
    log = tmp_path / "service.log"
    log.write_bytes(b"start\n" + message + b"\nend\n")
    expected = list(scan_text_log(log))
    monkeypatch.setenv(RIPGREP_ENV, str(foreign))
    assert list(scan_text_log(log)) == expected and len(expected) == 1
