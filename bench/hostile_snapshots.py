"""Benchmark: hostile snapshot pickles through `oomlab snapshot inspect` and `oomlab ingest`.

    python bench/hostile_snapshots.py [--scale 1] [--oomlab PATH] [--dir DIR]

Each case is a snapshot pickle built to explode (a shared 1 MiB string, shared nested lists, a shared tuple
where text belongs, a frame declared larger than the file, nesting 100,000 deep, a memo index with nothing
behind it), generated at the size `--scale` gives: derived from the real fragmentation capture in
tests/data/h200 with one field changed, or written opcode by opcode. Each command runs in a fresh child
process; its wall time and peak RSS (its own VmHWM, read while it runs) are measured against the targets

    seconds <= 2 s + 1 s per MB of uncompressed input      peak RSS <= 300 MB + 10x the uncompressed size

and it must end as the case expects: read (exit 0), or refused with one error line and no traceback
(exit 1). A child is killed at 4x its time target or 2x its memory target. Exit status 1 when any case fails.

Another bench imports the cases: `from hostile_snapshots import snapshot_cases, run_case`.
"""

from __future__ import annotations

import argparse
import gzip
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
REAL = REPO / "tests" / "data" / "h200" / "fragmentation" / "snapshot_fragmented_oom.pickle.gz"
MB = 1_000_000
MIB = 1 << 20


@dataclass(frozen=True)
class HostileCase:
    """One hostile snapshot: `build(folder)` writes it and returns its path; `refused`: whether oomlab must
    refuse it (one error line, exit 1) rather than read it (exit 0)."""

    name: str
    what: str
    build: Callable[[Path], Path]
    refused: bool = True


@dataclass(frozen=True)
class CaseResult:
    """One command on one case, measured."""

    case: str
    command: str
    disk_bytes: int
    raw_bytes: int
    seconds: float
    peak_mb: float
    outcome: str  # "read", "refused", or what went wrong
    passed: bool

    @property
    def target_seconds(self) -> float:
        return target_seconds(self.raw_bytes)

    @property
    def target_mb(self) -> float:
        return target_mb(self.raw_bytes)


def target_seconds(raw_bytes: int) -> float:
    return 2.0 + raw_bytes / MB


def target_mb(raw_bytes: int) -> float:
    return 300.0 + 10 * raw_bytes / MB


def _real() -> dict[str, Any]:
    """A fresh copy of the real capture, read with oomlab's safe unpickler."""
    from oomlab.parse.snapshot.safe_pickle import load_plain_pickle

    snapshot = load_plain_pickle(REAL)
    assert isinstance(snapshot, dict)
    return snapshot


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(data, 6) if path.name.endswith(".gz") else data)
    return path


def _shared_lists(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value, value]
    return value


def _dag(depth: int) -> Any:
    value: Any = ()
    for _ in range(depth):
        value = (value, value)
    return value


def _shared_string(stacks: int, mib: int) -> Callable[[Path], Path]:
    """The real capture plus `stacks` trace entries, each a distinct stack whose outer frame is one dict with
    a `mib` MiB filename: the pickle stores the string once."""

    def build(folder: Path) -> Path:
        snapshot = _real()
        trace = snapshot["device_traces"][0]
        shared = {"name": "forward", "filename": "x" * (mib * MIB), "line": 1}
        template = next(e for e in trace if e["frames"])
        for i in range(stacks):
            inner = {"name": "step", "filename": "/srv/app/scenarios.py", "line": 10_000 + i}
            trace.append(dict(template, frames=[inner, shared]))
        return _write(folder / "shared-string.pickle.gz", pickle.dumps(snapshot, protocol=4))

    return build


def _with(field: str, value: Callable[[], Any], file_name: str) -> Callable[[Path], Path]:
    """The real capture with one field set: a trace entry's action, its first frame's filename, or a key of
    allocator_settings."""

    def build(folder: Path) -> Path:
        snapshot = _real()
        entry = next(e for e in snapshot["device_traces"][0] if e["frames"])
        if field == "action":
            entry["action"] = value()
        elif field == "filename":
            entry["frames"][0]["filename"] = value()
        else:
            snapshot["allocator_settings"][field] = value()
        return _write(folder / file_name, pickle.dumps(snapshot, protocol=4))

    return build


