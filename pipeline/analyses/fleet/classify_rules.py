"""The rules that name an OOM's cause, in the order they are tried (docs/domain.md, "Telling the causes apart").

Each rule reads one event's `OomFacts` and returns a `Verdict` or None; the first verdict wins. The
request-size rules are counterfactuals: would the request have fit on the card as it has been seen to
serve requests (`limit`), with the lifetime's starting baseline instead of today's, or without the
neighbour's memory? Whatever removes the failure is the cause.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from ...load.oom_links import allocation_size
from ...load.settings import CONTEXT_ALLOWANCE_BYTES
from ...units import MIB, format_bytes_short
from ..snapshot.ooms import FRAGMENTED_SLACK_SHARE

CAUSES: tuple[str, ...] = (
    "leak",
    "fragmentation",
    "capacity",
    "transient_peak",
    "external_pressure",
    "process_cap",
    "preallocated_pool",
    "unknown",
)
# A request is at the card's edge when its estimated need reaches the largest peak that ever succeeded on the
# card, less what the estimate cannot tell apart from it: the need is the token-cost line's (fixed + bytes per
# token x tokens), whose real values scatter around it by the fit's residual standard error, the larger of the
# one over all requests and the one among the largest tenth, where the edge is reached (fct_oom_token_cost);
# within two of them (about 98 % of requests, one-sided) a need cannot be told from the largest one served.
# Without a fit the comparison is exact.
EDGE_ERRORS = 2
# A raised baseline counts when it is above the lifetime's start by this much (and this share of the limit).
MIN_EXCESS_BYTES = 64 * MIB
MIN_EXCESS_SHARE = 0.05
# In a lifetime that leaks, the baseline between requests is exact: a real process that does not leak reports the
# same allocated bytes after every request (tests/data/h200: serve_mixed 97 requests, cache_bloat 400, one value
# each), so every byte above the start is leaked. What remains is the allocator's own step: large blocks grow
# in 2 MiB units (CUDACachingAllocator kRoundLarge), the least a rise of the baseline can be.
LEAKED_STEP_BYTES = 2 * MIB
# A leaking lifetime whose leaked bytes fill at least half of the limit is the cause whatever the request.
LEAK_DOMINANT_SHARE = 0.5


@dataclass(frozen=True)
class OomFacts:
    """What is known about one OOM event, in bytes; None where the logs do not say."""

    origin: str
    framework: str | None
    requested: int | None
    free: int | None
    reserved: int | None
    unallocated: int | None
    in_use: int | None
    other: int | None
    other_pids: tuple[int, ...]
    cap: int | None
    device_total: int | None
    batch: int | None
    input_tokens: int | None
    output_tokens: int | None
    tokens: int | None
    baseline: int | None
    healthy_baseline: int | None
    need: int | None
    healthy_need: int | None
    limit: int | None
    card: str
    leaking: bool
    pool: bool
    slope: float | None
    snapshot: tuple[str, str] | None
    other_seen_at: datetime | None = None  # set when the neighbours come from nvidia-smi, not the message
    other_names: tuple[str, ...] = ()
    self_basis: str | None = None  # why a listed process is this one (stg_oom_sightings), None when none is
    other_unnamed: bool = False  # `other` is the card's memory in use that no named process accounts for
    in_use_on_card: int | None = None  # total - free, as the message states them
    # no lifetime of its own: the baseline is a bound from the message, the start its version's (classify.py)
    baseline_inferred: bool = False
    need_error: float | None = None  # the residual standard error of the token-cost line `need` comes from
    # an OOM on this card failed at its largest peak served with no neighbour of known bytes beside it
    # (classify._card_edges): that peak is then the card's edge, not merely the largest request seen
    edge_shown: bool = True
    # the smallest need that failed on this card's kind with nothing beside it (classify._card_edges), None if none
    ceiling: int | None = None
    # the fewest tokens of this version that failed by size alone on this card's kind (classify._token_edges)
    tokens_failed_alone: int | None = None

    @property
    def allocated(self) -> int | None:
        """What PyTorch had allocated when the request failed: reserved less its unallocated part."""
        if self.reserved is None or self.unallocated is None:
            return None
        return self.reserved - self.unallocated

    @property
    def excess(self) -> int:
        """Bytes the baseline stands above the lifetime's start (0 when unknown)."""
        if self.baseline is None or self.healthy_baseline is None:
            return 0
        return max(0, self.baseline - self.healthy_baseline)

    def raised(self) -> bool:
        """Is the baseline meaningfully above where the lifetime started? In a lifetime the leak analysis found
        climbing (or of a version that leaks, when the lifetime is too short to fit), every byte above its start is
        leaked, so a rise of one allocator step counts; elsewhere a rise can be a temporary kept alive between
        requests, so only one of a share of the card does. A baseline inferred from the message (no lifetime of its
        own) is a floor, allocated + requested less the estimated need: of a version not seen to leak, a floor above
        its start says the request held more than the token-cost line gives it, its own size, not a rise (fleet
        104622 of bench/truth.py: 97,920 tokens whose line gave 10.2 GiB, while PyTorch held 13.27 GiB and asked
        for 998 MiB more on a 1.63 GiB start)."""
        if self.leaking:
            return self.excess >= LEAKED_STEP_BYTES
        if self.baseline_inferred:
            return False
        return self.excess >= max(MIN_EXCESS_BYTES, MIN_EXCESS_SHARE * (self.limit or 0))

    @property
    def displaced(self) -> int:
        """The allocated room a neighbour's bytes take from this process. Alone, the card turned at most `limit` of
        the memory a process has (its total less a context) into allocated peaks; the rest is the allocator's waste
        at a peak (segments rounded and split as the requests' blocks were), which grows with what is allocated.
        A neighbour's bytes come out of that memory, so they take the same share of the allocated room: on a card
        whose edge is shown (an OOM failed at `limit` alone) `other` times limit / (total - context). Where no
        failure shows the edge, `limit` may be only the largest request seen and the share is unknown: all of
        `other`."""
        if not self.other:
            return 0
        usable = self.room_alone
        if not self.edge_shown or self.limit is None or usable is None or usable <= 0:
            return self.other
        return round(self.other * min(1.0, self.limit / usable))

    @property
    def room_alone(self) -> int | None:
        """What the card gives one process with nobody beside it: its total less a CUDA context."""
        return None if self.device_total is None else self.device_total - CONTEXT_ALLOWANCE_BYTES

    def beyond_card(self, need: int | None) -> bool:
        """Does `need` exceed what the card gives one process with nobody beside it: its total less a CUDA
        context? (The largest peak served, `limit`, is no bound here: beside a neighbour no large request
        could ever succeed, so that peak says what the neighbour left, not what the card holds.)"""
        room = self.room_alone
        return need is not None and room is not None and need > room

    def limit_without(self, other: int) -> bool:
        """Was the largest peak served (`limit`) served without a neighbour of `other` bytes? It was when the two
        cannot stand on the card together: then it says what the card holds, not what the neighbour left. Only a
        neighbour a message or nvidia-smi names has known bytes: one inferred from the card's accounting
        (`other_unnamed`: in use, less this process's reserve and a context allowance) also holds whatever of this
        process's own the allowance misses, an upper bound that proves nothing here."""
        if self.limit is None or self.device_total is None or self.other_unnamed:
            return False
        return self.limit + other > self.device_total

    def segment_fits(self) -> bool:
        """Did the device have room for the segment the allocator asks CUDA for when no cached block fits
        (`allocation_size`: 2 MiB, 20 MiB, or the request rounded to 2 MiB)? Then the card was not full."""
        return self.free is not None and self.requested is not None and self.free >= allocation_size(self.requested)

    def edge_binds(self) -> bool:
        """Is the largest peak served known to be what the card holds, for this event? It is where nothing of
        known size stood beside it (its own failure shows the edge), or where another OOM on the card failed at
        that peak alone. Else it is only the largest request seen, a lower bound: a request just above it that
        failed beside a neighbour proves nothing about the card (fleet 72508 of bench/truth.py: a 12.15 GiB
        need beside 134 GiB on a 139.80 GiB card whose largest request served had been 12.06 GiB)."""
        return self.edge_shown or not self.other or self.other_unnamed

    def at_edge(self, need: int | None) -> bool:
        """Does `need` reach the largest peak the card has served?"""
        if need is None or self.limit is None:
            return False
        return need >= self.limit - EDGE_ERRORS * (self.need_error or 0)

    def crowding_odds(self) -> tuple[float, float]:
        """Of a request at the card's edge that failed: how likely is its own size the reason, and how likely what
        stood beside it (the baseline's rise, a neighbour's bytes)? Its real need is the estimate plus an error
        e ~ N(0, need_error^2). On a healthy baseline alone on the card it fails when e > gap (gap: the card's edge
        less the healthy need), as it stood when e > gap - added; so its own size is the reason with P(e > gap),
        what was added with P(gap - added < e <= gap). The edge is the largest peak served, or anywhere between it
        and a larger need that failed alone (`_fails_alone`): the largest peak served is only a lower bound, and
        taken as the edge it gave a leak's OOMs whose healthy need lay 0.2 to 0.5 % above it to capacity (fleet
        104626 of bench/truth.py: 17.04 GiB needs, 17.00 GiB served, 17.12 GiB failed alone, the edge 17.09 GiB).
        (A margin of two errors toward capacity, as `at_edge` keeps where nothing else can explain a failure, would
        give a leak's or a neighbour's OOMs to capacity whenever the healthy need is merely near the limit: fleet
        38810 of bench/truth.py.)"""
        if self.healthy_need is None or self.limit is None:
            return 1.0, 0.0
        added = (self.excess if self.raised() else 0) + self.displaced
        own = self._fails_alone(self.healthy_need)
        return own, (self._fails_alone(self.healthy_need + added) - own if added > 0 else 0.0)

    def _fails_alone(self, need: float) -> float:
        """P(a request whose estimated need is `need` fails alone on this card). The card holds at least `limit`
        (it served that peak) and less than `ceiling` (a need that large failed alone on it); nothing says where
        in between, so each point is as likely. Without a ceiling above the limit, the limit is the edge."""
        error = self.need_error or 0
        if self.limit is None or self.ceiling is None or not self.band:
            return _upper_tail((self.limit or 0) - need, error)
        return _band_tail(need, error, self.limit, self.ceiling)

    @property
    def band(self) -> bool:
        """Is the card's edge known only to lie between the largest peak served and a larger need that failed?"""
        return self.limit is not None and self.ceiling is not None and self.ceiling > self.limit


