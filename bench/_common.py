"""Shared bench helpers: run a command in a child process and measure its wall time and peak memory."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Run:
    """Wall seconds and peak resident memory (MiB) of one child process."""

    seconds: float
    peak_mib: float
    output: str


def measure(argv: list[str], env: dict[str, str] | None = None) -> Run:
    """Run argv to completion; peak RSS comes from the kernel's accounting of that child alone."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **(env or {})}
    )
    output = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        killed = " (killed by SIGKILL: the kernel's OOM killer?)" if code == -9 else ""
        raise SystemExit(
            f"{' '.join(argv)} failed with exit {code}{killed}, peak {usage.ru_maxrss / 1024**2:.2f} GB:\n{output}"
        )
    return Run(seconds, usage.ru_maxrss / 1024, output)


CLI_ENV = "OOMLAB_BENCH_CLI"  # the oomlab command a bench times, when not the one beside its interpreter


def oomlab_command() -> str:
    """The `oomlab` command a bench times: $OOMLAB_BENCH_CLI, else the one installed beside this interpreter.
    Never one found elsewhere on PATH (another version) nor the library in-process under the CLI's name:
    without it the bench stops and says why."""
    exe = Path(os.environ.get(CLI_ENV) or Path(sys.executable).parent / "oomlab")
    if not exe.is_file() or not os.access(exe, os.X_OK):
        raise SystemExit(
            f"no oomlab command at {exe}: install oomlab beside {sys.executable} or set {CLI_ENV}=PATH; "
            "the bench times that command and nothing else"
        )
    return str(exe)


def oomlab_argv(*args: str) -> list[str]:
    """`oomlab ARGS...` with the command `oomlab_command` finds."""
    return [oomlab_command(), *args]


def python_argv(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def best_of_each(runs: int, argvs: list[list[str]], before=None) -> list[Run]:
    """The fastest of several runs of each command, the commands taking turns (baseline, ours, baseline, ...):
    a machine whose speed drifts during the bench then slows both alike, where runs in two blocks would tilt
    the ratio. `before` resets state before every run."""
    results: list[list[Run]] = [[] for _ in argvs]
    for _ in range(runs):
        for argv, kept in zip(argvs, results, strict=True):
            if before:
                before()
            kept.append(measure(argv))
    return [min(kept, key=lambda r: r.seconds) for kept in results]


def generated_fleet(work: Path, requests: int) -> Path:
    """`work/fleet`: the seeded sample fleet at `requests` requests, generated once and reused."""
    fleet = work / "fleet"
    if not fleet.exists():
        gen = measure(
            [
                sys.executable,
                str(REPO / "sample_logs" / "generate.py"),
                "--out",
                str(fleet),
                "--requests",
                str(requests),
            ]
        )
        print(f"generated {requests:,} requests in {gen.seconds:.1f} s")
    return fleet


def ingested_fleet(description: str, prefix: str) -> tuple[Path, Path, Run]:
    """The fleet benchmarks' common start: parse `--requests` and `--dir`, generate the fleet in the folder
    (a new temporary one by default), ingest it into a new database there; (folder, database, the ingest)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--requests", type=int, default=10_000_000)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix=prefix))
    db = work / "fleet.duckdb"
    return work, db, fresh_ingest(generated_fleet(work, args.requests), db)


def fresh_ingest(fleet: Path, db: Path) -> Run:
    """`oomlab ingest` of the fleet into a new database at `db` (an old one and its WAL are removed)."""
    for f in (db, db.with_name(db.name + ".wal")):
        f.unlink(missing_ok=True)
    return measure(oomlab_argv("ingest", str(fleet), "--db", str(db), "--quiet"))
