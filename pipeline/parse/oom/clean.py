"""Undo what logs and pastes do to an OOM message: ANSI colours, prefixes, JSON wrappers, escapes, wraps."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

# Real ESC sequences and their escaped spellings (`\x1b[31m`, `\u001b[0m`, `\033[1m`).
_ANSI = re.compile(
    r"(?:\x1b|\\x1[bB]|\\u001[bB]|\\033|\\e)\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[@-Z\\-_]?"
)

_TS = (
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\d{4}/\d{2}/\d{2}[ T-]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"
    r"|\d{2}/\d{2}/\d{4}-\d{2}:\d{2}:\d{2}"
    r"|[A-Z][a-z]{2}[ ]+\d{1,2}[ ]\d{2}:\d{2}:\d{2}(?:\.\d+)?"
    r"|\d{2}-\d{2}[ ]\d{2}:\d{2}:\d{2}(?:\.\d+)?"
    r"|\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"
)
_LEVEL = r"(?:CRITICAL|ERROR|WARNING|WARN|INFO|DEBUG|TRACE|FATAL|NOTICE)"

# The prefix tokens at the start of a log line, up to 12 of them; `strip_prefix` removes them.
_PREFIX = re.compile(
    rf"""(?:[ \t]*(?:
        \[(?:{_TS})[^\]\n]{{0,20}}\]:?          # [2026-11-30 01:49:09] or [02/15/2023-06:20:02]
      | (?:{_TS})(?=[\s:|\]-])                  # a bare timestamp
      | [IWEF]\d{{4}}[ ]\d{{2}}:\d{{2}}:\d{{2}}\.\d+[ ]+\d+[ ][\w./-]+:\d+\]   # glog
      | [IWEFD][ ][\w./-]+\.(?:cc|cpp|h|py|go):\d+\]           # TensorFlow after its timestamp
      | \d+\.\d{{2}}\.\d{{3}}\.\d{{3}}[ ][IWEDT](?=[ ])         # llama-server elapsed time + level
      | \[(?:{_LEVEL}|[IWEF])\]:?                # [ERROR], [E]
      | {_LEVEL}:(?:[\w.<>-]+:)?                # ERROR:root:
      | {_LEVEL}\b:?
      | \[[\w.@/-]{{1,40}}\]:?                     # [rank0]:, [gpu-a-7], [worker]
      | \[[\w.-]+:\d+\]                          # [core.py:330]
      | \[TRT\]:?|\[TensorRT(?:-LLM)?\](?:\[\w+\])?:?
      | \((?:[A-Za-z_]\w*)(?:[ ]\w+=[\w.-]+)+\)  # (VllmWorkerProcess pid=2421)
      | [\w.-]+[ ][\w./-]+\[\d+\]:               # host prog[pid]: (syslog, journald)
      | [\w.-]+[ ]+\|(?=[ ])                     # docker compose: service  |
      | [\w.-]+[ ]+-[ ](?={_LEVEL}\b)             # logging: name - LEVEL
      | [\w.]+:[\w.<>]+:\d+[ ]-(?=[ ])           # loguru: module:function:123 -
      | \d+(?=[ ]\[rank)                         # uniq -c count
    )(?:[ \t]*[|:-](?=[ ]))?){{1,12}}""",  # a separator only after a token: ": 16.00 GiB" is text
    re.VERBOSE,
)

_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # only these: a form feed or U+2028 inside a message is text
_ESCAPE = re.compile(r"\\(r\\n|[nrt\"'\\/])")
_ESCAPED = {"r\\n": "\n", "n": "\n", "r": "\n", "t": "\t", '"': '"', "'": "'", "\\": "\\", "/": "/"}
_JSON_TEXT_KEYS = ("msg", "message", "error", "err", "exception", "detail", "log", "text")
_OOMISH = re.compile(r"(?i:out\s*of\s*memory|OOM|exhausted|alloc|KV\s*cache|cache\s*blocks)")


def strip_ansi(text: str) -> str:
    """`text` without ANSI escape sequences, real or escaped."""
    if "\x1b" not in text and "\\" not in text:
        return text
    return _ANSI.sub("", text)


def strip_prefix(line: str) -> str:
    """`line` without leading log prefixes (timestamps, levels, `[rank0]:`, `host prog[pid]:`)."""
    match = _PREFIX.match(line)
    return line[match.end() :].lstrip() if match else line


def _strings(value: object, depth: int = 0) -> Iterator[str]:
    """Every string inside a decoded JSON value, preferred keys first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict) and depth < 8:
        keys = sorted(value, key=lambda k: (k not in _JSON_TEXT_KEYS, 0))
        for key in keys:
            yield from _strings(value[key], depth + 1)
    elif isinstance(value, list) and depth < 8:
        for item in value:
            yield from _strings(item, depth + 1)


