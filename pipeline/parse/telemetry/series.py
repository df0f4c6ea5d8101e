"""Prometheus series as stores answer them: the HTTP API's `query_range` and `query` answers (what `curl`,
`oomlab pull prometheus` and Grafana's "Inspect > Data" get) and VictoriaMetrics' `/api/v1/export` JSON lines.

An API answer is `{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {labels},
"values": [[<unix seconds>, "<value>"], ...]}]}}` (`"vector"`: one `"value"` pair per series; prometheus
`web/api/v1/api.go`); a VictoriaMetrics export line is `{"metric": {...}, "values": [...], "timestamps":
[<unix ms>, ...]}` (VictoriaMetrics `app/vmselect/prometheus/export.qtpl`). Both become Series: one metric's
labels and its samples as arrays, which `series_rows.py` sorts into the telemetry tables as a scrape's samples
are (`scrape.py`), column by column.

numpy is imported by the readers, not here: recognising a file must not load it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ...records import Reject

if TYPE_CHECKING:
    import numpy as np

PROM_API = "prometheus_api"  # a query_range / query answer saved to a file
VM_EXPORT = "victoriametrics_export"
_RAW_LIMIT = 2000
_ANSWER = re.compile(r'^\{.{0,400}?"(?:status|data)"\s*:', re.S)
_RESULT_TYPE = re.compile(r'"resultType"\s*:\s*"(matrix|vector)"')
_EXPORT_LINE = re.compile(r'^\{"metric"\s*:\s*\{.*"values"\s*:\s*\[.*"timestamps"\s*:\s*\[')


@dataclass(frozen=True)
class Series:
    """One series: its metric name, its other labels, and its samples (unix milliseconds, values) in time order;
    `line` is where it stands in its file (None when it came over the network)."""

    name: str
    labels: dict[str, str]
    ts_ms: np.ndarray  # int64
    values: np.ndarray  # float64
    line: int | None = None


def looks_like_api_answer(text: str) -> bool:
    """A Prometheus API answer with a matrix or vector result (Loki's metric queries answer the same shape)."""
    return _ANSWER.match(text) is not None and _RESULT_TYPE.search(text[: 1 << 16]) is not None


def looks_like_vm_export(text: str) -> bool:
    """VictoriaMetrics export: its first line is one series with `values` and `timestamps`."""
    return _EXPORT_LINE.match(text.split("\n", 1)[0]) is not None


def answer_series(doc: Any) -> list[Series]:
    """The series of one decoded API answer; raises ValueError with the server's own words for an error answer
    or a shape that is not one (a `scalar` or `string` result names no series)."""
    if not isinstance(doc, dict):
        raise ValueError("not a Prometheus API answer: expected a JSON object")
    if doc.get("status") == "error":
        raise ValueError(f"the answer is an error: {doc.get('errorType', '')}: {doc.get('error', '')}".strip())
    data = doc.get("data")
    if not isinstance(data, dict) or data.get("resultType") not in ("matrix", "vector"):
        kind = data.get("resultType") if isinstance(data, dict) else None
        raise ValueError(f"not a matrix or vector answer (resultType {kind!r}): no series to read")
    found = []
    for item in data.get("result") or []:
        pairs = item.get("values") if "values" in item else [item.get("value")]
        found.append(_series(item.get("metric") or {}, pairs))
    return found


def _series(metric: dict[str, str], pairs: list[Any]) -> Series:
    """One result item: [[seconds, "value"], ...] as arrays (values are strings: `"NaN"`, `"+Inf"` included)."""
    import numpy as np

    pairs = [p for p in pairs if p]
    seconds = np.fromiter((p[0] for p in pairs), np.float64, len(pairs))
    values = np.array([p[1] for p in pairs], dtype=np.float64) if pairs else np.empty(0)
    ts_ms = np.rint(seconds * 1000).astype(np.int64)  # the API writes milliseconds as seconds with 3 decimals
    labels = {k: v for k, v in metric.items() if k != "__name__"}
    return Series(metric.get("__name__", ""), labels, ts_ms, values)


def read_api_answer(text: str) -> tuple[list[Series], list[Reject]]:
    """The series of a file holding an API answer (pretty-printed or not), each at the line its `metric` object
    starts on; what is not one is a reject saying why (text_series), and so is text after it."""
    found, rejects = text_series(text.split("\n"), 1)
    if found and not rejects:  # the answer alone: text after it is not read, and is said so
        tail = text[text.rindex("}") + 1 :].strip()
        if tail:
            line = text.count("\n", 0, text.rindex("}")) + 1
            rejects = [Reject(line, "text after the Prometheus answer, not read", tail[:_RAW_LIMIT])]
    return found, rejects


def _at_line(series: Series, line: int) -> Series:
    return replace(series, line=line)


def read_vm_export(lines: Iterable[str]) -> Iterator[Series | Reject]:
    """VictoriaMetrics export JSON lines: a Series per line, a Reject for a line that is not one."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield _at_line(_export_series(json.loads(line)), number)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            yield Reject(number, f"not a VictoriaMetrics export line: {exc}", line[:_RAW_LIMIT])


# -- as blocks inside text (a `curl ... | jq` in a runbook, an answer pasted in an issue) --------------------------

# A line of a JSON document as printed, pretty or not: it starts with a bracket, a quote, a number or a comma.
_JSON_LINE = re.compile(r'^\s*`?[{}\[\]",\d-]')


def starts_api_block(lines: list[str] | tuple[str, ...]) -> bool:
    """An API answer starts at lines[0]: an object whose first lines name its `status` or `resultType`."""
    head = "\n".join(lines)
    return lines[0].lstrip().lstrip("`").startswith("{") and (
        '"resultType"' in head or re.search(r'^\{\s*"status"', head) is not None
    )


def starts_export_block(lines: list[str] | tuple[str, ...]) -> bool:
    """A VictoriaMetrics export starts at lines[0]: one per line, or one object spread over lines by `jq`."""
    first = lines[0].strip().strip("`")  # inline code in prose: `{"metric": ...}`
    return looks_like_vm_export(first) or (first == "{" and len(lines) > 1 and lines[1].strip().startswith('"metric"'))


def json_line(line: str) -> bool:
    """A line of a JSON document as printed."""
    return _JSON_LINE.match(line) is not None


def text_series(lines: list[str], first: int) -> tuple[list[Series], list[Reject]]:
    """The series of the JSON documents (API answers or export objects) one after another in `lines`, numbered
    from `first` as in the file: each series at the line its `metric` key stands on."""
    text = "\n".join(lines)
    decoder = json.JSONDecoder()
    found: list[Series] = []
    line, counted = first, 0  # the line of text[counted]: newlines are counted once, as the positions advance
    position = text.find("{")
    while 0 <= position < len(text):
        try:
            doc, end = decoder.raw_decode(text, position)
            items = answer_series(doc) if "data" in doc or "status" in doc else [_export_series(doc)]
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
            line += text.count("\n", counted, position)
            reason = f"not a readable Prometheus answer or export: {exc}"
            return found, [Reject(line, reason, text[position : position + _RAW_LIMIT])]
        keys = [m.start() for m in re.finditer(r'"metric"\s*:', text[position:end])]
        for index, item in enumerate(items):
            at = position + (keys[index] if index < len(keys) else 0)
            line, counted = line + text.count("\n", counted, at), at
            found.append(_at_line(item, line))
        position = text.find("{", end)
    return found, []


def _export_series(doc: dict[str, Any]) -> Series:
    """One VictoriaMetrics export object."""
    import numpy as np

    metric, values, stamps = doc["metric"], doc["values"], doc["timestamps"]
    if len(values) != len(stamps):
        raise ValueError(f"{len(values)} values against {len(stamps)} timestamps")
    vals = np.array([float(v) if v is not None else np.nan for v in values], dtype=np.float64)
    labels = {k: v for k, v in metric.items() if k != "__name__"}
    return Series(metric.get("__name__", ""), labels, np.array(stamps, dtype=np.int64), vals)
