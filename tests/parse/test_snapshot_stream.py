"""The streaming snapshot reader (parse/snapshot/_stream.c): the same tables as a whole load, from less memory.

Every case is a real H200 capture or DERIVED FROM ONE (loaded with the safe unpickler, re-pickled with one
change that each test's docstring names); the fuzz cases are the real fragmentation pickle with bytes
changed. A file the reader declines is read whole, so each case also checks which reader read it.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import pickle
import pickletools
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomlab.errors import InputError, UnsafePickleError
from oomlab.parse.snapshot import safe_pickle
from oomlab.parse.snapshot.read import SnapshotData, read_snapshot, read_snapshot_streaming, snapshot_from_object
from oomlab.parse.snapshot.safe_pickle import load_plain_pickle_sized

from snapshot_cases import SNAPSHOTS, raw_case, read_case, repeated_trace_pickle, snapshot_path

native = pytest.mark.skipif(
    safe_pickle._stream is None and os.environ.get("OOMLAB_REQUIRE_NATIVE") != "1",
    reason="the streaming reader is not compiled here (no C compiler when the package was built)",
)
pytestmark = native
_TABLES = ("segments", "blocks", "trace_events", "stacks", "frames", "ooms")


def test_the_streaming_reader_is_built_where_ci_requires_it() -> None:
    assert safe_pickle._stream is not None, "OOMLAB_REQUIRE_NATIVE=1 but parse/snapshot/_stream was not built"


def _whole(path: Path) -> SnapshotData:
    """The tables as the whole load (the C unpickler, then columnarising) makes them."""
    obj, size = load_plain_pickle_sized(path)
    return snapshot_from_object(obj, str(path), "pickle", input_bytes=size)


def _assert_same(streamed: SnapshotData, whole: SnapshotData) -> None:
    assert streamed.meta == whole.meta
    for name in _TABLES:
        assert _decoded(getattr(streamed, name)).equals(_decoded(getattr(whole, name))), name


def _decoded(table: pa.Table) -> pa.Table:
    """`table` with dictionary columns as plain values: each chunk of a whole load (one per device) has its
    own dictionary, the streamed chunks share one; the values are what the database stores."""
    for index, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            table = table.set_column(index, field.name, table[field.name].cast(field.type.value_type))
    return table.combine_chunks()


def _streams(path: Path) -> bool:
    """Whether the streaming reader takes the file (rather than declining it to the whole load)."""
    return read_snapshot_streaming(path) is not None


def _dump(path: Path, obj: Any, protocol: int = 4) -> Path:
    path.write_bytes(gzip.compress(pickle.dumps(obj, protocol=protocol), 1))
    return path


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_real_capture_streams_to_the_tables_of_a_whole_load(path: Path) -> None:
    assert _streams(path)
    _assert_same(read_snapshot(path), _whole(path))


def test_real_frames_lists_shared_between_entries_are_kept_for_the_later_entries() -> None:
    """fragmentation_expandable's pickle shares one frames list between the entries of a block's life (465
    of its 872 lists are named more than once): the reader must keep each for the entries that come later."""
    raw = raw_case("fragmentation_expandable", "snapshot_after_empty_cache")
    entries = [e for trace in raw["device_traces"] for e in trace if "frames" in e]
    assert len({id(e["frames"]) for e in entries}) < len(entries)
    path = snapshot_path("fragmentation_expandable", "snapshot_after_empty_cache")
    assert _streams(path)
    streamed = read_snapshot(path)
    assert streamed.trace_events.num_rows == 1338 and streamed.stacks.num_rows == 5
    _assert_same(streamed, _whole(path))


@pytest.mark.parametrize("protocol", [2, 3, 5])
def test_other_protocols_stream_alike(tmp_path: Path, protocol: int) -> None:
    """serve_mixed re-pickled with protocol 2/3 (BINPUT memo indices, no frames) and 5."""
    path = _dump(tmp_path / f"p{protocol}.pickle.gz", raw_case("serve_mixed"), protocol)
    assert _streams(path)
    data = read_snapshot(path)
    assert data.trace_events.num_rows == 40000
    _assert_same(data, _whole(path))


def test_devices_without_a_trace_keep_their_numbers(tmp_path: Path) -> None:
    """serve_mixed's trace as devices 1 and 3 of four (0 and 2 empty): rows keep their device, seq runs
    across devices in device order."""
    raw = raw_case("serve_mixed")
    entries = raw["device_traces"][0]
    raw["device_traces"] = [[], entries, [], [dict(e) for e in entries[:500]]]
    path = _dump(tmp_path / "devices.pickle.gz", raw)
    assert _streams(path)
    data = read_snapshot(path)
    devices = data.trace_events["device"].to_pylist()
    assert devices == [1] * 40000 + [3] * 500
    assert data.trace_events["seq"].to_pylist() == list(range(40500))
    _assert_same(data, _whole(path))


def test_stacks_equal_by_content_merge_as_in_a_whole_load(tmp_path: Path) -> None:
    """serve_mixed with the frames of every 100th entry copied into new frame dicts (equal content, not
    shared, as a JSON snapshot has them): both renumberings apply, the first-seen order and the merge of
    equal stacks, and the ids are a whole load's."""
    raw = raw_case("serve_mixed")
    for entry in raw["device_traces"][0][::100]:
        entry["frames"] = [dict(frame) for frame in entry["frames"]]
    path = _dump(tmp_path / "unshared.pickle.gz", raw)
    assert _streams(path)
    data = read_snapshot(path)
    assert data.stacks.num_rows == read_case("serve_mixed").stacks.num_rows == 166
    _assert_same(data, _whole(path))


