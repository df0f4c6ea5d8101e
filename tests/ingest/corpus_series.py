"""The series a Prometheus API answer, a VictoriaMetrics export or timestamped exposition text holds, as oomlab
reads them (parse/telemetry/series.py, prom.py): the `series` expectations of tests/cases/realworld/prom_api/
(checked by corpus.check_case). Whole files are read by their format's reader; text where the text-log scan reads
it, in the blocks it finds."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from oomlab.parse import formats
from oomlab.parse.detect import detect_kind
from oomlab.parse.telemetry.blocks import block_at
from oomlab.parse.telemetry.prom import Sample, parse_sample
from oomlab.parse.telemetry.series import Series, read_api_answer, read_vm_export, text_series

if TYPE_CHECKING:
    from corpus import Case

_JSON_KINDS = (formats.BY_NAME["prometheus_api"], formats.BY_NAME["victoriametrics_export"])


def check_series(case: Case, expected: list[dict[str, Any]]) -> list[str]:
    """How the series read from the case's artifact differ from those it states (empty: none)."""
    try:
        got = {(s.name, tuple(sorted(s.labels.items()))): s for s in _series_of(case)}
    except AssertionError as exc:
        return [str(exc)]
    problems = []
    for want in expected:
        key = (want["metric"], tuple(sorted(want["labels"].items())))
        series = got.get(key)
        if series is None:
            problems.append(f"{want['metric']}{want['labels']} not read")
            continue
        if len(series.values) != want["samples"]:
            problems.append(f"{want['metric']}: {len(series.values)} samples, expected {want['samples']}")
            continue
        for end, index in (("first", 0), ("last", -1)):
            when, value = want[end]
            moment = datetime.fromtimestamp(series.ts_ms[index] / 1000, UTC).replace(tzinfo=None)
            if when is not None and moment.isoformat(timespec="milliseconds") != when:
                problems.append(f"{want['metric']} {end}: at {moment.isoformat()}, expected {when}")
            if not _same(series.values[index], value):
                problems.append(f"{want['metric']} {end}: {series.values[index]}, expected {value}")
    return problems


def _series_of(case: Case) -> list[Series]:
    """The series oomlab reads from the case's artifact, wherever they stand."""
    path = case.artifact
    text = path.read_text(encoding="utf-8")
    kind = detect_kind(path)
    if kind == "prometheus_api":
        series, rejects = read_api_answer(text)
        assert rejects == [], rejects
        return series
    if kind == "victoriametrics_export":
        return [s for s in read_vm_export(text.splitlines()) if isinstance(s, Series)]
    if case.spec["kind"] == "openmetrics_ts":
        return _exposition_series(text.splitlines())
    return _block_series(text.splitlines())


def _block_series(lines: list[str]) -> list[Series]:
    """The series of the API answers and exports the text-log scan finds as blocks."""
    found: list[Series] = []
    index = 0
    while index < len(lines):
        hit = block_at(lines, index, _JSON_KINDS)
        if hit is None:
            index += 1
            continue
        block, _ = hit
        series, rejects = text_series(block.lines, block.first)
        assert rejects == [], rejects
        found += series
        index = block.first - 1 + len(block.lines)
    assert found, "no API answer or export block found in the text"
    return found


def _exposition_series(lines: list[str]) -> list[Series]:
    """The exposition samples of the text (wherever indented), grouped into series."""
    grouped: dict[tuple, list[Sample]] = defaultdict(list)
    for number, line in enumerate(lines, start=1):
        sample = parse_sample(number, line.strip()) if line.strip() and not line.strip().startswith("#") else None
        if isinstance(sample, Sample):
            grouped[(sample.name, tuple(sorted(sample.labels.items())))].append(sample)
    return [
        Series(
            name,
            dict(labels),
            np.array([round((s.ts - datetime(1970, 1, 1)).total_seconds() * 1000) if s.ts else 0 for s in found]),
            np.array([s.value for s in found]),
        )
        for (name, labels), found in grouped.items()
    ]


def _same(got: float, want: float | str) -> bool:
    if want == "NaN":
        return bool(np.isnan(got))
    if want in ("+Inf", "-Inf"):
        return got == float(want)
    return abs(got - float(want)) <= 1e-9 * max(1.0, abs(float(want)))
