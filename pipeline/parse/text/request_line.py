"""The request an OOM message in a text log failed: the line a service logs about it just before the traceback
(`req-27 failed status=500 model=chat-7b batch=16 prompt_tokens=5168 max_new_tokens=95`, or the same as JSON).

A log that states no memory levels still says what the failing request was: its model and its size. With them an
OOM seen only in a text log can be judged as one in a request log is: would this request have fit on the model's
healthy baseline on this card? The keys are the request log's field names and their aliases (`fields.FIELDS`), so
a name that works in a request log works here.
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
_SIZES = frozenset({"batch_size", "input_sequence_length", "output_sequence_length"})
_NAMES: dict[str, str] = {
    normalise_name(alias): f.name for f in FIELDS if f.name in CONTEXT_FIELDS for alias in (f.name, *f.aliases)
}
_STATUS_NAMES = frozenset(normalise_name(a) for f in FIELDS if f.name == "status" for a in (f.name, *f.aliases))
# `key=value` (logfmt, quoted or bare) and `"key": value` (JSON): a key starts a word, so `x_batch=` is not `batch=`
_PAIR = re.compile(
    r"""(?<![\w.])(?P<key>[A-Za-z_][\w.]*)=(?:"(?P<quoted>[^"]*)"|(?P<bare>[^\s,;"]+))"""
    r"""|"(?P<jkey>[A-Za-z_][\w.]*)"\s*:\s*(?:"(?P<jstring>[^"\\]*)"|(?P<jnumber>-?\d+))"""
)
# A status that says the request succeeded: that line is about another request, not the one that failed.
_SUCCESS = re.compile(r"^(?:2\d\d|ok|success|succeeded|done|completed?|finished)$", re.IGNORECASE)
_INT = re.compile(r"^\d{1,9}$")  # a size a request can have: 9 digits are a billion tokens


def request_fields(line: str) -> dict[str, str] | None:
    """The request a line describes (canonical field -> value as written); None when the line is no request
    line (it states none of a request's sizes); empty when it is one about a request that succeeded (a line
    about another request: the failing one logged none before its traceback)."""
    found: dict[str, str] = {}
    for match in _PAIR.finditer(line):
        key = normalise_name(match.group("key") or match.group("jkey"))
        value = next(v for v in match.group("quoted", "bare", "jstring", "jnumber") if v is not None)
        if key in _STATUS_NAMES and _SUCCESS.match(value.strip()):
            return {}
        name = _NAMES.get(key)
        if name is None or name in found:
            continue
        if name in _SIZES and not _INT.match(value):
            continue
        found[name] = value
    return found if _SIZES & found.keys() else None
