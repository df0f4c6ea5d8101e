"""Benchmark: oomlab's text-log ingest against `grep -c 'out of memory'` on the same large log.

Generates (seeded) a plain text log of realistic service log lines with one real-format OOM message
(variants of the H200 captures in tests/data/h200) per 1,000 lines, then times both sides (the fastest of
three runs each, the two taking turns) and prints `ratio = oomlab / grep` (target <= 4, moonshot 3). It also
times hashing the file alone (sources.content_hash, which ingest must compute): a floor no ingest can go under.
The oomlab timed is the `oomlab` command beside this interpreter (or `--oomlab PATH`); without one the bench
fails: it never times something else under the target's name.
Run: `python bench/ingest_text.py [--size-mb 1024] [--dir D] [--runs 3] [--oomlab PATH]`.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "data" / "h200"
LINES_PER_OOM = 1000
TARGET_RATIO = 4.0

_LEVELS = ("INFO", "INFO", "INFO", "INFO", "DEBUG", "DEBUG", "WARNING")
_LOGGERS = ("vllm.engine", "app.server", "app.batcher", "uvicorn.access", "app.metrics", "torch.distributed")
_BODIES = (
    "request {rid} finished in {ms} ms, prompt_tokens={a} completion_tokens={b}",
    "Avg prompt throughput: {a}.{b} tokens/s, Avg generation throughput: {ms}.0 tokens/s, Running: {b} reqs",
    '10.0.{a}.{b}:5{ms} - "POST /v1/completions HTTP/1.1" 200 OK',
    "scheduled batch of {b} sequences ({a} tokens) on worker-{b}",
    "allocated={a}.{b} GiB reserved={ms} MiB peak={a} MiB after request {rid}",
    "health check ok: queue_depth={b} inflight={a} p99_latency_ms={ms}",
    "loaded adapter lora-{b} for model llama-mini-v{b} in {ms} ms",
    "prefix cache hit rate {a}.{b}% over last {ms} requests",
    "GPU KV cache usage: {a}.{b}%, CPU KV cache usage: 0.0%",
    "tokenizer warmup done; vocab=32000 max_model_len={ms}",
)
_OOM_PREFIXES = (
    "ERROR [{inst}] torch.OutOfMemoryError: ",
    "ERROR [{inst}] [rank0]: ",
    "ERROR [{inst}] request failed: ",
)


def fixture_messages() -> list[str]:
    """Every verbatim OOM message in the H200 captures."""
    messages = []
    for path in sorted(FIXTURES.glob("*/oom_messages.txt.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            messages += [line.rstrip("\n") for line in handle if line.strip() and not line.startswith("---")]
    return messages


def body_pool(rng: random.Random, size: int = 4000) -> list[str]:
    """Pre-rendered ordinary log line bodies (level, logger, text), so generation stays fast."""
    pool = []
    for _ in range(size):
        body = rng.choice(_BODIES).format(
            rid=f"req-{rng.randrange(10**8):08d}", ms=rng.randrange(10, 9999), a=rng.randrange(100), b=rng.randrange(64)
        )
        pool.append(f"{rng.choice(_LEVELS)} [{rng.choice(_LOGGERS)}] {body}")
    return pool


def second_block(rng: random.Random, second: datetime, pool: list[str], ooms: list[str]) -> str:
    """1,000 lines within one second, one of them an OOM message at a random place."""
    stamp = second.strftime("%Y-%m-%dT%H:%M:%S.")
    lines = [f"{stamp}{ms:03d}Z {body}" for ms, body in enumerate(rng.choices(pool, k=LINES_PER_OOM))]
    where = rng.randrange(LINES_PER_OOM)
    prefix = rng.choice(_OOM_PREFIXES).format(inst=f"gpu-{rng.choice('ab')}-{rng.randrange(8)}")
    lines[where] = f"{stamp}{where:03d}Z {prefix}{rng.choice(ooms)}"
    return "\n".join(lines) + "\n"


def generate(path: Path, size_mb: int, seed: int = 20261130) -> int:
    """Write about `size_mb` MiB of log to `path`; return the number of OOM messages planted."""
    rng = random.Random(seed)
    pool, ooms = body_pool(rng), fixture_messages()
    second, planted, written = datetime(2026, 11, 30, 1, 0, 0), 0, 0
    with open(path, "w", encoding="utf-8") as out:
        while written < size_mb << 20:
            batch = [second_block(rng, second + timedelta(seconds=i), pool, ooms) for i in range(64)]
            second += timedelta(seconds=64)
            planted += len(batch)
            text = "".join(batch)
            out.write(text)
            written += len(text)
    return planted


@dataclass(frozen=True)
class Run:
    """One timed command: wall seconds, stdout, the command's own peak resident memory, and the CPU seconds
    (user + system) it and the children it waited for (oomlab's rg) used."""

    seconds: float
    stdout: str
    peak_rss_mib: float
    cpu_seconds: float


def timed(command: list[str], *, keep_output: bool = True) -> Run:
    """Run `command`; wait4 reports that child's own peak RSS (raises if the command fails)."""
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=subprocess.PIPE if keep_output else subprocess.DEVNULL, stderr=errors)
        out = child.stdout.read().decode() if child.stdout else ""
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.stdout:
            child.stdout.close()
        if child.returncode != 0:
            errors.seek(0)
            raise RuntimeError(f"{' '.join(command[:2])} failed: {errors.read().decode()[-2000:]}")
    return Run(seconds, out, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime)


