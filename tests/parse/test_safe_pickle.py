"""The restricted unpickler: globals are refused (nothing runs), broken input gets a one-line InputError."""

from __future__ import annotations

import gzip
import pickle
import random
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard

from oomlab.errors import EmptyInputError, InputError, UnsafePickleError
from oomlab.parse.compression import open_binary
from oomlab.parse.detect import detect_kind
from oomlab.parse.snapshot.read import read_snapshot
from oomlab.parse.snapshot.safe_pickle import load_plain_pickle, loads_plain_pickle

from snapshot_cases import DATA, SNAPSHOTS, snapshot_path


class _Call:
    """Pickles as a call of `func(*args)`: how a malicious pickle runs code on load."""

    def __init__(self, func: object, *args: object) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return self.func, self.args


def _touch_command(sentinel: Path) -> str:
    return f"touch {sentinel}"


def _call_pickle(module: str, name: str, argument: str, protocol: int) -> bytes:
    """A pickle that calls module.name(argument) on load, written opcode by opcode."""

    def text(value: str) -> bytes:
        encoded = value.encode()
        if protocol >= 4:
            return b"\x8c" + bytes([len(encoded)]) + encoded  # SHORT_BINUNICODE
        return b"X" + len(encoded).to_bytes(4, "little") + encoded  # BINUNICODE

    if protocol >= 4:
        callable_ = text(module) + text(name) + b"\x93"  # STACK_GLOBAL
    else:
        callable_ = b"c" + module.encode() + b"\n" + name.encode() + b"\n"  # GLOBAL
    return bytes([0x80, protocol]) + callable_ + text(argument) + b"\x85R."  # TUPLE1, REDUCE, STOP


def _os_system(sentinel: Path, protocol: int) -> bytes:
    return _call_pickle("os", "system", _touch_command(sentinel), protocol)


def _posix_system(sentinel: Path, protocol: int) -> bytes:
    """What pickle.dumps writes for a __reduce__ returning os.system (its module is posix)."""
    return pickle.dumps(_Call(__import__("os").system, _touch_command(sentinel)), protocol=protocol)


def _builtins_eval(sentinel: Path, protocol: int) -> bytes:
    """pickle.dumps writes `__builtin__.eval` below protocol 3; the message names it builtins.eval."""
    return pickle.dumps(_Call(eval, f"open({str(sentinel)!r}, 'w').close()"), protocol=protocol)


def _torch_rebuild(sentinel: Path, protocol: int) -> bytes:
    """What torch.save writes for a tensor: torch._utils._rebuild_tensor_v2 called on load."""
    return _call_pickle("torch._utils", "_rebuild_tensor_v2", str(sentinel), protocol)


MALICIOUS = {
    "os.system": _os_system,
    "posix.system": _posix_system,
    "builtins.eval": _builtins_eval,
    "torch._utils._rebuild_tensor_v2": _torch_rebuild,
}


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
@pytest.mark.parametrize("global_name", sorted(MALICIOUS))
def test_every_global_is_refused_and_nothing_runs(tmp_path: Path, global_name: str, protocol: int) -> None:
    sentinel = tmp_path / "sentinel"
    path = tmp_path / "evil.pickle"
    path.write_bytes(MALICIOUS[global_name](sentinel, protocol))
    with pytest.raises(UnsafePickleError) as refused:
        load_plain_pickle(path)
    assert str(refused.value) == (
        f"{path}: refusing to load: the pickle names the global {global_name} "
        "(a memory snapshot holds only dicts, lists, strings and numbers; do not load this file with pickle)"
    )
    with pytest.raises(UnsafePickleError, match=f"names the global {global_name}"):
        read_snapshot(path)
    assert not sentinel.exists()


def test_a_global_hidden_inside_a_real_snapshot_is_refused(tmp_path: Path) -> None:
    sentinel = tmp_path / "sentinel"
    snapshot = load_plain_pickle(snapshot_path("fragmentation", "snapshot_fragmented_oom"))
    snapshot["segments"][3]["blocks"][0]["frames"].append(_Call(eval, f"open({str(sentinel)!r}, 'w')"))
    path = tmp_path / "snapshot.pickle.gz"
    path.write_bytes(gzip.compress(pickle.dumps(snapshot, protocol=4)))
    with pytest.raises(UnsafePickleError, match=r"names the global builtins\.eval"):
        read_snapshot(path)
    assert not sentinel.exists()


def test_the_real_captures_hold_only_plain_data() -> None:
    assert len(SNAPSHOTS) == 11
    for path in SNAPSHOTS:
        assert isinstance(load_plain_pickle(path), dict)


def _plain_bytes() -> bytes:
    with gzip.open(snapshot_path("fragmentation", "snapshot_fragmented_oom"), "rb") as handle:
        return handle.read()


@pytest.mark.parametrize("fraction", [0.0, 0.001, 0.25, 0.5, 0.9, 0.9999])
def test_a_truncated_pickle_is_an_input_error(tmp_path: Path, fraction: float) -> None:
    data = _plain_bytes()
    cut = max(1, int(len(data) * fraction))
    path = tmp_path / "cut.pickle"
    path.write_bytes(data[:cut])
    with pytest.raises(InputError) as failed:
        load_plain_pickle(path)
    assert str(failed.value).startswith(f"{path}: truncated pickle")
    assert "\n" not in str(failed.value)


