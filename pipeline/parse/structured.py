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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import duckdb

from ..assets import scratch_dir
from ..errors import InputError
from ..records import Reject
from .compression import DECOMPRESSION_ERRORS, compression_of, open_binary
from .recognise import csv_delimiter

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
        self.dir = Path(tempfile.mkdtemp(prefix="work-", dir=scratch_dir()))

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


@dataclass(frozen=True)
class TypedReader:
    """A DuckDB reader that types its own columns (read_json, read_csv, read_parquet): the FROM clause, its
    parameters and the line its first row is on. The loader copies its rows in file order and types the stage
    from the copy (`typed_stage`), so the file is sniffed once."""

    relation: str
    params: dict[str, object]
    first_line: int


def typed_stage(con: duckdb.DuckDBPyConnection, relation: str, params: dict[str, object], first_line: int) -> Stage:
    """A stage over a relation whose columns are typed already (a typed reader's copy, or a registered table).

    No WITH ORDINALITY on the readers: it makes DuckDB read on one thread (about 1.5x slower); the loader numbers
    the rows from their order instead (see ingest/requests._load_fast).
    """
    top = _described(con, f"SELECT * FROM {relation} LIMIT 0", params)
    plain = {name: (quote_ident(name), kind) for name, kind in top.items()}
    # a column named `a.b` in the log itself wins over the field b of an object a
    leaves = {**_leaves(con, relation, params, plain), **{n: v for n, v in plain.items() if "." in n}}
    columns = {name: kind for name, (_, kind) in leaves.items()}

    def extra(consumed: set[str]) -> str:
        rest = [c for c in columns if c not in consumed]
        if not rest:
            return "NULL"
        pairs = ", ".join(f"'{c.replace(chr(39), chr(39) * 2)}', {leaves[c][0]}" for c in rest)
        # NULL when the row has none of them, as the line-by-line reader gives (and no object of nulls is built
        # for every row of a log whose extra field is rare: about 0.25 s per 2M rows)
        absent = " AND ".join(f"{leaves[c][0]} IS NULL" for c in rest)
        return f"CASE WHEN {absent} THEN NULL ELSE json_object({pairs}) END"

    raw = "to_json(struct_pack(" + ", ".join(f"{quote_ident(c)} := {quote_ident(c)}" for c in top) + "))"
    return Stage(
        relation=relation,
        columns=columns,
        params=params,
        line="NULL::BIGINT",
        raw=raw,
        column_sql=lambda name: leaves[name][0],
        extra_sql=extra,
        first_line=first_line,
    )


# How deep nested objects are opened into dotted columns (`kubernetes.labels.app` is three): log shippers nest
# two or three levels (Fluent Bit's `kubernetes.pod_name`, Elastic's `host.name`, `kubernetes.labels.app`).
NESTED_DEPTH = 3


def _described(con: duckdb.DuckDBPyConnection, query: str, params: dict[str, object]) -> dict[str, str]:
    """The column names and DuckDB types a query returns, without reading a row."""
    probe = con.execute(query, params)
    columns = {d[0]: str(d[1]) for d in probe.description}
    probe.fetchall()
    return columns


def _leaves(
    con: duckdb.DuckDBPyConnection, relation: str, params: dict[str, object], columns: dict[str, tuple[str, str]]
) -> dict[str, tuple[str, str]]:
    """Each column by name with its SQL and type, an object (a STRUCT) opened into its fields named `parent.child`,
    NESTED_DEPTH levels deep, so that a field nested in a shipper's envelope (`{"kubernetes": {"node_name": ...}}`)
    is found by the same name as its flattened form (`kubernetes.node_name`)."""
    out: dict[str, tuple[str, str]] = {}
    for name, (sql, kind) in columns.items():
        if not kind.startswith("STRUCT(") or name.count(".") + 1 >= NESTED_DEPTH:
            out[name] = (sql, kind)
            continue
        fields = _described(con, f"SELECT unnest({sql}) FROM {relation} LIMIT 0", params)
        nested = {
            f"{name}.{field}": (f"struct_extract({sql}, {_sql_string(field)})", field_kind)
            for field, field_kind in fields.items()
        }
        out.update(_leaves(con, relation, params, nested))
    return out


def fast_jsonl_reader(path: Path, compression: str, max_line: int) -> TypedReader:
    """JSON Lines typed by DuckDB's reader; fails as a whole on any malformed line or one over `max_line` bytes."""
    relation = "read_json($path, format='newline_delimited', compression=$compression, maximum_object_size=$max)"
    return TypedReader(relation, {"path": str(path), "compression": compression, "max": max_line}, 1)


