"""Request lines read in bulk: the reading of `request_line.logged_request`, done by polars (Rust regexes, no Python
per line) over a window's lines, since a log that writes a line per request holds millions of them. The two
readings are held equal by tests/parse/test_request_line.py, on real lines and on lines built from their syntax.

Rust's regexes look neither behind nor ahead. `logged_request`'s key must not follow a word character or a dot;
here the character before it is consumed instead, which would hide a key that follows a pair's closing quote
(`a="x"b=2`). So a marker byte (SEP) is put after every quote first, and the patterns step over it: each quote is
then followed by a character no key starts with, whatever the previous match consumed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from .request_line import FIELD_OF, READ_FIELDS, SIZES, STATUS_KEYS, SUCCESS_PATTERN, VALUE_PATTERNS
from .textscan import LINE_TEXT_BYTES

if TYPE_CHECKING:
    import polars as pl

    from .textscan import Window

# One C-speed search of a window's bytes for the status keys (request_line.STATUS_KEYS): in a log that writes a
# line per request every line holds one, so the marker search's per-line bookkeeping (textscan), made for a few OOM
# messages, would cost more than reading the lines.
_STATUS_KEY = re.compile(
    b"|".join(re.escape(m) for key in STATUS_KEYS for m in (f"{key}=".encode(), f'"{key}"'.encode()))
)

CHUNK_LINES = 1 << 16  # lines read at once: a slice's pairs stay within tens of MB
SEP = "\x01"
# `logged_request`'s _PAIR, with SEP after each quote
_PAIR = (
    r'(?:^|[^\w.])(?P<key>[A-Za-z_][\w.]*)=(?:"\x01(?P<quoted>[^"]*)"|(?P<bare>[^\s,;"]+))'
    r'|"\x01(?P<jkey>[A-Za-z_][\w.]*)"\x01\s*:\s*(?:"\x01(?P<jstring>[^"\\]*)"|(?P<jnumber>-?[0-9]+))'
)


def read_request_lines(lines: pl.Series) -> pl.DataFrame:
    """For `lines` (text): `offset` (the line's index), `text`, READ_FIELDS as written (None where the line states
    none) and `succeeded`, for each line that states a status and a size, in order."""
    import polars as pl  # here: it costs a fifth of a second to import, and most logs hold no request line

    marked = lines.str.replace_all('"', '"' + SEP, literal=True)
    pairs = (
        pl.DataFrame({"pair": marked.str.extract_all(_PAIR)})
        .with_row_index("offset")
        .explode("pair")
        .drop_nulls("pair")
        .with_columns(pl.col("pair").str.extract_groups(_PAIR).alias("g"))
        .unnest("g")
    )
    key = pl.coalesce("key", "jkey").str.to_lowercase()
    value = pl.coalesce("quoted", "bare", "jstring", "jnumber")
    fields = pairs.select(
        "offset",
        key.replace_strict(FIELD_OF, default=None, return_dtype=pl.Utf8).alias("field"),
        value.alias("value"),
    ).filter(pl.col("field").is_not_null())
    valid = pl.lit(True)
    for name, pattern in VALUE_PATTERNS.items():
        valid = valid & ((pl.col("field") != name) | pl.col("value").str.contains(pattern))
    firsts = fields.filter(valid).unique(["offset", "field"], keep="first", maintain_order=True)
    wide = firsts.group_by("offset", maintain_order=True).agg(
        pl.col("value").filter(pl.col("field") == name).first().alias(name) for name in READ_FIELDS
    )
    stated = wide.filter(pl.col("status").is_not_null() & pl.any_horizontal(pl.col(s).is_not_null() for s in SIZES))
    return stated.with_columns(
        pl.col("status").str.strip_chars(),
        lines.gather(stated["offset"]).alias("text"),
    ).with_columns(pl.col("status").str.contains(SUCCESS_PATTERN).alias("succeeded"))


@dataclass
class RequestScanner:
    """Reads the request lines that state how the request ended from the windows of a text log's OOM scan
    (`scan_text_log(on_window=...)`): `take()` gives them as `read_request_lines` gives them, with `line` (the
    line's number) and `ts` (`clock`'s time of it). A line's text is kept only where its time lies outside `dated`
    ([earliest, latest): the reader that rejects it quotes it); the rest would hold the whole log in memory."""

    clock: Callable[[str], datetime | None]
    dated: tuple[datetime, datetime]
    found: list[pl.DataFrame] = field(default_factory=list)

    def window(self, window: Window) -> None:
        import polars as pl

        region = bytes(window.buf[window.lo : window.hi])  # whole lines
        if _STATUS_KEY.search(region) is None:
            return
        # a request line is short: a longer one is read by its head, so no line costs more than that
        lines = pl.Series([region.decode("utf-8", errors="replace")]).str.split("\n").explode()
        lines = lines.str.slice(0, LINE_TEXT_BYTES)
        # in slices: a line's pairs take several times its bytes while they are read
        read = pl.concat(
            read_request_lines(lines.slice(at, CHUNK_LINES)).with_columns(pl.col("offset") + at)
            for at in range(0, len(lines), CHUNK_LINES)
        )
        if read.is_empty():
            return
        times = pl.Series("ts", [self.clock(text) for text in read["text"]], dtype=pl.Datetime("us"))
        dated = pl.col("ts").is_null() | pl.col("ts").is_between(*self.dated, closed="left")
        self.found.append(
            read.with_columns((pl.col("offset") + window.line).alias("line"), times)
            .with_columns(pl.when(dated).then(None).otherwise(pl.col("text")).alias("text"))
            .drop("offset")
        )

    def take(self) -> pl.DataFrame | None:
        """The request lines read since the last take, in order (None for none), forgotten here: a reader that
        stores them window by window holds one window's in memory, not the log's."""
        if not self.found:
            return None
        import polars as pl

        taken, self.found = pl.concat(self.found), []
        return taken
