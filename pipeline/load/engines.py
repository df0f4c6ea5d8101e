"""The two engines the aggregate tier runs on (load/aggregate.py): DuckDB in this process, or Apache Spark (local
threads or a cluster). Each is handed oomlab's SQL in DuckDB's dialect, exactly as it is in sql/; DuckDB runs it
with oomlab's macros created, Spark after load/portable.py has expanded them and sqlglot has transpiled it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import duckdb

from .connection import quarter_of_memory
from .lake import DATA_FILE, copy_to_parquet, path_literal
from .sql import creation_order, names_in, sql_text

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_TABLE_MACRO = re.compile(r"\bAS\s+TABLE\b", re.IGNORECASE)
# The local master a Spark run gets without --master: two executor threads, as the tests and the bench run.
LOCAL_MASTER = "local[2]"


# scheme://...: an object store or any file system Spark's Hadoop layer reads (s3a://, gs://, abfss://, file://)
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_uri(location: Path | str) -> bool:
    return isinstance(location, str) and _URI.match(location) is not None


def join(base: Path | str, name: str) -> Path | str:
    """`base/name` for a path or a URI alike (pathlib would fold a URI's `//`)."""
    return base.rstrip("/") + "/" + name if is_uri(base) else Path(base) / name


class Store(Protocol):
    """What the object-store commit needs of a file system without rename (load/aggregate.py)."""

    def exists(self, uri: str | Path) -> bool: ...

    def write_text(self, uri: str | Path, text: str) -> None: ...

    def folders(self, uri: str) -> list[str]: ...

    def delete(self, uri: str) -> None: ...


class Engine(Protocol):
    name: str

    def lake_table(self, table: str, folder: Path | str, columns: dict[str, str]) -> None:
        """Expose the lake folder of `table` as a view of that name with the table's columns and types."""

    def execute(self, sql: str) -> None:
        """Run the statements of one SQL file (DuckDB's dialect)."""

    def write(self, relation: str, folder: Path | str) -> int:
        """Write every row of `relation` as Parquet files under `folder` (made here); the rows written."""

    def store(self) -> Store | None:
        """The engine's access to URIs (None: local paths only)."""

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

    def lake_table(self, table: str, folder: Path | str, columns: dict[str, str]) -> None:
        files = path_literal(Path(folder) / "**" / "*.parquet")
        chosen = ", ".join(f'CAST("{c}" AS {t}) AS "{c}"' for c, t in columns.items())
        self.con.execute(
            f'CREATE OR REPLACE VIEW "{table}" AS SELECT {chosen} '
            f"FROM read_parquet({files}, hive_partitioning = true, union_by_name = true)"
        )

    def execute(self, sql: str) -> None:
        self.con.execute(sql)

    def write(self, relation: str, folder: Path | str) -> int:
        Path(folder).mkdir(parents=True)
        return copy_to_parquet(self.con, f'SELECT * FROM "{relation}"', Path(folder) / DATA_FILE, "")

    def store(self) -> None:
        return None

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
        # a session made elsewhere (spark-submit, Databricks) computes date_trunc and days in UTC too
        self.spark.conf.set("spark.sql.session.timeZone", "UTC")

    def lake_table(self, table: str, folder: Path | str, columns: dict[str, str]) -> None:
        from .portable import spark_type

        # The schema is given, not inferred: inferring it (mergeSchema) is a Spark job per table that reads every
        # file's footer, 0.2-3 s each and 10 s for the lake's 18 tables; a column a file lacks reads as NULL.
        # The partition columns (date, source_id) still come from the paths.
        types = {column: spark_type(kind) for column, kind in columns.items()}
        frame = self.spark.read.schema(", ".join(f"`{c}` {t}" for c, t in types.items())).parquet(str(folder))
        frame.select(*(frame[c].cast(t).alias(c) for c, t in types.items())).createOrReplaceTempView(table)

    def execute(self, sql: str) -> None:
        for statement in self._for_engine(sql, "spark"):
            self.spark.sql(statement)

    def write(self, relation: str, folder: Path | str) -> int:
        self.spark.table(relation).write.option("compression", "zstd").parquet(str(folder))
        if is_uri(folder):
            # counted by Spark, from the footers too: DuckDB reads no object store without its httpfs extension
            return int(self.spark.read.parquet(str(folder)).count())
        # counted from the written files' footers (no second Spark job per table: a second or more each)
        files = path_literal(Path(folder) / "*.parquet")
        return int(duckdb.sql(f"SELECT count(*) FROM read_parquet({files})").fetchall()[0][0])

    def store(self) -> HadoopStore:
        return HadoopStore(self.spark)

    def close(self) -> None:
        if self._owned:
            self.spark.stop()


class HadoopStore:
    """URIs through the Hadoop FileSystem of Spark's JVM: whatever file systems the session is configured for
    (hadoop-aws for s3a://, the GCS connector for gs://, ABFS for abfss://; file:// always)."""

    def __init__(self, spark: SparkSession) -> None:
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _fs(self, uri: str | Path):  # -> (org.apache.hadoop.fs.FileSystem, org.apache.hadoop.fs.Path)
        # a local path beside a URI (--lake lake/ --out s3a://...) is read by the same API, as Spark reads it
        path = self._jvm.org.apache.hadoop.fs.Path(str(uri))
        return path.getFileSystem(self._conf), path

    def exists(self, uri: str | Path) -> bool:
        fs, path = self._fs(uri)
        return bool(fs.exists(path))

    def write_text(self, uri: str | Path, text: str) -> None:
        fs, path = self._fs(uri)
        stream = fs.create(path, True)  # overwrite: one object, visible whole when closed
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()

    def folders(self, uri: str) -> list[str]:
        fs, path = self._fs(uri)
        if not fs.exists(path):
            return []
        return [s.getPath().getName() for s in fs.listStatus(path) if s.isDirectory()]

    def delete(self, uri: str) -> None:
        fs, path = self._fs(uri)
        fs.delete(path, True)


def _new_session(master: str) -> SparkSession:
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("oomlab aggregate")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "ERROR")
        .config("spark.sql.session.timeZone", "UTC")
    )
    heap = quarter_of_memory()
    if master.startswith("local") and heap is not None:
        # In local mode the executors are threads of the driver's JVM, whose default heap is 1 GiB: the sort
        # aggregates and shuffles of 8.3M requests spill and collect garbage in it (agg_request_devices 43 s
        # with 1 GiB, 28 s with 6 GiB). It gets the same quarter of the machine as DuckDB's buffer pool. A
        # cluster's driver and executors are sized by the cluster (docs/spark.md).
        builder = builder.config("spark.driver.memory", f"{heap // (1 << 20)}m")
    return builder.getOrCreate()


def open_engine(name: str, master: str | None = None) -> Engine:
    """The engine called `name` ('duckdb' or 'spark')."""
    if name == "spark":
        return SparkEngine(master)
    return DuckDBEngine()
