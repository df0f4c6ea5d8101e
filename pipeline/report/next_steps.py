"""What to do after an OOM, by its cause, with the incident's own numbers in each step."""

from __future__ import annotations

from typing import Any

from ..analyses.fleet.allocator_settings import AllocatorSettings
from ..findings.allocator_advice import EXPANDABLE, fragmentation_step
from ..findings.wording import leak_place
from .formatting import size


def next_steps(
    verdict: dict[str, Any],
    event: dict[str, Any],
    snapshot: dict[str, Any] | None,
    settings: AllocatorSettings | None = None,
    cap: dict[str, Any] | None = None,
) -> list[str]:
    """Ordered steps for the cause the classifier found, then what would confirm it; `settings` are the allocator
    options the instance ran with (an option already on is not advised again); `cap` the week's cap for the
    card (incident_data.week_cap), quoted as the weekly report states it."""
    steps = list(_by_cause(verdict, event, snapshot, settings or AllocatorSettings(), cap))
    if snapshot is None:
        steps.append(
            "Capture a snapshot on the next OOM (oomlab.capture with snapshots on) to see the allocator's "
            "layout and the allocation sites at the failure."
        )
    return steps


def _by_cause(
    verdict: dict[str, Any],
    event: dict[str, Any],
    snapshot: dict[str, Any] | None,
    settings: AllocatorSettings,
    cap: dict[str, Any] | None,
) -> list[str]:
    cause = verdict.get("cause")
    instance, version = event.get("instance"), event.get("model_version") or "this model version"
    requested = size(event.get("requested_bytes"))
    if cause == "leak":
        where = leak_place(_suspect(snapshot))
        return [
            f"Fix the leak{where} in {version}: memory allocated there is kept after requests end.",
            f"Until then, restart {instance} before the baseline reaches the card, or roll back {version}.",
        ]
    if cause == "fragmentation":
        unallocated = size(event.get("reserved_unallocated_bytes"))
        step = fragmentation_step(settings, str(instance), unallocated)
        if step.setting != "expandable_segments":
            return [f"{step.advice[0].upper()}{step.advice[1:]}."]
        return [
            f"Set {EXPANDABLE} on {instance}: {size(event.get('reserved_unallocated_bytes'))} was reserved but "
            f"unallocated, yet no free block fit {requested}.",
            "Find the long-lived small allocations that pin segments (the snapshot's top sites) and free or pool "
            "them; empty_cache() does not help while a segment holds one live block.",
        ]
    if cause in ("capacity", "transient_peak"):
        return [
            _cap_step(event, cap),
            "If such requests must be served, move the model to a card with 1.3-1.5x its measured peak.",
        ]
    if cause == "external_pressure":
        # the classifier's figures: the neighbours it found, and memory no named process accounts for
        listed = verdict.get("other_pids") or event.get("other_pids") or []
        held = size(verdict.get("other_bytes") or event.get("other_bytes"))
        who = f"process {', '.join(map(str, listed))} ({held})" if listed else f"the processes holding {held}"
        unnamed = "" if listed else " (the OOM message names none: nvidia-smi on the host lists them)"
        return [
            f"Move {who} off {instance}'s GPU{unnamed}, or give the service a card of its own.",
            "Check the calendar: a job that starts processes on the GPU host at this time is the usual culprit.",
        ]
    if cause == "process_cap":
        return [
            f"The per-process cap ({size(event.get('cap_bytes'))}) was reached while the device had free "
            "memory: raise set_per_process_memory_fraction / gpu_memory_utilization, or lower the load."
        ]
    if cause == "preallocated_pool":
        return [
            "The pool reserved at start-up left too little for activations: lower gpu_memory_utilization or "
            "the maximum sequence length."
        ]
    return [
        "The numbers do not single out a cause: compare with the similar incidents below and capture a "
        "snapshot on the next failure."
    ]


def headline(step: str) -> tuple[str, str]:
    """A step as the action to read first (up to its first `: ` or sentence end) and the rest of it."""
    ends = [i for i in (step.find(": "), step.find(". ")) if i > 0]
    if not ends:
        return step.rstrip("."), ""
    cut = min(ends)
    rest = step[cut + 2 :]
    return step[:cut], rest[:1].upper() + rest[1:]


def _cap_step(event: dict[str, Any], cap: dict[str, Any] | None) -> str:
    """The week's cap in its finding's words when there is one; else below this request's own size."""
    tokens = event.get("tokens")
    this = (
        f"this request was {tokens:,} batch x (input + output) tokens" if tokens else "this request's size is unknown"
    )
    if cap is not None:
        return (
            f"{cap['title']}. The weekly report for {cap['since']:%Y-%m-%d} to {cap['until']:%Y-%m-%d} sets that cap; "
            f"{this}. Queue larger requests (admission control) rather than shrinking the batch."
        )
    below = f" below this request's {tokens:,} batch x (input + output) tokens" if tokens else ""
    return (
        f"Cap request size{below} on {event.get('instance')} (admission control with a queue rather than a smaller "
        "batch); no weekly finding sets a cap for this card yet."
    )


def _suspect(snapshot: dict[str, Any] | None) -> dict[str, Any] | None:
    if snapshot and snapshot["leak_suspects"]:
        return dict(snapshot["leak_suspects"][0])
    return None
