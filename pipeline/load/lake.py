"""The Parquet lake (docs/lake.md): the normalized tables as Hive-partitioned Parquet, one folder of files per
source, so that a source can be added, replaced or removed without touching another's files.

Layout: `<table>/date=YYYY-MM-DD/source_id=N/data_0.parquet` for a table with a time column,
`<table>/source_id=N/data_0.parquet` for one without (a snapshot's tables go under their snapshot's source), and
the manifest `sources/data_0.parquet`: one row per ingested file with its content hash. The manifest is the
commit point: a source's files count only when the manifest names it, and `recover` deletes what an interrupted
write left outside it. The runs of recurring jobs (`job_occurrences` with origin 'cron') depend on the time the
whole lake covers, not on one file, so they are kept apart as `cron_0.parquet` files and rebuilt on every write.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from ..errors import OomlabError

# The tables of the lake and the time column each is partitioned by (`date=YYYY-MM-DD`, UTC), or None for a
# table partitioned by source only: rejects and calendars (small), and the snapshot tables, whose rows carry no
# time of their own or belong to one snapshot (a snapshot's events stay together).
LAKE_TABLES: dict[str, str | None] = {
    "sources": None,
    "requests": "ts",
    "oom_events": "ts",
    "gpu_samples": "ts",
    "gpu_process_samples": "ts",
    "engine_samples": "ts",
    "engine_memory": "ts",
    "allocator_stats": "ts",
    "allocator_settings": "ts",
    "text_requests": "ts",
    "rejects": None,
    "calendar_rules": None,
    "job_occurrences": "start_ts",
    "snapshots": None,
    "segments": None,
    "blocks": None,
    "trace_events": None,
    "stacks": None,
    "frames": None,
    "snapshot_ooms": None,
}
# Tables whose rows name a snapshot, not a source: written under the source of their snapshot.
SNAPSHOT_TABLES = frozenset({"segments", "blocks", "trace_events", "stacks", "frames", "snapshot_ooms"})
MANIFEST = "sources"
PARTITION_COLUMN = "date"
SOURCE_PARTITION = "source_id"
STAGING_PREFIX = ".staging-"
DATA_FILE = "data_0.parquet"
CRON_PATTERN = "cron_{i}"
LOCK_FILE = ".oomlab-lock"
SOURCE_IDS_TABLE = "lake_write_ids"


@contextmanager
def writing(lake: Path) -> Iterator[None]:
    """Hold the lake for one writer (an ingest or an export) until the block ends: a second one would take the
    first one's staging folder for an interrupted write's and delete it. The lock is the kernel's (flock), so it
    goes with the process that held it, however that ended. A lake left aside by an export killed between its
    two renames comes back first."""
    _finish_interrupted_exchange(lake)
    lake.mkdir(parents=True, exist_ok=True)
    with open(lake / LOCK_FILE, "a", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OomlabError(
                f"lake {lake} is busy: another oomlab ingest or export is writing it",
                hint="wait for it to finish or pass another lake",
            ) from None
        yield


def export_lake(con: duckdb.DuckDBPyConnection, lake: Path) -> dict[str, int]:
    """Write every lake table of the database behind `con` under `lake`, replacing what an earlier export or
    ingest wrote there; the rows written per table.

    The new lake is written whole beside the old one (`.<name>.export-<id>`, a sibling: the same file system) and
    the two folders are exchanged in one rename (Linux's renameat2 RENAME_EXCHANGE), so a reader or a kill at any
    moment finds either the old lake or the new one, never tables of both or one missing. Where the exchange is
    not to be had (another kernel, a file system without it) the old lake is renamed aside and the new one
    renamed in: two renames with no lake between them, which `prepare` completes after a kill. A lake that is a
    mount point of its own cannot be renamed at all: its tables are swapped one folder at a time, as before.
    """
    with writing(lake):
        prepare(lake)
        if _own_mount(lake):
            return _export_in_place(con, lake)
        staging = lake.parent / f".{lake.name}{EXPORT_INFIX}{uuid.uuid4().hex}"
        staging.mkdir()
        try:
            rows = _write_whole_lake(con, staging)
            (staging / LOCK_FILE).touch()
            _keep_foreign_files(lake, staging)
            _exchange(staging, lake)  # `staging` now names the old lake
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return rows


EXPORT_INFIX = ".export-"
_OLD_INFIX = ".old-"


def _write_whole_lake(con: duckdb.DuckDBPyConnection, folder: Path) -> dict[str, int]:
    """Every lake table of the database under `folder`; the rows written per table."""
    all_ids = [r[0] for r in con.execute("SELECT source_id FROM sources ORDER BY 1").fetchall()]
    rows = write_source_rows(con, folder, all_ids)
    rows["job_occurrences"] += write_cron_occurrences(con, folder)
    rows[MANIFEST] = write_manifest(con, folder)
    for table in LAKE_TABLES:
        (folder / table).mkdir(exist_ok=True)
        settle_placeholder(con, folder / table, table)
    return rows


def _export_in_place(con: duckdb.DuckDBPyConnection, lake: Path) -> dict[str, int]:
    staging = new_staging(lake)
    try:
        rows = _write_whole_lake(con, staging)
        _swap_table_folders(staging, lake)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return rows


def _keep_foreign_files(lake: Path, staging: Path) -> None:
    """What is under the lake but not oomlab's (a README, a job's own folder) into the new lake too, as hard links
    (the same file system: no copy, and the old lake keeps its own until it is removed)."""
    ours = {*LAKE_TABLES, LOCK_FILE}
    for entry in lake.iterdir():
        if entry.name in ours or entry.name.startswith(STAGING_PREFIX):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, staging / entry.name, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(entry, staging / entry.name)


def _link_or_copy(source: Path | str, target: Path | str) -> None:
    if os.path.islink(source):
        os.symlink(os.readlink(source), target)
        return
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _own_mount(lake: Path) -> bool:
    return lake.is_dir() and os.stat(lake).st_dev != os.stat(lake.resolve().parent).st_dev


_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(new: Path, lake: Path) -> None:
    """Put `new` where `lake` is and the old lake where `new` was, atomically where the kernel can."""
    if _renameat2_exchange(new, lake):
        return
    aside = lake.parent / f".{lake.name}{_OLD_INFIX}{uuid.uuid4().hex}"
    lake.rename(aside)
    new.rename(lake)
    aside.rename(new)


def _renameat2_exchange(a: Path, b: Path) -> bool:
    """renameat2(a, b, RENAME_EXCHANGE); False where it is not available (not Linux, an old kernel or libc, a
    file system without it), and the caller falls back to two renames."""
    import ctypes
    import errno

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    done = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if done == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _finish_interrupted_exchange(lake: Path) -> None:
    """After a kill between the two renames of the fallback: no lake, the old one aside. The new lake was
    whole (written before the renames) but it is not known which sibling it is, so the old one comes back."""
    if lake.exists():
        return
    for aside in sorted(lake.parent.glob(f".{lake.name}{_OLD_INFIX}*")):
        aside.rename(lake)
        return


def prepare(lake: Path) -> None:
    """Make the lake folder, drop the staging folders an interrupted write left (inside the lake, or an export's
    beside it) and every source folder the manifest does not name (files moved into place by a write that did
    not reach its manifest)."""
    lake.mkdir(parents=True, exist_ok=True)
    stale = [*lake.glob(f"{STAGING_PREFIX}*"), *lake.parent.glob(f".{lake.name}{EXPORT_INFIX}*")]
    stale += lake.parent.glob(f".{lake.name}{_OLD_INFIX}*")
    for folder in stale:
        shutil.rmtree(folder, ignore_errors=True)
    known = set(manifest_ids(lake))
    for folder in source_folders(lake):
        if _source_of(folder) not in known:
            shutil.rmtree(folder, ignore_errors=True)


def new_staging(lake: Path) -> Path:
    """A fresh staging folder inside the lake (the same file system, so moving out of it is a rename). Its name
    starts with a dot, which Spark, Hive and DuckDB's globs skip."""
    staging = lake / f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    staging.mkdir()
    return staging


