"""One event per real OOM: the sightings of one failure in several files linked into one event.

A real OOM is one failure of one process, seen in several places: its request-log row, the traceback in the
service's log, a message file, the `oom` entry of each snapshot whose trace still holds it. `oom_events` keeps
every sighting as it was read; this module decides which of them are the same failure and writes
`oom_event_links` (sighting -> the event's key sighting, and the device the event is on), which
`stg_oom_events` turns into one row per event. It runs over the whole database after every ingest, and its
decisions depend only on what the sightings say (never on event ids or the order files came in), so ingesting
the same files in another order gives the same events.

Two sightings are one failure when nothing they both state disagrees and they could not be two:
- the device: a sighting whose instance only repeats its file's name was placed by nothing and may join any
  device (it then takes that device); two placed sightings must name the same instance;
- the time: both stamped within the request's latency plus `SAME_MOMENT` of each other; a sighting without a
  time (a bare message file) links by its numbers alone, and only where its file's order decides (below);
- the numbers: the failed allocation's size, the free memory and the card's total agree within what printing
  rounds away (`printed_slack`), a snapshot's size (before the allocator rounds it) through the allocator's
  rounding (`allocation_size`);
- the allocator: one failure is one allocator's, so messages of frameworks that allocate on their own (a CuPy and
  a PyTorch message, JAX and NCCL: corpus oom/014 and 064, 024 and 096 ingested together) are two failures; the
  engines that serve on PyTorch print its failures as theirs (`ALLOCATOR`).
Each event holds at most one sighting per file: one file never records one failure twice. A document (a
Markdown issue or post) is the exception: its author pastes one failure into several sections of a template,
so there untimed copies of one message, character for character, are one failure (real: the realworld corpus's
pasted_text/019, one MPS OOM pasted four times into ComfyUI's bug template).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import duckdb

from ..config import IngestOptions
from ..parse.oom.message import parse_oom_message
from ..units import GIB, KIB, MIB
from .sql import sql_text

# Two stamps of one failure differ by how each source stamps it: a snapshot's trace in microseconds at the
# failure, a traceback when the handler logs it (milliseconds later), a log written to the whole second
# (truncated by up to 1 s). One second for the truncation and one for the way from failure to log line; a
# request-log row stamped at the request's start adds the request's own latency.
SAME_MOMENT = timedelta(seconds=2)
# Files that are documents people write, not logs a program writes: an issue or a post saved as Markdown.
DOCUMENT_SUFFIXES = (".md", ".markdown")
# PyTorch's caching allocator (c10/cuda/CUDACachingAllocator.cpp): requests up to kSmallSize come from 2 MiB
# blocks, those under kMinLargeAlloc from 20 MiB ones, larger ones are rounded up to kRoundLarge. A message
# says `Tried to allocate` the rounded size, a snapshot's `oom` entry the size asked for.
_SMALL_SIZE, _SMALL_BUFFER = 1 * MIB, 2 * MIB
_MIN_LARGE_ALLOC, _LARGE_BUFFER, _ROUND_LARGE = 10 * MIB, 20 * MIB, 2 * MIB
# The allocator behind each framework's messages (parse/oom/signatures.py names them), where it is not the
# framework's own: the serving engines run on PyTorch's caching allocator and print its failures.
ALLOCATOR = {name: "pytorch" for name in ("pytorch-rocm", "pytorch-mps", "pytorch-npu", "vllm", "sglang", "tgi", "ray")}
# The order sightings are taken in: a request-log row states exact bytes and its request, a message rounds
# them, a snapshot's entry states the fewest facts.
_ORIGIN_RANK = {"structured": 0, "message": 1, "snapshot": 2}


def printed_slack(value: int) -> float:
    """Half a unit of the last digit PyTorch prints a size with (format_size: whole bytes up to 1 KiB, then
    two decimals of KiB, MiB, GiB): the most a size read back from a message differs from its bytes. The SQL
    macro oomlab_printed_slack is the same rule."""
    if value <= KIB:
        return 0.0
    if value <= MIB:
        return 0.005 * KIB
    if value <= GIB:
        return 0.005 * MIB
    return 0.005 * GIB


def allocation_size(requested: int) -> int:
    """The block the allocator asks CUDA for when `requested` bytes do not fit (get_allocation_size)."""
    if requested <= _SMALL_SIZE:
        return _SMALL_BUFFER
    if requested < _MIN_LARGE_ALLOC:
        return _LARGE_BUFFER
    return -(-requested // _ROUND_LARGE) * _ROUND_LARGE


def _close(a: int, b: int) -> bool:
    return abs(a - b) <= printed_slack(a) + printed_slack(b)


@dataclass
class Sighting:
    """One oom_events row as the linking reads it."""

    event_id: int
    source_id: int
    path: str
    line: int
    origin: str
    ts: datetime | None
    instance: str | None
    placed: bool
    gpu_index: int | None
    requested: int | None
    free: int | None
    total: int | None
    latency: timedelta
    self_pid: int | None = None
    text: str | None = None  # the message as printed: a request-log row's, or a document's (`_pasted_copies`)
    framework: str | None = None  # whose message it is (None: a request-log row or snapshot without one)

    @property
    def allocator(self) -> str | None:
        return None if self.framework is None else ALLOCATOR.get(self.framework, self.framework)

    @property
    def order(self) -> tuple:
        """Strongest first, then by what the sighting is (file and line), never by its id."""
        return (_ORIGIN_RANK.get(self.origin, 3), self.ts is None, self.path, self.line)


@dataclass
class Event:
    """Sightings found to be one failure; the first is its key."""

    sightings: list[Sighting] = field(default_factory=list)
    host: str | None = None  # placed by telemetry listing its process (place_by_pid), when no sighting is

    @property
    def key(self) -> Sighting:
        return self.sightings[0]

    @property
    def ts(self) -> datetime | None:
        return next((s.ts for s in self.sightings if s.ts is not None), None)

    @property
    def instance(self) -> str | None:
        placed = next((s.instance for s in self.sightings if s.placed), self.host)
        return placed if placed is not None else self.key.instance

    @property
    def placed(self) -> bool:
        return self.host is not None or any(s.placed for s in self.sightings)

    def has_source(self, source_id: int) -> bool:
        return any(s.source_id == source_id for s in self.sightings)

    def stated(self, name: str) -> Sighting | None:
        """The strongest sighting that states `name`."""
        return next((s for s in self.sightings if getattr(s, name) is not None), None)


def sizes_agree(a: Sighting, b: Sighting) -> bool:
    """The failed allocation's size: equal within printing, or through the allocator's rounding where one side
    is a snapshot's record of the size asked for."""
    if a.requested is None or b.requested is None:
        return True
    if (a.origin == "snapshot") != (b.origin == "snapshot"):
        asked, said = (a, b) if a.origin == "snapshot" else (b, a)
        assert asked.requested is not None and said.requested is not None
        return _close(asked.requested, said.requested) or _close(allocation_size(asked.requested), said.requested)
    return _close(a.requested, b.requested)


