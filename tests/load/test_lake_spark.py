"""The lake as Apache Spark reads it, as it is: Spark in local mode (2 threads) over `oomlab lake export`.

Skipped without pyspark and Java (the `spark` extra, Debian's openjdk-17-jre-headless); CI sets
OOMLAB_REQUIRE_SPARK=1, so there a missing Spark fails instead.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from oomlab import api
from oomlab.load.lake import LAKE_TABLES

from conftest import needs_spark

pytestmark = needs_spark

# Per day and model version: the numbers the weekly review starts from, each a sum, count or extreme (exact),
# written once in DuckDB's dialect and transpiled for Spark with sqlglot, as the aggregate SQL will be.
DAILY = """
SELECT CAST(date AS VARCHAR) AS day, coalesce(model_version, '') AS model_version, count(*) AS requests,
       sum(CASE WHEN status = 'oom' THEN 1 ELSE 0 END) AS ooms, sum(batch_size) AS batch_sum,
       max(input_sequence_length) AS longest_prompt, min(ts) AS first_ts
FROM requests GROUP BY 1, 2
"""
DAILY_COLUMNS = ["day", "model_version", "requests", "ooms", "batch_sum", "longest_prompt", "first_ts"]


@pytest.fixture(scope="module")
def lake(fleet_db: Path, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lake") / "lake"
    api.lake_export(fleet_db, path)
    return path


def test_spark_reads_every_table_whole(spark, lake: Path, fleet_db: Path) -> None:
    with duckdb.connect(str(fleet_db), read_only=True) as con:
        for table in LAKE_TABLES:
            expected = con.execute(f'SELECT count(*) FROM "{table}"').fetchall()[0][0]
            assert spark.read.parquet(str(lake / table)).count() == expected, table


def test_spark_finds_the_date_partitions_and_utc_times(spark, lake: Path, fleet_db: Path) -> None:
    import sqlglot

    spark.read.parquet(str(lake / "requests")).createOrReplaceTempView("requests")
    from_spark = _rows(spark.sql(sqlglot.transpile(DAILY, read="duckdb", write="spark")[0]).collect())
    with duckdb.connect(str(fleet_db), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        rows = con.execute(DAILY.replace("CAST(date AS VARCHAR)", "CAST(CAST(ts AS DATE) AS VARCHAR)")).fetchall()
    from_duckdb = pl.DataFrame(rows, schema=DAILY_COLUMNS, orient="row").sort("day", "model_version")
    assert from_duckdb.height > 20  # weeks of days times model versions
    assert_frame_equal(from_spark.sort("day", "model_version"), from_duckdb, check_dtypes=False)


def _rows(collected: list) -> pl.DataFrame:
    """Spark rows as a polars frame (no pandas needed)."""
    return pl.DataFrame([tuple(row) for row in collected], schema=DAILY_COLUMNS, orient="row")