def manifest_path(lake: Path) -> Path:
    return lake / MANIFEST / DATA_FILE


def manifest_ids(lake: Path) -> list[int]:
    """The source ids the lake's manifest names (none for a lake without one)."""
    path = manifest_path(lake)
    if not path.exists():
        return []
    return [r[0] for r in duckdb.sql(f"SELECT source_id FROM read_parquet({path_literal(path)})").fetchall()]


def source_folders(lake: Path) -> list[Path]:
    """Every `source_id=N` folder of every table."""
    found = []
    for table in LAKE_TABLES:
        if table != MANIFEST and (lake / table).is_dir():
            found += [p for p in (lake / table).glob(f"**/{SOURCE_PARTITION}=*") if p.is_dir()]
    return found


def _source_of(folder: Path) -> int | None:
    value = folder.name.partition("=")[2]
    return int(value) if value.isdigit() else None


def write_source_rows(con: duckdb.DuckDBPyConnection, staging: Path, source_ids: Iterable[int]) -> dict[str, int]:
    """The rows of `source_ids` in every table but the manifest, as Parquet under `staging/<table>/`; the rows
    written per table. The runs of recurring jobs are left out (write_cron_occurrences)."""
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {SOURCE_IDS_TABLE} AS SELECT unnest($ids::INTEGER[]) AS source_id",
        {"ids": list(source_ids)},
    )
    try:
        return {
            table: _copy_partitioned(con, _source_select(table), staging / table, LAKE_TABLES[table], "data_{i}")
            for table in LAKE_TABLES
            if table != MANIFEST
        }
    finally:
        con.execute(f"DROP TABLE IF EXISTS {SOURCE_IDS_TABLE}")