def _upper_tail(gap: float, error: float) -> float:
    """P(e > gap) for an estimate's error e ~ N(0, error^2); a step at 0 without an error (need >= limit fails)."""
    if error <= 0:
        return 1.0 if gap <= 0 else 0.0
    return 0.5 * math.erfc(gap / (error * math.sqrt(2)))


def _band_tail(need: float, error: float, low: float, high: float) -> float:
    """P(need + e > L) for e ~ N(0, error^2) and the edge L uniform on [low, high]: the mean over L of
    `_upper_tail(L - need)`, in closed form with the antiderivative of the normal's upper tail,
    H(z) = z Q(z) - phi(z)."""
    width = high - low
    if error <= 0:
        return min(1.0, max(0.0, (need - low) / width))

    def antiderivative(z: float) -> float:
        return z * 0.5 * math.erfc(z / math.sqrt(2)) - math.exp(-z * z / 2) / math.sqrt(2 * math.pi)

    return error / width * (antiderivative((high - need) / error) - antiderivative((low - need) / error))


@dataclass(frozen=True)
class Verdict:
    """A cause, how sure, the sentence with the deciding numbers, and other factors that also played."""

    cause: str
    confidence: float
    evidence: str
    rule: str
    contributing: tuple[str, ...] = ()


def size(value: float | None) -> str:
    """Bytes for people: `9.87 GiB`, `522 MiB`."""
    if value is None:
        return "unknown"
    return format_bytes_short(value)


