"""parse_oom_message: real H200 messages, the case corpus, messy pastes, and arbitrary input."""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oomlab.errors import OomlabError, ParseError
from oomlab.parse.oom import clean as oom_clean
from oomlab.parse.oom import patterns as oom_patterns
from oomlab.parse.oom import signatures as oom_signatures
from oomlab.parse.oom.message import OOM_MARKERS, parse_oom_message
from oomlab.records import OomMessage

from conftest import TESTS

H200 = TESTS / "data" / "h200"
CASES = sorted((TESTS / "cases" / "oom").glob("*.json"))
CASE_MESSAGES = [json.loads(path.read_text(encoding="utf-8"))["message"] for path in CASES]


def gib(x: float) -> int:
    """x GiB in bytes, as PyTorch's two-decimal figure stands for."""
    return round(x * 2**30)


def mib(x: float) -> int:
    """x MiB in bytes."""
    return round(x * 2**20)


def fixture_messages() -> list[tuple[str, str, str]]:
    """(scenario, request id, message) for every message in the H200 oom_messages files."""
    found = []
    for path in sorted(H200.glob("*/oom_messages.txt.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            lines = handle.read().splitlines()
        for header, message in zip(lines[::2], lines[1::2], strict=True):
            assert header.startswith("--- ")
            found.append((path.parent.name, header.split()[1], message))
    return found


MESSAGES = fixture_messages()
_FIELDS = (
    "requested_bytes",
    "total_capacity_bytes",
    "free_bytes",
    "process_in_use_bytes",
    "allowed_bytes",
    "allocated_by_pytorch_bytes",
    "reserved_unallocated_bytes",
)
_MIXED = ((1030, gib(135.29)),)
# Every H200 message, read by hand: (requested, total, free, this process, allowed, by PyTorch, unallocated).
T = gib(139.80)
EXPECTED = {
    ("fragmentation", "big_after_holes"): (mib(1024), T, gib(135.85), gib(3.94), gib(4), gib(1.77), gib(1.67)),
    ("fragmentation", "big_after_empty_cache"): (mib(1024), T, gib(135.85), gib(3.94), gib(4), gib(1.77), gib(1.67)),
    ("fragmentation_expandable", "big_after_holes"): (
        mib(1024),
        T,
        gib(135.87),
        gib(3.92),
        gib(4),
        gib(1.70),
        gib(1.72),
    ),
    ("fragmentation_expandable", "big_after_empty_cache"): (
        mib(1024),
        T,
        gib(135.87),
        gib(3.92),
        gib(4),
        gib(1.70),
        gib(1.72),
    ),
    ("serve_leak", "gpu-a-0-00039"): (mib(44), T, gib(134.11), gib(5.68), gib(5), gib(4.49), mib(504.25)),
    ("serve_leak", "gpu-a-0-00045"): (mib(22), T, gib(134.11), gib(5.68), gib(5), gib(4.71), mib(279.14)),
    ("serve_leak", "gpu-a-0-00047"): (mib(16), T, gib(134.11), gib(5.68), gib(5), gib(4.70), mib(289.78)),
    ("serve_mixed", "gpu-b-1-00031"): (mib(398), T, mib(281.56), gib(4.22), None, gib(3.13), mib(405.08)),
    ("serve_mixed", "gpu-b-1-00058"): (mib(578), T, mib(63.56), gib(4.43), None, gib(3.15), mib(582.86)),
    ("serve_mixed", "gpu-b-1-00092"): (mib(342), T, mib(251.56), gib(4.25), None, gib(2.48), gib(1.03)),
    ("serve_mixed", "gpu-b-1-00093"): (mib(290), T, mib(253.56), gib(4.25), None, gib(2.17), gib(1.35)),
}


def numbers(oom: OomMessage | None) -> OomMessage:
    """The parsed message without its text, to compare what two spellings say."""
    assert oom is not None
    return dataclasses.replace(oom, message="")


# --- (a) the real H200 captures ---------------------------------------------------------------


def test_the_fixtures_hold_every_expected_message() -> None:
    assert {(scenario, rid) for scenario, rid, _ in MESSAGES} == set(EXPECTED)


def test_serve_mixed_first_message_in_exact_bytes() -> None:
    oom = parse_oom_message(MESSAGES[[m[1] for m in MESSAGES].index("gpu-b-1-00031")][2])
    assert oom == OomMessage(
        framework="pytorch",
        requested_bytes=417333248,
        total_capacity_bytes=150109106995,
        free_bytes=295237059,
        process_in_use_bytes=4531190497,
        other_processes=((1030, 145266531369),),
        allocated_by_pytorch_bytes=3360811909,
        reserved_unallocated_bytes=424757166,
        gpu_index=0,
        message=oom.message if oom else "",
    )
    assert oom.message.startswith("CUDA out of memory. Tried to allocate 398.00 MiB.")


@pytest.mark.parametrize(("scenario", "rid", "message"), MESSAGES, ids=[f"{s}/{r}" for s, r, _ in MESSAGES])
def test_every_h200_message(scenario: str, rid: str, message: str) -> None:
    oom = parse_oom_message(message)
    assert oom is not None and oom.framework == "pytorch" and oom.gpu_index == 0
    assert tuple(getattr(oom, name) for name in _FIELDS) == EXPECTED[(scenario, rid)]
    assert oom.other_processes == (_MIXED if scenario == "serve_mixed" else ())
    assert oom.already_allocated_bytes is None and oom.reserved_bytes is None
    assert oom.private_pool_bytes is None


def oom_request_rows() -> list[tuple[str, dict[str, object]]]:
    """(scenario, row) for every status == "oom" request in the H200 request logs."""
    rows = []
    for path in sorted(H200.glob("*/requests.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            rows += [(path.parent.name, row) for row in map(json.loads, handle) if row.get("status") == "oom"]
    return rows


REQUEST_ROWS = oom_request_rows()


def test_request_logs_have_oom_rows() -> None:
    assert len(REQUEST_ROWS) == 7


@pytest.mark.parametrize(("scenario", "row"), REQUEST_ROWS, ids=[str(r["request_id"]) for _, r in REQUEST_ROWS])
def test_request_log_error_field(scenario: str, row: dict[str, object]) -> None:
    oom = parse_oom_message(str(row["error"]))
    assert oom is not None
    assert oom.requested_bytes == row["requested_size"]  # the service logged the exact request
    assert tuple(getattr(oom, name) for name in _FIELDS) == EXPECTED[(scenario, str(row["request_id"]))]


# --- (b) the case corpus ----------------------------------------------------------------------


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case(path: Path) -> None:
    case = json.loads(path.read_text(encoding="utf-8"))
    oom = parse_oom_message(case["message"])
    assert oom is not None, "no OOM message recognised"
    assert oom.framework == case["framework"]
    for name, expected in case["expect"].items():
        got = getattr(oom, name)
        if name == "other_processes":
            got = [list(pair) for pair in got]
        assert got == expected, name


# Layouts the brief and docs/domain.md name that the corpus does not hold (written from the frameworks' sources).
MORE_FORMATS = [
    (
        "2023-05-01 10:00:00.000000: W tensorflow/core/common_runtime/bfc_allocator.cc:479] "
        "Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.2GiB (rounded to 1288490240)requested "
        "by op MatMul",
        "tensorflow",
        {"requested_bytes": 1288490240, "gpu_index": 0},  # the exact `rounded to` bytes, not 1.2 GiB
    ),
    (
        "ResourceExhaustedError: OOM when allocating tensor with shape[8,1024,4096] and type half on "
        "/job:localhost/replica:0/task:0/device:GPU:2 by allocator GPU_2_bfc",
        "tensorflow",
        {"requested_bytes": 8 * 1024 * 4096 * 2, "gpu_index": 2},
    ),
    (
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for 2.00GiB "
        "(2147483648B) on device ordinal 0",
        "jax",
        {"requested_bytes": 2147483648, "gpu_index": 0},
    ),
    (
        "XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 8.00G. "
        "That was not possible. There are 3.95G free.; (0x0x0_HBM0)",
        "jax",
        {"requested_bytes": gib(8), "free_bytes": gib(3.95)},
    ),
    (
        "ValueError: Free memory on device (10.5/79.1 GiB) on startup is less than desired GPU memory "
        "utilization (0.9, 71.2 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
        "processes.",
        "vllm",
        {"free_bytes": gib(10.5), "total_capacity_bytes": gib(79.1), "requested_bytes": gib(71.2)},
    ),
    (
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
        "initializing the engine.",
        "vllm",
        {"requested_bytes": None},
    ),
    (
        "RuntimeError: NCCL error in: NCCLUtils.hpp:219, unhandled cuda error, NCCL version 2.18.1\n"
        "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure 'out of memory'",
        "nccl",
        {},
    ),
    (
        "ggml_backend_metal_buffer_type_alloc_buffer: error: failed to allocate buffer, size = 512.00 MiB",
        "llama.cpp",
        {"requested_bytes": mib(512)},
    ),
    ("llama_kv_cache_init: failed to allocate buffer for kv cache", "llama.cpp", {}),
    (
        "onnxruntime::BFCArena::AllocReserve Available memory of 0 is smaller than requested bytes of 1073741824",
        "onnxruntime",
        {"requested_bytes": 1073741824, "free_bytes": 0},
    ),
    (
        "[03/01/2024-10:00:00] [TRT] [E] 1: [defaultAllocator.cpp::allocate::20] Error Code 1: Cuda Runtime "
        "(out of memory)",
        "tensorrt",
        {},
    ),
    (
        "torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)\n"
        "Currently allocated     : 15.01 GiB\nRequested               : 1.00 GiB\nDevice limit            : "
        "15.70 GiB\nFree (according to CUDA): 14.44 MiB\nPyTorch limit (set by user-supplied memory fraction)\n"
        "                        : 16.00 GiB",
        "pytorch",
        {
            "requested_bytes": gib(1),
            # pytorch_used_bytes (c10/cuda/CUDAMallocAsyncAllocator.cpp): what tensors hold, "already allocated"
            "already_allocated_bytes": gib(15.01),
            "allocated_by_pytorch_bytes": None,
            "total_capacity_bytes": gib(15.70),
            "free_bytes": mib(14.44),
            "allowed_bytes": gib(16),
            "gpu_index": 0,
        },
    ),
    (
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.80 GiB total capacity; "
        "5.27 GiB already allocated; 2.14 GiB free; 5.60 GiB allowed; 5.30 GiB reserved in total by PyTorch)",
        "pytorch",
        {"allowed_bytes": gib(5.60), "reserved_bytes": gib(5.30), "free_bytes": gib(2.14)},
    ),
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
        "79.15 GiB of which 9.06 MiB is free. Process 12 has 40.00 GiB memory in use. Process 34 has 39.13 GiB "
        "memory in use. Of the allocated memory 38.30 GiB is allocated by PyTorch, with 1.00 GiB allocated in "
        "private pools (e.g., CUDA Graphs), and 332.12 MiB is reserved by PyTorch but unallocated.",
        "pytorch",
        {
            "other_processes": ((12, gib(40)), (34, gib(39.13))),
            "private_pool_bytes": gib(1),
            "reserved_unallocated_bytes": mib(332.12),
            "process_in_use_bytes": None,
        },
    ),
    ("RuntimeError: HIP error: out of memory\nHIP kernel errors might be asynchronously reported", "hip", {}),
    ("RuntimeError: CUDA error: out of memory", "cuda", {}),
    ("cudaErrorMemoryAllocation: out of memory", "cuda", {}),
    (
        "mxnet.base.MXNetError: [10:00:00] src/storage/storage.cc:78: cudaMalloc retry failed: out of memory",
        "mxnet",
        {},
    ),
]


@pytest.mark.parametrize(
    ("text", "framework", "expect"), MORE_FORMATS, ids=[f"{m[1]}-{i}" for i, m in enumerate(MORE_FORMATS)]
)
def test_more_formats(text: str, framework: str, expect: dict[str, object]) -> None:
    oom = parse_oom_message(text)
    assert oom is not None and oom.framework == framework
    for name, value in expect.items():
        assert getattr(oom, name) == value, name
    assert any(marker in text.encode() for marker in OOM_MARKERS)


def test_the_case_corpus_is_there() -> None:
    assert len(CASES) >= 100


def test_every_known_message_contains_a_marker() -> None:
    texts = [m for _, _, m in MESSAGES] + CASE_MESSAGES
    for text in texts:
        assert any(marker in text.encode() for marker in OOM_MARKERS), text[:80]


def test_a_wrap_inside_one_marker_leaves_another() -> None:
    for _, _, message in MESSAGES:
        for width in (60, 79, 80, 81, 100):
            lines = [message[i : i + width].encode() for i in range(0, len(message), width)]
            assert any(marker in line for line in lines for marker in OOM_MARKERS)


def test_whole_message_patterns_agree_with_the_field_specs() -> None:
    texts = [m for _, _, m in MESSAGES] + CASE_MESSAGES
    used = 0
    for text in texts:
        cleaned = oom_clean.clean_message_text(text)
        for sig in oom_signatures.SIGNATURES:
            if sig.find(cleaned, text) is None:
                continue
            if any(spec.pattern.search(cleaned) for spec in sig.wholes):
                used += 1
                slow = dataclasses.replace(sig, wholes=())
                fast_fields, whole = oom_patterns.extract_fields(sig, cleaned)
                assert whole and fast_fields == oom_patterns.extract_fields(slow, cleaned)[0]
                assert sig.state(cleaned, 0) == "ended"  # a whole layout includes the closing words
            break
    assert used >= 40


# --- (c) messy spellings of the real messages -------------------------------------------------


def wrap(text: str, width: int = 80) -> str:
    """Hard-wrapped at `width` columns, splitting words."""
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


def sentences(text: str) -> str:
    """One sentence per line, as some loggers print the message."""
    return re.sub(r"(?<=[.;]) (?=[A-Z0-9])", "\n", text)


def ansi(text: str) -> str:
    """Coloured the way a terminal log would be, with codes inside and between words."""
    text = text.replace("Tried to allocate", "\x1b[1mTried\x1b[0m to allo\x1b[33mcate")
    return f"\x1b[31;1m{text[:10]}\x1b[0m{text[10:]}\x1b[0m"


MESSY = {
    "iso-prefix": lambda m: f"2026-11-30T01:49:36.527Z ERROR [worker-3] torch.OutOfMemoryError: {m}",
    "rank-prefix": lambda m: f"[rank0]: torch.OutOfMemoryError: {m}",
    "logging-root": lambda m: f"ERROR:root:{m}",
    "syslog": lambda m: f"Nov 30 01:49:36 gpu-a-0 python[4242]: {m}",
    "ansi": ansi,
    "json-escaped-newlines": lambda m: json.dumps({"level": "error", "msg": sentences(m)}),
    "pretty-json": lambda m: json.dumps({"detail": m}, indent=2),
    "escaped-newlines": lambda m: 'ERROR failed error="' + sentences(m).replace("\n", "\\n") + '"',
    "wrapped-80": wrap,
    "wrapped-37": lambda m: wrap(m, 37),
    "prefix-then-wrapped": lambda m: wrap(f"2026-11-30 01:49:36,527 - app - ERROR - {m}"),
    "rank-prefix-every-line": lambda m: "\n".join(f"[rank0]: {line}" for line in wrap(m, 70).splitlines()),
    "ansi-and-wrapped": lambda m: wrap(ansi(m), 64),
    "one-sentence-per-line": sentences,
    "crlf": lambda m: sentences(m).replace("\n", "\r\n"),
}


@pytest.mark.parametrize("style", sorted(MESSY))
@pytest.mark.parametrize(("scenario", "rid", "message"), MESSAGES[::2], ids=[f"{s}/{r}" for s, r, _ in MESSAGES[::2]])
def test_messy_spelling_parses_to_the_same_numbers(scenario: str, rid: str, message: str, style: str) -> None:
    clean = parse_oom_message(message)
    messy = MESSY[style](message)
    assert messy != message
    assert numbers(parse_oom_message(messy)) == numbers(clean)


def test_wrapped_message_text_is_healed() -> None:
    message = MESSAGES[0][2]
    oom = parse_oom_message(wrap(message, 50))
    assert oom is not None and oom.message == message


def test_prefix_is_left_out_of_the_message_text() -> None:
    oom = parse_oom_message(f"2026-11-30T01:49:36.527Z ERROR [worker-3] {MESSAGES[0][2]}")
    assert oom is not None and oom.message == MESSAGES[0][2]


# --- what is not an OOM message, and bad input ------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "hello world",
        "checking for out of memory conditions",
        "allocated=1.2 GiB reserved=3 GiB",
        "Tried to allocate nothing",
        "{}",
        "[1, 2, 3]",
        '{"msg": "all good"}',
        "RESOURCE_EXHAUSTED: quota exceeded",
    ],
)
def test_no_message(text: str) -> None:
    assert parse_oom_message(text) is None


def test_bytes_are_decoded_and_other_types_refused() -> None:
    assert numbers(parse_oom_message(MESSAGES[0][2].encode())) == numbers(parse_oom_message(MESSAGES[0][2]))
    with pytest.raises(ParseError):
        parse_oom_message(42)  # type: ignore[arg-type]


def test_a_size_too_large_to_read_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_oom_message("CUDA out of memory. Tried to allocate " + "9" * 400 + ".00 GiB (GPU 0; 1 GiB")


# --- (d) arbitrary input only ever raises oomlab's own errors ---------------------------------


def _parse_or_own_error(text: str) -> None:
    """Parse `text`; anything but an OomlabError fails the test."""
    try:
        result = parse_oom_message(text)
    except OomlabError:
        return
    assert result is None or isinstance(result, OomMessage)


_NOISE = st.sampled_from(
    [
        "\n",
        "\\n",
        "\x1b[31m",
        "\\u001b[0m",
        "{",
        "}",
        '"',
        "\\",
        "9" * 30,
        " GiB",
        "(GPU ",
        "; ",
        "Process 7 has ",
        "\r",
        "\t",
        "\x00",
        "\ufffd",
        "[rank0]: ",
        "2026-11-30T01:02:03Z ",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_random_text(text: str) -> None:
    _parse_or_own_error(text)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from([m for _, _, m in MESSAGES] + CASE_MESSAGES),
    st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 40), st.one_of(_NOISE, st.text(max_size=8))), max_size=6),
)
def test_mutated_real_messages(message: str, edits: list[tuple[int, int, str]]) -> None:
    for at, cut, insert in edits:
        at %= len(message) + 1
        message = message[:at] + insert + message[at + cut :]
    _parse_or_own_error(message)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes(data: bytes) -> None:
    _parse_or_own_error(data.decode("utf-8", errors="replace"))
    with contextlib.suppress(OomlabError):
        parse_oom_message(data)  # type: ignore[arg-type]


