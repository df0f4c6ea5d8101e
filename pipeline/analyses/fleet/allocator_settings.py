"""The allocator settings each instance was seen to run with (`fct_allocator_settings`: text logs, request logs,
snapshots), so that advice never repeats what is already on.

A setting holds from where it was seen: the one in effect at a moment is the last sighting at or before it (a
sighting of unknown time counts for the whole history, and a dated one overrides it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

import duckdb
import polars as pl

from ...load.sql import sql_text
from ..shared import shared

_TRUE = frozenset({"true", "1", "yes"})
# What `allocator_settings` returns where nothing was seen.
NO_SIGHTINGS = pl.DataFrame(
    schema={
        "instance": pl.Utf8,
        "ts": pl.Datetime("us"),
        "setting": pl.Utf8,
        "value": pl.Utf8,
        "origin": pl.Utf8,
        "source_id": pl.Int32,
        "line": pl.Int64,
    }
)


@dataclass(frozen=True)
class AllocatorSettings:
    """The options in effect on some instances: `values` by option (as written, switches `true` / `false`), and
    where each was seen (`seen_in`: `snapshot`, `text log`, `request log`)."""

    values: Mapping[str, str] = field(default_factory=dict)
    seen_in: Mapping[str, str] = field(default_factory=dict)

    def is_on(self, setting: str) -> bool:
        """Whether a switch is on (`expandable_segments`)."""
        return self.values.get(setting, "").strip().lower() in _TRUE

    def is_set(self, setting: str) -> bool:
        """Whether an option was given at all (`roundup_power2_divisions`, `garbage_collection_threshold`)."""
        return setting in self.values

    def as_metrics(self) -> dict[str, str]:
        """The options for a finding's metrics, in a stable order."""
        return dict(sorted(self.values.items()))


@shared()
def allocator_settings(con: duckdb.DuckDBPyConnection, until: datetime | None = None) -> pl.DataFrame:
    """Every sighting of an allocator option before `until`: instance, ts, setting, value, origin (oldest first)."""
    return con.sql(sql_text("q_allocator_settings"), params={"until": until}).pl()


def settings_for(sightings: pl.DataFrame, instances: Iterable[str], at: datetime | None = None) -> AllocatorSettings:
    """The options in effect on `instances` at `at` (None: the latest seen): per option the last sighting at or
    before it, on any of the instances (the hosts of one finding run one configuration, or the advice would differ)."""
    names = sorted(set(instances))
    rows = sightings.filter(pl.col("instance").is_in(names))
    if at is not None:
        rows = rows.filter(pl.col("ts").is_null() | (pl.col("ts") <= at))
    last = rows.sort("ts", nulls_last=False, maintain_order=True).group_by("setting", maintain_order=True).last()
    return AllocatorSettings(
        dict(zip(last["setting"].to_list(), last["value"].to_list(), strict=True)),
        dict(zip(last["setting"].to_list(), last["origin"].to_list(), strict=True)),
    )


def instance_settings(con: duckdb.DuckDBPyConnection, instance: str | None, at: datetime | None) -> AllocatorSettings:
    """The options in effect on one instance at `at` (None: the latest seen); none for an unnamed instance."""
    if instance is None:
        return AllocatorSettings()
    return settings_for(allocator_settings(con), [instance], at)
