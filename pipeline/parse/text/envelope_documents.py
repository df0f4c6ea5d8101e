"""JSON documents of log stores, pretty or not, one after another (parse/text/envelope.py): a Loki answer, an
Elasticsearch or OpenSearch answer, CloudWatch's events, a Cloud Logging array, `journalctl -o json-pretty`. Read
with a console's liberties (Kibana's triple-quoted strings, an elided `...` line, a document a paste cut short,
prose before it), each entry at the line its message stands on."""

from __future__ import annotations

import json
import re
from typing import Any

from ...records import Reject
from .envelope_record import Entry, entry_of, records_in

# Kibana's console writes a string holding quotes or newlines between triple quotes.
_TRIPLE = re.compile(r'"""(.*?)"""', re.S)
# A line standing for what the poster left out (`...`, `…`), inside a document.
_ELIDED = re.compile(r"^[ \t]*(?:\.{3}|…),?[ \t]*$", re.M)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
DOC_START = re.compile(r"^[ \t]*`?[{\[]", re.M)


def read_documents(text: str) -> tuple[list[Entry], list[Reject]]:
    """The records of JSON documents standing one after another in `text` (prose or a prompt before them is
    passed over), each entry at the line its message stands on."""
    cleaned = _tolerated(text)
    decoder = json.JSONDecoder()
    entries: list[Entry] = []
    rejects: list[Reject] = []
    finder = _MessageLines(text)
    start = DOC_START.search(cleaned)
    while start is not None:
        position = cleaned.index(start.group().strip().lstrip("`")[0], start.start())
        try:
            value, end = decoder.raw_decode(cleaned, position)
        except ValueError as exc:
            value, end = _cut_short(cleaned, position), len(cleaned)
            if value is None:
                rejects.append(Reject(cleaned.count("\n", 0, position) + 1, f"not a JSON document: {exc}", ""))
                newline = cleaned.find("\n", position)
                start = DOC_START.search(cleaned, newline + 1) if newline >= 0 else None
                continue
        for record, ts in records_in(value):
            entry = entry_of(record, 0, ts)
            entries.append(_at_line(entry, finder.line_of(entry.text)))
        start = DOC_START.search(cleaned, end)
    return entries, rejects


# A document cut short (a paste that stops mid-answer) is read up to its last whole value; the attempt is bounded.
_REPAIR_LIMIT_BYTES = 64 << 20
_REPAIR_TRIES = 64


def _cut_short(text: str, start: int) -> Any:
    """The document starting at `start` read up to its last whole value, its open brackets closed; None when it is
    not a document cut short (or too large to mend)."""
    if len(text) - start > _REPAIR_LIMIT_BYTES:
        return None
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []  # where a value ends, and the brackets open there
    in_string = escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                cuts.append((index + 1, "".join(stack)))
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append(char)
        elif char in "}]":
            if not stack:
                return None
            stack.pop()
            if not stack:
                return None  # the document closes: it is not cut short, but wrong
            cuts.append((index + 1, "".join(stack)))
    for end, open_brackets in reversed(cuts[-_REPAIR_TRIES:]):
        closers = "".join("}" if b == "{" else "]" for b in reversed(open_brackets))
        try:
            return json.loads(text[start:end].rstrip().rstrip(",") + closers)
        except ValueError:
            continue
    return None


def _tolerated(text: str) -> str:
    """The text with a console's liberties made JSON, each line kept where it was (triple-quoted strings become
    JSON strings, with their newlines escaped and the lines they spanned kept as blank lines)."""

    def quoted(match: re.Match[str]) -> str:
        inner = match.group(1)
        return json.dumps(inner) + "\n" * inner.count("\n")

    text = _TRIPLE.sub(quoted, text)
    text = _ELIDED.sub("", text)
    return _TRAILING_COMMA.sub(r"\1", text)


def _at_line(entry: Entry, line: int) -> Entry:
    return Entry(line, entry.ts, entry.text, entry.host, entry.pod, entry.namespace, entry.container, entry.stream)


_MESSAGE_KEY = re.compile(r'"(?:MESSAGE|log|message|textPayload|jsonPayload|line)"\s*:')


class _MessageLines:
    """Where each message stands in the original text, found in order: its start, as JSON writes it or as a
    console does, searched from where the previous one was found."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.cursor = 0

    def line_of(self, message: str | None) -> int:
        if message:
            head = message.split("\n", 1)[0][:40]
            for written in (json.dumps(head)[1:-1], json.dumps(head, ensure_ascii=False)[1:-1], head):
                found = self.text.find(written, self.cursor) if written else -1
                if found >= 0:
                    return self._found(found, len(written))
        key = _MESSAGE_KEY.search(self.text, self.cursor)  # bytes, or a payload without a message: its key
        return self._found(key.start(), len(key.group())) if key else self.text.count("\n", 0, self.cursor) + 1

    def _found(self, position: int, length: int) -> int:
        self.cursor = position + length
        return self.text.count("\n", 0, position) + 1
