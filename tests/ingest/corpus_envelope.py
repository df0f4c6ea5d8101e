"""The entries a log store's or shipper's envelope holds, as oomlab reads them (parse/text/envelope.py): the
`entries` expectations of tests/cases/realworld/envelope/ (checked by corpus.check_case): each stated entry, at its
line and with the start of its message, has its time, host, pod, namespace, container and stream."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oomlab.parse.text.envelope import envelope_layout, read_envelope

if TYPE_CHECKING:
    from corpus import Case

_FIELDS = ("host", "pod", "namespace", "container", "stream")


def check_entries(case: Case, expected: list[dict[str, Any]]) -> list[str]:
    """How the entries read from the case's artifact differ from those it states (empty: none)."""
    text = case.artifact.read_text(encoding="utf-8")
    layout = envelope_layout(text[: 64 * 1024])
    if layout is None:
        return ["not read as an envelope"]
    entries, _ = read_envelope(text, layout)
    problems = []
    for want in expected:
        start = want.get("message_starts")
        here = [e for e in entries if e.line == want["line"] and (start is None or (e.text or "").startswith(start))]
        if not here:
            near = [(e.line, (e.text or "")[:30]) for e in entries if abs(e.line - want["line"]) <= 3]
            problems.append(f"line {want['line']}: no entry starting {start!r} (near: {near})")
            continue
        got = here[0]
        when = None if got.ts is None else got.ts.isoformat(timespec="microseconds")
        if want.get("ts") is not None and (when is None or not when.startswith(want["ts"])):
            problems.append(f"line {want['line']}: ts {when}, expected {want['ts']}")
        for field in _FIELDS:
            if getattr(got, field) != want.get(field):
                problems.append(f"line {want['line']}: {field} {getattr(got, field)!r}, expected {want.get(field)!r}")
    return problems
