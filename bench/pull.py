"""Benchmark: `api.pull_prometheus` of one week of 8 GPUs at 30 s steps from a real local Prometheus.

The samples are tests/prom_server.py's DCGM week (the real exporter scrape's labels and values, moved by a
deterministic pattern): 2 metrics (DCGM_FI_DEV_FB_USED and _FREE) x 8 GPUs x 20,160 steps = 322,560 samples,
loaded into Debian's `prometheus` with `promtool tsdb create-blocks-from openmetrics` (setup, timed apart) and
pulled into a new database. Prints the pull's wall time, samples per second and the target: **one week of
8 GPUs at 30 s pulled in under 10 s**. Checks that every loaded sample came back (one gpu_samples row per GPU
and step, holding both metrics, values equal): exit 1 when they differ or the target is missed, exit 2 when
prometheus / promtool are not installed (apt-get install prometheus).

    python bench/pull.py [--gpus 8] [--days 7] [--step 30] [--runs 1] [--dir DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

TARGET_S = 10.0
MIB = 2**20


class _TimedSubprocess:
    """prom_server's `subprocess`, with the wall time of its `run` calls (the promtool load) added up."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    def run(self, *args: Any, **kwargs: Any) -> subprocess.CompletedProcess:
        start = time.perf_counter()
        try:
            return subprocess.run(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--step", type=int, default=30, help="seconds between samples, and the pull's --step")
    parser.add_argument("--runs", type=int, default=1, help="pulls, each into a new database; the fastest is kept")
    parser.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one, removed)")
    args = parser.parse_args()
    missing = [name for name in ("prometheus", "promtool") if shutil.which(name) is None]
    if missing:
        print(f"cannot measure: {' and '.join(missing)} not installed (apt-get install prometheus)")
        return 2
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        return bench(args, args.dir)
    with tempfile.TemporaryDirectory(prefix="oomlab-bench-pull-") as work:
        return bench(args, Path(work))


def bench(args: argparse.Namespace, work: Path) -> int:
    import prom_server

    from oomlab import api

    now = datetime.now(UTC).replace(tzinfo=None, second=0, microsecond=0)
    start = now - timedelta(days=args.days, hours=1)  # every sample an hour or more in the past
    began = time.perf_counter()
    text, loaded = prom_server.dcgm_week(start, days=args.days, step_s=args.step, gpus=args.gpus)
    expected = {name: loaded.samples(name) for name in prom_server.DCGM_METRICS}
    per_metric = len(expected[prom_server.DCGM_METRICS[0]])
    total = sum(len(s) for s in expected.values())
    print(
        f"input: {args.days:g} days of {args.gpus} GPUs every {args.step} s, {len(expected)} metrics: "
        f"{per_metric:,} samples per metric, {total:,} in all ({len(text) / 2**20:.0f} MiB of OpenMetrics, "
        f"generated in {time.perf_counter() - began:.1f} s)"
    )
    timed = _TimedSubprocess()
    prom_server.subprocess = timed  # the promtool load is setup: timed, but not part of the pull
    folder = work / "prometheus"
    folder.mkdir(exist_ok=True)
    began = time.perf_counter()
    with prom_server.prometheus(folder, text) as server:
        ready = time.perf_counter() - began
        print(f"setup: promtool load {timed.seconds:.2f} s, server start {ready - timed.seconds:.2f} s (not measured)")
        best = None
        for run in range(args.runs):
            db = work / f"pull-{run}.duckdb"
            began = time.perf_counter()
            report = api.pull_prometheus(db, server.url, start, now, step=f"{args.step}s")
            seconds = time.perf_counter() - began
            if best is None or seconds < best[0]:
                best = (seconds, report, db)
    seconds, report, db = best
    wrong = check(db, expected, report, per_metric, total)
    print(
        f"pull: {seconds:.2f} s wall, {report.samples:,} samples read, {report.rows:,} rows added, "
        f"{report.series} series pieces, {len(report.missing)} ranges missing"
    )
    print(f"rate: {report.samples / seconds:,.0f} samples/s ({report.rows / seconds:,.0f} rows/s)")
    met = seconds < TARGET_S
    print(f"target: one week of 8 GPUs at 30 s in < {TARGET_S:g} s: {'met' if met else 'MISSED'} ({seconds:.2f} s)")
    if wrong:
        print(f"FAILED: {wrong}")
        return 1
    print(f"check: all {total:,} loaded samples are in the database, {per_metric:,} rows, values equal")
    return 0 if met else 1


def check(db: Path, expected: dict, report: Any, per_metric: int, total: int) -> str | None:
    """Why the pulled database is not exactly the loaded samples, or None."""
    if report.missing:
        return f"{len(report.missing)} ranges not pulled, first: {report.missing[0]}"
    if report.samples != total or report.rows != per_metric:
        return f"{report.samples:,} samples read and {report.rows:,} rows added; loaded {total:,} in {per_metric:,}"
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT gpu_index, ts, memory_used_bytes, memory_free_bytes FROM gpu_samples").fetchall()
    finally:
        con.close()
    if len(rows) != per_metric:
        return f"gpu_samples holds {len(rows):,} rows, loaded {per_metric:,} per metric"
    for column, name in enumerate(expected, start=2):
        held = {(r[0], r[1]): r[column] / MIB for r in rows if r[column] is not None}
        if held != expected[name]:
            return f"{name}: the values held differ from those loaded ({len(held):,} held, {len(expected[name]):,})"
    return None


if __name__ == "__main__":
    sys.exit(main())
