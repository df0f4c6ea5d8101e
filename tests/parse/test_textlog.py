"""scan_text_log: logs built from the real H200 messages, compressed or not, across chunk boundaries."""

from __future__ import annotations

import dataclasses
import gzip
import json
import lzma
import platform
import random
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomlab.errors import InputError
from oomlab.parse import compression
from oomlab.parse.oom.message import OOM_MARKERS, parse_oom_message
from oomlab.parse.text import needles, textscan, textsearch
from oomlab.parse.text.logline import LineClock
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


@pytest.fixture(params=["ripgrep", "ripgrep-needles", "in-process"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test that takes it runs three times: plain logs searched by rg for the markers (as a small log is),
    by rg for needles chosen from the log (as a large one is), and searched in-process."""
    if request.param == "in-process":
        monkeypatch.setenv(RIPGREP_ENV, "off")
    if request.param == "ripgrep-needles":
        monkeypatch.setattr(needles, "CHOOSE_FROM_BYTES", 0)
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


def test_syslog_year_is_the_latest_that_is_not_in_the_future(tmp_path: Path) -> None:
    path = write_log(tmp_path, ["Nov 30 01:49:36 host app[1]: " + MESSAGES[0]])
    (item,) = ooms(list(scan_text_log(path)))
    now = datetime.now(UTC).replace(tzinfo=None)
    assert item.ts is not None and item.ts <= now and item.ts.replace(year=item.ts.year + 1) > now


NOW = datetime(2026, 3, 1, 12, 0, 0)  # the present, for the clocks below


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("Feb 28 23:59:59 host app[1]: x", datetime(2026, 2, 28, 23, 59, 59)),  # this year: already past
        ("Nov 30 01:49:09 host app[1]: x", datetime(2025, 11, 30, 1, 49, 9)),  # this year's is to come: last year
        ("Feb 29 10:00:00 host app[1]: x", datetime(2024, 2, 29, 10, 0, 0)),  # the latest year that has the day
        # vLLM's logger, after its process tags (https://github.com/vllm-project/vllm/issues/25837, /15039,
        # https://github.com/flashinfer-ai/flashinfer/issues/362).
        ("(EngineCore_DP0 pid=17374) ERROR 09-28 15:47:24 [core.py:718] x", datetime(2025, 9, 28, 15, 47, 24)),
        ("ERROR 02-20 03:10:01 [engine.py:467] x", datetime(2026, 2, 20, 3, 10, 1)),
        (
            "(VllmWorker rank=1 pid=194255) ERROR 01-08 14:46:12 [multiproc_executor.py:435] x",
            datetime(2026, 1, 8, 14, 46, 12),
        ),
        (
            "(VLLM pid=1) (VllmWorkerProcess pid=2) ERROR 07-07 13:43:36 multiproc_worker_utils.py:226] x",
            datetime(2025, 7, 7, 13, 43, 36),
        ),
        ("INFO 02-12 10:01:02 x", datetime(2026, 2, 12, 10, 1, 2)),
        ("I0202 00:55:35.305769       1 inference-server.go:2282] x", datetime(2026, 2, 2, 0, 55, 35, 305769)),  # klog
        # TensorRT's logger, month first (https://github.com/linghu8812/tensorrt_inference/issues/117).
        ("[08/03/2022-23:18:05] [E] [TRT] ../rtSafe/safeRuntime.cpp (25) - x", datetime(2022, 8, 3, 23, 18, 5)),
        # A Markdown quote and a launcher's child number before the stamp (https://github.com/jax-ml/jax/issues/788).
        ("> 2026-02-02T00:56:18.3900781Z I0902 00:55:35.305769 x", datetime(2026, 2, 2, 0, 56, 18, 390078)),
        (
            "[1] 2019-06-13 01:17:08.886805: E external/org_tensorflow/x.cc:672] x",
            datetime(2019, 6, 13, 1, 17, 8, 886805),
        ),
        # Seven fractional digits (.NET, ONNX Runtime on Windows): microseconds kept.
        (
            "2021-07-08 01:27:55.7944269 [E:onnxruntime:, sequential_executor.cc:339 x]",
            datetime(2021, 7, 8, 1, 27, 55, 794426),
        ),
        ("[16:10:33] stdout/INFO  x", None),  # a time without a day
    ],
)
def test_line_clock_stamps(line: str, expected: datetime | None) -> None:
    assert LineClock(now=NOW)(line) == expected


def test_a_yearless_line_takes_the_year_of_the_logs_dated_lines() -> None:
    clock = LineClock(now=NOW)
    assert clock("2024-05-01T10:00:00Z INFO start") == datetime(2024, 5, 1, 10, 0, 0)
    assert clock("ERROR 05-02 10:00:00 [core.py:1] x") == datetime(2024, 5, 2, 10, 0, 0)
    assert clock("Dec 31 23:00:00 host app[1]: x") == datetime(2024, 12, 31, 23, 0, 0)
    assert LineClock(now=NOW, year=2021)("Nov 30 01:49:09 host app[1]: x") == datetime(2021, 11, 30, 1, 49, 9)
    later = LineClock(now=NOW)
    later("2026-02-27T00:00:00Z INFO start")
    assert later("ERROR 12-30 10:00:00 x") == datetime(2025, 12, 30, 10, 0, 0)  # not in the future all the same


def test_the_scan_learns_the_year_from_a_dated_line_anywhere_near(tmp_path: Path) -> None:
    path = write_log(tmp_path, ["2019-06-01T00:00:00Z INFO start", "", "Jun  2 01:49:36 host app[1]: " + MESSAGES[0]])
    (item,) = ooms(list(scan_text_log(path)))
    assert item.ts == datetime(2019, 6, 2, 1, 49, 36)


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


def scanned(tmp_path: Path, lines: list[str]) -> list[TextOom]:
    """The messages of a log holding `lines`."""
    return ooms(list(scan_text_log(write_log(tmp_path, lines))))


def test_a_router_relaying_its_shards_error_is_one_event(tmp_path: Path) -> None:
    """https://github.com/huggingface/text-generation-inference/issues/1356: the shard's OOM, a blank line, the
    router's `Server error: CUDA out of memory. ...` for the same request (its excerpt, cut as posted)."""
    shard = (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 18.00 MiB. GPU 0 has a total capacty of "
        "79.11 GiB of which 14.62 MiB is free. Process 124797 has 79.08 GiB memory in use. Of the allocated memory "
        "78.11 GiB is allocated by PyTorch, and 131.85 MiB is reserved by PyTorch but unallocated. If reserved but "
        "unallocated memory is large try setting max_split_size_mb to avoid fragmentation.  See documentation for "
        "Memory Management and PYTORCH_CUDA_ALLOC_CONF"
    )
    router = (
        "2023-12-18T02:36:47.730476Z ERROR batch{batch_size=1}:prefill:prefill{id=7570 size=1}:prefill{id=7570 "
        "size=1}: text_generation_client: router/client/src/lib.rs:33: Server error: " + shard.split(": ", 1)[1][:600]
    )
    (item,) = scanned(tmp_path, [shard, "", router])
    assert (
        item.line == 1
        and item.oom.requested_bytes == 18 * 2**20
        and item.oom.other_processes == ((124797, 84911503442),)
    )
    assert item.ts == datetime(2023, 12, 18, 2, 36, 47, 730476)  # the first report has no time: the relay's


def test_each_layer_relaying_a_warmup_failure_folds_into_the_first(tmp_path: Path) -> None:
    """https://github.com/predibase/lorax/issues/354: the shard, the router and the launcher each say it."""
    lines = [
        ">RuntimeError: Not enough memory to handle 1024 prefill tokens. You need to decrease "
        "`--max-batch-prefill-tokens`",
        "2024-03-20T07:57:45.050465Z ERROR warmup{max_input_length=1024 max_prefill_tokens=1024 max_total_tokens=2048}"
        ":warmup: lorax_client: router/client/src/lib.rs:34: Server error: Not enough memory to handle 1024 prefill "
        "tokens. You need to decrease `--max-batch-prefill-tokens`",
        'Error: Warmup(Generation("Not enough memory to handle 1024 prefill tokens. You need to decrease '
        '`--max-batch-prefill-tokens`"))',
        "2024-03-20T07:57:45.117908Z ERROR lorax_launcher: Webserver Crashed",
    ]
    (item,) = scanned(tmp_path, lines)
    assert item.line == 1 and item.oom.framework == "tgi"


def test_a_wrapper_error_then_the_numbers_is_one_event(tmp_path: Path) -> None:
    """https://github.com/vllm-project/vllm/issues/19445: vLLM's sampler warm-up names the OOM, then PyTorch's
    message follows one sentence per line."""
    lines = [
        "RuntimeError: CUDA out of memory occurred when warming up sampler with 256 dummy requests.",
        "Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.",
        "",
        "torch.OutOfMemoryError: CUDA out of memory.",
        "Tried to allocate 252.00 MiB. GPU 0 has a total capacity of 10.57 GiB of which 163.12 MiB is free.",
        "Process 2073789 has 10.41 GiB memory in use.",
        "Of the allocated memory 9.67 GiB is allocated by PyTorch,",
        "with 299.88 MiB allocated in private pools (e.g., CUDA Graphs),",
        "and 26.44 MiB is reserved by PyTorch but unallocated.",
    ]
    (item,) = scanned(tmp_path, lines)
    assert (
        item.line == 1
        and item.oom.requested_bytes == 252 * 2**20
        and item.oom.private_pool_bytes == round(299.88 * 2**20)
    )
    assert (
        item.oom.message.startswith("RuntimeError: CUDA out of memory occurred")
        and "Tried to allocate" in item.oom.message
    )


def test_the_same_words_again_are_another_failure(tmp_path: Path) -> None:
    """https://github.com/NVIDIA/TensorRT/issues/2643: one `Error Code 2: OutOfMemory` per failed allocation,
    the second explained by the `Requested amount` warning after it; https://github.com/jax-ml/jax/issues/4994:
    pytest's summary lists one failing test a line, in one layout."""
    error = "[E] 2: [virtualMemoryBuffer.cpp::resizePhysical::145] Error Code 2: OutOfMemory (no further information)"
    warning = (
        "[W] Requested amount of GPU memory (68719476736 bytes) could not be allocated. There may not be enough free "
        "memory for allocation to succeed."
    )
    items = scanned(tmp_path, [error, error, warning, error])
    assert [(i.line, i.oom.requested_bytes) for i in items] == [(1, None), (2, 68719476736), (4, None)]
    failed = (
        "FAILED tests/core_test.py::CoreTest::test_{} - RuntimeError: Resource exhausted: Out of memory while trying "
        "to allocate 24 bytes."
    )
    items = scanned(tmp_path, [failed.format("jit_42"), failed.format("jvp_16"), failed.format("jit_5")])
    assert [i.line for i in items] == [1, 2, 3]


def test_two_workers_failing_alike_are_two_events(tmp_path: Path) -> None:
    """https://github.com/flashinfer-ai/flashinfer/issues/362: two vLLM workers (pids 1950430, 1950428)."""
    tag = "(VLLM pid=1950315) (VllmWorkerProcess pid={}) ERROR 07-07 13:43:36 multiproc_worker_utils.py:226] "
    lines = [
        tag.format(1950430) + "RuntimeError: RuntimeError: Out of workspace memory in AlignedAlloactor",
        tag.format(1950430),
        tag.format(1950428) + "Exception in worker VllmWorkerProcess while processing method "
        "determine_num_available_blocks: RuntimeError: Out of workspace memory in AlignedAlloactor, Traceback (most "
        "recent call last):",
    ]
    items = scanned(tmp_path, lines)
    assert [(i.line, i.oom.framework, i.ts.strftime("%m-%d %H:%M:%S")) for i in items] == [  # type: ignore[union-attr]
        (1, "flashinfer", "07-07 13:43:36"),
        (3, "flashinfer", "07-07 13:43:36"),
    ]


def test_tf1_allocator_and_op_lines_are_one_allocation(tmp_path: Path) -> None:
    """https://github.com/tensorflow/models/issues/848: bfc_allocator's `Ran out of memory` and the op's `OOM when
    allocating` on the next line, twice, then another op's OOM."""
    bfc = (
        "W tensorflow/core/common_runtime/bfc_allocator.cc:275] Ran out of memory trying to allocate 24.38MiB.  "
        "See logs for memory state."
    )
    op = (
        "W tensorflow/core/framework/op_kernel.cc:975] Resource exhausted: OOM when allocating tensor with "
        "shape[48,8,8,2080]"
    )
    stars = "W tensorflow/core/common_runtime/bfc_allocator.cc:274] " + "*" * 40
    coordinator = (
        "INFO:tensorflow:Error reported to Coordinator: <class 'tensorflow.python.framework.errors_impl."
        "ResourceExhaustedError'>, OOM when allocating tensor with shape[48,17,17,1088]"
    )
    items = scanned(tmp_path, [stars, bfc, op, stars, bfc, op, coordinator])
    assert [(i.line, i.oom.requested_bytes) for i in items] == [(2, 25564283), (5, 25564283), (7, None)]


@pytest.mark.parametrize(
    ("url", "lines", "line", "fields"),
    [
        (  # an exception's name, a blank line, then the message
            "https://github.com/PaddlePaddle/PaddleOCR/issues/645",
            [
                "Error Message Summary:",
                "----------------------",
                "ResourceExhaustedError: ",
                "",
                "Out of memory error on GPU 0. Cannot allocate 3.125000GB memory on GPU 0, available memory is only "
                "117.750000MB.",
                "",
            ],
            3,
            {"gpu_index": 0, "requested_bytes": 3355443200, "free_bytes": 123469824},
        ),
        (  # a printout whose words are spread over three lines
            "https://github.com/daswer123/xtts-webui/issues/25",
            [
                "Using ready reference",
                "Requested:      104873984",
                "Free:   49217536",
                "Total:  4294443008",
                "Traceback (most recent call last):",
            ],
            2,
            {"requested_bytes": 104873984, "free_bytes": 49217536, "total_capacity_bytes": 4294443008},
        ),
        (  # the function's head line, the message on the indented lines after it
            "https://github.com/vllm-project/vllm/issues/40023",
            [
                "RuntimeError: Error in function 'aligned_alloc' at /workspace/include/flashinfer/allocator.h:49:",
                "  Buffer overflow when allocating memory for batch_prefill_tmp_v",
                "  with size 536346624 and alignment 16,",
                "  but only 413138944 bytes available in AlignedAllocator.",
                "  Increase the workspace buffer size.",
            ],
            1,
            {"framework": "flashinfer", "requested_bytes": 536346624, "free_bytes": 413138944},
        ),
        (  # a terminal wrap inside the words that name the failure: no marker on the first line
            "https://github.com/jax-ml/jax/issues/788",
            [
                "[1] 2019-06-13 01:17:08.886805: E external/org_tensorflow/tensorflow/compiler/xla/python/"
                "local_client.cc:672] Execution of replica 0 failed: Resource exhausted: Out ",
                "of memory while trying to allocate 5520758552 bytes.",
            ],
            1,
            {"framework": "jax", "requested_bytes": 5520758552},
        ),
    ],
)
def test_messages_whose_words_start_after_their_first_line(
    tmp_path: Path, url: str, lines: list[str], line: int, fields: dict[str, object]
) -> None:
    (item,) = scanned(tmp_path, lines)
    assert item.line == line, url
    for name, value in fields.items():
        assert getattr(item.oom, name) == value, (url, name)


def test_a_line_that_opens_no_message_leaves_its_lines_free(tmp_path: Path) -> None:
    lines = ["Requested: 3", "Free: done", "more", MESSAGES[0], "Requested: 4"]
    assert [item.line for item in scanned(tmp_path, lines)] == [4]


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
    # Another failure on the next line (MESSAGES[1] is MESSAGES[0] again: right after, it would be an echo).
    assert numbers(parse_oom_message(MESSAGES[2])) != numbers(parse_oom_message(MESSAGES[0]))
    path = write_log(tmp_path, ["start", long_line, MESSAGES[2], "end"], kind)
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
