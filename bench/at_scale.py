"""Benchmark (issue 15, target 6): `oomlab findings` and `oomlab report weekly` at 10x, against `oomlab ingest`.

Generates the seeded sample fleet at --requests (default 100,000,000; reused when --dir already holds it),
ingests it once (the baseline: its wall time), then runs `oomlab findings` and `oomlab report weekly` --runs
times each on that database and prints, per run, each one's wall time over the ingest's, its peak RSS and the
page's size. Targets: findings <= 0.5x ingest, report <= 0.3x, peak RSS < 8 GB, page <= 5 MB.

    python bench/at_scale.py [--requests 100000000] [--runs 3] [--dir DIR]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import duckdb

from _common import fresh_ingest, generated_fleet, measure, oomlab_argv

GB = 1024  # MiB per GB as the peaks are printed (GiB, like the other benches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="oomlab-at-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    db = work / "fleet.duckdb"
    ingest = fresh_ingest(generated_fleet(work, args.requests), db)
    with duckdb.connect(str(db), read_only=True) as con:
        requests = con.execute("SELECT count(*) FROM requests").fetchall()[0][0]
    print(f"requests in the database: {requests:,}")
    print(f"oomlab ingest: {ingest.seconds:.1f} s, peak {ingest.peak_mib / GB:.2f} GB (the baseline)")
    page = work / "weekly.html"
    found_ratios, report_ratios = [], []
    for run in range(1, args.runs + 1):
        found = _measured(f"run {run}: findings", "findings", "--db", str(db), "--json", str(work / "findings.json"))
        if found is not None:
            found_ratios.append(found.seconds / ingest.seconds)
            print(
                f"run {run}: findings {found.seconds:.1f} s = {found_ratios[-1]:.3f}x ingest, "
                f"peak {found.peak_mib / GB:.2f} GB"
            )
        report = _measured(f"run {run}: report weekly", "report", "weekly", "--db", str(db), "-o", str(page))
        if report is not None:
            report_ratios.append(report.seconds / ingest.seconds)
            print(
                f"run {run}: report weekly {report.seconds:.1f} s = {report_ratios[-1]:.3f}x ingest, "
                f"peak {report.peak_mib / GB:.2f} GB, page {page.stat().st_size / 1e6:.2f} MB"
            )
    if not found_ratios or not report_ratios:
        raise SystemExit("a command failed in every run: nothing to compare with the targets")
    print(f"ratio (findings / ingest), median: {statistics.median(found_ratios):.3f}  (target <= 0.5)")
    print(f"ratio (report weekly / ingest), median: {statistics.median(report_ratios):.3f}  (target <= 0.3)")
    print("peak RSS target < 8 GB; page target <= 5 MB")
    if len(found_ratios) < args.runs or len(report_ratios) < args.runs:
        raise SystemExit("some runs failed (above): the medians cover only the runs that finished")


def _measured(label: str, *args: str):
    """One timed `oomlab ARGS`, or None after printing why it failed (a kill by the kernel's OOM killer
    shows as exit -9): the other measurements still print."""
    try:
        return measure(oomlab_argv(*args))
    except SystemExit as failure:
        print(f"{label} FAILED: {str(failure).strip().splitlines()[0]}")
        return None


if __name__ == "__main__":
    main()