def numbers_agree(event: Event, s: Sighting) -> bool:
    """Nothing both state disagrees: the allocator, requested size, free memory, the card's total."""
    stated = event.stated("allocator")
    if stated is not None and s.allocator is not None and stated.allocator != s.allocator:
        return False
    sized = event.stated("requested")
    if sized is not None and not sizes_agree(sized, s):
        return False
    for name in ("free", "total"):
        theirs, ours = event.stated(name), getattr(s, name)
        if theirs is not None and ours is not None and not _close(getattr(theirs, name), ours):
            return False
    return True


def same_device(event: Event, s: Sighting) -> bool:
    """Placed sightings name one instance; a GPU index counts only between request-log rows, because a
    message's or snapshot's `GPU 0` is the process's own index (CUDA_VISIBLE_DEVICES renumbers from 0)."""
    if s.placed and event.placed and event.instance != s.instance:
        return False
    if s.origin == "structured" and s.gpu_index is not None:
        other = next((x for x in event.sightings if x.origin == "structured" and x.gpu_index is not None), None)
        if other is not None and other.gpu_index != s.gpu_index:
            return False
    return True


def _joinable(event: Event, s: Sighting) -> bool:
    return not event.has_source(s.source_id) and same_device(event, s) and numbers_agree(event, s)


