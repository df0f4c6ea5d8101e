"""Benchmark: `oomlab report weekly` on a 10,000,000-request fleet, against `oomlab ingest` of the same fleet.

Generates the fleet with sample_logs/generate.py (seeded, the committed sample's planted truths), ingests it,
renders the weekly report of its last week, and prints report time / ingest time (target <= 0.5), the page's
size (target <= 5 MB) and the report's peak memory.

    python bench/report.py [--requests 10000000] [--dir DIR]
"""

from __future__ import annotations

import duckdb

from _common import ingested_fleet, measure, oomlab_argv


def main() -> None:
    work, db, ingest = ingested_fleet(__doc__.splitlines()[0], "oomlab-report-")
    page = work / "weekly.html"
    requests = duckdb.connect(str(db), read_only=True).execute("SELECT count(*) FROM requests").fetchall()[0][0]
    report = measure(
        oomlab_argv("report", "weekly", "--db", str(db), "-o", str(page), "--json", str(work / "weekly.json"))
    )
    print(f"requests in the database: {requests:,}")
    print(f"oomlab ingest:        {ingest.seconds:.1f} s, peak {ingest.peak_mib / 1024:.2f} GB")
    print(f"oomlab report weekly: {report.seconds:.1f} s, peak {report.peak_mib / 1024:.2f} GB")
    print(f"page size: {page.stat().st_size / 1e6:.2f} MB  (target <= 5 MB)")
    print(f"ratio (report / ingest): {report.seconds / ingest.seconds:.2f}  (target <= 0.5)")


if __name__ == "__main__":
    main()
