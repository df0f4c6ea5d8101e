"""Benchmark (issue 16): one database against the Parquet lake and its aggregate tier on DuckDB and on Spark.

For each --requests size (the seeded sample fleet, generated once per size and reused from --dir), it times, each as
its own `oomlab` process:
  single database   `oomlab ingest FLEET --db`, then `oomlab findings --db`
  lake              `oomlab ingest FLEET --lake`
  DuckDB aggregates `oomlab aggregate --engine duckdb` (DuckDB's threads: every core)
  Spark aggregates  `oomlab aggregate --engine spark` (local[2]: two executor threads)
and prints wall time, peak RSS (the measured process's own; Spark's JVM is its child), rows per core-second of each
aggregation (requests / (seconds x cores it used)), and the size of the aggregates (agg_* folders) and of the small
tables copied beside them. Targets: aggregates for 100M requests < 1 GB and growing with instances x minutes, not
with requests; Spark's rows per core-second within 3x of DuckDB's; findings on aggregates <= 10 % of findings on
raw rows at 100M: `oomlab findings --aggregates` on each engine's set, timed and its findings compared with the
database's (a set whose findings differ fails the bench instead of printing a ratio).

    python bench/scale.py [--requests 10M,100M] [--dir DIR] [--engines duckdb,spark]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path

from _common import fresh_ingest, generated_fleet, measure, oomlab_argv

GB = 1024**3
SPARK_CORES = 2  # local[2], the engine's default master
_SUFFIXES = {"k": 10**3, "m": 10**6, "g": 10**9}


def _count(text: str) -> int:
    text = text.strip().lower().replace("_", "")
    if text and text[-1] in _SUFFIXES:
        return int(float(text[:-1]) * _SUFFIXES[text[-1]])
    return int(text)


def _size(folder: Path, aggregates: bool) -> int:
    """Bytes under the agg_* folders of an aggregate set (or under its other folders)."""
    return sum(
        f.stat().st_size
        for sub in folder.iterdir()
        if sub.is_dir() and sub.name.startswith("agg_") == aggregates
        for f in sub.rglob("*")
        if f.is_file()
    )


def _requests_in(db: Path) -> int:
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        return int(con.execute("SELECT count(*) FROM requests").fetchall()[0][0])


def run_size(work: Path, requests: int, engines: list[str]) -> dict[str, float]:
    fleet = generated_fleet(work, requests)
    db, lake = work / "fleet.duckdb", work / "lake"
    ingest = fresh_ingest(fleet, db)
    rows = _requests_in(db)
    print(f"\n== {rows:,} requests ({work})")
    print(f"single database: ingest {ingest.seconds:.1f} s, peak {ingest.peak_mib / 1024:.2f} GB")
    found = measure(oomlab_argv("findings", "--db", str(db), "--json", str(work / "findings.json")))
    print(f"single database: findings {found.seconds:.1f} s, peak {found.peak_mib / 1024:.2f} GB")
    shutil.rmtree(lake, ignore_errors=True)  # a lake kept from a run before would skip every file
    lake_ingest = measure(oomlab_argv("ingest", str(fleet), "--lake", str(lake), "--quiet"))
    print(
        f"lake: ingest {lake_ingest.seconds:.1f} s = {lake_ingest.seconds / ingest.seconds:.2f}x the database's, "
        f"peak {lake_ingest.peak_mib / 1024:.2f} GB"
    )
    figures: dict[str, float] = {"requests": rows, "findings_s": found.seconds}
    for engine in engines:
        out = work / f"agg-{engine}"
        shutil.rmtree(out, ignore_errors=True)
        aggregated = measure(oomlab_argv("aggregate", "--lake", str(lake), "--out", str(out), "--engine", engine))
        cores = SPARK_CORES if engine == "spark" else os.cpu_count() or 1
        per_core = rows / (aggregated.seconds * cores)
        figures[f"{engine}_rows_per_core_s"] = per_core
        figures[f"{engine}_agg_bytes"] = _size(out, aggregates=True)
        print(
            f"{engine} aggregates: {aggregated.seconds:.1f} s on {cores} cores = {per_core:,.0f} rows per core-second, "
            f"peak {aggregated.peak_mib / 1024:.2f} GB; aggregates {_size(out, True) / 1e6:.1f} MB, "
            f"small tables beside them {_size(out, False) / 1e6:.1f} MB"
        )
        figures[f"{engine}_findings_s"] = _findings_on(out, work, found.seconds)
    return figures


def _findings_on(agg: Path, work: Path, raw_seconds: float) -> float:
    """`oomlab findings --aggregates` on one set: its time, after checking it found what the database did."""
    written = work / f"findings-{agg.name}.json"
    found = measure(oomlab_argv("findings", "--aggregates", str(agg), "--json", str(written)))
    if _findings_of(written) != _findings_of(work / "findings.json"):
        raise SystemExit(f"findings on {agg} differ from the database's: compare {written} with findings.json")
    print(
        f"findings on {agg.name}: {found.seconds:.1f} s = {found.seconds / raw_seconds:.1%} of the database's, "
        f"peak {found.peak_mib / 1024:.2f} GB (same findings)"
    )
    return found.seconds


def _findings_of(path: Path) -> list[tuple[str, str, str]]:
    """Kind, subject and advice of each finding in rank order: what a reader acts on."""
    document = json.loads(path.read_text(encoding="utf-8"))
    return [(f["kind"], f["subject"], f["advice"]) for f in document["findings"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", default="10M,100M", help="sizes, comma-separated (10M, 100M, 2500000)")
    parser.add_argument("--dir", type=Path, default=None, help="where fleets, databases and lakes go (reused)")
    parser.add_argument("--engines", default="duckdb,spark")
    args = parser.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="oomlab-scale-"))
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    results = []
    for size in (_count(s) for s in args.requests.split(",")):
        work = base / f"fleet-{size}"
        work.mkdir(parents=True, exist_ok=True)
        results.append(run_size(work, size, engines))
    print("\n== targets")
    largest = results[-1]
    if "duckdb_agg_bytes" in largest:
        print(
            f"aggregates at {largest['requests']:,.0f} requests: {largest['duckdb_agg_bytes'] / GB:.3f} GB "
            "(target < 1 GB)"
        )
    if len(results) > 1 and "duckdb_agg_bytes" in results[0]:
        growth = largest["duckdb_agg_bytes"] / results[0]["duckdb_agg_bytes"]
        print(f"aggregates grew {growth:.2f}x for {largest['requests'] / results[0]['requests']:.1f}x the requests")
    if "duckdb_rows_per_core_s" in largest and "spark_rows_per_core_s" in largest:
        ratio = largest["duckdb_rows_per_core_s"] / largest["spark_rows_per_core_s"]
        print(f"ratio (DuckDB / Spark rows per core-second): {ratio:.2f} (target <= 3)")
    for engine in engines:
        share = largest[f"{engine}_findings_s"] / largest["findings_s"]
        print(f"findings on {engine}'s aggregates / on raw rows: {share:.1%} (target <= 10 %)")


if __name__ == "__main__":
    main()
