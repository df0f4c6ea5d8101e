"""The format registry (parse/formats.py, issue 38): every format is read from real artifacts, and the registry is
the one place that names formats.

A format's real cases are the artifacts of tests/cases/realworld/ (each copied from the URL its case.json names)
and the real H200 captures of tests/data/h200/ that are of it as whole files, and, for a format that has a
`block`, the text artifacts a block of it is found in. Each needs three, one of them inside text when it has a
block.
"""

from __future__ import annotations

from collections import Counter
from functools import cache

import pytest
from corpus import cases

from oomlab.errors import EmptyInputError
from oomlab.parse import formats
from oomlab.parse.compression import open_binary
from oomlab.parse.detect import detect_kind
from oomlab.parse.telemetry.blocks import find_blocks

from conftest import H200

# Formats no public artifact shows as a file of its own, and why: they are covered by rows derived from the real
# captures instead (the tests named).
_DERIVED = "tests/ingest/test_ingest_requests.py::test_formats_and_compressions_load_the_same_rows"
NO_PUBLIC_ARTIFACT = {
    formats.PARQUET: f"the real H200 request logs written as Parquet stand for it ({_DERIVED})",
    formats.CALENDAR: "oomlab's own file of scheduled jobs (docs/schema.md, calendar_rules): no one else writes it",
}
MIN_CASES = 3


@cache
def real_cases() -> tuple[Counter[str], Counter[str]]:
    """Per format: the real artifacts that are files of it, and the text artifacts a block of it is found in."""
    whole: Counter[str] = Counter()
    inside: Counter[str] = Counter()
    captures = sorted(p for p in H200.rglob("*") if p.is_file() and p.name != "README.md")
    for path in [case.artifact for case in cases()] + captures:
        try:
            kind = detect_kind(path)
        except EmptyInputError:  # big_trace_cpp's message file: that run had no OOM
            continue
        whole[kind] += 1
        if kind == formats.TEXT:
            with open_binary(path) as handle:
                text = handle.read(4 << 20).decode("utf-8", errors="replace")
            inside.update({found.kind for found in find_blocks(text.splitlines(), formats.BLOCKS)})
    return whole, inside


@pytest.mark.parametrize("fmt", formats.FORMATS, ids=lambda f: f.name)
def test_every_format_is_read_from_real_artifacts(fmt: formats.Format) -> None:
    if fmt.name in NO_PUBLIC_ARTIFACT:
        pytest.skip(NO_PUBLIC_ARTIFACT[fmt.name])
    whole, inside = real_cases()
    found = f"{fmt.name}: {whole[fmt.name]} files, {inside[fmt.name]} pasted"
    assert whole[fmt.name] + inside[fmt.name] >= MIN_CASES, found
    if fmt.block is not None:
        assert inside[fmt.name] >= 1, f"{fmt.name} is found inside text, and no real text holds one"