def _request(f: OomFacts) -> str:
    """`batch 16 x (3,308 + 102) = 54,560 tokens`, or what is known of it."""
    if f.tokens is None:
        return "the request"
    sizes = f"batch {f.batch} x ({f.input_tokens or 0:,} + {f.output_tokens or 0:,}) = {f.tokens:,} tokens"
    return f"the request ({sizes})"


def _neighbours(f: OomFacts) -> str:
    if f.other_unnamed:
        return (
            f"processes the message does not name held about {size(f.other)} (the card had "
            f"{size(f.in_use_on_card)} in use, more than this process's {size(f.reserved)} reserved and a context "
            f"account for)"
        )
    pids = ", ".join(str(p) for p in f.other_pids) or "?"
    noun = "process" if len(f.other_pids) == 1 else "processes"
    if f.other_seen_at is None:
        return f"{noun} {pids} held {size(f.other)}"
    names = ", ".join(dict.fromkeys(n for n in f.other_names if n))
    named = f" ({names})" if names else ""
    return f"{noun} {pids}{named} held {size(f.other)} (nvidia-smi at {f.other_seen_at:%Y-%m-%d %H:%M:%S})"


def from_snapshot(f: OomFacts) -> Verdict | None:
    """An OOM recorded in a snapshot's trace: the allocator's replayed state already decided it."""
    if f.origin != "snapshot" or f.snapshot is None:
        return None
    cause, explanation = f.snapshot
    cause = "process_cap" if cause == "per_process_cap" else cause
    return Verdict(cause, 0.9, f"snapshot: {explanation}", "snapshot")