class _Timeline:
    """Events with a time, sorted, for the search of a window."""

    def __init__(self) -> None:
        self._keys: list[tuple[datetime, int]] = []
        self._events: list[Event] = []

    def add(self, event: Event) -> None:
        ts = event.ts
        assert ts is not None
        at = bisect.bisect(self._keys, (ts, len(self._events)))
        self._keys.insert(at, (ts, len(self._events)))
        self._events.append(event)

    def near(self, ts: datetime, window: timedelta) -> list[tuple[timedelta, Event]]:
        low = bisect.bisect_left(self._keys, (ts - window, -1))
        out = []
        for at in range(low, len(self._keys)):
            when, index = self._keys[at]
            if when > ts + window:
                break
            out.append((abs(when - ts), self._events[index]))
        return out


def _joins_within(gap: timedelta, event: Event, s: Sighting) -> bool:
    """Whether `s`, `gap` from `event`, may join it. The cheapest test first: a file's own sightings are never
    one failure, and in a burst (thousands of OOMs of one file in the same second) nearly every candidate is of
    the sighting's own file, so the check of the event's first sighting settles most pairs at once."""
    if event.sightings[0].source_id == s.source_id:
        return False
    return gap <= _window(event, s) and _joinable(event, s)


def _window(event: Event, s: Sighting) -> timedelta:
    latency = max([s.latency] + [x.latency for x in event.sightings])
    return SAME_MOMENT + latency


def link_timed(sightings: list[Sighting]) -> list[Event]:
    """Sightings with a time, strongest first: each joins the nearest event it agrees with, else starts one."""
    events: list[Event] = []
    timeline = _Timeline()
    widest = max((s.latency for s in sightings), default=timedelta(0)) * 2 + SAME_MOMENT
    for s in sorted(sightings, key=lambda x: x.order):
        assert s.ts is not None
        near = [(gap, e) for gap, e in timeline.near(s.ts, widest) if _joins_within(gap, e, s)]
        if near:
            min(near, key=lambda pair: (pair[0], pair[1].key.order))[1].sightings.append(s)
            continue
        event = Event([s])
        events.append(event)
        timeline.add(event)
    return events


def link_untimed(events: list[Event], sightings: list[Sighting]) -> list[Event]:
    """Sightings without a time join events by their numbers, file by file: the sightings of one file that
    agree with the same set of events are paired with them in order (a log is written in the order things
    happen) when there are as many of each, or when they print the same numbers; otherwise they stay events of
    their own."""
    by_source: dict[int, list[Sighting]] = defaultdict(list)
    for s in sorted(sightings, key=lambda x: x.order):
        by_source[s.source_id].append(s)
    sizes = _BySize(events)
    for source_sightings in sorted(by_source.values(), key=lambda group: group[0].order):
        originals, copies = _pasted_copies(source_sightings)
        for event in _pair_in_order(sizes, originals):
            events.append(event)
            sizes.add(event)
        for original, copy in copies:
            next(e for e in events if original in e.sightings).sightings.append(copy)
    return events


def _pasted_copies(sightings: list[Sighting]) -> tuple[list[Sighting], list[tuple[Sighting, Sighting]]]:
    """A document's untimed sightings split into the first of each message text and (first, copy) pairs for the
    later copies of it; any other file's are all originals. A log printing the same message twice recorded two
    failures; a document pasting it twice describes one."""
    if not sightings or not sightings[0].path.lower().endswith(DOCUMENT_SUFFIXES):
        return sightings, []
    first: dict[str, Sighting] = {}
    originals, copies = [], []
    for s in sorted(sightings, key=lambda x: x.line):
        original = first.get(s.text) if s.text else None
        if original is not None:
            copies.append((original, s))
            continue
        if s.text:
            first[s.text] = s
        originals.append(s)
    return sorted(originals, key=lambda x: x.order), copies


