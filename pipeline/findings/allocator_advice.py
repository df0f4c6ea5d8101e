"""What to set in PYTORCH_CUDA_ALLOC_CONF next, given what a process already runs with
(`analyses.fleet.allocator_settings`): an option already on is never advised again; the next step is, with why.

The physics the steps rest on (c10/cuda/CUDACachingAllocator.cpp):
- Before it raises an OOM, the allocator frees every cached block it can (`release_cached_blocks`) and retries. The
  reserved-but-unallocated memory an OOM message reports is what that release could not return: free space inside
  segments (or, with expandable segments, inside pages) that also hold live tensors.
- Expandable segments map memory in pages of 20 MiB for allocations over 1 MiB (2 MiB below), so a hole smaller
  than a page between live tensors stays mapped whatever the allocator does.
- `garbage_collection_threshold` starts a release of the cached blocks not used lately earlier, once reserved memory
  passes that share of what the process may use; PyTorch collects only in a process given a memory fraction
  (`torch.cuda.set_per_process_memory_fraction`: the threshold is a share of it). It keeps a cache from filling the
  card, but it frees no page that still holds a live tensor, so it cannot cure fragmentation.
- `roundup_power2_divisions:N` rounds each size up to a multiple of 1/N of its power of two, so that a freed block
  fits later requests of a near size; the padding is at most 1/N of the size.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..analyses.fleet.allocator_settings import AllocatorSettings
from ..analyses.fleet.sizing import STEADY_TARGET

EXPANDABLE = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
# A quarter of each power of two: at most 25 % padding per tensor, and four size classes per doubling for a
# freed block to be reused by.
ROUNDUP_DIVISIONS = 4
# Where garbage collection starts: the steady level the sizing rules hold the card under (STEADY_TARGET, 60 %),
# so that the cache is given back before it lifts the level above the target, not when an allocation fails.
GC_THRESHOLD = STEADY_TARGET


@dataclass(frozen=True)
class Step:
    """The next allocator step: `headline` (one line, for a report's action) and `advice` (what and why);
    `setting` names the option it advises (None: no option, a change of code)."""

    headline: str
    advice: str
    setting: str | None


def fragmentation_step(settings: AllocatorSettings, where: str, unallocated: str) -> Step:
    """The step for OOMs that failed although `unallocated` (a size) was reserved but free, on `where`."""
    if settings.values.get("backend", "").lower() == "cudamallocasync":
        return _async_backend(settings, where)
    if not settings.is_on("expandable_segments"):
        return Step(
            f"set {EXPANDABLE}",
            f"set {EXPANDABLE} on {where}; find the long-lived small allocations that pin segments "
            f"(a snapshot's top sites) and free or pool them",
            "expandable_segments",
        )
    if not settings.is_set("roundup_power2_divisions"):
        return _fewer_sizes(settings, where, unallocated)
    return _long_lived_apart(settings, where, unallocated)


def _async_backend(settings: AllocatorSettings, where: str) -> Step:
    """cudaMallocAsync places memory itself: expandable_segments belongs to the native allocator."""
    return Step(
        "switch to the native allocator with expandable segments",
        f"{where} runs the cudaMallocAsync backend ({_seen(settings, 'backend')}), which ignores expandable_segments: "
        f"set PYTORCH_CUDA_ALLOC_CONF=backend:native,expandable_segments:True, and find the long-lived small "
        f"allocations that pin memory (a snapshot's top sites) and free or pool them",
        "backend",
    )


def _fewer_sizes(settings: AllocatorSettings, where: str, unallocated: str) -> Step:
    """Expandable segments on, sizes not rounded: fewer distinct sizes let freed blocks be reused."""
    return Step(
        "reduce the number of distinct tensor sizes (roundup_power2_divisions)",
        f"expandable_segments is already on for {where} ({_seen(settings, 'expandable_segments')}), and the OOMs "
        f"still left {unallocated} reserved but unallocated: PyTorch frees every cached page it can before it "
        f"raises an OOM, so that memory lies in pages that still hold live tensors (expandable segments map 20 MiB "
        f"pages, 2 MiB for allocations of 1 MiB or less); garbage_collection_threshold would not free it either, "
        f"it only starts the same release earlier. Reduce the number of distinct tensor sizes so that a freed "
        f"block fits the next request: pad shapes to a few sizes, or add "
        f"roundup_power2_divisions:{ROUNDUP_DIVISIONS} to PYTORCH_CUDA_ALLOC_CONF (sizes round up to a "
        f"{_fraction(ROUNDUP_DIVISIONS)} of their power of two: at most {100 // ROUNDUP_DIVISIONS} % padding); and "
        f"allocate long-lived tensors apart from per-request ones (a snapshot's top sites show which pin the pages)",
        "roundup_power2_divisions",
    )


def _long_lived_apart(settings: AllocatorSettings, where: str, unallocated: str) -> Step:
    """Expandable segments and rounding both on: what is left is where long-lived tensors sit."""
    return Step(
        "allocate long-lived tensors apart from per-request ones",
        f"expandable_segments and roundup_power2_divisions are already on for {where} "
        f"({_seen(settings, 'expandable_segments')}), and the OOMs still left {unallocated} reserved but "
        f"unallocated, in pages that still hold live tensors (PyTorch frees every other cached page before it "
        f"raises an OOM, so garbage_collection_threshold would not free it either): allocate long-lived tensors "
        f"at start-up or in a pool of their own (torch.cuda.MemPool), so that per-request tensors do not "
        f"interleave with them; a snapshot's top sites show which pin the pages",
        None,
    )


EMPTY_CACHE = "empty_cache() between requests"


def cache_option(settings: AllocatorSettings) -> str | None:
    """The allocator option that returns a cache filling the card (held memory, not tensors) and is not on yet,
    with why; None when both are on (then only empty_cache() is left, see `cache_spent`)."""
    if not settings.is_on("expandable_segments"):
        return EXPANDABLE
    if not settings.is_set("garbage_collection_threshold"):
        return (
            f"garbage_collection_threshold:{GC_THRESHOLD} in PYTORCH_CUDA_ALLOC_CONF with a memory fraction set "
            f"(torch.cuda.set_per_process_memory_fraction: PyTorch collects only then) (expandable_segments is "
            f"already on, {_seen(settings, 'expandable_segments')}; with the threshold the allocator gives back "
            f"the cached blocks it has not used lately once it holds {GC_THRESHOLD * 100:.0f} % of that fraction, "
            f"the steady level the sizing rules aim for, instead of when an allocation fails)"
        )
    return None


def cache_spent(settings: AllocatorSettings) -> str:
    """Why no option is advised: `(expandable_segments and garbage_collection_threshold:0.8 are already on, ...)`."""
    return (
        f"(expandable_segments and garbage_collection_threshold:{settings.values['garbage_collection_threshold']} "
        f"are already on, {_seen(settings, 'garbage_collection_threshold')})"
    )


def cache_step(settings: AllocatorSettings) -> str:
    """The cache remedy as a headline (a finding's `allocator_step`): the option to set, else empty_cache()."""
    if not settings.is_on("expandable_segments"):
        return f"set {EXPANDABLE}"
    if not settings.is_set("garbage_collection_threshold"):
        return f"set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,garbage_collection_threshold:{GC_THRESHOLD}"
    return f"call {EMPTY_CACHE}"


def cache_advice(settings: AllocatorSettings, option_first: bool) -> dict[str, object]:
    """What a finding about a cache filling the card carries: the settings seen (`allocator_settings`), the
    headline step (`allocator_step`) and the remedy in words, the option to set before or after empty_cache()
    as the finding's sentence reads, or empty_cache() alone with why when every option is on."""
    option = cache_option(settings)
    if option is None:
        remedy = f"{EMPTY_CACHE} {cache_spent(settings)}"
    else:
        remedy = f"{option} or {EMPTY_CACHE}" if option_first else f"{EMPTY_CACHE} or set {option}"
    return {"allocator_settings": settings.as_metrics(), "allocator_step": cache_step(settings), "remedy": remedy}


def _seen(settings: AllocatorSettings, setting: str) -> str:
    """`seen in a snapshot`, `seen in a text log`: where the option was found."""
    origin = settings.seen_in.get(setting)
    return f"seen in a {origin}" if origin else "as configured"


def _fraction(divisions: int) -> str:
    return {2: "half", 4: "quarter", 8: "eighth"}.get(divisions, f"1/{divisions}")