def no_numbers(f: OomFacts) -> Verdict | None:
    """Nothing measured (a bare `CUDA error: out of memory`): nothing to decide from."""
    if f.requested is None and f.free is None and f.tokens is None and f.unallocated is None:
        return Verdict("unknown", 0.0, "the message carries no sizes and no request context", "no_numbers")
    return None


def outsized_by_tokens(f: OomFacts) -> Verdict | None:
    """Beside a neighbour, where no token-cost line sizes the request in bytes: a request of its version with no
    more tokens failed by its size alone on these cards, and its need grows with its tokens, so it fails without
    the neighbour too. (A failure with nothing beside it is the process's own already: `message_only`.)"""
    if not f.other or f.need is not None or f.tokens is None or f.tokens_failed_alone is None:
        return None
    if f.leaking or f.pool or f.tokens < f.tokens_failed_alone:
        return None
    text = (
        f"{_request(f)} is no smaller than one of {f.tokens_failed_alone:,} tokens of its version that failed on "
        f"{f.card} cards with nothing beside it and the card full, so it fails without the neighbour too (no "
        f"request log sizes its bytes); {_neighbours(f)} as well"
    )
    return Verdict("capacity", 0.8, text, "tokens_failed_alone", ("external_pressure",))


def dominant_neighbour(f: OomFacts) -> Verdict | None:
    """Other processes hold more of the device than this one: free is small because of them. Where the message
    states no in-use figure and the others are inferred from the card's accounting, this process holds what
    PyTorch reserved (the context is already counted on its side of that accounting)."""
    own = f.in_use if f.in_use is not None or not f.other_unnamed else f.reserved
    if not f.other or own is None or f.other < own:
        return None
    edge, served_without = f.at_edge(f.healthy_need), f.limit_without(f.other)
    if f.beyond_card(f.healthy_need) or (edge and served_without and f.edge_binds()):
        # the request needs more than the whole card holds even on a healthy baseline, or more than the card was
        # seen to serve with this neighbour away, where a failure alone showed that to be its edge: without the
        # neighbour it fails all the same, so the card's size is the cause and the neighbour a factor
        # (`counterfactual`)
        return None
    also = ("capacity",) if edge and not served_without else ()
    tail = ""
    if also:
        tail = (
            f"; {_request(f)} needed about {size(f.healthy_need)}, above the {size(f.limit)} that "
            f"succeeded here beside it, so it is also a capacity limit under that pressure"
        )
    elif edge:
        tail = (
            f"; {_request(f)} needed about {size(f.healthy_need)}, above the {size(f.limit)} largest peak served, "
            f"but no OOM on {f.card} cards failed there without a neighbour: the card holds more"
        )
    text = (
        f"{_neighbours(f)} of the {size(f.device_total)} device while this process had {size(own)}; "
        f"{size(f.free)} was free for a {size(f.requested)} request{tail}"
    )
    return Verdict("external_pressure", 0.9, text, "dominant_neighbour", also)


