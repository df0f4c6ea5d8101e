"""Prose that names an out-of-memory error without being one: a runbook's `Error message "RuntimeError: CUDA out of
memory." is displayed in logs`, an issue's "it still reports `CUDA out of memory`", a Markdown table documenting
`cudaErrorMemoryAllocation`, a template's `Tried to allocate XXX.XX GiB`. Only a message that states no number is
judged: one with numbers is a real failure wherever it was pasted (tests/cases/realworld/pasted_text/ 013, 022,
023, 024)."""

from __future__ import annotations

import re

# Where an out-of-memory error's name starts in a line, in any framework's wording.
_ERROR_WORDS = re.compile(
    r"out of (?:the )?memory|OutOfMemory|OUT_OF_MEMORY|MemoryAllocation|ALLOC_FAILED|failed to allocate"
    r"|Resource exhausted",
    re.IGNORECASE,
)
# A lower-case word and a space (or a CJK character), then an opening quote or backtick, then at most an
# exception's name and a device word before the error's words: prose quoting the error. A log's own quoting
# follows a key (`"msg": "`), a bracket or a level (`ERROR "`), never a sentence's word.
_QUOTED_IN_PROSE = re.compile(
    r"(?:\b[a-z][\w]*[,;)]?\s+|[\u3040-\u9fff\uac00-\ud7af]\s*)[`\"'\u201c\u2018\u300c]\s*(?:[\w.]+:\s*)?"
    r"(?:[A-Za-z]{2,6}\s+)?$"
)
# A Markdown table's row: `| name | value | description |`.
_TABLE_ROW = re.compile(r"^\s*\|(?:[^|]*\|){2,}\s*$")
# A size left as a placeholder: `XXX.XX GiB`, `XX MiB`.
_PLACEHOLDER = re.compile(r"\bX+(?:\.X+)?\s*[KMGT]i?B\b")


def mentions_only(line: str) -> bool:
    """Whether a line that names an out-of-memory error (with no number) only mentions it."""
    if _TABLE_ROW.match(line) or _PLACEHOLDER.search(line):
        return True
    found = _ERROR_WORDS.search(line)
    return found is not None and _QUOTED_IN_PROSE.search(line[: found.start()]) is not None