def _deep_settings(depth: int) -> Callable[[Path], Path]:
    """The real capture (protocol 2, no frames) with allocator_settings['max_split_size'] replaced, opcode by
    opcode, by a list nested `depth` levels: EMPTY_LIST depth+1 times, APPEND depth times."""

    def build(folder: Path) -> Path:
        snapshot = _real()
        snapshot["allocator_settings"]["max_split_size"] = "@@deep@@"
        data = pickle.dumps(snapshot, protocol=2)
        data = data.replace(b"X\x08\x00\x00\x00@@deep@@", b"]" * (depth + 1) + b"a" * depth)
        return _write(folder / "deep-list.pickle.gz", data)

    return build


def _huge_frame(zero_bytes: int, suffix: str, declared: int | None = None) -> Callable[[Path], Path]:
    """A FRAME declaring `declared` bytes (default: one more than the zeros after it; the audit's case is 3 GiB
    of zeros) followed by `zero_bytes` zeros."""

    def build(folder: Path) -> Path:
        path = folder / f"huge-frame{suffix}"
        header = b"\x80\x04\x95" + (declared or zero_bytes + 1).to_bytes(8, "little")
        with gzip.open(path, "wb", compresslevel=6) if suffix.endswith(".gz") else open(path, "wb") as out:
            out.write(header)
            left = zero_bytes
            chunk = bytes(min(left, 16 * MIB))
            while left > 0:
                out.write(chunk[: min(left, len(chunk))])
                left -= len(chunk)
        return path

    return build


def _memo_index(folder: Path) -> Path:
    """LONG_BINPUT 2^28: 9 bytes that make the C unpickler zero a 4 GiB memo table."""
    return _write(folder / "memo-index.pickle", b"\x80\x04N" + b"r" + (1 << 28).to_bytes(4, "little") + b".")


def cases(scale: float = 1.0) -> list[HostileCase]:
    """The hostile snapshots at `scale` (1: runs in well under a minute; sizes grow linearly with it)."""
    stacks = max(1, round(1000 * scale))
    zeros = max(1, round(256 * MIB * scale))
    depth = max(1, round(100_000 * scale))
    return [
        HostileCase(
            "shared-string", f"1 MiB filename shared by {stacks} stacks", _shared_string(stacks, 1), refused=False
        ),
        HostileCase(
            "nested-settings",
            "allocator_settings: a list holding the same list twice, 60 deep",
            _with("roundup_power2_divisions", lambda: _shared_lists(60), "nested-settings.pickle.gz"),
        ),
        HostileCase(
            "tuple-action",
            "a shared tuple 60 deep as a trace action",
            _with("action", lambda: _dag(60), "tuple-action.pickle.gz"),
        ),
        HostileCase(
            "tuple-filename",
            "a shared tuple 60 deep as a frame filename",
            _with("filename", lambda: _dag(60), "tuple-filename.pickle.gz"),
        ),
        HostileCase(
            "huge-frame", f"FRAME of {zeros + 1} bytes, {zeros} zeros behind it", _huge_frame(zeros, ".pickle.gz")
        ),
        HostileCase(
            "huge-frame-plain", "FRAME of 3 GiB + 1, 1,000 zeros behind it", _huge_frame(1000, ".pickle", (3 << 30) + 1)
        ),
        HostileCase("deep-list", f"allocator_settings: a list nested {depth} deep", _deep_settings(depth)),
        HostileCase("memo-index", "LONG_BINPUT 2^28 (9 bytes)", _memo_index),
    ]


snapshot_cases = cases  # the name bench/hostile.py imports


def oomlab_executable(explicit: str | None = None) -> Path:
    """The `oomlab` command beside this interpreter, or `explicit`; SystemExit when there is none."""
    path = Path(explicit) if explicit else Path(sys.executable).parent / "oomlab"
    if not path.is_file() or not os.access(path, os.X_OK):
        raise SystemExit(f"no oomlab command at {path}: install oomlab in this environment or pass --oomlab PATH")
    return path


def uncompressed_size(path: Path) -> int:
    """The decompressed size of `path`, streamed (never held); of a cut stream, what decompresses before the cut
    (read whole chunks at a time, so at most one chunk less)."""
    from oomlab.parse.compression import DECOMPRESSION_ERRORS, open_binary

    size = 0
    with open_binary(path) as stream:
        try:
            while chunk := stream.read(16 * MIB):
                size += len(chunk)
        except (EOFError, *DECOMPRESSION_ERRORS):
            pass
    return size


