"""Text from the data, made safe for a terminal: logs carry ANSI escapes (`\\x1b[2J` clears the screen) and
other control bytes, and rich would read `[red]` or `[/opt/torch/lib]` in them as markup. Everything the CLI
prints that came from the data goes through `visible` and is printed as plain text (rich `Text`)."""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# C0 controls but tab and newline, DEL, and the C1 controls (0x80-0x9f: CSI is 0x9b).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(value: object) -> str:
    """`value` as text with every control character shown as its escape (`\\x1b`), never acted on, and every
    byte a name could not decode as its escape (`\\udcff`)."""
    text = "" if value is None else str(value)
    # a file name that is not UTF-8 reaches Python with its bytes as lone surrogates, which no terminal can show
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


# Where a long name (a path, file:function:line) may be folded: after a separator, never inside a word.
_SEPARATOR = re.compile(r"(?<=[/\\:, ])")
ELLIPSIS = "\u2026"


def fold_name(text: str, width: int) -> str:
    """`text` on lines of at most `width` characters, broken after its separators (`/`, `\\`, `:`, `,`, space)
    so that no name is split; a single name longer than `width` is cut with an ellipsis."""
    width = max(width, 8)
    lines, line = [], ""
    for piece in _SEPARATOR.split(text):
        if len(piece) > width:
            piece = piece[: width - 1] + ELLIPSIS
        if line and len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        line += piece
    return "\n".join([*lines, line])


def first_column_width(width: int, headers: list[str], rows: list[list[str]]) -> int:
    """What a table `width` columns wide leaves its first column once the others (as wide as their widest cell)
    and every column's padding and borders are drawn: the width to fold its names to."""
    others = sum(max([len(headers[i]), *(len(row[i]) for row in rows)]) + 3 for i in range(1, len(headers)))
    return width - others - 4


def plain(value: object, style: str = "") -> Text:
    """A rich Text of `visible(value)`: no markup is read in it."""
    from rich.text import Text

    return Text(visible(value), style=style)


def pipe_console(**options: Any) -> Console:
    """A rich Console (`options` as rich takes them) whose reader closing the pipe (`oomlab findings | head`)
    raises BrokenPipeError, which the command line turns into a quiet exit (main.PIPE_CLOSED_EXIT); rich's own
    Console exits with status 1 there, as if the command had failed. Emoji codes are never read: a stack frame
    `trainers.py:train:444` is a file, a function and a line, not `:train:` (real snapshot snapshots/001)."""
    return _pipe_console_class()(**{"emoji": False, **options})


@functools.cache
def _pipe_console_class() -> type[Console]:
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    return PipeConsole
