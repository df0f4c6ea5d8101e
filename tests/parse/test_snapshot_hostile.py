"""Snapshot pickles built to explode: shared objects, deep nesting, declared sizes with nothing behind them.

Each must be read with work bounded by its size, or refused with one line naming the file and the reason.
The snapshot-shaped inputs are DERIVED FROM REAL CAPTURES (tests/data/h200, loaded with the safe unpickler)
with one field changed, as each test's docstring says; the others are written opcode by opcode.
"""

from __future__ import annotations

import gzip
import pickle
import resource
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomlab.errors import InputError
from oomlab.parse.snapshot.limits import MAX_DEPTH, MAX_TEXT, Budget
from oomlab.parse.snapshot.read import read_snapshot, snapshot_from_object
from oomlab.parse.snapshot.safe_pickle import load_plain_pickle, loads_plain_pickle

from conftest import H200
from snapshot_cases import raw_case, read_case

_CORRUPT = "(the file is truncated or not a pickle; copy it again from where it was dumped)"
_MIB = 1 << 20


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(data, 6) if path.name.endswith(".gz") else data)
    return path


def _dag(depth: int, leaf: Any = ()) -> Any:
    """A tuple holding the same tuple twice, `depth` levels: 2^depth leaves, a few bytes pickled."""
    value = leaf
    for _ in range(depth):
        value = (value, value)
    return value


def _shared_lists(depth: int) -> list[Any]:
    """A list holding the same list twice, `depth` levels."""
    value: list[Any] = []
    for _ in range(depth):
        value = [value, value]
    return value


def _rss_growth_mb(action) -> float:  # type: ignore[no-untyped-def]
    """How far this process's peak RSS rose during `action` (0 when it stayed under an earlier peak)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    action()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024


def _message(call) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as failed:
        call()
    message = str(failed.value)
    assert "\n" not in message
    return message


# 1. One big string, shared by hundreds of stacks


def _shared_big_filename() -> tuple[dict[str, Any], tuple[str, str, int]]:
    """serve_leak's real snapshot with ONE field changed: the `filename` of the frame dict that most stacks
    share (`module.py` `_call_impl`, 384 frame rows over its 167 stacks) becomes a 1 MiB string. The pickle
    stores the string once; every stack naming the frame refers to it."""
    raw = raw_case("serve_leak")
    target = ("/opt/torch/.venv/lib/python3.12/site-packages/torch/nn/modules/module.py", "_call_impl", 1790)
    frame = next(
        f
        for entry in raw["device_traces"][0]
        for f in entry["frames"]
        if (f["filename"], f["name"], f["line"]) == target
    )
    frame["filename"] = "x" * _MIB
    return raw, target


def test_a_string_shared_by_hundreds_of_stacks_is_stored_once_and_cut(tmp_path: Path) -> None:
    raw, target = _shared_big_filename()
    path = _write(tmp_path / "shared.pickle.gz", pickle.dumps(raw, protocol=4))
    assert path.stat().st_size < 500_000  # the original is 428 KB; the 1 MiB string compresses to 1 KB
    original = read_case("serve_leak")
    rows = original.frames.to_pydict()
    naming = sum(1 for key in zip(rows["filename"], rows["name"], rows["line"], strict=True) if key == target)
    assert naming == 384
    data = read_snapshot(path)
    cut = "x" * 4068 + "...[1044508 more characters]"  # MAX_TEXT characters, the marker included
    assert len(cut) == MAX_TEXT
    filenames = data.frames["filename"].combine_chunks()
    assert filenames.dictionary.to_pylist().count(cut) == 1  # stored once in the table
    assert filenames.to_pylist().count(cut) == naming  # and named by every row that named it
    assert data.stacks.num_rows == original.stacks.num_rows == 167
    assert data.frames.num_rows == original.frames.num_rows
    for table in ("segments", "blocks", "trace_events", "ooms"):
        assert getattr(data, table).equals(getattr(original, table)), table
    # 384 rows of 1 MiB would be 384 MiB; the cut string is stored once
    assert data.frames.nbytes + data.stacks.nbytes < 300_000


def test_the_shared_string_stays_bounded_through_ingest(tmp_path: Path, db: Path, run_cli, sql) -> None:  # type: ignore[no-untyped-def]
    raw, _ = _shared_big_filename()
    path = _write(tmp_path / "shared.pickle.gz", pickle.dumps(raw, protocol=4))
    result = run_cli("ingest", path, "--db", db, "--quiet")
    assert result.exit_code == 0, result.stderr
    rows, longest, total = sql("SELECT count(*), max(length(filename)), sum(length(filename)) FROM frames")[0]
    assert (rows, longest) == (3015, MAX_TEXT)
    assert total < 384 * MAX_TEXT + 3015 * 100  # not 384 MiB
    assert db.stat().st_size < 10 * _MIB


def test_a_long_frames_list_named_by_thousands_of_entries_is_compared_within_the_budget(tmp_path: Path) -> None:
    """fragmentation's real snapshot plus 5,000 trace entries (copies of a real one, ONE field changed: their
    frames) naming one 20,001-frame list, equal to but not the same list as a stack already seen: each entry
    would compare 20,001 frames, 100 million in all, from a file of under 1 MB."""
    raw = raw_case("fragmentation", "snapshot_fragmented_oom")
    trace = raw["device_traces"][0]
    template = next(e for e in trace if e["frames"])
    first, other = template["frames"][0], template["frames"][-1]
    trace.append(dict(template, frames=[first] + [other] * 20_000))
    shared = [first] + [other] * 20_000
    trace.extend(dict(template, frames=shared) for _ in range(5_000))
    data = pickle.dumps(raw, protocol=4)
    assert len(data) < 1_000_000
    path = _write(tmp_path / "long.pickle.gz", data)
    started = time.perf_counter()
    assert _message(lambda: read_snapshot(path)) == (
        f"{path}: not a PyTorch memory snapshot: its frames lists are shared so often that matching them would "
        "take more frame comparisons than the file's size allows (8 per byte)"
    )
    assert time.perf_counter() - started < 5


# 2. Shared nested lists in allocator_settings


def _with_settings(value: object) -> bytes:
    """fragmentation's real snapshot with ONE field changed: allocator_settings['roundup_power2_divisions']."""
    raw = raw_case("fragmentation", "snapshot_fragmented_oom")
    raw["allocator_settings"]["roundup_power2_divisions"] = value
    return pickle.dumps(raw, protocol=4)