def oomlab_command(explicit: str | None) -> str:
    """The oomlab CLI to time: `explicit`, else the one installed beside this interpreter; SystemExit without."""
    exe = Path(explicit) if explicit else Path(sys.executable).parent / "oomlab"
    if not exe.is_file() or not os.access(exe, os.X_OK):
        raise SystemExit(f"no oomlab command at {exe}: install oomlab beside {sys.executable} or pass --oomlab PATH")
    return str(exe)


def check_cli(exe: str, log: Path, workdir: Path) -> None:
    """`oomlab ingest FILE --db TMP --quiet` must succeed on a tiny log before it is timed (SystemExit if not)."""
    probe = workdir / "probe.log"
    with log.open(encoding="utf-8") as handle:
        probe.write_text(handle.read(4096).rsplit("\n", 1)[0] + "\n", encoding="utf-8")
    done = subprocess.run(
        [exe, "ingest", str(probe), "--db", str(workdir / "probe.duckdb"), "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{exe} ingest fails on a small log, so it cannot be timed:\n{done.stderr[-2000:]}")


_SCAN = (
    "import sys, time; t0 = time.perf_counter(); from oomlab.parse.text.textlog import scan_text_log;"
    "from oomlab.records import TextOom; t1 = time.perf_counter(); rows = list(scan_text_log(sys.argv[1]));"
    "print(sum(isinstance(r, TextOom) for r in rows), len(rows), t1 - t0, time.perf_counter() - t1)"
)


_HASH = "import sys; from oomlab.parse.facts import content_hash_of; content_hash_of(sys.argv[1])"


def run_scan(log: Path) -> tuple[Run, int, float, float]:
    """list(scan_text_log(FILE)) in a fresh interpreter: the run, OOMs found, import s, scan s."""
    run = timed([sys.executable, "-c", _SCAN, str(log)])
    found, _, import_s, scan_s = run.stdout.split()
    return run, int(found), float(import_s), float(scan_s)


def run_both(exe: str, log: Path, workdir: Path, runs: int) -> tuple[Run, Run, list[float], int | None]:
    """`grep -c 'out of memory' FILE` and `oomlab ingest FILE --db TMP.duckdb --quiet` (each into a new
    database) `runs` times, taking turns so that a machine whose speed drifts slows both alike: the fastest
    grep, the fastest oomlab, every oomlab run's seconds, and the number of events oomlab loaded."""
    db = workdir / "bench.duckdb"
    greps, results = [], []
    for _ in range(runs):
        greps.append(timed(["grep", "-c", "out of memory", str(log)]))
        for stale in (db, db.with_name(db.name + ".wal")):
            stale.unlink(missing_ok=True)
        results.append(timed([exe, "ingest", str(log), "--db", str(db), "--quiet"]))
    grep = min(greps, key=lambda r: r.seconds)
    run, seconds = min(results, key=lambda r: r.seconds), [r.seconds for r in results]
    try:
        import duckdb

        with duckdb.connect(str(db), read_only=True) as con:
            row = con.execute("SELECT count(*) FROM oom_events").fetchone()
        return grep, run, seconds, int(row[0]) if row else None
    except Exception:  # the count is informative only; the schema belongs to the loader
        return grep, run, seconds, None


def main(argv: list[str] | None = None) -> int:
    """Generate the log, time both sides, print the figures; exit 1 if a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="log size in MiB (default 1024)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write the log (default: a temp dir)")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--runs", type=int, default=3, help="runs of each side, the fastest counts (default 3)")
    parser.add_argument("--oomlab", help="the oomlab command to time (default: the one beside this python)")
    args = parser.parse_args(argv)
    exe = oomlab_command(args.oomlab)
    workdir = Path(tempfile.mkdtemp(prefix="oomlab-bench-", dir=args.dir))
    try:
        return bench(exe, workdir, args.size_mb, args.seed, max(1, args.runs))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def cpu_bound(oomlab: Run, grep: Run) -> str:
    """The CPU the fastest oomlab run used (rg included) and the wall it implies with perfect overlap on the
    cores this process may run on: when that alone is over the target, only less CPU can meet it."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    floor = oomlab.cpu_seconds / cores
    return (
        f"CPU of that oomlab run: {oomlab.cpu_seconds:.3f} s (user + system, rg included); on {cores} cores no "
        f"overlap can bring it under {floor:.3f} s wall, ratio {floor / grep.seconds:.2f}"
    )


def python_speed() -> float:
    """Milliseconds for a million-step pure-Python loop: how fast this shared machine runs Python now."""
    start, total = time.perf_counter(), 0
    for i in range(1_000_000):
        total += i
    return (time.perf_counter() - start) * 1000


def bench(exe: str, workdir: Path, size_mb: int, seed: int, runs: int = 3) -> int:
    """The benchmark proper, inside `workdir`."""
    log = workdir / "service.log"
    start = time.perf_counter()
    planted = generate(log, size_mb, seed)
    print(
        f"generated {log.stat().st_size / 2**20:.0f} MiB, {planted} OOM messages planted "
        f"({time.perf_counter() - start:.1f} s)"
    )
    timed(["cat", str(log)], keep_output=False)  # warm the page cache: both sides read from memory
    check_cli(exe, log, workdir)
    grep, oomlab, seconds, loaded = run_both(exe, log, workdir, runs)
    print(f"grep -c 'out of memory': {grep.seconds:.3f} s (count {grep.stdout.strip()}, best of {runs})")
    floor = timed([sys.executable, "-c", _HASH, str(log)])
    print(
        f"content hash of the file alone (sources.content_hash, which ingest must compute, in a fresh "
        f"interpreter): {floor.seconds:.3f} s wall, "
        f"ratio {floor.seconds / grep.seconds:.2f}: the floor of any ingest on this machine"
    )
    scan, found, import_s, inner_s = run_scan(log)
    print(
        f"list(scan_text_log(FILE)): {scan.seconds:.3f} s wall ({import_s:.3f} s imports + {inner_s:.3f} s "
        f"scan), OOMs found {found}, ratio {scan.seconds / grep.seconds:.2f}, "
        f"peak RSS {scan.peak_rss_mib:.0f} MiB"
    )
    label = f"{exe} ingest FILE --db TMP.duckdb --quiet"
    ratio = oomlab.seconds / grep.seconds
    print(
        f"oomlab [{label}]: {oomlab.seconds:.3f} s (best of {', '.join(f'{s:.3f}' for s in seconds)}), "
        f"OOMs found {loaded if loaded is not None else 'n/a'}"
    )
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("note: PYTHONDONTWRITEBYTECODE is set: modules without a .pyc yet are compiled at every start")
    print(f"ratio = oomlab / grep = {ratio:.2f} (target <= {TARGET_RATIO:g})")
    print(f"peak RSS of the oomlab side: {oomlab.peak_rss_mib:.0f} MiB")
    print(cpu_bound(oomlab, grep))
    print(f"(a million-step Python loop took {python_speed():.0f} ms: higher means slower Python now)")
    ok = ratio <= TARGET_RATIO and found == planted and loaded == planted
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
