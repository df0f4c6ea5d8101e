"""Stage structured request logs (JSONL, JSON array, CSV, Parquet) as DuckDB relations.

A stage is a FROM clause plus how to read each source column, the line number and the raw row.
The fast stages let DuckDB's own readers type the columns; when a reader refuses the file (bad
JSON, a type that changes mid-file, invalid UTF-8) the robust stages read it line by line so that
every bad line becomes a reject with its number and the good lines still load.
"""

from __future__ import annotations

import codecs
import csv
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from ..errors import InputError
from ..records import Reject
from .compression import compression_of, open_binary
from .detect import csv_delimiter

# DuckDB reads these compressions itself; others are decompressed to a temporary file first.
_NATIVE_COMPRESSION = {None: "none", "gzip": "gzip", "zstd": "zstd"}
# Lines are read whole: no quote or escape, and a delimiter that valid JSON never holds unescaped (a
# control character); a file that holds one is read from a sanitised copy instead.
_LINES_CSV = (
    "columns={'raw': 'VARCHAR'}, header=false, delim='\x01', quote='', escape='', "
    "auto_detect=false, strict_mode=true, null_padding=false, compression=$compression"
)


def quote_ident(name: str) -> str:
    """A column name as a DuckDB identifier, whatever characters it holds."""
    return '"' + name.replace('"', '""') + '"'


@dataclass
class Stage:
    """A relation over one source: typed columns plus line number, raw text and a row guard."""

    relation: str
    columns: dict[str, str]
    params: dict[str, object]
    line: str = "line"
    raw: str = "NULL"
    guard: str = "NULL"  # a reject reason that applies before any field is read, or NULL
    first_line: int | None = None  # set when line numbers follow row order: the first row's line
    column_sql: Callable[[str], str] = quote_ident
    extra_sql: Callable[[set[str]], str] = field(default=lambda consumed: "NULL")
    rejects: list[Reject] = field(default_factory=list)  # found while reading, before SQL


class Workspace:
    """Temporary files a stage needs (decompressed copies, sanitised lines); removed on close."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="oomlab-"))

    def file(self, name: str) -> Path:
        return self.dir / name

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def readable_by_duckdb(path: Path, work: Workspace) -> tuple[Path, str]:
    """A path and compression DuckDB can read: xz is decompressed into the workspace."""
    kind = compression_of(path)
    if kind in _NATIVE_COMPRESSION:
        return path, _NATIVE_COMPRESSION[kind]
    plain = work.file(path.name + ".plain")
    with open_binary(path) as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst, 16 << 20)
    return plain, "none"


def _typed_stage(con: duckdb.DuckDBPyConnection, relation: str, params: dict[str, object], first_line: int) -> Stage:
    """A stage over a reader that types its own columns (read_json, read_csv, read_parquet).

    No WITH ORDINALITY here: it makes DuckDB read on one thread (about 1.5x slower); the loader numbers
    the rows from their order instead (see ingest/requests._load_fast).
    """
    probe = con.execute(f"SELECT * FROM {relation} LIMIT 0", params)
    columns = {d[0]: str(d[1]) for d in probe.description}
    probe.fetchall()

    def extra(consumed: set[str]) -> str:
        rest = [c for c in columns if c not in consumed]
        if not rest:
            return "NULL"
        pairs = ", ".join(f"'{c.replace(chr(39), chr(39) * 2)}', {quote_ident(c)}" for c in rest)
        return f"json_object({pairs})"

    raw = "to_json(struct_pack(" + ", ".join(f"{quote_ident(c)} := {quote_ident(c)}" for c in columns) + "))"
    return Stage(
        relation=relation,
        columns=columns,
        params=params,
        line="NULL::BIGINT",
        raw=raw,
        extra_sql=extra,
        first_line=first_line,
    )


def fast_jsonl_stage(con: duckdb.DuckDBPyConnection, path: Path, compression: str) -> Stage:
    """JSON Lines typed by DuckDB's reader; fails as a whole on any malformed line."""
    relation = "read_json($path, format='newline_delimited', compression=$compression)"
    return _typed_stage(con, relation, {"path": str(path), "compression": compression}, 1)


def _header_line(path: Path) -> str:
    with open_binary(path) as handle:
        return handle.readline().decode("utf-8", errors="replace")


def fast_csv_stage(con: duckdb.DuckDBPyConnection, path: Path, compression: str) -> Stage:
    """CSV with a header, typed by DuckDB's sniffer; a row of the wrong width fails the whole read.
    Line numbers count the header line."""
    delimiter = csv_delimiter(_header_line(path)) or ","
    relation = (
        "read_csv($path, header=true, delim=$delim, strict_mode=true, null_padding=false, compression=$compression)"
    )
    params = {"path": str(path), "compression": compression, "delim": delimiter}
    return _typed_stage(con, relation, params, 2)  # after the header line


