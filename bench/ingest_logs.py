"""Benchmark: `oomlab ingest` of a 2,000,000-line JSONL request log against DuckDB's own read_json.

The log is generated (seeded) in the shape of the real H200 captures: every line is a real fixture
request with a fresh request id, instance, time and prompt shape; OOM rows keep their real messages.
Each side is timed --runs times, the two taking turns, and its fastest run kept. Prints both times, the ratio
(target <= 1.3, moonshot 1.15) and oomlab's peak memory (target <= 1.5 GB); exit status 1 when a target is missed.
The oomlab timed is the command beside this interpreter (or $OOMLAB_BENCH_CLI).

    python bench/ingest_logs.py [--lines 2000000] [--dir DIR] [--runs 2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

from _common import best_of_each, oomlab_argv, oomlab_command, python_argv

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "data" / "h200"
TARGET_RATIO = 1.3


def fixture_requests() -> list[dict]:
    rows = []
    for path in sorted(FIXTURES.glob("*/requests.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            rows.extend(json.loads(line) for line in handle if line.strip())
    return rows


def generate(path: Path, lines: int, seed: int = 7) -> None:
    """A seeded log: real fixture rows, re-labelled and spread over two weeks of a 16-instance fleet."""
    rng = random.Random(seed)
    rows = fixture_requests()
    start = datetime(2026, 11, 1)
    with open(path, "w", encoding="utf-8") as out:
        for i in range(lines):
            row = dict(rng.choice(rows))
            row["request_id"] = f"req-{i:08d}"
            row["instance"] = f"gpu-{rng.randrange(16):02d}"
            row["ts"] = (start + timedelta(milliseconds=i * 600 + rng.randrange(600))).isoformat(
                timespec="milliseconds"
            ) + "Z"
            if "input_sequence_length" in row:
                row["input_sequence_length"] = rng.randint(16, 8192)
            out.write(json.dumps(row) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    oomlab_command()  # no command to time: stop before generating anything
    work = args.dir or Path(tempfile.mkdtemp(prefix="oomlab-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    log = work / "requests.jsonl"
    if not log.exists():
        generate(log, args.lines)
    db_oomlab, db_raw = work / "oomlab.duckdb", work / "raw.duckdb"

    def fresh() -> None:
        for db in (db_oomlab, db_raw):
            for f in (db, db.with_name(db.name + ".wal")):
                f.unlink(missing_ok=True)

    raw, ours = best_of_each(
        args.runs,
        [
            python_argv(
                f"import duckdb; duckdb.connect({str(db_raw)!r}).execute("
                f'"CREATE TABLE t AS SELECT * FROM read_json({str(log)!r})")'
            ),
            oomlab_argv("ingest", str(log), "--db", str(db_oomlab), "--quiet"),
        ],
        fresh,
    )
    print(f"input: {log} ({log.stat().st_size / 2**20:.0f} MiB, {args.lines:,} lines)")
    print(f"duckdb read_json CTAS: {raw.seconds:.2f} s, peak {raw.peak_mib:.0f} MiB")
    print(f"oomlab ingest:         {ours.seconds:.2f} s, peak {ours.peak_mib:.0f} MiB")
    ratio = ours.seconds / raw.seconds
    print(f"ratio (oomlab / duckdb): {ratio:.2f}  (target <= {TARGET_RATIO}, moonshot 1.15)")
    print(f"oomlab peak memory: {ours.peak_mib / 1024:.2f} GB  (target <= 1.5)")
    return 0 if ratio <= TARGET_RATIO and ours.peak_mib <= 1.5 * 1024 else 1


if __name__ == "__main__":
    sys.exit(main())
