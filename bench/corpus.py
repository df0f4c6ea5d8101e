"""Benchmark: how much of the real-world corpus (tests/cases/realworld/) oomlab reads right.

Every artifact there was copied verbatim from a public page (its case.json names the URL) with the facts it
must yield. Each is ingested alone, as `oomlab ingest` would, and compared with them. Prints per family the
artifacts that land with every fact right; for the OOM messages among them (every expected oom_events row
of every family), how many were detected (an event on the expected line, else the row in that position)
and how many of their stated fields are right; then the cases that miss, with what differs.

    python bench/corpus.py [--family F] [--quiet] [--root DIR]

Targets: >= 98 % of artifacts land right; of real OOM messages >= 98 % detected and >= 98 % of fields
right. Fails (exit 2) when the corpus is empty: nothing to measure.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb

from _common import REPO

sys.path.insert(0, str(REPO / "tests" / "ingest"))

from corpus import Case, cases, check_case, ingest_case

TARGETS = {"artifacts": 0.98, "detected": 0.98, "fields": 0.98}


def score_events(case: Case, con: duckdb.DuckDBPyConnection) -> tuple[int, int, int, int]:
    """(OOM messages expected, detected, fields stated, fields right) of one case."""
    expected = (case.spec.get("expect") or {}).get("oom_events") or []
    if not expected:
        return 0, 0, 0, 0
    rows = con.sql("SELECT * FROM oom_events ORDER BY line NULLS LAST, event_id").pl().to_dicts()
    by_line = {row["line"]: row for row in rows}
    detected = stated = right = 0
    for position, want in enumerate(expected):
        got = by_line.get(want["line"]) if "line" in want else (rows[position] if position < len(rows) else None)
        fields = {k: v for k, v in want.items() if k != "line"}
        stated += len(fields)
        if got is None:
            continue
        detected += 1
        right += sum(1 for k, v in fields.items() if _same(k, v, got))
    return len(expected), detected, stated, right


def _same(key: str, want: Any, got: dict[str, Any]) -> bool:
    from corpus import _check_value  # one comparison for the test and the bench

    return _check_value(key, want, got, set(got)) is None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", help="only this family (oom, telemetry, allocator, engine, ...)")
    parser.add_argument("--quiet", action="store_true", help="no list of misses")
    parser.add_argument(
        "--root", type=Path, default=None, help="another folder of cases laid out the same way (a held-out set)"
    )
    args = parser.parse_args(argv)
    found = cases(args.root) if args.root else cases()
    chosen = [c for c in found if args.family in (None, c.name.split("/")[0])]
    if not chosen:
        print("corpus: no case to measure", file=sys.stderr)
        return 2
    landed: Counter[str] = Counter()
    total: Counter[str] = Counter()
    events = [0, 0, 0, 0]
    misses: list[tuple[str, list[str]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for number, case in enumerate(chosen):
            con = ingest_case(case, Path(tmp) / f"case{number}.duckdb")
            try:
                problems = check_case(case, con)
                events = [a + b for a, b in zip(events, score_events(case, con), strict=True)]
            finally:
                con.close()
            family = case.name.split("/")[0]
            total[family] += 1
            landed[family] += not problems
            if problems:
                misses.append((case.name, problems))
    print(f"{'family':<12} {'artifacts':>9} {'right':>6} {'share':>6}")
    for family in sorted(total):
        print(f"{family:<12} {total[family]:>9} {landed[family]:>6} {landed[family] / total[family]:>6.1%}")
    share = sum(landed.values()) / sum(total.values())
    expected, detected, stated, right = events
    if not args.quiet:
        for name, problems in misses:
            print(f"  miss {name}: {'; '.join(problems)[:300]}")
    print(f"targets: artifacts >= {TARGETS['artifacts']:.0%}, OOM messages detected >= {TARGETS['detected']:.0%}")
    print(f"         and fields right >= {TARGETS['fields']:.0%}")
    detected_share = detected / expected if expected else float("nan")
    fields_share = right / stated if stated else float("nan")
    print(
        f"corpus: {sum(landed.values())} of {sum(total.values())} artifacts right ({share:.1%}); "
        f"OOM messages {detected} of {expected} detected ({detected_share:.1%}), "
        f"fields {right} of {stated} right ({fields_share:.1%})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
