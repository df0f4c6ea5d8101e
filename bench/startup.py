"""Benchmark: start-up of `oomlab --help`, `--version` and `sources` on a 10,000,000-request database.

Each command runs as a fresh process (interpreter start, imports, opening the database, printing): best and
median of 7 runs each, next to `python -c pass` of the interpreter the `oomlab` command runs on. The target is
under 0.3 s per command, judged on the median (the best is printed too); the bench exits 1 when one is missed.

The database is a real oomlab database, built once and kept in `--dir`: DuckDB writes a seeded JSONL request
log (10 zstd files of a 16-instance fleet, one OOM per 5,000 requests, with PyTorch's message), `oomlab ingest`
ingests it, and `oomlab query` checks that `requests` holds every row. It runs the `oomlab` command beside
this interpreter (or `--oomlab PATH`), never anything else under that name.

    python bench/startup.py [--requests 10000000] [--dir DIR] [--runs 7] [--oomlab PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from _common import Run, measure

TARGET_S = 0.3
FILES = 10

# Run by the oomlab command's own interpreter (it has DuckDB): argv = out folder, requests, files.
_GENERATE = r"""
import sys, duckdb
out, requests, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
message = ("CUDA out of memory. Tried to allocate 44.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which "
           "21.50 MiB is free. Including non-PyTorch memory, this process has 139.77 GiB memory in use. Of the "
           "allocated memory 137.12 GiB is allocated by PyTorch, and 1.95 GiB is reserved by PyTorch but unallocated.")
