"""rg's needles: every marker holds one, a hit is checked back to the markers exactly, and the choice follows
what the log's own lines cost."""

from __future__ import annotations

import gzip
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oomlab.parse.allocator import SUMMARY_FINDER
from oomlab.parse.oom.message import OOM_MARKERS
from oomlab.parse.telemetry.startup import FINDER as STARTUP_FINDER
from oomlab.parse.text import needles, textscan
from oomlab.parse.text.fileview import FileView
from oomlab.parse.text.ripgrep import ripgrep_binary

from conftest import H200

READERS = (OOM_MARKERS, STARTUP_FINDER.markers, SUMMARY_FINDER.markers)
NEEDED = textscan.MarkerFinder([m for r in READERS for m in r]).needed


def vllm_lines(count: int, seed: int) -> bytes:
    """Ordinary vLLM serving lines (the metrics line every few seconds, access lines): the text a needle must
    not be common in."""
    rng = random.Random(seed)
    lines = [
        rng.choice(
            [
                f"INFO 11-30 01:{i % 60:02d}:00 [metrics.py:455] Avg prompt throughput: {rng.random() * 900:.1f} "
                f"tokens/s, Running: {rng.randrange(64)} reqs, GPU KV cache usage: {rng.random() * 99:.1f}%, "
                f"CPU KV cache usage: 0.0%.",
                f'INFO:     10.0.0.{rng.randrange(255)}:5{i % 10000:04d} - "POST /v1/completions HTTP/1.1" 200 OK',
            ]
        )
        for i in range(count)
    ]
    return ("\n".join(lines) + "\n").encode()


@given(st.integers(0, 2**32 - 1))
@settings(max_examples=25, deadline=None)
def test_every_marker_holds_a_needle_whatever_the_sample(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = bytes(range(32, 127))
    sample = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 5000)))
    chosen = needles._cheapest_cover(NEEDED, sample + vllm_lines(50, seed), 1 << 30)
    assert all(any(n in m for n in chosen) for m in NEEDED)
    assert all(n in NEEDED or len(n) == needles.NEEDLE_BYTES for n in chosen)
    assert len(chosen) == len(set(chosen)) < len(NEEDED)


def test_needles_avoid_what_the_logs_lines_say() -> None:
    """A log of vLLM's metrics lines says `GPU KV cache usage` on every line: no needle may be a piece of
    that text, since a piece free of it covers every marker for the same number of needles."""
    sample = vllm_lines(4000, seed=1)
    chosen = needles._cheapest_cover(NEEDED, sample, 1 << 30)
    assert [n for n in chosen if n in sample] == []
    # ... and with the same markers, a log that says nothing of the kind lets other pieces win
    assert needles._cheapest_cover(NEEDED, b"x" * 10_000, 1 << 30) != chosen


def brute_force_lines(data: bytes, markers: tuple[bytes, ...]) -> list[int]:
    """Numbers of the lines of `data` that hold a marker."""
    return [n for n, line in enumerate(data.split(b"\n"), start=1) if any(m in line for m in markers)]


@given(st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_hits_lead_back_to_exactly_the_lines_holding_markers(seed: int) -> None:
    """Markers over a three-letter alphabet overlap each other and themselves all the time, so needles
    often begin inside another needle's hit, which rg does not report: every reader's lines must still be
    found, and no line without a marker."""
    rng = random.Random(seed)
    readers = [tuple({"".join(rng.choices("abc", k=rng.randrange(4, 9))).encode() for _ in range(3)}) for _ in "xy"]
    data = b"\n".join("".join(rng.choices("abc ", k=rng.randrange(0, 40))).encode() for _ in range(300)) + b"\n"
    finders = [textscan.MarkerFinder(r) for r in readers]
    union = textscan.MarkerFinder([m for r in readers for m in r])
    cover = needles._cheapest_cover(union.needed, data[: len(data) // 2], len(data))
    found = marked_with(tmp_log(data), finders, needles._needles(tuple(readers), tuple(cover)))
    assert found == [brute_force_lines(data, r) for r in readers]


def tmp_log(data: bytes) -> Path:
    """`data` in a fresh file (hypothesis examples share no tmp_path)."""
    with tempfile.NamedTemporaryFile(suffix=".log", delete=False) as handle:
        handle.write(data)
    return Path(handle.name)


def marked_with(path: Path, finders: list[textscan.MarkerFinder], chosen: needles.Needles) -> list[list[int]]:
    """Each finder's marked line numbers in the log at `path`, rg searching `chosen`."""
    binary = ripgrep_binary()
    assert binary is not None
    readers = textscan._Readers(finders)
    search = textscan.RipgrepSearch(binary, path, chosen.texts)
    view = FileView(path)
    windows = list(textscan._windows_of(textscan._Started(view, textscan._MarkedLines(view, chosen, readers), search)))
    path.unlink()
    return [[n for w in windows for _, n in w.marked(f)] for f in finders]


@pytest.mark.parametrize("lines", [100, 70_000])
def test_a_real_log_is_marked_alike_by_needles_and_by_markers(tmp_path: Path, lines: int) -> None:
    """The H200 captures' OOM messages among vLLM lines, as one batch of rg's output and as many: the lines
    of each reader, numbered, are the same whether rg searches the chosen needles or the markers."""
    text = gzip.decompress((H200 / "serve_mixed" / "oom_messages.txt.gz").read_bytes())
    messages = [line for line in text.split(b"\n") if any(m in line for m in OOM_MARKERS)]
    filler = vllm_lines(lines, seed=5).split(b"\n")
    data = b"\n".join(messages[i % len(messages)] if i % 97 == 0 else filler[i] for i in range(lines)) + b"\n"
    path = tmp_path / "serve.log"
    finders = [textscan.MarkerFinder(r) for r in READERS]
    union = textscan.MarkerFinder([m for r in READERS for m in r])
    by_needles = needles._needles(READERS, tuple(needles._cheapest_cover(union.needed, data, len(data))))
    assert len(by_needles.texts) < len(union.needed)
    by_markers = needles._needles(READERS, union.needed)
    found = []
    for chosen in (by_needles, by_markers):
        path.write_bytes(data)
        found.append(marked_with(path, finders, chosen))
    assert found[0] == found[1] == [brute_force_lines(data, r) for r in READERS]
    assert len(found[0][0]) == len(range(0, lines, 97))
