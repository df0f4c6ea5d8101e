"""scan_text_log: logs built from the real H200 messages, compressed or not, across chunk boundaries."""

from __future__ import annotations

import dataclasses
import gzip
import json
import lzma
import platform
import random
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomlab.errors import InputError
from oomlab.parse import compression
from oomlab.parse.oom.message import OOM_MARKERS, parse_oom_message
from oomlab.parse.text import textscan, textsearch
from oomlab.parse.text.ripgrep import RIPGREP_ENV
from oomlab.parse.text.textlog import REJECT_REASON, scan_text_log
from oomlab.records import OomMessage, Reject, TextOom

from conftest import CASES as TEST_CASES
from conftest import H200

CASES = TEST_CASES / "oom"


def h200_messages() -> list[str]:
    """The verbatim OOM messages of the H200 captures."""
    found = []
    for path in sorted(H200.glob("*/oom_messages.txt.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            found += [line for line in handle.read().splitlines() if line and not line.startswith("---")]
    return found


MESSAGES = h200_messages()


def case(name: str) -> str:
    """The message of the case file whose name starts with `name`."""
    (path,) = CASES.glob(f"{name}*.json")
    return json.loads(path.read_text(encoding="utf-8"))["message"]


WRITERS: dict[str, Callable[[Path, bytes], None]] = {
    "plain": lambda p, data: p.write_bytes(data),
    "gzip": lambda p, data: p.write_bytes(gzip.compress(data)),
    "xz": lambda p, data: p.write_bytes(lzma.compress(data)),
    "zstd": lambda p, data: p.write_bytes(zstandard.ZstdCompressor().compress(data)),
}


def write_log(tmp_path: Path, lines: list[str], kind: str = "plain") -> Path:
    """`lines` as a log file, compressed as `kind`."""
    path = tmp_path / f"service.log.{kind}"
    WRITERS[kind](path, ("\n".join(lines) + "\n").encode())
    return path


def numbers(oom: OomMessage | None) -> OomMessage:
    """A message without its text, to compare what it says."""
    assert oom is not None
    return dataclasses.replace(oom, message="")


def ooms(items: list[TextOom | Reject]) -> list[TextOom]:
    """The TextOom items, checking there is nothing else."""
    assert all(isinstance(item, TextOom) for item in items), [i for i in items if isinstance(i, Reject)]
    return items  # type: ignore[return-value]


@pytest.fixture(params=["ripgrep", "in-process"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test that takes it runs twice: plain logs searched by rg, and searched in-process."""
    if request.param == "in-process":
        monkeypatch.setenv(RIPGREP_ENV, "off")
    return str(request.param)


def filler(rng: random.Random, n: int, second: int = 0) -> list[str]:
    """Ordinary log lines, none of which mentions an OOM."""
    bodies = [
        "request done in 41 ms",
        "GPU KV cache usage: 12.5%",
        "scheduled batch of 8",
        "allocated=1.2 GiB",
        "health ok",
        "Avg prompt throughput: 120.5 tokens/s",
    ]
    stamp = f"2026-11-30T01:{second // 60 % 60:02d}:{second % 60:02d}"
    return [f"{stamp}.{i % 1000:03d}Z INFO [app] {rng.choice(bodies)}" for i in range(n)]


# --- the fixture file itself ------------------------------------------------------------------


def test_the_fixture_file_parses_line_by_line() -> None:
    path = H200 / "serve_mixed" / "oom_messages.txt.gz"
    items = ooms(list(scan_text_log(path)))
    assert [item.line for item in items] == [2, 4, 6, 8]
    assert all(item.ts is None for item in items)  # the message lines carry no timestamp
    assert [numbers(i.oom) for i in items] == [numbers(parse_oom_message(m)) for m in MESSAGES if "1030" in m]
    assert items[0].oom.requested_bytes == 417333248


# --- line numbers, timestamps, compression, chunk boundaries ----------------------------------


def planted_log(seed: int = 7, count: int = 40) -> tuple[list[str], list[tuple[int, str]]]:
    """A log of filler with OOM lines at random places: (lines, [(line number, message)])."""
    rng = random.Random(seed)
    lines: list[str] = []
    planted = []
    for i in range(count):
        lines += filler(rng, rng.randrange(0, 60), second=i)
        message = rng.choice(MESSAGES)
        lines.append(f"2026-11-30T02:00:{i % 60:02d}.250Z ERROR [gpu-b-1] torch.OutOfMemoryError: {message}")
        planted.append((len(lines), message))
    lines += filler(rng, 5)
    return lines, planted


@pytest.mark.parametrize("kind", sorted(WRITERS))
@pytest.mark.parametrize("chunk", [textscan.SEGMENT_BYTES, 4096, 1500])
def test_lines_timestamps_and_bytes(tmp_path: Path, kind: str, chunk: int, engine: str) -> None:
    lines, planted = planted_log()
    items = ooms(list(scan_text_log(write_log(tmp_path, lines, kind), chunk_size=chunk)))
    assert [item.line for item in items] == [line for line, _ in planted]
    assert [numbers(item.oom) for item in items] == [numbers(parse_oom_message(m)) for _, m in planted]
    assert items[3].ts == datetime(2026, 11, 30, 2, 0, 3, 250000)


@pytest.mark.parametrize("kind", ["plain", "gzip"])
def test_the_polars_search_finds_what_bytes_find_does(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines, planted = planted_log(seed=11, count=120)
    path = write_log(tmp_path, lines, kind)
    expected = list(scan_text_log(path))
    monkeypatch.setenv(RIPGREP_ENV, "off")
    monkeypatch.setattr(textscan, "SMALL_BYTES", 0)
    monkeypatch.setattr(textsearch, "BLOCK_BYTES", 700)  # several messages per block, blocks smaller than some
    assert list(scan_text_log(path)) == expected
    assert len(expected) == len(planted)


def test_marker_finder_agrees_on_messy_bytes() -> None:
    rng = random.Random(3)
    pieces = [
        b"plain line\n",
        b"\xff\xfe invalid utf-8 \xc3\n",
        "ünïcode line\n".encode(),
        b"x" * 5000 + b"\n",
        b"to allocate\n",
        b"\n",
        b"a" * 11 + b"\n",
        *(m + b"\n" for m in OOM_MARKERS),
    ]
    data = b"".join(rng.choice(pieces) for _ in range(3000))
    finder = textscan.MarkerFinder(OOM_MARKERS)
    for block in (16, 300, 4096):
        textsearch.BLOCK_BYTES, saved = block, textsearch.BLOCK_BYTES
        try:
            assert finder._lines_polars(data, 0, len(data)) == finder.lines_py(data, 0, len(data))
        finally:
            textsearch.BLOCK_BYTES = saved
    assert finder.lines_py(data, 0, len(data))


def mixed_log(seed: int = 5, count: int = 400) -> list[str]:
    """A few hundred KiB of filler with one-line, wrapped and multi-line messages of many frameworks."""
    rng = random.Random(seed)
    multi = [case(n).splitlines() for n in ("089_nccl", "091_llama.cpp", "107_tensorrt", "053_tensorflow")]
    lines: list[str] = []
    for i in range(count):
        lines += filler(rng, rng.randrange(0, 40), second=i)
        message = rng.choice(MESSAGES)
        pick = rng.randrange(4)
        if pick == 0:
            lines.append(f"2026-11-30T02:00:00.000Z ERROR [rank{i % 8}]: {message}")
        elif pick == 1:
            text = f"2026-11-30T02:00:00.000Z ERROR {message}"
            lines += [text[j : j + 80] for j in range(0, len(text), 80)]
        elif pick == 2:
            lines += [*rng.choice(multi), ""]
        else:
            lines.append(message)
    return lines


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
@pytest.mark.parametrize("chunk", [997, 70_001])
def test_compressed_chunks_find_what_the_plain_file_has(
    tmp_path: Path, kind: str, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = mixed_log()
    expected = list(scan_text_log(write_log(tmp_path, lines)))  # searched by rg
    assert len(expected) == 400 and all(isinstance(item, TextOom) for item in expected)
    deep = sum(len("\n".join(lines[: item.line])) > 2 * 70_001 for item in expected)
    assert deep > 100  # most messages lie several chunks in
    assert list(scan_text_log(write_log(tmp_path, lines, kind), chunk_size=chunk)) == expected
    monkeypatch.setenv(RIPGREP_ENV, "off")
    assert list(scan_text_log(write_log(tmp_path, lines), chunk_size=chunk)) == expected


TIMESTAMPS = [
    ("2026-11-30T01:49:36.527Z ERROR ", {}, datetime(2026, 11, 30, 1, 49, 36, 527000)),
    ("2026-11-30T03:49:36.527+02:00 ERROR ", {}, datetime(2026, 11, 30, 1, 49, 36, 527000)),
    (
        "2026-11-30 02:49:36,527 - app - ERROR - ",
        {"default_tz": "Europe/Berlin"},
        datetime(2026, 11, 30, 1, 49, 36, 527000),
    ),
    ("2026/11/30 01:49:36.001 ", {}, datetime(2026, 11, 30, 1, 49, 36, 1000)),
    ("[2026-11-30 01:49:36] ", {}, datetime(2026, 11, 30, 1, 49, 36)),
    ("2025-11-14T09:33:56.2332545Z FAILED ", {}, datetime(2025, 11, 14, 9, 33, 56, 233254)),
    ("Nov 30 01:49:36 gpu-a-0 python[42]: ", {"year": 2025}, datetime(2025, 11, 30, 1, 49, 36)),
    (
        "Nov 30 02:49:36 gpu-a-0 python[42]: ",
        {"year": 2025, "default_tz": "Europe/Berlin"},
        datetime(2025, 11, 30, 1, 49, 36),
    ),
    ("[rank0]: ", {}, None),
]


@pytest.mark.parametrize(("prefix", "options", "expected"), TIMESTAMPS, ids=[row[0] for row in TIMESTAMPS])
def test_timestamp_formats(tmp_path: Path, prefix: str, options: dict, expected: datetime | None) -> None:
    path = write_log(tmp_path, ["start", prefix + MESSAGES[0], "end"])
    (item,) = ooms(list(scan_text_log(path, **options)))
    assert item.line == 2 and item.ts == expected
    assert numbers(item.oom) == numbers(parse_oom_message(MESSAGES[0]))


def test_syslog_year_defaults_to_this_year(tmp_path: Path) -> None:
    path = write_log(tmp_path, ["Nov 30 01:49:36 host app[1]: " + MESSAGES[0]])
    (item,) = ooms(list(scan_text_log(path)))
    assert item.ts is not None and item.ts.year == datetime.now().year


def test_json_lines_log(tmp_path: Path) -> None:
    records = [
        {"ts": f"2026-11-30T01:49:3{i}.000Z", "level": "error", "msg": m.replace(". ", ".\n")}
        for i, m in enumerate(MESSAGES[:4])
    ]
    path = write_log(tmp_path, [json.dumps({"ts": "2026-11-30T01:49:00Z", "msg": "hello"}), *map(json.dumps, records)])
    items = ooms(list(scan_text_log(path)))
    assert [item.line for item in items] == [2, 3, 4, 5]
    assert items[1].ts == datetime(2026, 11, 30, 1, 49, 31)
    assert [numbers(i.oom) for i in items] == [numbers(parse_oom_message(m)) for m in MESSAGES[:4]]


# --- messages over several lines --------------------------------------------------------------


@pytest.mark.parametrize("width", [80, 57, 31])
@pytest.mark.parametrize("kind", ["plain", "xz"])
def test_wrapped_message(tmp_path: Path, width: int, kind: str, engine: str) -> None:
    text = "2026-11-30T01:49:36.527Z ERROR [rank0]: torch.OutOfMemoryError: " + MESSAGES[-1]
    wrapped = [text[i : i + width] for i in range(0, len(text), width)]
    after = "2026-11-30T01:49:37.000Z INFO [app] after"
    lines = ["2026-11-30T01:49:35.000Z INFO [app] before", *wrapped, after, *wrapped]
    items = ooms(list(scan_text_log(write_log(tmp_path, lines, kind), chunk_size=2048)))
    assert [item.line for item in items] == [2, len(wrapped) + 3]
    assert numbers(items[0].oom) == numbers(items[1].oom) == numbers(parse_oom_message(MESSAGES[-1]))
    assert items[0].ts == datetime(2026, 11, 30, 1, 49, 36, 527000)
    assert MESSAGES[-1] in items[0].oom.message


def test_consecutive_messages_without_prefixes_stay_apart(tmp_path: Path) -> None:
    lines = [*MESSAGES[:3], "CUDA error: out of memory", "CUDA error: out of memory", MESSAGES[3]]
    items = ooms(list(scan_text_log(write_log(tmp_path, lines))))
    assert [item.line for item in items] == [1, 2, 3, 4, 5, 6]
    assert [item.oom.framework for item in items] == ["pytorch"] * 3 + ["cuda", "cuda", "pytorch"]


@pytest.mark.parametrize(
    ("name", "framework", "field", "value"),
    [
        ("089_nccl", "nccl", "requested_bytes", 6291456),
        ("091_llama.cpp", "llama.cpp", "requested_bytes", 151851672535),
        ("092_llama.cpp", "llama.cpp", "gpu_index", 1),
        ("095_llama.cpp", "llama.cpp", "requested_bytes", 85623518003),
        ("098_llama.cpp", "llama.cpp", "gpu_index", 0),
        ("107_tensorrt", "tensorrt", "requested_bytes", 4294967296),
        ("053_tensorflow", "tensorflow", "gpu_index", 0),
        ("112_paddle", "paddle", "free_bytes", 436862976),
        ("066_cuda", "cuda", "framework", "cuda"),
        ("086_vllm", "vllm", "requested_bytes", 24159191040),
    ],
)
def test_multi_line_messages_from_the_corpus(
    tmp_path: Path, name: str, framework: str, field: str, value: object
) -> None:
    message = case(name)
    lines = [
        "2026-11-30T01:49:35.000Z INFO [app] before",
        *message.splitlines(),
        "",
        "2026-11-30T01:49:37.000Z INFO [app] after",
    ]
    (item,) = ooms(list(scan_text_log(write_log(tmp_path, lines))))
    assert item.oom.framework == framework and getattr(item.oom, field) == value
    assert item.line >= 2


def test_every_case_as_a_one_message_log(tmp_path: Path) -> None:
    for path in sorted(CASES.glob("*.json")):
        message = json.loads(path.read_text(encoding="utf-8"))["message"]
        log = write_log(
            tmp_path,
            [
                "2026-11-30T01:49:35.000Z INFO [app] before",
                *message.splitlines(),
                "",
                "2026-11-30T01:49:37.000Z INFO [app] after",
            ],
        )
        items = list(scan_text_log(log))
        assert len(items) == 1 and isinstance(items[0], TextOom), path.name
        assert items[0].oom.framework == json.loads(path.read_text(encoding="utf-8"))["framework"], path.name


# --- rejects, noise, bad input ----------------------------------------------------------------


def test_unknown_oom_wording_is_rejected_with_its_line(tmp_path: Path) -> None:
    odd = "2026-11-30T01:49:36Z ERROR frobnicator ran out of memory while fusing kernels"
    lines = [
        "fine",
        odd,
        "checking for out of memory conditions: none",
        "GPU KV cache memory usage 5%",
        "throughput of memory bus 3 GB/s",
        MESSAGES[0],
    ]
    items = list(scan_text_log(write_log(tmp_path, lines)))
    assert items[0] == Reject(2, REJECT_REASON, odd)
    assert isinstance(items[1], TextOom) and items[1].line == 6
    assert len(items) == 2


def test_reject_raw_is_cut_at_2000_characters(tmp_path: Path) -> None:
    odd = "OUT OF MEMORY " + "x" * 5000
    (item,) = list(scan_text_log(write_log(tmp_path, [odd])))
    assert isinstance(item, Reject) and item.line == 1 and item.raw == odd[:2000]


def test_invalid_utf8_does_not_stop_the_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    data = b"\xff\xfe junk \xc3\n" * 50 + b"\x80 " + MESSAGES[0].encode() + b" \xff\n" + b"\xfe more\n" * 50
    path = tmp_path / "bad.log"
    path.write_bytes(data)
    for small in (textscan.SMALL_BYTES, 0):
        monkeypatch.setattr(textscan, "SMALL_BYTES", small)
        (item,) = ooms(list(scan_text_log(path)))
        assert item.line == 51 and numbers(item.oom) == numbers(parse_oom_message(MESSAGES[0]))


def test_empty_and_markerless_logs(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    assert list(scan_text_log(empty)) == []
    assert list(scan_text_log(write_log(tmp_path, filler(random.Random(1), 500)))) == []


def test_missing_file_and_bad_zone_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        list(scan_text_log(tmp_path / "nope.log"))
    with pytest.raises(InputError, match="time zone"):
        list(scan_text_log(write_log(tmp_path, [MESSAGES[0]]), default_tz="Mars/Olympus"))


def test_last_line_without_newline(tmp_path: Path) -> None:
    path = tmp_path / "tail.log"
    path.write_bytes(b"first\n" + MESSAGES[0].encode())
    (item,) = ooms(list(scan_text_log(path)))
    assert item.line == 2


@pytest.mark.parametrize("kind", ["gzip", "xz", "zstd"])
def test_a_truncated_compressed_log_is_an_input_error(tmp_path: Path, kind: str) -> None:
    path = write_log(tmp_path, [MESSAGES[0]] * 2000, kind)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(InputError, match="cannot read the log"):
        list(scan_text_log(path))


_PIECES = [m.decode() for m in OOM_MARKERS] + [
    MESSAGES[0],
    MESSAGES[0][:90],
    MESSAGES[0][90:],
    "2026-11-30T01:49:36.527Z ERROR ",
    "[rank0]: ",
    "\n",
    "\n",
    "\n\n",
    "CUDA error: out of memory",
    "NCCL WARN Failed to CUDA calloc 64 bytes",
    "  current device: 0",
    "Traceback (most recent call last):",
    "\x1b[31m",
    '{"msg": "',
    '"}',
    "\\n",
    "\r\n",
    "x" * 300,
    "\udcff",
    "\x00",
    "\ufeff",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(_PIECES), max_size=120))
def test_any_log_scans_the_same_in_every_mode(tmp_path: Path, pieces: list[str]) -> None:
    data = "".join(pieces).encode("utf-8", errors="surrogateescape")
    plain, packed = tmp_path / "fuzz.log", tmp_path / "fuzz.log.gz"
    plain.write_bytes(data)
    packed.write_bytes(gzip.compress(data))
    expected = list(scan_text_log(plain))  # searched by rg
    assert all(isinstance(item, TextOom | Reject) for item in expected)
    assert list(scan_text_log(packed, chunk_size=977)) == expected
    with pytest.MonkeyPatch.context() as patch:  # the in-process search: segments, then polars on tiny blocks
        patch.setenv(RIPGREP_ENV, "off")
        assert list(scan_text_log(plain, chunk_size=501)) == expected
        patch.setattr(textscan, "SMALL_BYTES", 0)
        patch.setattr(textsearch, "BLOCK_BYTES", 64)
        assert list(scan_text_log(plain)) == expected


@pytest.mark.parametrize("kind", ["plain", "gzip"])
def test_lines_longer_than_a_chunk(tmp_path: Path, kind: str, engine: str) -> None:
    long_line = ("x" * 100_000 + MESSAGES[0]) * 3
    path = write_log(tmp_path, ["start", long_line, MESSAGES[1], "end"], kind)
    items = ooms(list(scan_text_log(path, chunk_size=5000)))
    assert [item.line for item in items] == [2, 3]


def test_a_damaged_gzip_log_is_an_input_error(tmp_path: Path) -> None:
    path = write_log(tmp_path, [MESSAGES[0]] * 2000, "gzip")
    data = bytearray(path.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)  # a run of zeros inside the deflate stream
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="cannot read the log"):
        list(scan_text_log(path))


@pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64", "aarch64", "arm64"),
    reason="isal is a dependency only where it ships wheels",
)
def test_gzip_logs_are_read_by_isal() -> None:
    assert compression.fast_gzip.__name__ == "isal.igzip"
