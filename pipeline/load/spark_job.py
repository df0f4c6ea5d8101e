"""The aggregate job as a cluster runs it: `spark-submit` (or a Databricks Python wheel task) in place of
`oomlab aggregate --engine spark`, on the session the cluster makes (its master, executors and file systems come
from spark-submit's flags and the cluster's configuration, never from here). docs/spark.md shows both.

    spark-submit --master yarn "$(python -m oomlab.load.spark_job --path)" --lake s3a://b/lake --out s3a://b/agg
    python -m oomlab.load.spark_job --lake s3a://b/lake --out s3a://b/agg        # the same, on pyspark's default

spark-submit runs this file as a script, outside its package, so the module imports nothing at its top; the
script's `main` is the installed module's.
"""

from __future__ import annotations

import argparse
import sys


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="oomlab-spark-aggregate",
        description="Compute oomlab's aggregate tier from a lake on the Spark session of this job.",
    )
    parser.add_argument("--lake", help="the lake: a path, or a URI (s3a://, gs://, abfss://, file://)")
    parser.add_argument("--out", help="where the aggregate set goes: a path or a URI")
    parser.add_argument("--path", action="store_true", help="print this file's path (for spark-submit) and stop")
    arguments = parser.parse_args(argv)
    if not arguments.path and not (arguments.lake and arguments.out):
        parser.error("--lake and --out are required")
    return arguments


def main(argv: list[str] | None = None) -> int:
    """Run the job; the exit status (0 done, 1 an oomlab error, said in one line; 2 usage)."""
    arguments = _arguments(argv)
    if arguments.path:
        print(__file__)
        return 0
    from pyspark.sql import SparkSession

    from ..errors import OomlabError
    from .aggregate import aggregate_lake
    from .engines import SparkEngine

    session = SparkSession.builder.appName("oomlab aggregate").getOrCreate()
    try:
        rows = aggregate_lake(arguments.lake, arguments.out, SparkEngine(session=session))
    except OomlabError as exc:
        print(f"oomlab: {exc}", file=sys.stderr)
        return 1
    aggregates = sum(n for name, n in rows.items() if name.startswith("agg_"))
    print(f"{len(rows)} tables ({aggregates:,} aggregate rows) written to {arguments.out}")
    return 0


if __name__ == "__main__":
    if __package__:
        sys.exit(main())
    from oomlab.load.spark_job import main as installed_main  # run as a file by spark-submit

    sys.exit(installed_main())
