"""A rendered report: its data document (for --json and automation) and its HTML page."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..assets import write_atomic
from .figures import plain


@dataclass(frozen=True)
class Report:
    """What `oomlab report` writes."""

    doc: dict[str, Any]
    html: str

    def json_text(self) -> str:
        """The document as stable JSON (sorted keys, ISO times, no NaN)."""
        return json.dumps(plain(self.doc), sort_keys=True, indent=2, allow_nan=False) + "\n"

    def write(self, html_path: str | Path, json_path: str | Path | None = None) -> list[Path]:
        """Write the page and, when asked, the JSON; returns the paths written."""
        written = [_write(html_path, self.html)]
        if json_path is not None:
            written.append(_write(json_path, self.json_text()))
        return written


def _write(path: str | Path, text: str) -> Path:
    return write_atomic(path, text)