@dataclass(frozen=True)
class CsvHeader:
    """A CSV's header line: its delimiter and column names."""

    delimiter: str
    columns: tuple[str, ...]


# The most columns a CSV or JSON request log may have. Request logs name tens of fields (the canonical ones, a few
# labels, a pod's envelope); DuckDB's typing and the staging SQL do work per column per row, so 100,000 columns in
# a 1.7 MB file took 469 s and 2.4 GB before failing. Far above any log, far below that.
MAX_COLUMNS = 2048


def _twice(columns: tuple[str, ...]) -> set[str]:
    """The names given more than once (in one pass: a header of thousands of names stays linear)."""
    seen: set[str] = set()
    return {c for c in columns if c in seen or seen.add(c)}  # type: ignore[func-returns-value]


def csv_header(path: Path, max_line: int) -> CsvHeader:
    """The header of a CSV request log; an InputError when it has none, is too long, or names a column twice
    (which of the two a field would be read from is unknown)."""
    with open_binary(path) as handle:
        raw = handle.readline(max_line + 1)
    if len(raw) > max_line:
        raise InputError(str(path), f"the header line is over {max_line:,} bytes: not a CSV header")
    line = raw.decode("utf-8-sig", errors="replace").rstrip("\r\n")
    delimiter = csv_delimiter(line) or ","
    try:
        names = next(csv.reader([line], delimiter=delimiter))
    except (csv.Error, StopIteration) as exc:
        raise InputError(str(path), f"line 1: not a CSV header ({exc or 'empty'})") from exc
    columns = tuple(name.strip() or f"column{i}" for i, name in enumerate(names))
    if len(columns) > MAX_COLUMNS:
        raise InputError(
            str(path),
            f"line 1: the header names {len(columns):,} columns: a request log has tens, and oomlab reads at most "
            f"{MAX_COLUMNS:,}",
        )
    twice = sorted(_twice(columns))
    if twice:
        raise InputError(
            str(path), f"line 1: the header names {', '.join(twice)} twice: which column is meant is unknown"
        )
    return CsvHeader(delimiter, columns)


# DuckDB's CSV sniffer reads this many rows to type the columns (its default, passed explicitly so the check
# below covers what it reads); it takes time quadratic in a field's length (0.65 s for one 128 KiB field, 4 s
# for 1 MB, minutes at a few MB), while reading itself is linear.
_SNIFF_ROWS = 20480
# A sniff sample with a line longer than this is read without sniffing: request fields are numbers, times and
# short names, so a longer line is a logged prompt or garbage, and the sniff would cost seconds on it.
_SNIFF_LINE_BYTES = 64 << 10


def fast_csv_reader(path: Path, compression: str, header: CsvHeader) -> TypedReader:
    """CSV typed by DuckDB's sniffer (a column mixing representations is text, read value by value); a row of
    the wrong width fails the whole read. When the sniff sample holds a very long line, every column is read
    as text instead, unsniffed. Line numbers count the header line."""
    params = {"path": str(path), "compression": compression, "delim": header.delimiter}
    common = "header=true, delim=$delim, strict_mode=true, null_padding=false, compression=$compression"
    if _longest_of_first_lines(path, _SNIFF_ROWS + 1, _SNIFF_LINE_BYTES) <= _SNIFF_LINE_BYTES:
        relation = f"read_csv($path, {common}, sample_size={_SNIFF_ROWS})"
    else:
        columns = "{" + ", ".join(f"{_sql_string(c)}: 'VARCHAR'" for c in header.columns) + "}"
        relation = f"read_csv($path, {common}, auto_detect=false, columns={columns}, quote='\"', escape='\"')"
    return TypedReader(relation, params, 2)  # after the header line


def _longest_of_first_lines(path: Path, count: int, enough: int) -> int:
    """The length of the longest of the first `count` lines, or `enough` + 1 as soon as one is longer."""
    longest = 0
    with open_binary(path) as handle:
        for _ in range(count):
            line = handle.readline(enough + 1)
            if not line:
                break
            longest = max(longest, len(line.rstrip(b"\r\n")))
            if longest > enough:
                break
    return longest


