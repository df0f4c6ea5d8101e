"""The two engines the aggregate tier runs on (load/aggregate.py): DuckDB in this process, or Apache Spark (local
threads or a cluster). Each is handed oomlab's SQL in DuckDB's dialect, exactly as it is in sql/; DuckDB runs it
with oomlab's macros created, Spark after load/portable.py has expanded them and sqlglot has transpiled it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import duckdb

from .lake import DATA_FILE, copy_to_parquet, path_literal
from .sql import creation_order, names_in, sql_text

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_TABLE_MACRO = re.compile(r"\bAS\s+TABLE\b", re.IGNORECASE)
# The local master a Spark run gets without --master: two executor threads, as the tests and the bench run.
LOCAL_MASTER = "local[2]"


class Engine(Protocol):
    name: str

    def lake_table(self, table: str, folder: Path, columns: dict[str, str]) -> None:
        """Expose the lake folder of `table` as a view of that name with the table's columns and types."""

    def execute(self, sql: str) -> None:
        """Run the statements of one SQL file (DuckDB's dialect)."""

    def write(self, relation: str, folder: Path) -> int:
        """Write every row of `relation` as Parquet files under `folder` (made here); the rows written."""

    def close(self) -> None: ...


class DuckDBEngine:
    """DuckDB in memory, with oomlab's macros; its buffer pool capped like a database's (load/connection)."""

    name = "duckdb"

    def __init__(self) -> None:
        from .connection import bare_session

        self.con = bare_session()
        # the scalar macros: table macros read the fleet views, which do not exist over a lake
        macros = {name for name in names_in("macros") if not _TABLE_MACRO.search(sql_text(name))}
        for name in creation_order():
            if name in macros:
                self.con.execute(sql_text(name))

    def lake_table(self, table: str, folder: Path, columns: dict[str, str]) -> None:
        files = path_literal(folder / "**" / "*.parquet")
        chosen = ", ".join(f'CAST("{c}" AS {t}) AS "{c}"' for c, t in columns.items())
        self.con.execute(
            f'CREATE OR REPLACE VIEW "{table}" AS SELECT {chosen} '
            f"FROM read_parquet({files}, hive_partitioning = true, union_by_name = true)"
        )

    def execute(self, sql: str) -> None:
        self.con.execute(sql)

    def write(self, relation: str, folder: Path) -> int:
        folder.mkdir(parents=True)
        return copy_to_parquet(self.con, f'SELECT * FROM "{relation}"', folder / DATA_FILE, "")

    def close(self) -> None:
        self.con.close()


class SparkEngine:
    """A Spark session (pyspark, the `spark` extra): `master` is local[N], spark://..., yarn, k8s://...; times are
    UTC and timezone-free (timestamp_ntz) as in DuckDB."""

    name = "spark"

    def __init__(self, master: str | None = None, session: SparkSession | None = None) -> None:
        from .portable import for_engine

        self._for_engine = for_engine
        self._owned = session is None
        self.spark = session or _new_session(master or LOCAL_MASTER)

    def lake_table(self, table: str, folder: Path, columns: dict[str, str]) -> None:
        from .portable import spark_type

        frame = self.spark.read.option("mergeSchema", "true").parquet(str(folder))
        chosen = [frame[c].cast(spark_type(t)).alias(c) for c, t in columns.items()]
        frame.select(*chosen).createOrReplaceTempView(table)

    def execute(self, sql: str) -> None:
        for statement in self._for_engine(sql, "spark"):
            self.spark.sql(statement)

    def write(self, relation: str, folder: Path) -> int:
        self.spark.table(relation).write.option("compression", "zstd").parquet(str(folder))
        # counted from the written files' footers (no second Spark job per table: a second or more each)
        files = path_literal(folder / "*.parquet")
        return int(duckdb.sql(f"SELECT count(*) FROM read_parquet({files})").fetchall()[0][0])

    def close(self) -> None:
        if self._owned:
            self.spark.stop()


def _new_session(master: str) -> SparkSession:
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(master)
        .appName("oomlab aggregate")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "ERROR")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )


def open_engine(name: str, master: str | None = None) -> Engine:
    """The engine called `name` ('duckdb' or 'spark')."""
    if name == "spark":
        return SparkEngine(master)
    return DuckDBEngine()