con = duckdb.connect()
per_file = -(-requests // files)
for f in range(files):
    lo, hi = f * per_file, min(requests, (f + 1) * per_file)
    con.execute(f'''
    COPY (
      SELECT strftime(TIMESTAMP '2026-11-01' + to_milliseconds(i * 180 + hash(i) % 180), '%Y-%m-%dT%H:%M:%S.%gZ') AS ts,
             'req-' || lpad(i::VARCHAR, 9, '0') AS request_id,
             'gpu-' || lpad((hash(i * 3) % 16)::VARCHAR, 2, '0') AS instance,
             'llama-mini-v' || (1 + i * 4 // {requests})::VARCHAR AS model_version,
             (1 + hash(i * 5) % 8)::INT AS batch_size,
             (16 + hash(i * 7) % 8177)::INT AS input_sequence_length,
             (16 + hash(i * 17) % 1009)::INT AS output_sequence_length,
             CASE WHEN i % 5000 = 17 THEN 'oom' ELSE 'ok' END AS status,
             CASE WHEN i % 5000 = 17 THEN $message END AS error,
             round(50 + (hash(i * 11) % 300000) / 100.0, 1) AS latency_ms,
             (4000000000 + hash(i * 13) % 1000000000)::BIGINT AS allocated_before,
             150109880320::BIGINT AS device_total
      FROM range({lo}, {hi}) t(i)
    ) TO '{out}/requests-{f:02d}.jsonl.zst' (FORMAT JSON, COMPRESSION zstd)
    ''', {"message": message})
"""


def oomlab_command(given: Path | None) -> Path:
    """`--oomlab`, else the `oomlab` beside this interpreter; there must be one (nothing else is timed)."""
    exe = given or Path(sys.executable).parent / "oomlab"
    if not exe.is_file():
        where = "--oomlab" if given else f"beside {sys.executable}"
        raise SystemExit(f"no oomlab command {where} ({exe}): install oomlab there or pass --oomlab PATH")
    return exe


def interpreter_of(exe: Path) -> str:
    """The Python a console script runs on (its `#!` line), else this one."""
    with open(exe, "rb") as handle:
        first = handle.readline(4096).decode("utf-8", "replace").strip()
    if first.startswith("#!"):
        words = first[2:].split()
        if words and Path(words[0]).name.startswith("python") and Path(words[0]).exists():
            return words[0]
    return sys.executable


def request_count(oomlab: Path, db: Path) -> int | None:
    """Rows of `requests`, read with the oomlab command itself; None when the database is not usable."""
    try:
        run = measure([str(oomlab), "query", "SELECT count(*) AS n FROM requests", "--db", str(db), "--format", "csv"])
    except SystemExit:
        return None
    lines = run.output.strip().splitlines()
    return int(lines[-1]) if lines and lines[-1].isdigit() else None


def database(oomlab: Path, python: str, work: Path, requests: int) -> Path:
    """`work/startup-N.duckdb`: N requests ingested by `oomlab ingest`, built once and reused."""
    db = work / f"startup-{requests}.duckdb"
    if db.exists() and request_count(oomlab, db) == requests:
        return db
    for f in (db, db.with_name(db.name + ".wal")):
        f.unlink(missing_ok=True)
    logs = work / "startup-logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    gen = measure([python, "-c", _GENERATE, str(logs), str(requests), str(FILES)])
    print(f"generated {requests:,} requests ({FILES} zstd JSONL files) in {gen.seconds:.1f} s")
    ingest = measure([str(oomlab), "ingest", str(logs), "--db", str(db), "--quiet"])
    print(f"oomlab ingest: {ingest.seconds:.1f} s")
    shutil.rmtree(logs)  # the database is what is kept
    found = request_count(oomlab, db)
    if found != requests:
        raise SystemExit(f"{db}: requests holds {found} rows, not {requests:,}")
    return db


def verdict(seconds: float) -> str:
    return "PASS" if seconds < TARGET_S else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000_000)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "oomlab-bench-startup")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--oomlab", type=Path, default=None, help="the oomlab command to time")
    args = parser.parse_args()
    oomlab = oomlab_command(args.oomlab)
    python = interpreter_of(oomlab)
    args.dir.mkdir(parents=True, exist_ok=True)
    db = database(oomlab, python, args.dir, args.requests)

    cases = {
        "python -c pass": [python, "-c", "pass"],
        "oomlab --help": [str(oomlab), "--help"],
        "oomlab --version": [str(oomlab), "--version"],
        "oomlab sources --db DB": [str(oomlab), "sources", "--db", str(db)],
    }
    for argv in cases.values():  # once untimed: the page cache, and a schema update an upgrade may owe
        measure(argv)
    runs: dict[str, list[Run]] = {name: [] for name in cases}
    for _ in range(args.runs):  # round robin, so a busy moment of the machine hits every command alike
        for name, argv in cases.items():
            runs[name].append(measure(argv))
    if "requests-00.jsonl.zst" not in runs["oomlab sources --db DB"][0].output:
        raise SystemExit(
            f"`oomlab sources` did not list the ingested files:\n{runs['oomlab sources --db DB'][0].output}"
        )

    print(f"oomlab: {oomlab} (on {python})")
    print(f"database: {db} ({args.requests:,} requests, {db.stat().st_size / 2**20:.0f} MiB)")
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("note: PYTHONDONTWRITEBYTECODE is set: modules without a .pyc yet are compiled at every start")
    print(f"wall seconds of a fresh process, {args.runs} runs each (target < {TARGET_S} s, judged on the median)")
    base = statistics.median(r.seconds for r in runs["python -c pass"])
    missed = []
    for name, results in runs.items():
        best = min(r.seconds for r in results)
        median = statistics.median(r.seconds for r in results)
        if name.startswith("python"):
            print(f"  {name:<24} best {best:.3f}  median {median:.3f}  (baseline)")
            continue
        print(
            f"  {name:<24} best {best:.3f} {verdict(best)}  median {median:.3f} {verdict(median)}"
            f"  (+{median - base:.3f} over the baseline)"
        )
        if median >= TARGET_S:
            missed.append(name)
    print(f"start-up: {'FAIL: ' + ', '.join(missed) if missed else 'PASS'}")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
