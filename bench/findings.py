"""Benchmark: `oomlab findings` on a 10,000,000-request fleet, against `oomlab ingest` of the same fleet.

Generates the fleet with sample_logs/generate.py (seeded, same planted truths as the committed sample),
ingests it, runs the findings, and prints findings time / ingest time (target <= 1.0) and the peak memory
of the findings run (target < 6 GB).

    python bench/findings.py [--requests 10000000] [--dir DIR]
"""

from __future__ import annotations

from _common import ingested_fleet, measure, oomlab_argv


def main() -> None:
    work, db, ingest = ingested_fleet(__doc__.splitlines()[0], "oomlab-findings-")
    found = measure(oomlab_argv("findings", "--db", str(db), "--json", str(work / "findings.json")))
    print(f"oomlab ingest:   {ingest.seconds:.1f} s, peak {ingest.peak_mib / 1024:.2f} GB")
    print(f"oomlab findings: {found.seconds:.1f} s, peak {found.peak_mib / 1024:.2f} GB  (target < 6 GB)")
    print(f"ratio (findings / ingest): {found.seconds / ingest.seconds:.2f}  (target <= 1.0)")


if __name__ == "__main__":
    main()