def test_settings_nested_60_deep_are_refused(tmp_path: Path) -> None:
    data = _with_settings(_shared_lists(60))
    assert len(pickle.dumps(_shared_lists(60), protocol=4)) < 400  # 2^60 leaves in a few hundred bytes
    path = _write(tmp_path / "nested.pickle.gz", data)
    started = time.perf_counter()
    message = _message(lambda: read_snapshot(path))
    assert time.perf_counter() - started < 5
    assert (
        message == f"{path}: not a PyTorch memory snapshot: its allocator_settings nests deeper than {MAX_DEPTH} levels"
    )


def test_settings_shared_past_the_budget_are_refused(tmp_path: Path) -> None:
    """Within the depth limit but 2^30 leaves: refused by the budget of objects proportional to the file."""
    data = _with_settings(_shared_lists(30))
    path = _write(tmp_path / "wide.pickle", data)
    budget = Budget(len(data))
    message = _message(lambda: read_snapshot(path))
    assert message == (
        f"{path}: not a PyTorch memory snapshot: its allocator_settings would serialise to more than "
        f"{budget.objects} objects or {budget.json_chars} characters (shared objects repeated; the file has "
        f"{len(data)} bytes)"
    )


def test_settings_shared_a_little_are_read_as_a_tree(tmp_path: Path) -> None:
    """Sharing that a file's size can pay for is kept, written out as a plain tree (what JSON will hold)."""
    path = _write(tmp_path / "small.pickle.gz", _with_settings(_shared_lists(4)))
    settings_value = read_snapshot(path).meta.allocator_settings
    assert settings_value is not None
    tree = settings_value["roundup_power2_divisions"]
    assert tree == _shared_lists(4) and tree[0] is not tree[1]