def fragmented(f: OomFacts) -> Verdict | None:
    """Reserved-but-unallocated covers the request with room to spare, yet no block fitted, and no new segment
    could be had: the allocator asks CUDA for one before it fails, so with the segment's room free on the device
    and no cap printed, something outside the cache refused it (`room_refused`; real: corpus oom/083, 203.49 GiB
    free for 2 MiB). Under a cap (`X allowed`, the H200 fragmentation capture) the device's free memory is not
    the process's."""
    if f.unallocated is None or f.requested is None or f.unallocated < f.requested:
        return None
    if f.segment_fits() and f.cap is None:
        return None
    slack = f.unallocated - f.requested
    if f.reserved and slack < FRAGMENTED_SLACK_SHARE * f.reserved:
        return None
    ratio = f.unallocated / max(1, f.requested)
    text = (
        f"{size(f.unallocated)} reserved but unallocated is {ratio:.1f}x the {size(f.requested)} "
        f"requested, yet the allocation failed with {size(f.free)} free: no cached block was large "
        f"enough"
    )
    return Verdict("fragmentation", 0.95 if ratio >= 2 else 0.8, text, "fragmentation")


def counterfactual(f: OomFacts) -> Verdict | None:
    """With the request's size: would it have fit on a healthy baseline, without the neighbour?"""
    if f.healthy_need is None or f.need is None or f.limit is None:
        return None
    if not f.at_edge(f.healthy_need):
        return _crowded(f, f.healthy_need)
    own, added = f.crowding_odds()
    binds = f.edge_binds()
    if added <= own and binds:
        return _capacity(f)
    verdict = _crowded(f, f.healthy_need)
    if verdict is None:
        return None
    where = (
        f"lies between that limit and the {size(f.ceiling)} that failed alone on {f.card} cards"
        if f.band and f.limit is not None and f.healthy_need >= f.limit
        else f"is within the estimate's error ({size(f.need_error)}) of that limit"
    )
    why = (
        f"on the healthy baseline it {where}, and what stood beside it is the likelier reason (P {added:.2f}, its "
        f"own size {own:.2f})"
        if binds
        else f"on the healthy baseline it reaches that limit, but no OOM on {f.card} cards failed there without a "
        f"neighbour: it is only the largest request served, not what the card holds"
    )
    return replace(verdict, evidence=f"{verdict.evidence}; {why}")


def _crowded(f: OomFacts, healthy_need: int) -> Verdict | None:
    """The leak or the neighbour, where the request fits without what it added."""
    if f.other:
        beside = f.at_edge(healthy_need + f.displaced)
        if f.raised() and f.at_edge(f.need) and not beside:
            return _leak(f, "leak_alone", also=("external_pressure",))
        return _external(f)
    if f.raised() and f.at_edge(f.need):
        return _leak(f, "leak_alone")
    return None


