"""The one bound on a document read whole to decode it (a saved Prometheus answer, a log store's JSON export, an
HTTP answer, a calendar), and the read that keeps to it.

Decoded, a JSON document takes several times its text in Python objects (a float is a 24-byte object, a dict of
two labels about 200 bytes against 30 of text), and `oomlab ingest` reads two files at once on a machine doing
other work: 256 MiB of text is already 1-2 GiB of objects. The largest real document oomlab reads is far below it
(a Prometheus pull's piece: at most 2 M samples, about 60 MB). A larger document is refused with one line naming
the file; a line-oriented log over it is read line by line instead (ingest/envelope.py).
"""

from __future__ import annotations

from typing import BinaryIO

WHOLE_DOCUMENT_BYTES = 256 << 20


def read_bounded(handle: BinaryIO) -> bytes | None:
    """The rest of `handle`, or None when it holds more than WHOLE_DOCUMENT_BYTES (reading one byte more tells)."""
    limit = WHOLE_DOCUMENT_BYTES
    data = handle.read(limit + 1)
    return None if len(data) > limit else data


def bound_text() -> str:
    """The bound as the errors say it."""
    return f"{WHOLE_DOCUMENT_BYTES >> 20} MiB"
