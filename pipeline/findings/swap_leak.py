"""leak findings from model swaps: a process whose every return to a model holds more than the turn before
(analyses.fleet.swaps), with when, if ever, the memory came back."""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from ..analyses.fleet.swaps import MIN_RETURNS, swap_runs
from ..units import format_bytes_short
from .finding import Finding, Window


def findings(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> list[Finding]:
    """A `leak` finding per device whose model swaps leak; later runs on it that did not leak say whether a fix
    (a clean unload) held."""
    runs = swap_runs(con, since, until)
    return [_finding(row, runs) for row in runs.filter(pl.col("is_leak")).iter_rows(named=True)]


def _finding(run: dict, runs: pl.DataFrame) -> Finding:
    """The sentence, the advice and the metrics of one leaking run of swaps."""
    where = run["instance"] if run["gpu_index"] == 0 else f"{run['instance']} GPU {run['gpu_index']}"
    per_return = run["growth_bytes"] / run["returns"]
    later = runs.filter(
        (pl.col("instance") == run["instance"])
        & (pl.col("gpu_index") == run["gpu_index"])
        & (pl.col("start") > run["end"])
    )
    clean = later.filter(~pl.col("is_leak") & (pl.col("returns") > 0))
    text = (
        f"each of {run['returns']} returns to a model ({', '.join(run['models'])}) on {where} held more than the "
        f"model's turn before, +{format_bytes_short(per_return)} on average, although the same model holds the "
        f"same weights each time: allocated memory climbed from {format_bytes_short(run['first_level_bytes'])} to "
        f"{format_bytes_short(run['last_level_bytes'])} over {run['turns']} turns from "
        f"{_when(run['start'], run)} to {_when(run['end'], run)} UTC{_given_back(run, clean)}; "
        f"{run['ooms']} OOMs in those turns"
    )
    advice = (
        "drop every reference to a model before loading the next (caches, closures, globals, optimizer state), "
        "then gc.collect() and torch.cuda.empty_cache(); a snapshot recorded over a few swaps shows which "
        "allocation sites outlive their model"
    )
    if not clean.is_empty():
        advice += (
            f"; the {int(clean['returns'].sum())} returns after the memory came back did not grow, so keep that unload"
        )
    metrics = {
        "instance": run["instance"],
        "instances": [run["instance"]],
        "gpu_index": run["gpu_index"],
        "models": run["models"],
        "turns": run["turns"],
        "returns": run["returns"],
        "growth_bytes": run["growth_bytes"],
        "growth_bytes_per_return": per_return,
        "first_level_bytes": run["first_level_bytes"],
        "last_level_bytes": run["last_level_bytes"],
        "given_back_at": None if run["given_back_at"] is None else run["given_back_at"].isoformat(),
        "given_back_level_bytes": run["given_back_level_bytes"],
        "clean_returns_after": int(clean["returns"].sum()),
        "leak_ooms": run["ooms"],
    }
    # the fewest returns that make a pattern leave room for a buffer made on first use; twice as many that all
    # grew leave little
    confidence = 0.9 if run["returns"] >= 2 * MIN_RETURNS else 0.7
    return Finding(
        "leak",
        f"model swaps on {where}",
        text,
        advice,
        confidence,
        float(run["ooms"]),
        Window(run["start"], run["end"]),
        metrics,
    )


def _when(moment: datetime, run: dict) -> str:
    """A time as precise as the run needs: milliseconds for a run of seconds, the date for one of days."""
    span = (run["end"] - run["start"]).total_seconds()
    if span < 60:
        return f"{moment:%Y-%m-%d %H:%M:%S}.{moment.microsecond // 1000:03d}"
    return f"{moment:%Y-%m-%d %H:%M}"


def _given_back(run: dict, clean: pl.DataFrame) -> str:
    """`; it came back to 0.35 GiB at 01:47:05 UTC, and 2 later returns did not grow` or nothing."""
    if run["given_back_at"] is None:
        return ""
    after = f", and {int(clean['returns'].sum())} later returns did not grow" if not clean.is_empty() else ""
    return (
        f"; it came back to {format_bytes_short(run['given_back_level_bytes'])} at "
        f"{_when(run['given_back_at'], run)} UTC (a restart or a clean unload){after}"
    )