def _capacity(f: OomFacts) -> Verdict:
    also = tuple(c for c, on in (("external_pressure", bool(f.other)), ("leak", f.raised())) if on)
    text = (
        f"{_request(f)} needs about {size(f.healthy_need)} even on the healthy "
        f"{size(f.healthy_baseline)} baseline, at or above the {size(f.limit)} largest peak that "
        f"succeeded on {f.card} cards"
    )
    if f.other:
        text += f"; {_neighbours(f)} as well"
    return Verdict("capacity", 0.9, text, "capacity", also)


def _external(f: OomFacts) -> Verdict:
    also = ("leak",) if f.raised() else ()
    # sure when the neighbour's bytes are what pushes the request over the edge; else only the likeliest
    sure = f.healthy_need is not None and f.other is not None and f.at_edge(f.healthy_need + f.displaced)
    text = (
        f"{_neighbours(f)} on the device; {_request(f)} needed about {size(f.healthy_need)} on the healthy "
        f"baseline, within the {size(f.limit)} that succeeds on {f.card} cards without it; {size(f.free)} was free"
    )
    return Verdict("external_pressure", 0.85 if sure else 0.6, text, "neighbour_counterfactual", also)


def _leak(f: OomFacts, rule: str, also: tuple[str, ...] = ()) -> Verdict:
    rate = f", climbing {size(f.slope)}/h" if f.slope else ""
    where = (
        f"allocated baseline at least {size(f.baseline)} (PyTorch held {size(f.allocated)} when the request "
        f"asked for {size(f.requested)} more) is {size(f.excess)} above the {size(f.healthy_baseline)} a fresh "
        f"process of its version starts from on {f.card} cards{rate.replace('climbing', 'which leaks')}"
        if f.baseline_inferred
        else f"allocated baseline {size(f.baseline)} is {size(f.excess)} above the lifetime's starting "
        f"{size(f.healthy_baseline)}{rate}"
    )
    text = (
        f"{where}; {_request(f)} needed about {size(f.need)} against the "
        f"{size(f.limit)} that succeeds on {f.card} cards, {size(f.healthy_need)} on the starting "
        f"baseline"
    )
    return Verdict("leak", 0.9 if f.leaking else 0.7, text, rule, also)


def leak_dominates(f: OomFacts) -> Verdict | None:
    """A leaking lifetime whose leaked bytes fill most of the limit: the leak, whatever the request."""
    if not f.leaking or f.limit is None or f.excess < LEAK_DOMINANT_SHARE * f.limit:
        return None
    return _leak(f, "leak_dominates")


def process_cap(f: OomFacts) -> Verdict | None:
    """A per-process cap (`X allowed`) refused the request while the device still had room."""
    if f.cap is None or f.free is None or f.requested is None or f.free < f.requested:
        return None
    text = (
        f"the device had {size(f.free)} free, but the process is capped at {size(f.cap)} "
        f"(set_per_process_memory_fraction) and asked for {size(f.requested)} more"
    )
    return Verdict("process_cap", 0.85, text, "process_cap")


def room_refused(f: OomFacts) -> Verdict | None:
    """The device had room for the new segment the request needed, and no cap is printed: neither the card nor
    the cache was short, so a limit outside PyTorch's counters refused it (a memory fraction the message does not
    print, a container's or the driver's limit)."""
    if f.cap is not None or not f.segment_fits():
        return None
    text = (
        f"the device had {size(f.free)} free for a {size(f.requested)} request, room for the new segment the "
        f"allocator asks CUDA for: a limit outside PyTorch's counters refused it (set_per_process_memory_fraction, "
        f"a container's GPU memory limit, the driver), not the card and not fragmentation"
    )
    return Verdict("process_cap", 0.5, text, "room_refused")