# 3. A shared tuple where text belongs


def _with_value(where: str, value: object) -> bytes:
    """fragmentation's real snapshot with ONE field changed to `value`: a trace entry's action, the filename
    or name of its first frame, a block's state or a segment's type."""
    raw = raw_case("fragmentation", "snapshot_fragmented_oom")
    entry = next(e for e in raw["device_traces"][0] if e["frames"])
    if where == "action":
        entry["action"] = value
    elif where in ("filename", "name"):
        entry["frames"][0][where] = value
    elif where == "state":
        raw["segments"][0]["blocks"][0]["state"] = value
    elif where == "segment_type":
        raw["segments"][0]["segment_type"] = value
    elif where == "addr":
        entry["addr"] = value
    return pickle.dumps(raw, protocol=4)


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("action", "a trace entry's 'action' is a tuple, not text"),
        ("filename", "a stack frame's 'filename' is a tuple, not text or a number"),
        ("name", "a stack frame's 'name' is a tuple, not text or a number"),
        ("state", "a block's 'state' is a tuple, not text"),
        ("segment_type", "a segment's 'segment_type' is a tuple, not text"),
        ("addr", "a trace entry's 'addr' is a tuple, not an integer"),
    ],
)
def test_a_shared_tuple_where_text_belongs_is_refused_by_name(tmp_path: Path, where: str, reason: str) -> None:
    assert len(pickle.dumps(_dag(60), protocol=4)) < 300  # str() of it would write 2^60 pairs
    path = _write(tmp_path / f"{where}.pickle.gz", _with_value(where, _dag(60)))
    started = time.perf_counter()
    message = _message(lambda: read_snapshot(path))
    assert time.perf_counter() - started < 5
    assert message == f"{path}: not a PyTorch memory snapshot: {reason}"


def test_long_labels_are_cut(tmp_path: Path) -> None:
    """A 1 MiB action shared by every trace entry would be repeated by every row: it is cut to 64 characters."""
    raw = raw_case("fragmentation", "snapshot_fragmented_oom")
    long_action = "y" * _MIB
    for entry in raw["device_traces"][0]:
        if entry["action"] == "alloc":
            entry["action"] = long_action
    path = _write(tmp_path / "label.pickle.gz", pickle.dumps(raw, protocol=4))
    actions = read_snapshot(path).trace_events["action"].combine_chunks()
    assert "y" * 36 + "...[1048540 more characters]" in actions.dictionary.to_pylist()
    assert actions.nbytes < 100_000


# 4. A declared size with nothing behind it

_HUGE = (3 << 30) + 1  # 3 GiB + 1


def _declares(opcode: bytes, length_bytes: int, protocol: int = 4) -> bytes:
    """PROTO, one opcode declaring a `_HUGE`-byte frame or object, then only 1,000 bytes."""
    size = _HUGE if length_bytes == 8 else (1 << 31) - 1
    return bytes([0x80, protocol]) + opcode + size.to_bytes(length_bytes, "little") + bytes(1000)


def _declared(size: int, left: int) -> str:
    return f"corrupt pickle: it declares a {size}-byte frame or object but only {left} bytes remain {_CORRUPT}"


