"""Short literals ("needles") that rg searches in place of the readers' markers, and the check that turns rg's
needle hits back into the lines that hold a marker.

rg finds many literals at once with SIMD (Teddy), but only while they are few (at most 64) and their first
bytes are rare in the text: with every reader's markers (88 phrases, many sharing common words) it falls back
to a scan 6x slower than one literal. Every marker holds some 4-byte piece, and a few dozen pieces cover all
markers: chosen by what they cost on this log (sampled in a few places), rg searches a GiB of the bench's log
in 0.42-0.58 s, as fast as for the OOM markers alone (0.45-0.52 s; all 88 markers 1.56-1.71 s, one literal
0.25-0.28 s, measured in turns). A line holding a needle may not hold a marker, so each hit is checked in
place: the needle sits at known offsets of the markers that hold it, so a check is a slice compare, never a
search of the line.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

NEEDLE_BYTES = 4  # the shortest piece that is rare: most 3-byte pieces of English are common words' parts
# Choosing samples the log and costs 20-35 ms; needles save rg ~1 s per GiB (above). Below this size, where
# they would save less than the choice costs, the markers themselves are searched.
CHOOSE_FROM_BYTES = 16 << 20
SAMPLE_PIECES = 16  # spread over the log: its start (loading, warm-up) often reads unlike the rest
SAMPLE_PIECE_BYTES = 32 << 10
# What a needle costs, in seconds per GiB of log (measured on this machine with rg 14.1): each literal slows
# rg's SIMD search by ~7 ms per GiB (27 literals 0.37 s, one 0.19 s), and each hit that holds no marker
# costs ~2 us (rg prints it, Python reads and checks it). The price of a literal is not flat: Teddy's buckets
# fill, so each one costs more the more there are (covers of 29-55 rare needles of the bench's log took
# 0.28-1.06 s per GiB, the 39 chosen here 0.39-0.46 s, one literal 0.12 s, on 2026-12-03). A higher flat price picks
# fewer needles with more false hits: rg got faster, Python slower, and the whole ingest no faster in turns.
PATTERN_COST_S = 0.007
FALSE_HIT_COST_S = 2e-6

Buffer = Any  # bytes or mmap.mmap: slicing and find/rfind
Spot = tuple[bytes, int]  # where a needle sits: a marker that holds it, and its offset there


@dataclass(frozen=True)
class Needles:
    """What rg searches (`texts`); for each, the readers whose markers hold it and where, and the needles
    that could begin inside one of its hits."""

    texts: tuple[bytes, ...]
    places: Mapping[bytes, tuple[tuple[int, tuple[Spot, ...]], ...]]  # needle -> (reader, its spots)
    inside: Mapping[bytes, tuple[tuple[int, bytes], ...]]  # (offset in the hit, needle) that may begin there
    readers: int

    def add_holders(self, buf: Buffer, at: int, needle: bytes, holding: set[int]) -> None:
        """Add to `holding` each reader with a marker that holds the hit of `needle` at `at`, or a hit of
        another needle that begins inside it: rg reports hits that do not overlap, so those are looked for
        here. Readers already in `holding` are not looked for again (a line needs each reader once)."""
        pending = [(at, needle)]
        seen = set(pending)
        while pending and len(holding) < self.readers:
            hit, text = pending.pop()
            for reader, spots in self.places[text]:
                if reader not in holding and _holds(buf, hit, spots):
                    holding.add(reader)
            for offset, other in self.inside[text]:
                where = hit + offset
                if (where, other) not in seen and buf[where : where + len(other)] == other:
                    seen.add((where, other))
                    pending.append((where, other))


def _holds(buf: Buffer, hit: int, spots: tuple[Spot, ...]) -> bool:
    """Whether a marker of `spots` surrounds the needle's hit at `hit` (a slice compare each)."""
    return any(buf[hit - offset : hit - offset + len(marker)] == marker for marker, offset in spots if hit >= offset)


def needles_for(readers: Sequence[Sequence[bytes]], needed: Sequence[bytes], buf: Buffer) -> Needles:
    """Needles for the readers' markers (`needed`: the ones that matter, none holding another) in the log
    `buf`: the markers themselves for a small log, else the cheapest cover of pieces found by sampling it."""
    texts = needed if len(buf) < CHOOSE_FROM_BYTES else _cheapest_cover(needed, _sample(buf), len(buf))
    return _needles(tuple(tuple(r) for r in readers), tuple(texts))


@functools.lru_cache(maxsize=8)  # a run over many small logs searches the same markers in each
def _needles(readers: tuple[tuple[bytes, ...], ...], texts: tuple[bytes, ...]) -> Needles:
    """Needles `texts` with the places where they sit in every reader's markers."""
    places = {
        text: tuple(
            (reader, spots)
            for reader, markers in enumerate(readers)
            if (spots := tuple((m, offset) for m in dict.fromkeys(markers) for offset in _offsets(m, text)))
        )
        for text in texts
    }
    inside = {text: tuple(_may_begin_inside(text, texts)) for text in texts}
    return Needles(texts, places, inside, len(readers))