def _source_select(table: str) -> str:
    """The rows of the sources in SOURCE_IDS_TABLE. `table` comes from LAKE_TABLES, never from input."""
    wanted = f"IN (SELECT source_id FROM {SOURCE_IDS_TABLE})"
    if table in SNAPSHOT_TABLES:
        return (
            f'SELECT t.*, s.source_id FROM "{table}" t JOIN snapshots s USING (snapshot_id) WHERE s.source_id {wanted}'
        )
    cron = " AND origin <> 'cron'" if table == "job_occurrences" else ""
    return f'SELECT * FROM "{table}" WHERE source_id {wanted}{cron}'


def write_cron_occurrences(con: duckdb.DuckDBPyConnection, staging: Path) -> int:
    """The runs of recurring jobs (rebuilt over the whole lake's time by every write) as `cron_N.parquet` files
    beside their calendar's own rows; the rows written."""
    select = "SELECT * FROM job_occurrences WHERE origin = 'cron'"
    return _copy_partitioned(con, select, staging / "job_occurrences", "start_ts", CRON_PATTERN)


def write_manifest(con: duckdb.DuckDBPyConnection, staging: Path) -> int:
    """The `sources` table as the manifest `staging/sources/data_0.parquet`; its rows."""
    (staging / MANIFEST).mkdir(exist_ok=True)
    return copy_to_parquet(con, "SELECT * FROM sources ORDER BY source_id", staging / MANIFEST / DATA_FILE, "")


def _copy_partitioned(
    con: duckdb.DuckDBPyConnection, select: str, folder: Path, time_column: str | None, pattern: str
) -> int:
    by_time = time_column is not None
    dated = f'SELECT *, CAST("{time_column}" AS DATE) AS {PARTITION_COLUMN} FROM ({select})' if by_time else select
    partitions = f"{PARTITION_COLUMN}, {SOURCE_PARTITION}" if by_time else SOURCE_PARTITION
    options = f", PARTITION_BY ({partitions}), FILENAME_PATTERN '{pattern}', OVERWRITE_OR_IGNORE"
    return copy_to_parquet(con, dated, folder, options)