def test_a_repeated_message_is_read_once_but_its_prefix_still_names_the_framework() -> None:
    body = "failed to allocate 1.00G (1073741824 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory"
    prefixes = {  # same cleaned text; the component in each log prefix decides the framework
        "2026-11-30 01:49:36.123456: E tensorflow/stream_executor/cuda/cuda_driver.cc:806] ": "tensorflow",
        "2026-11-30 01:49:37.5: E external/org_tensorflow/tensorflow/compiler/xla/stream_executor/x.cc:9] ": "jax",
        "2026-11-30T01:49:38Z ERROR ": "cuda",
    }
    for _ in range(2):  # the second round is served from the cache
        found = {prefix: parse_oom_message(prefix + body) for prefix in prefixes}
        assert {p: m.framework for p, m in found.items() if m} == prefixes
        assert {m.requested_bytes for m in found.values() if m} == {1073741824}
        assert {m.message for m in found.values() if m} == {body}


def test_an_amount_no_device_can_hold_is_dropped_not_a_crash() -> None:
    """Verbatim from https://github.com/MathOnco/valis/issues/208: `this process has 17179869184.00 GiB` is
    2**64 bytes (a wrapped counter; it does not fit BIGINT either). It is dropped; the other numbers stand."""
    text = (
        "UserWarning: CUDA out of memory. Tried to allocate 3.41 GiB. GPU 0 has a total capacity of 23.99 GiB of "
        "which 2.75 GiB is free. Including non-PyTorch memory, this process has 17179869184.00 GiB memory in use. "
        "Of the allocated memory 11.91 GiB is allocated by PyTorch, and 8.03 GiB is reserved by PyTorch but unallo"
    )
    message = parse_oom_message(text)
    assert message is not None and message.process_in_use_bytes is None
    assert message.requested_bytes == round(3.41 * 2**30) and message.free_bytes == round(2.75 * 2**30)
    assert message.allocated_by_pytorch_bytes == round(11.91 * 2**30)