def _may_begin_inside(text: bytes, texts: Sequence[bytes]) -> Iterator[tuple[int, bytes]]:
    """(offset, needle) of each needle that agrees with `text` from that offset on, so that a hit of it may
    begin there inside a hit of `text` (at offset 0, any other needle that starts the same way)."""
    for offset in range(len(text)):
        tail = text[offset:]
        for other in texts:
            if (offset, other) != (0, text) and (other.startswith(tail) or tail.startswith(other)):
                yield offset, other


def _offsets(marker: bytes, text: bytes) -> list[int]:
    """Every offset where `text` occurs in `marker`, overlapping ones included."""
    found, at = [], marker.find(text)
    while at >= 0:
        found.append(at)
        at = marker.find(text, at + 1)
    return found


def _sample(buf: Buffer) -> bytes:
    """SAMPLE_PIECES pieces spread evenly over the log, joined by newlines (a short log whole)."""
    if len(buf) <= SAMPLE_PIECES * SAMPLE_PIECE_BYTES:
        return bytes(buf[:])
    step = (len(buf) - SAMPLE_PIECE_BYTES) // (SAMPLE_PIECES - 1)
    return b"\n".join(bytes(buf[i * step : i * step + SAMPLE_PIECE_BYTES]) for i in range(SAMPLE_PIECES))


def _cheapest_cover(markers: Sequence[bytes], sample: bytes, size: int) -> list[bytes]:
    """Needles such that every marker holds one, chosen greedily by cost per marker newly covered (the
    classic approximation of weighted set cover). A candidate is any NEEDLE_BYTES piece of a marker, or the
    whole marker (its hits are all true ones: a marker whose every piece is common text is searched whole)."""
    held = [{m[i : i + NEEDLE_BYTES] for i in range(len(m) - NEEDLE_BYTES + 1)} for m in markers]
    pieces = sorted(set().union(*held))
    candidates = pieces + [m for m in markers if m not in pieces]
    index = {c: i for i, c in enumerate(candidates)}
    cover = np.zeros((len(candidates), len(markers)), dtype=bool)
    for column, (marker, inner) in enumerate(zip(markers, held, strict=True)):
        cover[[index[c] for c in inner | {marker} if c in index], column] = True
    false_hits = _false_hits(pieces, markers, sample) * (size / len(sample))
    cost = np.full(len(candidates), PATTERN_COST_S)
    cost[: len(pieces)] += FALSE_HIT_COST_S * false_hits
    left, chosen = np.ones(len(markers), dtype=bool), []
    while left.any():
        gain = cover[:, left].sum(axis=1)
        pick = int(np.argmin(np.where(gain > 0, cost / np.maximum(gain, 1), np.inf)))
        chosen.append(candidates[pick])
        left &= ~cover[pick]
    return chosen


def _false_hits(pieces: list[bytes], markers: Sequence[bytes], sample: bytes) -> np.ndarray:
    """How often each piece occurs in the sample outside the markers' own occurrences (those lines are read
    whichever needle finds them)."""
    counts = _piece_counts(pieces, sample)
    present = {p: n for p, n in zip(pieces, counts.tolist(), strict=True) if n}
    for marker in markers:  # only a marker all of whose pieces occur can occur itself: few are counted
        inner = [marker[i : i + NEEDLE_BYTES] for i in range(len(marker) - NEEDLE_BYTES + 1)]
        if inner and all(p in present for p in inner) and (occurs := sample.count(marker)):
            for piece in inner:
                present[piece] -= occurs
    return np.array([max(0, present.get(p, 0)) for p in pieces], dtype=np.float64)


def _piece_counts(pieces: list[bytes], sample: bytes) -> np.ndarray:
    """Occurrences in `sample` of each (sorted, distinct) NEEDLE_BYTES-byte piece, counted with numpy: every
    position's 4 bytes as one big-endian number, kept when its first two bytes begin some piece."""
    data = np.frombuffer(sample, dtype=np.uint8).astype(np.uint32)
    if len(data) < NEEDLE_BYTES:
        return np.zeros(len(pieces), dtype=np.int64)
    codes = data[:-3] << 24 | data[1:-2] << 16 | data[2:-1] << 8 | data[3:]
    wanted = np.array([int.from_bytes(p, "big") for p in pieces], dtype=np.uint32)
    head = np.zeros(1 << 16, dtype=bool)
    head[wanted >> 16] = True
    kept = np.sort(codes[head[codes >> 16]])
    return np.searchsorted(kept, wanted, side="right") - np.searchsorted(kept, wanted, side="left")