def parquet_stage(con: duckdb.DuckDBPyConnection, path: Path) -> Stage:
    """Parquet: `line` is the row number."""
    return _typed_stage(con, "read_parquet($path)", {"path": str(path)}, 1)


def robust_jsonl_stage(con: duckdb.DuckDBPyConnection, path: Path, compression: str, work: Workspace) -> Stage:
    """JSON Lines read line by line: invalid JSON and non-objects become rejects with their line."""
    lines_path, rejects = path, []
    if _needs_sanitising(path):
        lines_path, rejects = _sanitise_lines(path, work)
        compression = "none"
    params = {"path": str(lines_path), "compression": compression}
    lines = (
        f"(SELECT ordinality AS line, raw FROM read_csv($path, {_LINES_CSV}) WITH ORDINALITY "
        "WHERE trim(raw, ' ' || chr(9) || chr(13)) <> '')"
    )  # blank: spaces, tabs; other space is content
    keys = [r[0] for r in con.execute(f"SELECT DISTINCT unnest(try(json_keys(raw))) FROM {lines}", params).fetchall()]
    params["paths"] = ["$." + json.dumps(k) for k in keys]
    relation = f"(SELECT line, raw, try(json_extract_string(raw, $paths)) AS j FROM {lines})"
    index = {k: i + 1 for i, k in enumerate(keys)}

    def extra(consumed: set[str]) -> str:
        params["patch"] = json.dumps({k: None for k in consumed})
        return "nullif(CAST(try(json_merge_patch(raw, $patch)) AS VARCHAR), '{}')"

    guard = "CASE WHEN j IS NULL THEN 'invalid JSON' WHEN left(ltrim(raw), 1) <> '{' THEN 'not a JSON object' END"
    return Stage(
        relation=relation,
        columns=dict.fromkeys(keys, "VARCHAR"),
        params=params,
        raw="raw",
        guard=guard,
        column_sql=lambda name: f"j[{index[name]}]",
        extra_sql=extra,
        rejects=rejects,
    )


def _needs_sanitising(path: Path) -> bool:
    """True when the text is not UTF-8 or holds the line reader's delimiter byte (DuckDB would
    refuse the first and silently cut lines at the second)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    with open_binary(path) as handle:
        while chunk := handle.read(16 << 20):
            if b"\x01" in chunk:
                return True
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError:
                return True
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return True
    return False


def _sanitise_lines(path: Path, work: Workspace) -> tuple[Path, list[Reject]]:
    """A copy DuckDB can read line by line: lines that are not UTF-8 are blanked (numbers kept) with a
    reject each, and the delimiter byte is written as the text \\u0001 (such a line is invalid JSON either way)."""
    clean, rejects = work.file(path.name + ".utf8"), []
    with open_binary(path) as src, open(clean, "wb") as dst:
        for number, line in enumerate(src, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                rejects.append(
                    Reject(
                        number,
                        f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                        line.decode("utf-8", errors="replace")[:2000],
                    )
                )
                line = b"\n"
            dst.write(line.replace(b"\x01", b"\\u0001"))
    return clean, rejects


def robust_csv_stage(con: duckdb.DuckDBPyConnection, path: Path, work: Workspace) -> Stage:
    """CSV read with Python's csv module: rows with the wrong number of fields become rejects."""
    del work  # rows are held in Arrow; nothing to write
    with open_binary(path) as handle:
        text = handle.read().decode("utf-8", errors="replace")
    reader = csv.reader(text.splitlines(), delimiter=csv_delimiter(text.split("\n", 1)[0]) or ",")
    header = next(reader)
    rows, lines, rejects = [], [], []
    for row in reader:
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            rejects.append(
                Reject(reader.line_num, f"{len(row)} fields where the header has {len(header)}", ",".join(row)[:2000])
            )
            continue
        rows.append(row)
        lines.append(reader.line_num)
    import pyarrow as pa  # only this fallback needs it

    table = pa.table(
        {"line": lines, **{h: [r[i] for r in rows] for i, h in enumerate(header)}},
        schema=pa.schema([("line", pa.int64()), *((h, pa.string()) for h in header)]),
    )
    name = f"robust_csv_{id(table)}"
    con.register(name, table)
    stage = _typed_stage(con, name, {}, 2)
    stage.columns.pop("line", None)
    stage.line, stage.first_line = "line", None  # rows carry their own line numbers
    stage.rejects = rejects
    return stage


def json_array_to_lines(path: Path, work: Workspace) -> Path:
    """A JSON array of objects rewritten as JSON Lines: `line` then counts array elements."""
    with open_binary(path) as handle:
        try:
            items = json.load(handle)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputError(str(path), f"invalid JSON: {exc}") from exc
    if not isinstance(items, list):
        raise InputError(str(path), "a JSON document that is not an array of request objects")
    lines = work.file(path.name + ".jsonl")
    with open(lines, "w", encoding="utf-8") as out:
        for item in items:
            out.write(json.dumps(item, ensure_ascii=False) + "\n")
    return lines
