"""Benchmark: `oomlab report weekly` on a 10,000,000-request fleet, against `oomlab ingest` of the same fleet.

Generates the fleet with sample_logs/generate.py (seeded, the committed sample's planted truths), ingests it,
renders the weekly report of its last week, and prints report time / ingest time (target <= 0.5), the page's
size (target <= 5 MB) and the report's peak memory.

    python bench/report.py [--requests 10000000] [--dir DIR]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import duckdb

from _common import fresh_ingest, generated_fleet, measure, oomlab_argv

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000_000)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="oomlab-report-"))
    fleet, db, page = generated_fleet(work, args.requests, REPO), work / "fleet.duckdb", work / "weekly.html"
    ingest = fresh_ingest(fleet, db)
    requests = duckdb.connect(str(db), read_only=True).execute("SELECT count(*) FROM requests").fetchall()[0][0]
    report = measure(oomlab_argv("report", "weekly", "--db", str(db), "-o", str(page),
                                 "--json", str(work / "weekly.json")))
    print(f"requests in the database: {requests:,}")
    print(f"oomlab ingest:        {ingest.seconds:.1f} s, peak {ingest.peak_mib / 1024:.2f} GB")
    print(f"oomlab report weekly: {report.seconds:.1f} s, peak {report.peak_mib / 1024:.2f} GB")
    print(f"page size: {page.stat().st_size / 1e6:.2f} MB  (target <= 5 MB)")
    print(f"ratio (report / ingest): {report.seconds / ingest.seconds:.2f}  (target <= 0.5)")


if __name__ == "__main__":
    main()
