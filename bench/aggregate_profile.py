"""Where the aggregate tier's time goes (issue 16: Spark within 3x of DuckDB): each aggregate of sql/aggregates/
computed on one engine and then the other over the same lake, written as `oomlab aggregate` writes it, in this
process, timed alone. Prints seconds per aggregate on each engine and their ratio, the engines' start and the
lake's views apart, and the sum; then the engines' floor: one plain GROUP BY of the requests (per device and
minute, nothing else), run after the aggregates so that Spark's JIT is as warm as it gets, which no rewrite of the
aggregate SQL can go below. The lake is a folder written by `oomlab ingest --lake` (bench/scale.py leaves one
per size under its --dir).

    python bench/aggregate_profile.py LAKE [--engines duckdb,spark]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from oomlab.load.aggregate import staged_views, table_columns
from oomlab.load.engines import open_engine
from oomlab.load.lake import LAKE_TABLES, manifest_path
from oomlab.load.sql import names_in, sql_text

FLOOR = "(floor: one GROUP BY)"
# the least an aggregate of the tier does: read the requests once, group them, write the groups
FLOOR_SQL = (
    "CREATE OR REPLACE VIEW bench_floor AS SELECT instance, gpu_index, date_trunc('minute', ts) AS minute, "
    "count(*) AS requests FROM requests GROUP BY instance, gpu_index, date_trunc('minute', ts)"
)


def profile(lake: Path, engine_name: str, out: Path) -> dict[str, float]:
    """Seconds of each step on one engine: start, views over the lake, then every aggregate written."""
    start = time.perf_counter()
    engine = open_engine(engine_name)
    seconds = {"(engine start)": time.perf_counter() - start}
    try:
        start = time.perf_counter()
        columns = table_columns()
        for table in LAKE_TABLES:
            engine.lake_table(table, lake / table, columns[table])
        aggregates = names_in("aggregates")
        for view in staged_views(tuple(aggregates)):
            engine.execute(sql_text(view))
        seconds["(lake views)"] = time.perf_counter() - start
        for name in aggregates:
            start = time.perf_counter()
            engine.execute(sql_text(name))
            engine.write(name, out / engine_name / name)
            seconds[name] = time.perf_counter() - start
        start = time.perf_counter()
        engine.execute(FLOOR_SQL)
        engine.write("bench_floor", out / engine_name / "bench_floor")
        seconds[FLOOR] = time.perf_counter() - start
    finally:
        engine.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lake", type=Path)
    parser.add_argument("--engines", default="duckdb,spark")
    args = parser.parse_args()
    if not manifest_path(args.lake).exists():
        raise SystemExit(f"no lake at {args.lake}: write one with `oomlab ingest PATHS --lake DIR`")
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    out = Path(tempfile.mkdtemp(prefix="oomlab-aggregate-profile-"))
    try:
        timings = {engine: profile(args.lake, engine, out) for engine in engines}
    finally:
        shutil.rmtree(out, ignore_errors=True)
    steps = [s for s in next(iter(timings.values())) if s != FLOOR]
    print(f"{'step':<24}" + "".join(f"{e:>10}" for e in engines) + ("     ratio" if len(engines) == 2 else ""))
    for step in [*steps, "total", FLOOR]:
        row = [sum(v for k, v in t.items() if k != FLOOR) if step == "total" else t[step] for t in timings.values()]
        ratio = f"{row[1] / row[0]:>9.1f}x" if len(row) == 2 and row[0] > 0 else ""
        print(f"{step:<24}" + "".join(f"{s:>9.1f}s" for s in row) + ratio)


if __name__ == "__main__":
    main()