@pytest.mark.parametrize("suffix", [".pickle", ".pickle.gz"])
@pytest.mark.parametrize(
    ("opcode", "length_bytes", "reason"),
    [
        (b"\x95", 8, _declared(_HUGE, 1000)),  # FRAME
        (b"\x8d", 8, _declared(_HUGE, 1000)),  # BINUNICODE8
        (b"\x8b", 4, _declared((1 << 31) - 1, 1000)),  # LONG4
        (b"X", 4, _declared((1 << 31) - 1, 1000)),  # BINUNICODE
        # BINBYTES8: the C unpickler allocates the object before it reads; the memory guard refuses that
        (b"\x8e", 8, f"corrupt pickle: it claims more memory than a pickle of its size can hold {_CORRUPT}"),
    ],
    ids=["FRAME", "BINUNICODE8", "LONG4", "BINUNICODE", "BINBYTES8"],
)
def test_a_size_larger_than_the_input_is_refused_before_it_is_read(
    tmp_path: Path, suffix: str, opcode: bytes, length_bytes: int, reason: str
) -> None:
    """PROTO, one opcode declaring 3 GiB + 1 (or 2 GiB - 1) bytes, then 1,000 bytes; a plain and a gzip file."""
    if opcode == b"\x8e" and not sys.platform.startswith("linux"):
        pytest.skip("the memory guard is Linux only")
    path = _write(tmp_path / f"declares{suffix}", _declares(opcode, length_bytes))
    messages: list[str] = []
    grew = _rss_growth_mb(lambda: messages.append(_message(lambda: read_snapshot(path))))
    assert messages == [f"{path}: {reason}"]
    assert grew < 100