def json_text(text: str) -> str | None:
    """The OOM-looking string inside `text` when `text` is a JSON document; None otherwise."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[" or stripped[-1] not in "}]":
        return None
    try:
        decoded = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    for candidate in _strings(decoded):
        if _OOMISH.search(candidate):
            return candidate
    return None


def unescape(text: str) -> str:
    r"""`text` with `\n`, `\t`, `\"` written out as escapes turned back into characters."""
    if "\\" not in text:
        return text
    return _ESCAPE.sub(lambda m: _ESCAPED[m.group(1)], text)


def _clean_lines(text: str, depth: int) -> Iterator[tuple[int, str]]:
    """The width of each line of `text` as it stood (colour codes and prefix included) and its content,
    prefixes removed and JSON wrappers opened."""
    for raw in _LINE_BREAK.split(text):
        line = strip_prefix(strip_ansi(raw))
        inner = json_text(line) if depth < 2 else None
        if inner is not None:
            yield from _clean_lines(strip_ansi(inner), depth + 1)
        elif "\\" in line and depth < 3 and (escaped := unescape(line)) != line:
            yield from _clean_lines(escaped, depth + 1)
        else:
            yield len(raw), line


# A sentence ends at the end of the line: what follows starts another one, even in lines of one width.
_SENTENCE_END = ".;:,!?)"
# A size at the end of a line: in a message a size is never glued to the word after it, so a line that ends
# in one and a next line that starts with a letter are two rows (`Device limit : 15.70 GiB` / `Free ...`).
_SIZE_END = re.compile(r"\d\s*(?:[KMGTP]i?B|bytes?)$")


def _separator(before: tuple[int, str] | None, line: tuple[int, str], after: tuple[int, str]) -> str:
    """What goes between `line` and the `after` it continues on (`before` is the line before it).

    Nothing where whitespace is already there, or where a fixed-width wrap cut the text anywhere (a word, a
    number): a line as wide as the one before or after it, and not narrower than the next, is a terminal's or
    a mail client's hard wrap, and so is the widest line cut inside a word. Otherwise one space: the lines were
    the message's own sentences, clauses or rows, which a line break separated ("(out of memory)" /
    "Currently allocated").
    """
    (width, text), (next_width, next_text) = line, after
    if text[-1].isspace() or next_text[0].isspace():
        return ""
    if width >= next_width and (width == next_width or (before is not None and width == before[0])):
        starts_sentence = text[-1] in _SENTENCE_END and next_text[0].isupper()
        starts_row = next_text[0].isalpha() and _SIZE_END.search(text) is not None
        return " " if starts_sentence or starts_row else ""
    inside_word = (text[-1].isalnum() or text[-1] == "_") and (next_text[0].islower() or next_text[0].isdigit())
    return "" if width > next_width and inside_word else " "


def join_lines(lines: list[tuple[int, str]]) -> str:
    """The non-blank lines (width as written, content) as one text, each break healed or made a space.

    What goes between two lines depends only on them and the line before, so the text of some first lines is
    the start of the text of more (`textlog` compares the two).
    """
    kept = [item for item in lines if item[1].strip()]
    parts = []
    for index, item in enumerate(kept):
        if index:
            parts.append(_separator(kept[index - 2] if index > 1 else None, kept[index - 1], item))
        parts.append(item[1])
    return "".join(parts)


def clean_message_text(text: str) -> str:
    """One string a format pattern can match: lines joined as `join_lines` says, so mid-word wraps heal."""
    if "\n" not in text and "\r" not in text and "\x1b" not in text and "\\" not in text:
        line = strip_prefix(text)  # the common case, a single log line: no need to split or unescape
        if not line.startswith(("{", "[")):
            return line.strip()
    whole = json_text(strip_ansi(text)) if "\n" in text else None  # pretty-printed JSON spans lines
    if whole is not None:
        text = strip_ansi(whole)
    return join_lines(list(_clean_lines(text, 0))).strip()
