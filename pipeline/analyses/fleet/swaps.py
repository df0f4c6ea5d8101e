"""Leaks across model swaps: a process that serves several models in turn and keeps memory of each it unloads.

A multi-model server (or a service that swaps checkpoints, adapters or pipelines) loads a model, serves it,
unloads it and loads another. If a reference to the unloaded model survives (a cache, a closure, an optimizer
or a global list), its tensors stay allocated, and every turn adds the size of what was unloaded. The request
leak analysis (`leaks`) cannot see it: it counts a change of version as a restart, and a swap log has too few
rows per turn for a trend. The physics that can: the same model loaded again holds the same bytes (the same
weights and buffers), so a process that frees what it unloads shows the same level each time a version returns
(view `fct_model_stints`), and a process that leaks shows a higher one every time.

A run of turns ends where memory was given back (a return that holds clearly less than the version's previous
turn: a restart, or a clean unload) or the process changed (pid or pod); each run is judged on its own, so a
fix shows as a leaking run followed by a clean one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb
import polars as pl

from ...load.sql import sql_text
from ...units import MIB
from .leaks import MIN_GROWTH_BYTES

# A return "grew" when it holds more than the allocator's rounding can add to the same set of tensors: large
# blocks are rounded to 2 MiB (kRoundLarge in CUDACachingAllocator.cpp), so equal loads differ by less.
ROUNDING_BYTES = 2 * MIB
# Two returns at least: one return that holds more can be a buffer created on first use (a workspace, a
# compiled graph's pool); two that each hold more are a pattern. The run's growth must clear the leak floor that
# the request analysis uses (leaks.MIN_GROWTH_BYTES) for the same reason: rounding and jitter stay under it.
MIN_RETURNS = 2


@dataclass(frozen=True)
class Run:
    """Consecutive turns of one process between two give-backs."""

    instance: str
    gpu_index: int
    rows: list[dict]

    def returns(self) -> list[dict]:
        """The turns of a version the run held before, each with `growth_bytes` against its previous turn."""
        seen: dict[str, int] = {}
        out = []
        for row in self.rows:
            previous = seen.get(row["model_version"])
            if previous is not None:
                out.append({**row, "growth_bytes": row["level_bytes"] - previous})
            seen[row["model_version"]] = row["level_bytes"]
        return out


SWAP_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "instance": pl.Utf8,
    "gpu_index": pl.Int32,
    "models": pl.List(pl.Utf8),
    "turns": pl.Int64,
    "returns": pl.Int64,
    "growing_returns": pl.Int64,
    "growth_bytes": pl.Int64,
    "first_level_bytes": pl.Int64,
    "last_level_bytes": pl.Int64,
    "start": pl.Datetime("us"),
    "end": pl.Datetime("us"),
    "requests": pl.Int64,
    "ooms": pl.Int64,
    "is_leak": pl.Boolean,
    "given_back_at": pl.Datetime("us"),
    "given_back_level_bytes": pl.Int64,
}


def swap_runs(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """One row per run of model turns on a device that served two or more versions: its returns, how many grew,
    the growth summed over them, and `is_leak` (MIN_RETURNS or more returns, every one grew by more than
    ROUNDING_BYTES, and MIN_GROWTH_BYTES in all); `given_back_at` is when the memory came back (the next run's
    start), None while the run lasts."""
    stints = con.sql(sql_text("q_model_stints"), params={"since": since, "until": until}).pl()
    rows = []
    for (instance, gpu_index), group in stints.group_by(["instance", "gpu_index"], maintain_order=True):
        runs = _runs(str(instance), int(gpu_index), group.to_dicts())
        rows.extend(_judge(run, after) for run, after in zip(runs, [*runs[1:], None], strict=True))
    return pl.DataFrame(rows, schema=SWAP_SCHEMA, orient="row")


def _runs(instance: str, gpu_index: int, stints: list[dict]) -> list[Run]:
    """Cut a device's stints where a process ended or memory was given back."""
    runs: list[Run] = []
    current: list[dict] = []
    levels: dict[str, int] = {}
    for stint in stints:
        previous = levels.get(stint["model_version"])
        new_process = bool(current) and (stint["pid"], stint["pod"]) != (current[-1]["pid"], current[-1]["pod"])
        gave_back = previous is not None and stint["level_bytes"] < previous - MIN_GROWTH_BYTES
        if new_process or gave_back:
            runs.append(Run(instance, gpu_index, current))
            current, levels = [], {}
        current.append(stint)
        levels[stint["model_version"]] = stint["level_bytes"]
    if current:
        runs.append(Run(instance, gpu_index, current))
    return runs


def _judge(run: Run, after: Run | None) -> tuple:
    """The row of one run."""
    returns = run.returns()
    growing = sum(r["growth_bytes"] > ROUNDING_BYTES for r in returns)
    growth = sum(r["growth_bytes"] for r in returns)
    is_leak = len(returns) >= MIN_RETURNS and growing == len(returns) and growth >= MIN_GROWTH_BYTES
    rows = run.rows
    return (
        run.instance,
        run.gpu_index,
        sorted({r["model_version"] for r in rows}),
        len(rows),
        len(returns),
        growing,
        growth,
        rows[0]["level_bytes"],
        rows[-1]["level_bytes"],
        rows[0]["stint_start"],
        rows[-1]["stint_end"],
        sum(r["requests"] for r in rows),
        sum(r["ooms"] for r in rows),
        is_leak,
        None if after is None else after.rows[0]["stint_start"],
        None if after is None else after.rows[0]["level_bytes"],
    )
