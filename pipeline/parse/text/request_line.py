"""Request lines in a text log: the line a service logs about each request (`req-27 failed status=500
model=chat-7b batch=16 prompt_tokens=5168 max_new_tokens=95`, `req-28 done status=200 ...`, or the same as JSON).

A log that states no memory levels still says what its requests were: their model, their size, how they ended. The
one just before an OOM's traceback is the request that failed (`request_fields`): with it an OOM seen only in a
text log can be judged as one in a request log is, would this request have fit on the model's healthy baseline on
this card? All of them (`RequestScanner`) say what the device served, and how large. The keys are the request
log's field names and their aliases (`fields.FIELDS`), so a name that works in a request log works here.
"""

from __future__ import annotations

import re

from ...fields import FIELDS, normalise_name

# What a request line may say of the request; sizes and names only (its time is the message's own).
CONTEXT_FIELDS: tuple[str, ...] = (
    "model_version",
    "request_id",
    "batch_size",
    "input_sequence_length",
    "output_sequence_length",
)
SIZES = frozenset({"batch_size", "input_sequence_length", "output_sequence_length"})
# Everything a request line is read for: the request, how it ended, how long it took.
READ_FIELDS: tuple[str, ...] = (*CONTEXT_FIELDS, "status", "latency_ms")
# every key a request line is read by (normalised) -> its field
FIELD_OF = {normalise_name(a): f.name for f in FIELDS if f.name in READ_FIELDS for a in (f.name, *f.aliases)}
# `key=value` (logfmt, quoted or bare) and `"key": value` (JSON): a key starts a word, so `x_batch=` is not `batch=`
_PAIR = re.compile(
    r"""(?<![\w.])(?P<key>[A-Za-z_][\w.]*)=(?:"(?P<quoted>[^"]*)"|(?P<bare>[^\s,;"]+))"""
    r"""|"(?P<jkey>[A-Za-z_][\w.]*)"\s*:\s*(?:"(?P<jstring>[^"\\]*)"|(?P<jnumber>-?[0-9]+))"""
)
# A status that says the request succeeded: that line is about another request, not the one that failed.
SUCCESS_PATTERN = r"(?i)^(?:2[0-9][0-9]|ok|success|succeeded|done|completed?|finished)$"  # Python's and Rust's
_SUCCESS = re.compile(SUCCESS_PATTERN)
# The values a field must have to be read (Python's and Rust's patterns): a size a request can have, 9 digits being
# a billion tokens; milliseconds as a log writes them, no sign, no exponent.
VALUE_PATTERNS = {**dict.fromkeys(SIZES, r"^[0-9]{1,9}$"), "latency_ms": r"^[0-9]{1,12}(?:\.[0-9]{1,9})?$"}
_VALUES = {name: re.compile(pattern) for name, pattern in VALUE_PATTERNS.items()}
# The lines that may say how a request ended: they name a status as a key (`status=`, `"status":`, or an alias);
# `RequestScanner` keeps those that state a size too. A status, not a size, marks them: a log's lines that only
# mention tokens (throughput reports, a request "finished" with no outcome) are many and say nothing of success.
STATUS_KEYS = tuple(
    dict.fromkeys(
        spelling
        for f in FIELDS
        if f.name == "status"
        for alias in (f.name, *f.aliases)
        for spelling in (alias, normalise_name(alias))
    )
)


def request_fields(line: str) -> dict[str, str] | None:
    """The request a line describes (canonical field -> value as written, of CONTEXT_FIELDS); None when the line
    is no request line (it states none of a request's sizes); empty when it is one about a request that succeeded
    (a line about another request: the failing one logged none before its traceback)."""
    found = _stated(line)
    if succeeded(found.get("status")):
        return {}  # a line that says a request succeeded, with or without its size
    if not SIZES & found.keys():
        return None
    return {name: value for name, value in found.items() if name in CONTEXT_FIELDS}


def logged_request(line: str) -> dict[str, str] | None:
    """Everything a request line states (canonical field -> value as written): CONTEXT_FIELDS, `status` and
    `latency_ms`, the first of each; None when the line states none of a request's sizes."""
    found = _stated(line)
    return found if SIZES & found.keys() else None


def _stated(line: str) -> dict[str, str]:
    """The request fields a line states (`logged_request`), sizes or not."""
    found: dict[str, str] = {}
    # findall's tuples, not match objects: a log that writes a line per request has millions of them
    for key, quoted, bare, jkey, jstring, jnumber in _PAIR.findall(line):
        name = FIELD_OF.get(normalise_name(key or jkey))
        if name is None or name in found:
            continue
        value = quoted or bare or jstring or jnumber  # one alternative matched: the others are ""
        pattern = _VALUES.get(name)
        if pattern is not None and not pattern.match(value):
            continue
        found[name] = value.strip() if name == "status" else value
    return found


def succeeded(status: str | None) -> bool:
    """Does a request line's status say the request succeeded? (No status says nothing: False.)"""
    return status is not None and _SUCCESS.match(status) is not None