def settle_placeholder(con: duckdb.DuckDBPyConnection, folder: Path, table: str) -> None:
    """A table without any rows is one `data_0.parquet` without rows, so every reader learns its columns; it
    goes as soon as the table has partitions (a reader would take it for a second layout)."""
    placeholder = folder / DATA_FILE
    if table == MANIFEST:
        return
    has_rows = any(p.is_dir() for p in folder.iterdir()) if folder.is_dir() else False
    if has_rows:
        placeholder.unlink(missing_ok=True)
    elif not placeholder.exists():
        folder.mkdir(parents=True, exist_ok=True)
        copy_to_parquet(con, f'SELECT * FROM "{table}" LIMIT 0', placeholder, "")


def copy_to_parquet(con: duckdb.DuckDBPyConnection, select: str, target: Path, options: str) -> int:
    """DuckDB's COPY TO (parallel, streaming); the rows it wrote. The statement is built here, not kept in
    sql/, because COPY takes no bound parameter for its path: the path is written as an SQL string literal,
    quotes doubled."""
    written = con.execute(f"COPY ({select}) TO {path_literal(target)} (FORMAT parquet, COMPRESSION zstd{options})")
    return int(written.fetchall()[0][0])


def path_literal(path: Path) -> str:
    """A path as an SQL string literal, quotes doubled: where DuckDB takes no bound parameter (COPY's target)."""
    return "'" + str(path).replace("'", "''") + "'"


def _swap_table_folders(staging: Path, lake: Path) -> None:
    """Each table folder of `staging` replaces its namesake in `lake` (old one renamed aside, then removed)."""
    for folder in sorted(p for p in staging.iterdir() if p.name in LAKE_TABLES):
        target = lake / folder.name
        if target.exists():
            target.rename(staging / f".old-{folder.name}")
        folder.rename(target)


def merge_into_lake(con: duckdb.DuckDBPyConnection, staging: Path, lake: Path, removed_ids: Iterable[int]) -> None:
    """Commit a staged write of some sources (ingest --lake): their folders move into place, then the manifest
    is replaced (the commit point), then the folders of `removed_ids` (replaced or gone sources) and the old
    runs of recurring jobs are deleted and the new ones moved in."""
    for folder in sorted(p for p in staging.glob(f"*/**/{SOURCE_PARTITION}=*") if p.is_dir()):
        _move_data_files(folder, lake / folder.relative_to(staging))
    publish_manifest(staging, lake)
    gone = set(removed_ids)
    for folder in source_folders(lake):
        if _source_of(folder) in gone:
            shutil.rmtree(folder, ignore_errors=True)
    _replace_cron_files(staging, lake)
    for table in LAKE_TABLES:
        _remove_empty_folders(lake / table)
        settle_placeholder(con, lake / table, table)


def publish_manifest(staging: Path, lake: Path) -> None:
    """The staged manifest replaces the lake's in one rename: the moment a write takes effect."""
    manifest = manifest_path(lake)
    manifest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staging / MANIFEST / DATA_FILE, manifest)


def _move_data_files(folder: Path, target: Path) -> None:
    """The source's own files (the runs of recurring jobs move apart: _replace_cron_files) into `target`, which
    holds none of them yet: a write gives every source it writes a new id."""
    files = [f for f in folder.iterdir() if not f.name.startswith("cron_")]
    if files:
        target.mkdir(parents=True, exist_ok=True)
    for file in files:
        file.rename(target / file.name)


def _replace_cron_files(staging: Path, lake: Path) -> None:
    for old in (lake / "job_occurrences").glob("**/cron_*.parquet"):
        old.unlink()
    staged = staging / "job_occurrences"
    for new in staged.glob("**/cron_*.parquet"):
        target = lake / "job_occurrences" / new.relative_to(staged)
        target.parent.mkdir(parents=True, exist_ok=True)
        new.rename(target)


def _remove_empty_folders(folder: Path) -> None:
    """Partition folders left without files once a source's were removed."""
    if not folder.is_dir():
        return
    for sub in sorted((p for p in folder.glob("**/*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        if not any(sub.iterdir()):
            sub.rmdir()