class _BySize:
    """Events that state the failed allocation's size, sorted by it: the candidates of a sighting without a
    time are those within the allocator's rounding (`_LARGE_BUFFER`, the most a snapshot's size and a
    message's differ) and the print slack of its size."""

    def __init__(self, events: list[Event]) -> None:
        self._keys: list[tuple[int, int]] = []
        self._events: list[Event] = []
        for event in events:
            self.add(event)

    def add(self, event: Event) -> None:
        sized = event.stated("requested")
        if sized is None or sized.requested is None:
            return
        bisect.insort(self._keys, (sized.requested, len(self._events)))
        self._events.append(event)

    def candidates(self, s: Sighting) -> list[Event]:
        assert s.requested is not None
        reach = _LARGE_BUFFER + 2 * printed_slack(s.requested)
        low = bisect.bisect_left(self._keys, (s.requested - reach, -1))
        high = bisect.bisect_right(self._keys, (s.requested + reach, len(self._events)))
        return [self._events[i] for _, i in self._keys[low:high] if _joinable(self._events[i], s)]


def _pair_in_order(sizes: _BySize, sightings: list[Sighting]) -> list[Event]:
    """The sightings of one file: paired with the events they agree with, or events of their own."""
    groups: dict[tuple[int, ...], tuple[list[Event], list[Sighting]]] = {}
    for s in sightings:
        # without a size, nothing but a time could tie a sighting to an event
        found = sizes.candidates(s) if s.requested is not None else []
        key = tuple(sorted(id(e) for e in found))
        groups.setdefault(key, (found, []))[1].append(s)
    alone = []
    for found, group in groups.values():
        if found and (len(found) == len(group) or _alike(group)):
            # in file order: the first sightings join the earliest events, any left over are OOMs of their own
            paired = zip(sorted(group, key=lambda x: x.line), sorted(found, key=_event_order), strict=False)
            for s, event in paired:
                event.sightings.append(s)
            group = sorted(group, key=lambda x: x.line)[len(found) :]
        alone += [Event([s]) for s in group]
    return alone


def _alike(group: list[Sighting]) -> bool:
    """Sightings printing the same numbers: whichever of them joins an event brings it the same facts, so their
    count and the events' no longer need to be equal (two equal messages and one snapshot OOM are two OOMs,
    not three); sightings that differ could carry their facts to the wrong event, and stay apart."""
    return len({(s.requested, s.free, s.total) for s in group}) == 1


def _event_order(event: Event) -> tuple:
    ts = event.ts
    return (ts is None, ts or datetime.min, event.key.order)


def link(sightings: list[Sighting]) -> list[Event]:
    """Every sighting in exactly one event."""
    timed = [s for s in sightings if s.ts is not None]
    untimed = [s for s in sightings if s.ts is None]
    return link_untimed(link_timed(timed), untimed)


def is_placed(instance: str | None, path: str) -> bool:
    """Does the instance say where the sighting happened? Not when it is only the name ingest gives a file that
    names none (its file's name, or a memory_summary/memory_stats printout's folder): a host or pod the row
    names, or --instance, does."""
    return instance is not None and instance != IngestOptions().instance_for(path)


def read_sightings(con: duckdb.DuckDBPyConnection) -> list[Sighting]:
    # the message only where it is read: a log's text sightings hold most of the database's messages
    rows = con.execute(sql_text("select_oom_sightings"), {"document_suffixes": list(DOCUMENT_SUFFIXES)}).fetchall()
    out = []
    for row in rows:
        event_id, source_id, path, line, origin, ts, instance, gpu, req, free, total, latency, message, pid, who = row
        logged = message if origin == "structured" else None
        requested, free, total = _printed_numbers(logged) or (req, free, total)
        out.append(
            Sighting(
                event_id=event_id,
                source_id=source_id,
                path=path,
                line=line,
                origin=origin,
                ts=ts,
                instance=instance,
                placed=is_placed(instance, path),
                gpu_index=gpu,
                requested=requested,
                free=free,
                total=total,
                latency=timedelta(milliseconds=latency) if latency and latency > 0 else timedelta(0),
                self_pid=pid,
                text=message,
                framework=who,
            )
        )
    return out


def _printed_numbers(message: str | None) -> tuple[int | None, int | None, int | None] | None:
    """A request-log row's sizes as the OOM message it logged prints them: the row's own columns may be rounded
    to the unit it logs in (`requested_size_gib: 0.17`), while another file's copy of the failure prints the
    same message, to PyTorch's precision."""
    if not message:
        return None
    parsed = parse_oom_message(message)
    if parsed is None or parsed.requested_bytes is None:
        return None
    return parsed.requested_bytes, parsed.free_bytes, parsed.total_capacity_bytes