def preallocated_pool(f: OomFacts) -> Verdict | None:
    """A serving engine that reserves most of the device at start (vLLM, TGI)."""
    if not f.pool and f.framework != "vllm":
        return None
    text = (
        f"the process holds a pool reserved at start ({size(f.baseline or f.reserved)} of "
        f"{size(f.device_total)}), flat since; the {size(f.requested)} request did not fit beside it"
    )
    return Verdict("preallocated_pool", 0.7, text, "preallocated_pool")


def nearly_full_cache(f: OomFacts) -> Verdict | None:
    """Cached-but-free memory covered the request, but only as the slack every caching allocator keeps: the
    cache and the card were full, so defragmenting would have bought this request and not the next one."""
    if f.unallocated is None or f.requested is None or f.unallocated < f.requested:
        return None
    if f.free is not None and f.free >= f.requested:
        return None  # the card had room: not a full card (a cap decides earlier, when one is stated)
    text = (
        f"{size(f.unallocated)} reserved but unallocated covered the {size(f.requested)} request, but only as the "
        f"slack of a full cache: {size(f.unallocated - f.requested)} beyond it, under "
        f"{FRAGMENTED_SLACK_SHARE:.0%} of the {size(f.reserved)} reserved, and {size(f.free)} free on the card"
    )
    return Verdict("capacity", 0.6, text, "nearly_full_cache")


def transient(f: OomFacts) -> Verdict | None:
    """A request that fits the card by every measure failed anyway: a passing peak (concurrency, spikes)."""
    if f.need is None or f.limit is None:
        return None
    also = ("leak",) if f.raised() else ()
    against = "at or above" if f.at_edge(f.need) else "below"
    text = (
        f"{_request(f)} needed about {size(f.need)}, {against} the {size(f.limit)} that succeeds on "
        f"{f.card} cards, with no neighbour named, no cap reached and no rise of the baseline that tipped it: a "
        f"transient peak"
    )
    return Verdict("transient_peak", 0.5, text, "transient", also)


def message_only(f: OomFacts) -> Verdict | None:
    """No request context: the message alone says whether others held memory."""
    if f.other:
        text = (
            f"{_neighbours(f)} while this process had {size(f.in_use)}; {size(f.free)} free for a "
            f"{size(f.requested)} request (no request log to size the request itself)"
        )
        return Verdict("external_pressure", 0.6, text, "message_neighbour")
    if f.requested is None or f.free is None:
        return None
    own = f.in_use if f.in_use is not None else f.reserved
    if f.in_use_on_card is not None and own is not None:
        # the card's accounting was checked (fct_oom_context.unnamed_other_bytes) and nobody else holds memory:
        # the process filled the card itself, whatever ran beside it
        text = (
            f"{size(f.requested)} requested with {size(f.free)} free: the card's {size(f.in_use_on_card)} in use "
            f"is this process's ({size(own)} {'in use' if f.in_use is not None else 'reserved'} and its context), "
            f"no other process holds memory on it (no request log to size the request itself)"
        )
        return Verdict("capacity", 0.4, text, "own_memory")  # as sure of the cause as message_capacity
    text = (
        f"{size(f.requested)} requested with {size(f.free)} free and {size(f.unallocated)} cached; "
        f"no other process named (no request log to size the request itself)"
    )
    return Verdict("capacity", 0.4, text, "message_capacity")


RULES: tuple[Callable[[OomFacts], Verdict | None], ...] = (
    from_snapshot,
    no_numbers,
    outsized_by_tokens,
    dominant_neighbour,
    fragmented,
    counterfactual,
    leak_dominates,
    process_cap,
    room_refused,
    preallocated_pool,
    nearly_full_cache,
    transient,
    message_only,
)


def decide(facts: OomFacts) -> Verdict:
    """The first rule that applies; a listed process found to be this one is said in its evidence."""
    verdict = next(
        (v for v in (rule(facts) for rule in RULES) if v is not None),
        Verdict("unknown", 0.0, "no rule applies to the numbers available", "none"),
    )
    if facts.self_basis is None:
        return verdict
    return replace(verdict, evidence=f"{verdict.evidence}; {facts.self_basis}")
