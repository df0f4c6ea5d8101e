"""The host a text log names of itself: a Kubernetes pod's log, collected by file, often names its node in a
line of its own (`pod=chat-7c9f-xk2p9 node=gpu-a10-03`, a log shipper's `"kubernetes.node_name": "..."`). The pod
is one process lifetime and is renamed on every restart; the node is the device, so a log that names exactly one
node (or host) in its head is placed there rather than under its file's name.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...fields import FIELDS, LIFETIME_COLUMNS
from ..compression import read_head

# The head read: a service names where it runs when it starts, in its first lines.
HEAD_BYTES = 64 * 1024
# `key=value` (logfmt) and `"key": "value"` (JSON) with the keys request logs name a node or host by (the instance
# field's aliases), less a pod's (a pod is not a device) and bare `host` and `server`, which application logs use
# as often for a server they connect to.
_NOT_THIS_HOST = LIFETIME_COLUMNS | {"host", "server"}
_HOST_KEYS = (
    "(?:"
    + "|".join(
        re.escape(alias) for f in FIELDS if f.name == "instance" for alias in f.aliases if alias not in _NOT_THIS_HOST
    )
    + ")"
)
_LABEL = re.compile(
    rf"""(?:(?<![\w.]){_HOST_KEYS}=(?P<bare>[A-Za-z0-9][A-Za-z0-9._-]*)"""
    rf"""|"{_HOST_KEYS}"\s*:\s*"(?P<quoted>[A-Za-z0-9][A-Za-z0-9._-]*)")"""
)


def host_named_in(path: str | Path) -> str | None:
    """The one node or host the log's head names, None when it names none or several."""
    text = read_head(path, HEAD_BYTES).decode("utf-8", errors="replace")  # a bad byte names no host
    names = {m.group("bare") or m.group("quoted") for m in _LABEL.finditer(text)}
    return names.pop() if len(names) == 1 else None
