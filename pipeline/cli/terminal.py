"""Text from the data, made safe for a terminal: logs carry ANSI escapes (`\\x1b[2J` clears the screen) and
other control bytes, and rich would read `[red]` or `[/opt/torch/lib]` in them as markup. Everything the CLI
prints that came from the data goes through `visible` and is printed as plain text (rich `Text`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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


def plain(value: object, style: str = "") -> Text:
    """A rich Text of `visible(value)`: no markup is read in it."""
    from rich.text import Text

    return Text(visible(value), style=style)