def _sql_string(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def parquet_reader(path: Path) -> TypedReader:
    """Parquet: `line` is the row number."""
    return TypedReader("read_parquet($path)", {"path": str(path)}, 1)


def robust_jsonl_stage(
    con: duckdb.DuckDBPyConnection, path: Path, compression: str, work: Workspace, max_line: int
) -> Stage:
    """JSON Lines read line by line: invalid JSON, non-objects, a key given twice and lines over `max_line`
    bytes become rejects with their line."""
    lines_path, rejects = path, []
    if _needs_sanitising(path, max_line):
        lines_path, rejects = _sanitise_lines(path, work, max_line)
        compression = "none"
    params = {"path": str(lines_path), "compression": compression}
    lines = (
        f"(SELECT ordinality AS line, raw FROM read_csv($path, {_LINES_CSV}, max_line_size={max_line + 2}) "
        "WITH ORDINALITY WHERE trim(raw, ' ' || chr(9) || chr(13)) <> '')"
    )  # blank: spaces, tabs; other space is content. +2: the line's own CR LF
    leaves, opened = _json_leaves(con, lines, params)
    keys = [".".join(path) for path in leaves]
    params["paths"] = [_json_path(path) for path in leaves]
    relation = f"(SELECT line, raw, try(json_extract_string(raw, $paths)) AS j, try(json_keys(raw)) AS k FROM {lines})"
    index = {k: i + 1 for i, k in enumerate(keys)}

    def extra(consumed: set[str]) -> str:
        # as the typed reader gives it: an opened object's fields by their dotted names, the consumed ones left out
        top = [path[0] for path in leaves if len(path) == 1 and ".".join(path) in consumed]
        params["patch"] = json.dumps(dict.fromkeys([*top, *(k for k in opened if "." not in k)]))
        nested = [(".".join(path), _json_path(path)) for path in leaves if len(path) > 1]
        nested = [(k, p) for k, p in nested if k not in consumed]
        if not nested:
            return "nullif(CAST(try(json_merge_patch(raw, $patch)) AS VARCHAR), '{}')"
        fields = ", ".join(f"{_sql_string(k)}, json_extract(raw, {_sql_string(p)})" for k, p in nested)
        return f"nullif(CAST(try(json_merge_patch(raw, $patch, json_object({fields}))) AS VARCHAR), '{{}}')"

    # A key given twice: JSON leaves the meaning open (DuckDB's reader refuses the file, json_extract takes the
    # first, Python's json the last), so the row is a reject naming the key rather than a silent pick.
    guard = (
        "CASE WHEN j IS NULL THEN 'invalid JSON' WHEN left(ltrim(raw), 1) <> '{' THEN 'not a JSON object' "
        "WHEN list_contains(k, '') THEN 'the key \"\" is empty: a field without a name' "
        "WHEN len(k) <> len(list_distinct(k)) THEN 'the key ' || "
        "to_json(list_filter(k, lambda x: len(list_filter(k, lambda y: y = x)) > 1)[1]) || "
        "' is given twice: which value is meant is unknown' END"
    )
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


def _json_leaves(
    con: duckdb.DuckDBPyConnection, lines: str, params: dict[str, object]
) -> tuple[list[tuple[str, ...]], set[str]]:
    """The key paths of the lines' objects, an object value opened into its fields NESTED_DEPTH levels deep (as
    the typed reader opens a STRUCT), and the dotted names of the keys opened. A key that holds an object in
    some lines and a value in others is kept as a leaf too."""
    leaves: list[tuple[str, ...]] = []
    opened: set[str] = set()
    level: list[tuple[str, ...]] = [()]
    while level:
        below: list[tuple[str, ...]] = []
        for parent in level:
            for key, is_object, is_value in _json_children(con, lines, params, parent):
                path = (*parent, key)
                if is_object and len(path) < NESTED_DEPTH:
                    opened.add(".".join(path))
                    below.append(path)
                if is_value or not is_object or len(path) >= NESTED_DEPTH:
                    leaves.append(path)
        level = below
    return leaves, opened


def _json_children(
    con: duckdb.DuckDBPyConnection, lines: str, params: dict[str, object], parent: tuple[str, ...]
) -> list[tuple[str, bool, bool]]:
    """The keys of the objects at `parent` in any line: whether each holds an object in some line, and whether a
    value (anything else) in some."""
    at = _json_path(parent) if parent else "$"
    query = (
        f"SELECT key, bool_or(json_type(raw, {_sql_string(at)} || '.' || to_json(key)) = 'OBJECT'), "
        f"bool_or(json_type(raw, {_sql_string(at)} || '.' || to_json(key)) <> 'OBJECT') "
        f"FROM (SELECT line, raw, unnest(try(json_keys(raw, {_sql_string(at)}))) AS key FROM {lines}) "
        "WHERE key <> '' GROUP BY key ORDER BY min(line)"  # an empty key has no path: its row is a reject
    )
    return [(str(k), bool(o), bool(v)) for k, o, v in con.execute(query, params).fetchall()]


def _json_path(path: tuple[str, ...]) -> str:
    """`$."kubernetes"."pod_name"`: a JSON path whose keys are quoted, whatever they hold."""
    return "$." + ".".join(json.dumps(k) for k in path)


def _needs_sanitising(path: Path, max_line: int) -> bool:
    """True when DuckDB's line reader cannot take the file as it is: text that is not UTF-8, the reader's
    delimiter byte (it would silently cut lines there), a carriage return that ends no line (its CSV state
    machine refuses a file mixing CR and LF line ends) or a line over `max_line` bytes. One pass in chunks."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    run, pending_cr = 0, False  # bytes since the last LF; whether the previous chunk ended in CR
    with open_binary(path) as handle:
        while True:
            chunk = _read_or_cut(handle, max_line)
            if chunk is None:
                return True  # a cut stream: the sanitised copy keeps its whole lines and says where it ends
            if not chunk:
                break
            if b"\x01" in chunk or _bare_cr(chunk, pending_cr):
                return True
            pending_cr = chunk.endswith(b"\r")
            first, last = chunk.find(b"\n"), chunk.rfind(b"\n")
            # a chunk holds max_line bytes, so only a line crossing chunks can be longer
            if (run + (len(chunk) if first < 0 else first)) > max_line:
                return True
            run = run + len(chunk) if first < 0 else len(chunk) - last - 1
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError:
                return True
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return True
    return pending_cr  # the last line is at most one chunk long


def _read_or_cut(handle: BinaryIO, size: int) -> bytes | None:
    """Up to `size` bytes; None where a compressed stream is cut short (the sanitised copy says where)."""
    try:
        return handle.read(size)
    except (EOFError, *DECOMPRESSION_ERRORS):
        return None


def _bare_cr(chunk: bytes, pending_cr: bool) -> bool:
    """Whether a chunk holds a CR not followed by LF (one at its very end is decided by the next chunk)."""
    if pending_cr and not chunk.startswith(b"\n"):
        return True
    bare = chunk.count(b"\r") - chunk.count(b"\r\n")
    return bare > (1 if chunk.endswith(b"\r") else 0)


def _bounded_lines(handle: BinaryIO, max_line: int) -> Iterator[tuple[bytes, int]]:
    """(line, its length) for each LF-terminated line; a line over `max_line` bytes is yielded as b"" with its
    full length, read through in pieces so that no more than `max_line` bytes are ever held."""
    while line := handle.readline(max_line + 1):
        if len(line) <= max_line or line.endswith(b"\n"):
            yield line, len(line)
            continue
        length = len(line)
        while (piece := handle.readline(max_line)) and not piece.endswith(b"\n"):
            length += len(piece)
        yield b"", length + len(piece)


def _sanitise_lines(path: Path, work: Workspace, max_line: int) -> tuple[Path, list[Reject]]:
    """A copy DuckDB can read line by line, with the same line numbers: a line that is not UTF-8 or is over
    `max_line` bytes is blanked with a reject each; the delimiter byte is written as the text \\u0001 and a CR
    that ends no line as the text \\r (valid escapes inside a JSON string, invalid JSON outside one, as the
    raw bytes would be)."""
    clean, rejects = work.file(path.name + ".utf8"), []
    with open_binary(path) as src, open(clean, "wb") as dst:
        for _, text in _decoded_lines(src, max_line, rejects):
            dst.write(_escape_line(text.encode("utf-8")))
    return clean, rejects


def _escape_line(line: bytes) -> bytes:
    """The delimiter byte and carriage returns that end no line, written as JSON escapes."""
    end = b"\r\n" if line.endswith(b"\r\n") else b"\n" if line.endswith(b"\n") else b""
    body = line[: len(line) - len(end)]
    return body.replace(b"\x01", b"\\u0001").replace(b"\r", b"\\r") + end


def robust_csv_stage(con: duckdb.DuckDBPyConnection, path: Path, header: CsvHeader, max_line: int) -> Stage:
    """CSV read with Python's csv module, line by line with bounded memory: a row with the wrong number of
    fields, one that is not UTF-8, one the csv module cannot parse (a bare CR in an unquoted field) and a line
    over `max_line` bytes become rejects; a quoted field may span lines."""
    rows, lines, rejects = _csv_rows(path, header, max_line)
    import pyarrow as pa  # only this fallback needs it

    table = pa.table(
        {"line": lines, **{h: [r[i] for r in rows] for i, h in enumerate(header.columns)}},
        schema=pa.schema([("line", pa.int64()), *((h, pa.string()) for h in header.columns)]),
    )
    name = f"robust_csv_{id(table)}"
    con.register(name, table)
    stage = typed_stage(con, name, {}, 2)
    stage.columns.pop("line", None)
    stage.line, stage.first_line = "line", None  # rows carry their own line numbers
    stage.rejects = rejects
    return stage


def _csv_rows(path: Path, header: CsvHeader, max_line: int) -> tuple[list[list[str]], list[int], list[Reject]]:
    """The data rows of a CSV with the line each starts on, and the rejects."""
    rows: list[list[str]] = []
    lines: list[int] = []
    rejects: list[Reject] = []
    width = len(header.columns)
    with open_binary(path) as handle, _csv_field_limit(max_line):
        numbered = _decoded_lines(handle, max_line, rejects)
        next(numbered, None)  # the header
        position = {"line": 1}

        def texts() -> Iterator[str]:
            for number, text in numbered:
                position["line"] = number
                yield text

        reader = csv.reader(texts(), delimiter=header.delimiter, strict=True)
        while True:
            start = position["line"] + 1
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                rejects.append(Reject(start, f"not a CSV row: {exc}", ""))
                continue
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != width:
                raw = header.delimiter.join(row)[:2000]
                rejects.append(Reject(start, f"{len(row)} fields where the header has {width}", raw))
                continue
            rows.append(row)
            lines.append(start)
    rejects.sort(key=lambda reject: reject.line)
    return rows, lines, rejects


def _decoded_lines(handle: BinaryIO, max_line: int, rejects: list[Reject]) -> Iterator[tuple[int, str]]:
    """(number, text) of each line, its line end kept; a line that is not UTF-8 or over `max_line` bytes is a
    reject and reads as an empty line (so a quoted field cannot run on through it). A compressed stream cut short
    (a log copied or rotated while it was written) gives its whole lines and one reject for the rest."""
    numbered = enumerate(_bounded_lines(handle, max_line), start=1)
    number = 0
    while True:
        try:
            number, (line, length) = next(numbered)
        except StopIteration:
            return
        except (EOFError, *DECOMPRESSION_ERRORS) as exc:
            rejects.append(Reject(number + 1, f"the compressed stream ends here ({exc}): the rest of the file is lost"))
            return
        if not line:
            rejects.append(Reject(number, _too_long(length, max_line), ""))
            yield number, "\n"
            continue
        try:
            yield number, line.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = line.decode("utf-8", errors="replace")[:2000]
            rejects.append(Reject(number, f"not UTF-8 text ({exc.reason} at byte {exc.start})", text))
            yield number, "\n"


@contextmanager
def _csv_field_limit(limit: int) -> Iterator[None]:
    """The csv module's field size limit (128 KiB by default, process-wide) raised to `limit` while reading."""
    previous = csv.field_size_limit(limit)
    try:
        yield
    finally:
        csv.field_size_limit(previous)


def _too_long(length: int, max_line: int) -> str:
    return f"a line of {length:,} bytes: over the {max_line:,} a request record can take"


def json_array_to_lines(path: Path, work: Workspace) -> Path:
    """A JSON document of request objects rewritten as JSON Lines: `line` then counts the objects. The objects are
    an array, the values of an object keyed by id, or the one array an object holds (parse/recognise.json_array)."""
    with open_binary(path) as handle:
        try:
            document = json.load(handle)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputError(str(path), f"invalid JSON: {exc}") from exc
    items = _request_objects(document)
    if items is None:
        raise InputError(
            str(path),
            "a JSON document that holds no request objects: neither an array of them, nor objects keyed by id, "
            "nor one array of them under a key",
        )
    lines = work.file(path.name + ".jsonl")
    with open(lines, "w", encoding="utf-8") as out:
        for item in items:
            out.write(json.dumps(item, ensure_ascii=False) + "\n")
    return lines


def _request_objects(document: object) -> list[object] | None:
    """The request objects of a JSON document (json_array_to_lines), or None when it holds none."""
    if isinstance(document, list):
        return document
    if not isinstance(document, dict):
        return None
    arrays = [value for value in document.values() if isinstance(value, list)]
    if len(arrays) == 1:  # the one array under a key, metadata beside it
        return arrays[0]
    keyed = [value for value in document.values() if isinstance(value, dict)]  # keyed by id, in the file's order
    return keyed if keyed and not arrays else None