def run_case(case: HostileCase, folder: Path, oomlab: Path | None = None) -> list[CaseResult]:
    """Build `case` in `folder`, then run `snapshot inspect` and `ingest` on it, each in a fresh child."""
    exe = oomlab or oomlab_executable()
    path = case.build(folder)
    disk, raw = path.stat().st_size, uncompressed_size(path)
    db = folder / f"{case.name}.duckdb"
    commands = {
        "snapshot inspect": [str(exe), "snapshot", "inspect", str(path)],
        "ingest": [str(exe), "ingest", str(path), "--db", str(db), "--quiet"],
    }
    results = []
    for label, argv in commands.items():
        db.unlink(missing_ok=True)
        seconds, peak_mb, status, output, killed = _measure(argv, 4 * target_seconds(raw), 2 * target_mb(raw))
        outcome = killed or _outcome(status, output, path)
        expected = "refused" if case.refused else "read"
        passed = outcome == expected and seconds <= target_seconds(raw) and peak_mb <= target_mb(raw)
        results.append(CaseResult(case.name, label, disk, raw, seconds, peak_mb, outcome, passed))
    return results


def _outcome(status: int, output: str, path: Path) -> str:
    """'read', 'refused' (exit 1, exactly one error line naming the file, no traceback), or what happened."""
    if "Traceback" in output:
        return "traceback"
    if status == 0:
        return "read"
    errors = [line for line in output.splitlines() if line.lower().startswith("error:")]
    if status == 1 and len(errors) == 1 and str(path) in errors[0]:
        return "refused"
    return f"exit {status}" if status >= 0 else f"signal {-status}"


def _measure(argv: list[str], timeout: float, rss_cap_mb: float) -> tuple[float, float, int, str, str]:
    """(wall seconds, peak RSS MB, exit status, output, '' or why it was killed) of one child, whose RSS is
    watched so that a regression cannot take the machine down.

    The peak is the child's own high-water mark (VmHWM, read while it runs): wait4's ru_maxrss counts the RSS
    the parent had when it forked, so a bench that built a big case itself would inflate every figure after.
    A child too quick to be read falls back to ru_maxrss.
    """
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        killed, peak = "", 0.0
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            rss, hwm = _memory_mb(child.pid)
            peak = max(peak, hwm)
            elapsed = time.perf_counter() - start
            if elapsed > timeout:
                killed = f"killed after {elapsed:.0f} s"
            elif rss > rss_cap_mb:
                killed = f"killed at {rss_cap_mb:.0f} MB"
            if killed:
                os.killpg(child.pid, signal.SIGKILL)
                _, status, usage = os.wait4(child.pid, 0)
                break
            time.sleep(0.02)
        seconds = time.perf_counter() - start
        out.seek(0)
        output = out.read().decode(errors="replace")
    child.returncode = os.waitstatus_to_exitcode(status)
    return seconds, peak or usage.ru_maxrss / 1024, child.returncode, output, killed


def _memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a running process in MB; zeros when it cannot be read (it has just ended)."""
    found = {"VmRSS:": 0.0, "VmHWM:": 0.0}
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                key = line.split(":", 1)[0] + ":"
                if key in found:
                    found[key] = int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return found["VmRSS:"], found["VmHWM:"]


def print_table(results: list[CaseResult]) -> None:
    header = (
        f"{'case':18s} {'command':17s} {'on disk':>10s} {'uncompressed':>13s} {'seconds':>8s} {'peak MB':>8s} "
        f"{'target s':>9s} {'target MB':>10s} {'outcome':10s} result"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.case:18s} {r.command:17s} {_size(r.disk_bytes):>10s} {_size(r.raw_bytes):>13s} {r.seconds:8.2f} "
            f"{r.peak_mb:8.0f} {r.target_seconds:9.1f} {r.target_mb:10.0f} {r.outcome:10s} "
            f"{'PASS' if r.passed else 'FAIL'}"
        )


def _size(count: int) -> str:
    if count >= MB:
        return f"{count / MB:.1f} MB"
    if count >= 1000:
        return f"{count / 1000:.1f} KB"
    return f"{count} B"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="size of the generated cases (default 1)")
    parser.add_argument("--oomlab", help="the oomlab command (default: the one beside this python)")
    parser.add_argument("--dir", type=Path, help="where the cases are written (default: a temporary folder)")
    args = parser.parse_args()
    exe = oomlab_executable(args.oomlab)
    with tempfile.TemporaryDirectory(prefix="oomlab-hostile-") as tmp:
        folder = args.dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        print(f"{exe}, scale {args.scale}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs\n")
        results = [result for case in cases(args.scale) for result in run_case(case, folder, exe)]
    print_table(results)
    failed = [r for r in results if not r.passed]
    print(f"\n{len(results) - len(failed)} of {len(results)} passed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
