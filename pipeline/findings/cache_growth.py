"""cache_growth findings: devices whose reserved memory climbed while the allocated baseline stayed flat
(analyses.fleet.leaks): PyTorch's allocator keeping freed blocks for reuse, not a leak. Said out loud because a
reserved or nvidia-smi level that climbs reads as a leak to anyone watching it."""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from ..analyses.fleet.allocator_settings import allocator_settings, settings_for
from ..analyses.fleet.leaks import lifetimes
from ..units import format_bytes_short
from .allocator_advice import cache_advice
from .finding import Finding, Window


def findings(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> list[Finding]:
    """A `cache_growth` finding per device whose latest cache-growth lifetime overlaps [since, until).

    impact: 0: the allocator frees its cache before it raises an OOM, so the growth alone causes none.
    """
    lives = lifetimes(con, since, until).filter(pl.col("is_cache_growth"))
    if lives.is_empty():
        return []
    sightings = allocator_settings(con, until)
    latest = lives.sort("end").group_by(["instance", "gpu_index"], maintain_order=True).last()
    counts = lives.group_by(["instance", "gpu_index"]).len()
    rows = latest.join(counts, on=["instance", "gpu_index"]).sort(["instance", "gpu_index"])
    return [_finding(row, sightings) for row in rows.iter_rows(named=True)]


def _finding(life: dict, sightings: pl.DataFrame) -> Finding:
    """The sentence, the advice and the metrics of one device's cache growth."""
    where = life["instance"] if life["gpu_index"] == 0 else f"{life['instance']} GPU {life['gpu_index']}"
    advice_facts = cache_advice(settings_for(sightings, [life["instance"]], life["end"]), option_first=True)
    more = f" (and in {life['len'] - 1} earlier process lifetimes)" if life["len"] > 1 else ""
    text = (
        f"reserved memory on {where} grew from {format_bytes_short(life['reserved_low_bytes'])} to "
        f"{format_bytes_short(life['reserved_end_bytes'])} over {life['requests']} requests while allocated memory "
        f"after requests stayed at {format_bytes_short(life['baseline_start_bytes'])} "
        f"(ending at {format_bytes_short(life['baseline_end_bytes'])}){more}: PyTorch's allocator keeps the blocks "
        f"requests freed for the next ones, so this is cache growth, not a leak"
    )
    advice = (
        "do not chase a leak: alert on allocated memory (torch.cuda.memory_allocated()), not on reserved memory or "
        "nvidia-smi's used; the allocator gives its cache back before it raises an OOM. If other processes on the "
        f"card need that memory: {advice_facts['remedy']}"
    )
    metrics = {
        "instance": life["instance"],
        "gpu_index": life["gpu_index"],
        "card": life["card"],
        "model_version": life["model_version"],
        "lifetimes": life["len"],
        "requests": life["requests"],
        "allocated_start_bytes": life["baseline_start_bytes"],
        "allocated_end_bytes": life["baseline_end_bytes"],
        "reserved_low_bytes": life["reserved_low_bytes"],
        "reserved_end_bytes": life["reserved_end_bytes"],
        "reserved_growth_bytes": life["reserved_growth_bytes"],
        "allocator_settings": advice_facts["allocator_settings"],
        "allocator_step": advice_facts["allocator_step"],
    }
    # the verdict rests on two measured levels (allocated flat, reserved up), not on a fit
    return Finding("cache_growth", where, text, advice, 0.9, 0.0, Window(life["start"], life["end"]), metrics)