def test_a_trace_entry_named_twice_is_read_whole(tmp_path: Path) -> None:
    """serve_mixed with one entry dict appended twice: the second is a memo reference to an entry the reader
    has forgotten, so it declines and the whole load reads the file, with the same tables."""
    raw = raw_case("serve_mixed")
    entries = raw["device_traces"][0]
    entries.append(entries[10])
    path = _dump(tmp_path / "twice.pickle.gz", raw)
    assert not _streams(path)
    data = read_snapshot(path)
    assert data.trace_events.num_rows == 40001
    _assert_same(data, _whole(path))


def test_a_list_that_only_looks_like_a_trace_is_read_whole(tmp_path: Path) -> None:
    """serve_mixed with its settings holding a list of {'action': ...} dicts: streamed away, it would be lost
    from the settings, so the reader's lists must all be device traces or the file is read whole."""
    raw = raw_case("serve_mixed")
    raw["allocator_settings"] = {"notes": [{"action": "alloc"}, {"action": "free"}]}
    path = _dump(tmp_path / "lookalike.pickle.gz", raw)
    assert not _streams(path)
    assert read_snapshot(path).meta.allocator_settings == {"notes": [{"action": "alloc"}, {"action": "free"}]}


def test_a_malformed_entry_is_the_same_one_line_error(tmp_path: Path) -> None:
    """serve_mixed with entry 20000's time_us a string: the error the whole load gives, from its chunk."""
    raw = raw_case("serve_mixed")
    raw["device_traces"][0][20000]["time_us"] = "soon"
    path = _dump(tmp_path / "bad.pickle.gz", raw)
    with pytest.raises(InputError) as streamed:
        read_snapshot(path)
    with pytest.raises(InputError) as whole:
        _whole(path)
    assert str(streamed.value) == str(whole.value)
    assert "time_us" in str(streamed.value)


def test_a_global_is_refused_by_the_whole_reader(tmp_path: Path) -> None:
    """A snapshot-shaped dict holding os.system: the streaming reader declines, the whole reader refuses it
    by name; nothing runs."""
    path = tmp_path / "global.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "x": os.system}, protocol=4))
    assert not _streams(path)
    with pytest.raises(UnsafePickleError, match="system"):
        read_snapshot(path)


def test_the_trace_is_never_held_whole(tmp_path: Path) -> None:
    """serve_leak's 60,000-entry trace repeated 6x (360,000 entries, new dicts and frames lists per copy, the
    frame dicts shared as torch writes them): the streaming read's peak of Python allocations is bounded by a
    chunk and the tables, a fraction of the whole load's, which holds every entry at once."""
    path = repeated_trace_pickle("serve_leak", 6, tmp_path / "repeated.pickle")

    def peak(read: Any) -> int:
        tracemalloc.start()
        try:
            read(path)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    streamed, whole = peak(read_snapshot), peak(_whole)
    assert streamed < whole / 3, (streamed, whole)


