"""Is this a memory snapshot? Told from its first bytes, without loading the snapshot machinery."""

from __future__ import annotations

_PICKLE_PROTOCOLS = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")
_JSON_MARKERS = (b'"segments"', b'"total_size"')


def sniff_snapshot(head: bytes) -> str | None:
    """'pickle' for any pickle of protocol 2-5 (snapshot or not: the loader refuses the rest),
    'json' for JSON text holding snapshot keys, None otherwise. `head`: the first decompressed bytes."""
    if head[:2] in _PICKLE_PROTOCOLS:
        return "pickle"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text[:1] in (b"{", b"[") and any(marker in head for marker in _JSON_MARKERS):
        return "json"
    return None