def test_a_3_gib_frame_of_zeros_is_refused_while_counting(tmp_path: Path) -> None:
    """The audit's case, scaled down: a frame declared 1 byte longer than the zeros that follow it (64 MiB +
    1 MiB of zeros, 65 KB gzip'd). The remaining bytes are counted 1 MiB at a time, never held."""
    zeros = (65 << 20) + 17
    path = tmp_path / "zeros.pickle.gz"
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(b"\x80\x04\x95" + (zeros + 1).to_bytes(8, "little"))
        chunk = bytes(_MIB)
        for _ in range(zeros // _MIB):
            out.write(chunk)
        out.write(bytes(zeros % _MIB))
    assert path.stat().st_size < 200_000
    messages: list[str] = []
    grew = _rss_growth_mb(lambda: messages.append(_message(lambda: load_plain_pickle(path))))
    assert messages == [f"{path}: {_declared(zeros + 1, zeros)}"]
    assert grew < 50


def test_a_large_frame_that_is_there_still_loads(tmp_path: Path) -> None:
    """The check only refuses what is missing: a 65 MiB frame holding a 65 MiB bytes object loads (gzip'd)."""
    size = 65 << 20
    body = b"\x8e" + size.to_bytes(8, "little")
    path = tmp_path / "big.pickle.gz"
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(b"\x80\x04\x95" + (len(body) + size + 1).to_bytes(8, "little") + body)
        for _ in range(size // _MIB):
            out.write(bytes(_MIB))
        out.write(b".")
    loaded = load_plain_pickle(path)
    assert isinstance(loaded, bytes) and len(loaded) == size
    del loaded


def test_a_memo_index_with_nothing_behind_it_is_refused() -> None:
    """LONG_BINPUT 2^28: 9 bytes that make the C unpickler zero a 4 GiB memo table."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the memory guard is Linux only")
    data = b"\x80\x04N" + b"r" + (1 << 28).to_bytes(4, "little") + b"."
    messages: list[str] = []
    grew = _rss_growth_mb(lambda: messages.append(_message(lambda: loads_plain_pickle(data, "memo"))))
    assert messages == [f"memo: corrupt pickle: it claims more memory than a pickle of its size can hold {_CORRUPT}"]
    assert grew < 100


def test_the_memory_guard_is_lifted_after_a_load() -> None:
    before = resource.getrlimit(resource.RLIMIT_AS)
    with pytest.raises(InputError):
        loads_plain_pickle(b"\x80\x04N" + b"r" + (1 << 28).to_bytes(4, "little") + b".", "memo")
    assert loads_plain_pickle(pickle.dumps({"a": [1, 2]}, protocol=4)) == {"a": [1, 2]}
    assert resource.getrlimit(resource.RLIMIT_AS) == before


def test_a_text_line_without_end_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "line.pickle.gz", b"\x80\x02I" + b"1" * (65 << 20))
    assert _message(lambda: load_plain_pickle(path)) == (
        f"{path}: corrupt pickle: a text opcode's line is longer than {64 << 20} bytes {_CORRUPT}"
    )


# 5. Deep nesting

_DEPTH = 100_000
_PLACEHOLDER = "@@deep@@"


def _deep_list_opcodes(depth: int = _DEPTH) -> bytes:
    """EMPTY_LIST depth+1 times, then APPEND depth times: a list nested `depth` levels."""
    return b"]" * (depth + 1) + b"a" * depth


def _deep_dict_opcodes(depth: int = _DEPTH) -> bytes:
    """{'k': {'k': ... {} ...}}: EMPTY_DICT and SHORT_BINUNICODE 'k' depth times, an EMPTY_DICT, SETITEM."""
    return b"}\x8c\x01k" * depth + b"}" + b"s" * depth


def _splice(raw: dict[str, Any], opcodes: bytes) -> bytes:
    """`raw` pickled (protocol 2: no frames to keep consistent) with the placeholder text replaced by
    `opcodes`; the BINPUT after it memoizes the deep value instead."""
    data = pickle.dumps(raw, protocol=2)
    text = b"X" + len(_PLACEHOLDER).to_bytes(4, "little") + _PLACEHOLDER.encode()
    assert data.count(text) == 1
    return data.replace(text, opcodes)


def _deep_at(where: str, opcodes: bytes) -> bytes:
    """fragmentation's real snapshot with ONE field replaced by a value nested 100,000 levels deep."""
    raw = raw_case("fragmentation", "snapshot_fragmented_oom")
    entry = next(e for e in raw["device_traces"][0] if e["frames"])
    if where == "allocator_settings":
        raw["allocator_settings"]["max_split_size"] = _PLACEHOLDER
    elif where == "external_annotations":
        raw["external_annotations"] = [_PLACEHOLDER]
    elif where == "frames":
        entry["frames"] = [_PLACEHOLDER]
    elif where == "filename":
        entry["frames"][0] = dict(entry["frames"][0], filename=_PLACEHOLDER)
    elif where == "addr":
        entry["addr"] = _PLACEHOLDER
    elif where == "blocks":
        raw["segments"][0]["blocks"] = [_PLACEHOLDER]
    elif where == "segments":
        raw["segments"][0] = _PLACEHOLDER
    return _splice(raw, opcodes)


@pytest.mark.parametrize("shape", ["list", "dict"])
@pytest.mark.parametrize(
    ("where", "list_reason", "dict_reason"),
    [
        ("allocator_settings", f"its allocator_settings nests deeper than {MAX_DEPTH} levels", None),
        ("external_annotations", f"its external_annotations nests deeper than {MAX_DEPTH} levels", None),
        ("frames", "a stack frame is a list, not a dict", "a stack frame's 'k' is a dict, not text or a number"),
        ("filename", "a stack frame's 'filename' is a list, not text or a number", None),
        (
            "addr",
            "a trace entry's 'addr' is a list, not an integer",
            "a trace entry's 'addr' is a dict, not an integer",
        ),
        ("blocks", "a block is a list, not a dict", "malformed content ('size')"),
        ("segments", "a segment is a list, not a dict", "malformed content ('address')"),
    ],
)
def test_a_value_nested_100000_deep_is_one_line(
    tmp_path: Path, shape: str, where: str, list_reason: str, dict_reason: str | None
) -> None:
    opcodes = _deep_list_opcodes() if shape == "list" else _deep_dict_opcodes()
    reason = list_reason if shape == "list" else (dict_reason or list_reason.replace("a list", "a dict"))
    path = _write(tmp_path / f"deep-{where}.pickle.gz", _deep_at(where, opcodes))
    started = time.perf_counter()
    message = _message(lambda: read_snapshot(path))
    assert time.perf_counter() - started < 10
    assert message == f"{path}: not a PyTorch memory snapshot: {reason}"


def test_a_whole_pickle_nested_100000_deep_is_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "deep.pickle", b"\x80\x04" + _deep_list_opcodes() + b".")
    assert _message(lambda: read_snapshot(path)) == (
        f"{path}: not a PyTorch memory snapshot: a list that is not a list of segments "
        "(expected the pickle of torch.cuda.memory._snapshot() / _dump_snapshot())"
    )


def test_a_json_snapshot_nested_100000_deep_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"segments": [], "total_size": ' + "[" * _DEPTH + "]" * _DEPTH + "}")
    assert _message(lambda: read_snapshot(path)) == (
        f"{path}: not a readable JSON snapshot: it nests deeper than can be walked"
    )


# Through `oomlab ingest`: the hostile file fails with its reason, the real one beside it is all there

_GOOD = H200 / "cache_bloat" / "snapshot_end.pickle.gz"

_HOSTILE = {
    "nested-settings": (
        lambda: _with_settings(_shared_lists(60)),
        f"not a PyTorch memory snapshot: its allocator_settings nests deeper than {MAX_DEPTH} levels",
    ),
    "tuple-action": (
        lambda: _with_value("action", _dag(60)),
        "not a PyTorch memory snapshot: a trace entry's 'action' is a tuple, not text",
    ),
    "tuple-filename": (
        lambda: _with_value("filename", _dag(60)),
        "not a PyTorch memory snapshot: a stack frame's 'filename' is a tuple, not text or a number",
    ),
    "huge-frame": (lambda: _declares(b"\x95", 8), _declared(_HUGE, 1000)),
    "deep-list": (
        lambda: _deep_at("allocator_settings", _deep_list_opcodes()),
        f"not a PyTorch memory snapshot: its allocator_settings nests deeper than {MAX_DEPTH} levels",
    ),
    "deep-frames": (
        lambda: _deep_at("frames", _deep_dict_opcodes()),
        "not a PyTorch memory snapshot: a stack frame's 'k' is a dict, not text or a number",
    ),
}


@pytest.mark.parametrize("suffix", [".pickle.gz", ".pickle"])
@pytest.mark.parametrize("case", sorted(_HOSTILE))
def test_ingest_fails_the_hostile_file_and_takes_the_real_one(  # type: ignore[no-untyped-def]
    tmp_path: Path, db: Path, run_cli, sql, case: str, suffix: str
) -> None:
    build, reason = _HOSTILE[case]
    hostile = _write(tmp_path / f"{case}{suffix}", build())
    result = run_cli("ingest", hostile, _GOOD, "--db", db, "--quiet")
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {hostile}: {reason}"]
    assert sql("SELECT path FROM snapshots") == [(str(_GOOD.resolve()),)]
    totals = sql("SELECT segment_count, block_count, trace_event_count, stack_count, oom_count FROM snapshots")
    tables = ("segments", "blocks", "trace_events", "stacks", "frames")
    rows = tuple(sql(f"SELECT count(*) FROM {t}")[0][0] for t in tables)
    assert totals == [(12, 12, 4231, 4, 0)]
    assert rows == (12, 12, 4231, 4, 6)


# Properties: nothing but a one-line InputError, whatever the bytes


def _accepts(data: bytes) -> None:
    """Load `data` and columnarise what it holds; only InputError (UnsafePickleError is one) may escape."""
    try:
        loaded = loads_plain_pickle(data, "fuzz")
        snapshot_from_object(loaded, "fuzz", input_bytes=len(data))
    except InputError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("fuzz")


_REAL = gzip.decompress((H200 / "fragmentation" / "snapshot_fragmented_oom.pickle.gz").read_bytes())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=1, max_size=2048))
def test_random_bytes_are_a_snapshot_or_an_input_error(data: bytes) -> None:
    _accepts(data)
    _accepts(b"\x80\x04" + data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, len(_REAL) - 1), st.integers(0, 255)), min_size=1, max_size=6),
    st.integers(1, len(_REAL)),
)
def test_mutations_of_a_real_snapshot_are_a_snapshot_or_an_input_error(
    changes: list[tuple[int, int]], keep: int
) -> None:
    """fragmentation's real pickle with a few bytes changed, then cut to its first `keep` bytes."""
    data = bytearray(_REAL)
    for at, value in changes:
        data[at] = value
    _accepts(bytes(data[:keep]) if keep < len(data) else bytes(data))