def _loads_streaming(data: bytes, on_batch: Any = None) -> Any:
    batches: list[Any] = []

    def keep(ordinal: int, entries: list[Any], columns: tuple[bytes | None, ...]) -> list[Any]:
        batches.append((ordinal, entries, columns))
        return [e.get("frames") if isinstance(e.get("frames"), list) else [] for e in entries]

    root, lists = safe_pickle._stream.read(io.BytesIO(data), on_batch or keep, 1 << 20, ("n", "size"))
    return root, lists, batches


_PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 80), max_value=1 << 80)
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
    | st.binary(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=8) | st.integers(), inner, max_size=6)
    ),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(_PLAIN, st.sampled_from([2, 3, 4, 5]))
def test_plain_data_reads_back_as_pickle_loads_it(value: Any, protocol: int) -> None:
    """Whatever plain data pickles to, the reader reads back as pickle.loads does, or declines only a pickle
    holding code (protocol 2 writes bytes as a call of _codecs.encode)."""
    data = pickle.dumps(value, protocol=protocol)
    try:
        root, lists, batches = _loads_streaming(data)
    except safe_pickle._stream.Unsupported:
        assert {op.name for op, _arg, _pos in pickletools.genops(data)} & {"GLOBAL", "STACK_GLOBAL", "REDUCE"}
        return
    assert root == pickle.loads(data) and lists == [] and batches == []


_REAL = gzip.decompress(snapshot_path("fragmentation", "snapshot_fragmented_oom").read_bytes())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, len(_REAL) - 1), st.integers(0, 255)), min_size=1, max_size=6),
    st.integers(1, len(_REAL)),
)
def test_mutations_of_a_real_snapshot_are_read_or_declined(changes: list[tuple[int, int]], keep: int) -> None:
    """fragmentation's real pickle with a few bytes changed, then cut: the reader returns, or declines with
    Unsupported; never a crash (it is C), never another error but what on_batch or the input raised."""
    data = bytearray(_REAL)
    for at, value in changes:
        data[at] = value
    with contextlib.suppress(safe_pickle._stream.Unsupported):
        _loads_streaming(bytes(data[:keep]))


def test_an_object_larger_than_the_limit_is_declined() -> None:
    data = pickle.dumps({"segments": [], "big": "x" * (2 << 20)}, protocol=4)
    with pytest.raises(safe_pickle._stream.Unsupported, match="larger"):
        safe_pickle._stream.read(io.BytesIO(data), lambda o, e, c: [], 1 << 20)


def test_an_error_in_on_batch_ends_the_read() -> None:
    data = pickle.dumps({"device_traces": [[{"action": "alloc"}, {"action": "free"}]]}, protocol=4)

    def fail(ordinal: int, entries: list[Any], columns: tuple[bytes | None, ...]) -> list[Any]:
        raise InputError("x", "bad entry")

    with pytest.raises(InputError, match="bad entry"):
        safe_pickle._stream.read(io.BytesIO(data), fail, 1 << 20)


def test_batches_arrive_in_order_with_their_list() -> None:
    traces = [[{"action": "alloc", "n": i} for i in range(2500)], [{"action": "free", "n": 1}]]
    root, lists, batches = _loads_streaming(pickle.dumps({"device_traces": traces}, protocol=4))
    assert root == {"device_traces": [[], []]} and lists == [[], []]
    assert [(o, len(e)) for o, e, _ in batches] == [(0, 1000), (0, 1000), (0, 500), (1, 1)]
    assert [entry["n"] for ordinal, entries, _ in batches if ordinal == 0 for entry in entries] == list(range(2500))


def test_int_columns_hold_every_value_or_leave_the_key_to_python() -> None:
    """Per batch and key: the values as int64 where every entry has an int that fits, else None (a missing
    key, a bool, a float, an int past 64 bits), so the column builder reads that key itself and judges it."""
    entries = [{"action": "alloc", "n": -(1 << 63) + i, "size": i} for i in range(5)]
    odd = [
        *map(dict, entries[:2]),
        {"action": "oom", "n": 7},
        {"action": "x", "n": True, "size": 1},
        {"action": "y", "n": 1 << 64},
    ]
    _, _, batches = _loads_streaming(pickle.dumps({"device_traces": [entries, odd]}, protocol=4))
    (_, _, (n, size)), (_, _, odd_columns) = batches
    assert np.frombuffer(n, np.int64).tolist() == [-(1 << 63) + i for i in range(5)]
    assert np.frombuffer(size, np.int64).tolist() == list(range(5))
    assert odd_columns == (None, None)