def test_a_truncated_gzip_file_is_an_input_error(tmp_path: Path) -> None:
    compressed = snapshot_path("fragmentation", "snapshot_fragmented_oom").read_bytes()
    path = tmp_path / "cut.pickle.gz"
    path.write_bytes(compressed[: len(compressed) // 2])
    with pytest.raises(InputError, match=r"cut\.pickle\.gz: truncated or corrupt gzip data"):
        load_plain_pickle(path)


def _zstd_snapshot() -> bytes:
    """The real fragmentation snapshot, recompressed with zstd as `zstd snapshot.pickle` writes it."""
    return zstandard.ZstdCompressor().compress(_plain_bytes())


@pytest.mark.parametrize(
    ("suffix", "cut", "in_head"),
    [
        (".pickle.gz", lambda: snapshot_path("fragmentation", "snapshot_fragmented_oom").read_bytes()[:50], True),
        (".pickle.gz", lambda: snapshot_path("fragmentation", "snapshot_fragmented_oom").read_bytes()[:-9], False),
        (".pickle.zst", lambda: _zstd_snapshot()[:40], True),  # not one decoded byte: it used to read as empty
        (".pickle.zst", lambda: _zstd_snapshot()[:-3], False),
    ],
    ids=["gzip-in-the-head", "gzip-at-the-end", "zstd-in-the-head", "zstd-at-the-end"],
)
def test_a_truncated_compressed_snapshot_is_an_error_not_an_empty_snapshot(
    tmp_path: Path, suffix: str, cut: Callable[[], bytes], in_head: bool
) -> None:
    """The real snapshot's compressed bytes cut off: reading it fails with one line that names the file and
    the truncation (a cut inside the first decoded bytes used to escape as EOFError, a cut zstd frame used to
    decode quietly to less, or to nothing). Ingest's kind detection reads only the head: a cut there fails it
    too (it used to call the file empty and skip it), a cut further on is a snapshot whose read then fails."""
    path = tmp_path / f"cut{suffix}"
    path.write_bytes(cut())
    kind = "gzip" if suffix.endswith("gz") else "zstd"
    with pytest.raises(InputError) as failed:
        read_snapshot(path)
    message = str(failed.value)
    assert message.startswith(f"{path}: truncated or corrupt {kind} data: Compressed file ended")
    assert "\n" not in message
    if not in_head:
        assert detect_kind(path) == "snapshot"
        return
    with pytest.raises(InputError) as detected:
        detect_kind(path)
    assert not isinstance(detected.value, EmptyInputError)
    assert (
        str(detected.value) == f"{path}: cannot read: Compressed file ended before the end-of-stream marker was reached"
    )


def test_the_strict_zstd_reader_reads_every_frame_of_a_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "two-frames.pickle.zst"
    path.write_bytes(_zstd_snapshot() + zstandard.ZstdCompressor().compress(b"tail"))
    with open_binary(path) as stream:
        assert stream.read() == _plain_bytes() + b"tail"
    path.write_bytes(_zstd_snapshot())
    assert read_snapshot(path).meta.trace_event_count == 1353


@pytest.mark.parametrize("seed", range(5))
def test_random_bytes_are_an_input_error(tmp_path: Path, seed: int) -> None:
    noise = random.Random(seed).randbytes(4096)
    path = tmp_path / "noise.bin"
    path.write_bytes(noise)
    with pytest.raises(InputError) as failed:
        load_plain_pickle(path)
    message = str(failed.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert "pickle" in message


def test_an_empty_file_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.pickle"
    path.write_bytes(b"")
    with pytest.raises(InputError, match=r"empty\.pickle: empty file: no pickle data"):
        read_snapshot(path)


def test_a_zip_archive_names_the_likely_mistake(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    path.write_bytes(b"PK\x03\x04" + bytes(100))
    with pytest.raises(InputError, match="not a pickle: a zip archive"):
        load_plain_pickle(path)


@pytest.mark.parametrize("value", [42, {"a": 1}, [], [1, 2], "segments"])
def test_a_valid_pickle_of_the_wrong_shape_is_an_input_error(tmp_path: Path, value: object) -> None:
    path = tmp_path / "other.pickle"
    path.write_bytes(pickle.dumps(value))
    with pytest.raises(InputError, match=r"other\.pickle: not a PyTorch memory snapshot: "):
        read_snapshot(path)


def test_loads_refuses_like_load() -> None:
    with pytest.raises(UnsafePickleError, match=r"names the global builtins\.eval"):
        loads_plain_pickle(pickle.dumps(_Call(eval, "1")), "inline")
    with pytest.raises(InputError, match="inline: empty input"):
        loads_plain_pickle(b"", "inline")


def test_a_missing_file_is_an_input_error() -> None:
    with pytest.raises(InputError, match="cannot read the file"):
        load_plain_pickle(DATA / "no_such_file.pickle")


@pytest.mark.parametrize("global_name", ["os.system", "builtins.eval"])
def test_the_payloads_are_live(tmp_path: Path, global_name: str) -> None:
    """Proof that the sentinel tests above mean something: plain pickle (in a throwaway process) runs them."""
    import subprocess
    import sys

    sentinel = tmp_path / "sentinel"
    path = tmp_path / "evil.pickle"
    path.write_bytes(MALICIOUS[global_name](sentinel, 4))
    subprocess.run(
        [sys.executable, "-c", f"import pickle; pickle.loads(open({str(path)!r}, 'rb').read())"],
        check=False,
        capture_output=True,
    )
    assert sentinel.exists()
