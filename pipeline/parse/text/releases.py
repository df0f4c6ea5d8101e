"""When each vLLM version came out, for the year of a log's lines that state none (`logline.LineClock`): a log of
a vLLM run cannot be older than the vLLM it runs, and vLLM states its version when it starts (`vLLM API server
version 0.4.1`, `Initializing an LLM engine (v0.4.1) with config: ...`).

The dates come from vLLM's own history, https://github.com/vllm-project/vllm (its main branch, read commit by
commit): each is the date of the commit that set `__version__` (`vllm/__init__.py`, from 0.5.0 `vllm/version.py`)
to that version, the pull request named beside it (https://github.com/vllm-project/vllm/pull/4177 "Bump version
of 0.4.1"). A release is built from that commit, so no copy of the version ran before it (the maintainers even
reverted an early bump "until the actual release is created", https://github.com/vllm-project/vllm/pull/3708);
the release itself reached PyPI the same day or a few days later, so a date here is a bound, never later than the
release. A date is the commit's own calendar date (the earlier of its author's and committer's, each in its own
zone). From 0.6.2 on vLLM takes its version from its git tags (setuptools-scm, pull 4738) and no commit states it:
those releases are not listed. A version that is not listed is bounded by the latest listed before it of the same
minor version (0.6.3 by 0.6.1.post2), and not at all past the last listed minor (0.7 on): a bound months or years
too early would put the log's lines in the earliest year after it, worse than no bound. SGLang is not listed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

# version: (the commit's date, the pull request that set it)
VLLM_VERSION_SET: dict[str, tuple[str, int]] = {
    "0.1.0": ("2023-06-17", 150),  # "Change the name to vLLM": the first __version__ under that name
    "0.1.1": ("2023-06-22", 204),
    "0.1.2": ("2023-07-04", 300),
    "0.1.3": ("2023-08-02", 657),
    "0.1.4": ("2023-08-25", 846),
    "0.1.5": ("2023-09-07", 944),
    "0.1.6": ("2023-09-08", 989),
    "0.1.7": ("2023-09-11", 1013),
    "0.2.0": ("2023-09-28", 1212),
    "0.2.1": ("2023-10-16", 1355),
    "0.2.2": ("2023-11-18", 1689),
    "0.2.3": ("2023-12-03", 1903),
    "0.2.4": ("2023-12-11", 2034),
    "0.2.5": ("2023-12-13", 2095),
    "0.2.6": ("2023-12-17", 2157),
    "0.2.7": ("2024-01-03", 2337),
    "0.3.0": ("2024-01-31", 2656),
    "0.3.1": ("2024-02-16", 2887),
    "0.3.2": ("2024-02-21", 2968),
    "0.3.3": ("2024-03-01", 3129),
    "0.4.0": ("2024-03-28", 3705),  # reverted the same day (3708), set again on 2024-03-29 (3712)
    "0.4.0.post1": ("2024-04-02", 3803),
    "0.4.1": ("2024-04-19", 4177),
    "0.4.2": ("2024-05-04", 4600),
    "0.4.3": ("2024-05-30", 5046),
    "0.5.0": ("2024-06-10", 5384),
    "0.5.0.post1": ("2024-06-13", 5522),
    "0.5.1": ("2024-07-05", 6157),
    "0.5.2": ("2024-07-15", 6433),
    "0.5.3": ("2024-07-23", 6674),
    "0.5.3.post1": ("2024-07-23", 6696),
    "0.5.4": ("2024-08-05", 7139),
    "0.5.5": ("2024-08-23", 7823),
    "0.6.0": ("2024-09-04", 8166),
    "0.6.1": ("2024-09-11", 8379),
    "0.6.1.post1": ("2024-09-12", 8440),
    "0.6.1.post2": ("2024-09-13", 8473),
}

# A version as vLLM prints it: 0.4.1, 0.6.3.post1, 0.10.1.1, 0.8.5.dev42+g1234abc, 0.9.0rc1, 0.4.0+cu118.
_VERSION = r"(\d{1,3}\.\d{1,3}(?:\.\d{1,4}){0,2}(?:\.?post\d{1,4})?(?:\.?(?:dev|rc|a|b)\d{0,6})?(?:\+[\w.]{1,80})?)"
_ANSI = r"(?:\x1b\[[\d;]{0,12}m)?"
# The lines where vLLM states its version: the API server's start (`vLLM API server version 0.4.1`), the engine's
# (`Initializing an LLM engine (v0.4.1) with config:`, `... a V1 LLM engine (v0.8.5) ...`, `... a V0 ...`), the
# newer server's (`vLLM server version 0.11.0, serving model ...`, or its logo's `█ ▀▄▀ █  version 0.15.0`), the
# batch runner's, and a headless worker's (`Launching vLLM (v0.10.0) headless multiproc executor`).
VERSION_LINE = re.compile(
    r"(?:vLLM API server version |vLLM server version |vLLM batch processing API version "
    r"|Initializing an? (?:V[01] )?LLM engine \(v|Launching vLLM \(v"
    r"|▀▄▀ █" + _ANSI + r" {1,4}version " + _ANSI + r")" + _VERSION + r"(?![\w.+])"
)
# Every line above holds one of these: text without them is not searched.
NEEDLES = ("version", "(v")
_PARTS = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:\.?post(\d+))?(\.?(?:dev|rc|a|b)\d*)?(?:\+.*)?$")


@dataclass(frozen=True)
class Release:
    """The vLLM a log names (`version`) and the earliest date it can have run: that of `dated`, the version of the
    list it is, or the latest listed before it in its minor version."""

    version: str
    dated: str
    on: date

    def __str__(self) -> str:
        if self.dated == self.version.partition("+")[0]:
            return f"vLLM {self.version} ({self.on.isoformat()}), the version the log states"
        return f"vLLM {self.dated} ({self.on.isoformat()}), which the log's vLLM {self.version} came after"


def _key(version: str) -> tuple[tuple[int, ...], bool] | None:
    """`version` as comparable numbers (the release's parts, then its post release) and whether it is a pre-release
    (dev, rc, alpha, beta: before the release it names); None for a version that is not one."""
    parts = _PARTS.match(version)
    if parts is None:
        return None
    numbers = tuple(int(part) if part else 0 for part in parts.groups()[:5])
    return numbers, parts[6] is not None


_LISTED = sorted(
    (key[0], version, date.fromisoformat(day))
    for version, (day, _) in VLLM_VERSION_SET.items()
    if (key := _key(version)) is not None
)


def vllm_release(version: str) -> Release | None:
    """The earliest date vLLM `version` can have run: its own listed date, else that of the latest listed version
    before it of the same minor version (a pre-release, dev build or release candidate, comes before the release it
    names); None where none is listed, or for what is not a version."""
    key = _key(version)
    if key is None:
        return None
    numbers, pre = key
    best = None
    for listed, name, day in _LISTED:
        if listed[:2] == numbers[:2] and (listed < numbers or (listed == numbers and not pre)):
            best = (name, day)
    return None if best is None else Release(version, best[0], best[1])


def release_in(text: str) -> Release | None:
    """The earliest bound that the vLLM version lines of `text` set (the oldest version a log names bounds all of its
    lines); None when it has none."""
    if not any(needle in text for needle in NEEDLES):
        return None
    found = None
    for match in VERSION_LINE.finditer(text):
        release = vllm_release(match[1])
        if release is not None and (found is None or release.on < found.on):
            found = release
    return found
