"""Findings from classified OOMs: fragmentation per instance, external pressure per neighbour, capacity
per card.

Input is `analyses.fleet.classify.classify_ooms`'s frame, one row per real OOM (the files that saw one failure
are one event: stg_oom_events). A scheduled job whose runs hold most of a neighbour's OOMs names the neighbour.
Fragmentation advice starts from the allocator settings the instance was seen to run with (allocator_advice.py).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import cast

import duckdb
import polars as pl

from ..analyses.fleet.allocator_settings import NO_SIGHTINGS, allocator_settings, settings_for
from ..analyses.fleet.classify import classify_ooms
from ..analyses.fleet.classify_rules import size
from ..analyses.fleet.jobs import ALPHA, neighbour_first_seen
from ..analyses.fleet.oom_limits import token_cost
from ..analyses.fleet.served import served_at_least
from ..load.sql import sql_text
from ..units import ooms_text
from .allocator_advice import fragmentation_step
from .finding import Finding, Window

# A job explains a neighbour when at least this share of the neighbour's OOMs fall inside its runs.
JOB_SHARE = 0.8
# OOMs that all fall within this many hours of the day form a recurring window worth naming.
RECURRING_SPAN_HOURS = 6


def findings(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> list[Finding]:
    """Fragmentation, external-pressure and capacity findings over [since, until)."""
    return cause_findings(con, classify_ooms(con, since, until))


def cause_findings(con: duckdb.DuckDBPyConnection, classified: pl.DataFrame) -> list[Finding]:
    """Fragmentation, external-pressure and capacity findings from one classification."""
    return [
        *fragmentation_findings(classified, allocator_settings(con)),
        *external_findings(con, classified),
        *capacity_findings(con, classified),
    ]


def _num(value: object) -> float | None:
    """A polars aggregate (median, max, ...) as a float; None stays None."""
    return None if value is None else float(cast(float, value))


def _window(events: pl.DataFrame) -> Window:
    """First to last OOM, and the daily window they fall in when they cluster by time of day."""
    times = events["ts"].drop_nulls()
    if times.is_empty():
        return Window()
    return Window(cast(datetime, times.min()), cast(datetime, times.max()), _recurring(times))


def _recurring(times: pl.Series) -> str | None:
    """`daily 01:00-02:30 UTC` when OOMs of several days fall in a few hours of a day (not over midnight)."""
    minutes = times.dt.hour().cast(pl.Int32) * 60 + times.dt.minute().cast(pl.Int32)
    low, high = int(_num(minutes.min()) or 0), int(_num(minutes.max()) or 0)
    if times.dt.date().n_unique() < 3 or high - low > RECURRING_SPAN_HOURS * 60:
        return None
    start, end = low // 30 * 30, min(24 * 60 - 1, (high // 30 + 1) * 30)
    return f"daily {start // 60:02d}:{start % 60:02d}-{end // 60:02d}:{end % 60:02d} UTC"


def _confidence(events: pl.DataFrame) -> float:
    return round(_num(events["confidence"].mean()) or 0.0, 2)


def fragmentation_findings(events: pl.DataFrame, sightings: pl.DataFrame | None = None) -> list[Finding]:
    """One finding per instance whose OOMs were fragmentation; `sightings` are the allocator settings seen
    (`analyses.fleet.allocator_settings`): the advice is the next step beyond what was on at its last OOM."""
    frag = events.filter(pl.col("cause") == "fragmentation")
    out = []
    for (instance,), group in frag.group_by(["instance"], maintain_order=True):
        ratio = _num((group["reserved_unallocated_bytes"] / group["requested_bytes"]).median())
        unalloc = _num(group["reserved_unallocated_bytes"].median())
        requested = size(_num(group["requested_bytes"].median()))
        free = size(_num(group["free_bytes"].median()))
        ooms = f"{group.height} OOM{'s' if group.height != 1 else ''} on {instance}"
        if unalloc is None:  # OOMs known from a snapshot alone: its segments showed the blocks, no message the sum
            text = (
                f"{ooms} failed for {requested} with {free} free on the device: the memory snapshot of the failure "
                "shows cached blocks, none large enough (no message with the reserved-but-unallocated figure was "
                "joined to it)"
            )
        else:
            text = (
                f"{ooms} failed although reserved-but-unallocated memory was {_ratio(ratio)} the request (median "
                f"{size(unalloc)} unallocated against {requested} requested, {free} free on the device): no cached "
                "block was large enough"
            )
        settings = settings_for(NO_SIGHTINGS if sightings is None else sightings, [instance], _last(group))
        step = fragmentation_step(settings, instance, size(unalloc))
        out.append(
            Finding(
                "fragmentation",
                f"instance {instance}",
                text,
                step.advice,
                _confidence(group),
                float(group.height),
                _window(group),
                {
                    "instance": instance,
                    "card": group["card"].drop_nulls().first() if "card" in group.columns else None,
                    "ooms": group.height,
                    "median_unallocated_bytes": unalloc,
                    "median_unallocated_to_requested": ratio,
                    "allocator_settings": settings.as_metrics(),
                    "allocator_step": step.headline,
                    "advised_setting": step.setting,
                },
            )
        )
    return out


def _last(group: pl.DataFrame) -> datetime | None:
    """The group's last OOM time (None when none has one): the settings in effect then are the ones it ran with."""
    return cast("datetime | None", group["ts"].max())


def _ratio(value: float | None) -> str:
    return "unknown" if value is None or math.isnan(value) else f"{value:.1f}x"


def external_findings(con: duckdb.DuckDBPyConnection, events: pl.DataFrame) -> list[Finding]:
    """One finding per neighbour: a scheduled job across its hosts, else each instance's other process."""
    ext = events.filter(pl.col("cause") == "external_pressure")
    if ext.is_empty():
        return []
    jobs = _job_of(con, ext)
    ext = ext.join(jobs, on="event_id", how="left")
    keyed = ext.with_columns(
        pl.coalesce(pl.concat_str(pl.lit("job "), "job"), pl.concat_str(pl.lit("instance "), "instance")).alias("key")
    )
    return [_external(key, group) for (key,), group in keyed.group_by(["key"], maintain_order=True)]


def _job_of(con: duckdb.DuckDBPyConnection, events: pl.DataFrame) -> pl.DataFrame:
    """Per event, the scheduled job running on its host at the time, when that job holds most of them."""
    inside = _windows_holding(con, events)
    # a job counts for an instance only when most of that instance's external OOMs fall in its windows
    per_instance = events.group_by("instance").agg(pl.len().alias("n"))
    share = (
        inside.group_by("instance", "name")
        .agg(pl.col("event_id").n_unique().alias("hits"))
        .join(per_instance, on="instance")
        .filter(pl.col("hits") >= JOB_SHARE * pl.col("n"))
        .join(_evidence_of_own(inside), on="name")
        .sort(["hits", "own_hits", "all_hits", "name"], descending=[True, True, True, False])
        .unique("instance", keep="first")
    )
    return (
        inside.join(share.select("instance", "name"), on=["instance", "name"])
        .select("event_id", pl.col("name").alias("job"))
        .unique("event_id")
    )


def _windows_holding(con: duckdb.DuckDBPyConnection, events: pl.DataFrame) -> pl.DataFrame:
    """(event_id, instance, name): the jobs whose window on the event's host holds it, the neighbour having arrived
    during the window (q_job_windows_holding, by the test the job tests use)."""
    seen = neighbour_first_seen(con, events.select("event_id", "instance", "ts", "other_pids"))
    params = {
        "ids": seen["event_id"].to_list(),
        "instances": seen["instance"].to_list(),
        "ts": seen["ts"].to_list(),
        "first_seen": seen["first_seen"].to_list(),
    }
    held = con.sql(sql_text("q_job_windows_holding"), params=params).pl()
    return held.rename({"id": "event_id"}).join(seen.select("event_id", "instance"), on="event_id")


def _evidence_of_own(inside: pl.DataFrame) -> pl.DataFrame:
    """Per job, fleet-wide: the neighbour OOMs inside its runs (`all_hits`) and those inside no other job's run
    (`own_hits`). Jobs whose runs overlap hold the same OOMs there; what tells them apart is where one ran
    alone, so a job seen only beside another loses to the one that also explains OOMs by itself."""
    jobs_per_event = inside.group_by("event_id").agg(pl.col("name").n_unique().alias("jobs"))
    return (
        inside.join(jobs_per_event, on="event_id")
        .group_by("name")
        .agg(
            pl.col("event_id").n_unique().alias("all_hits"),
            pl.col("event_id").filter(pl.col("jobs") == 1).n_unique().alias("own_hits"),
        )
    )


def _external(key: str, group: pl.DataFrame) -> Finding:
    """The neighbour's finding: who, how much it held, where, and what to move."""
    hosts = sorted(group["instance"].unique().to_list())
    pids = sorted({p for row in group["other_pids"].to_list() for p in (row or [])})
    held = _num(group["other_bytes"].median())
    job = group["job"][0]
    named = f"process {', '.join(map(str, pids[:3]))}" if pids else "processes the OOM messages do not name"
    who = f"job {job}'s process" if job else named
    also = group.filter(pl.col("contributing").list.contains("capacity")).height
    fit = group.filter(pl.col("rule") == "neighbour_counterfactual").height
    dominant = group.filter(pl.col("rule") == "dominant_neighbour").height
    seen = f" ({len(pids)} pid{'s' if len(pids) != 1 else ''} seen)" if pids else ""
    text = f"{ooms_text(group.height)} on {', '.join(hosts)} happened while {who} held {size(held)} of the device{seen}"
    if fit:
        text += f"; {fit} of the failing requests fit what these cards serve without it"
    if dominant:
        text += f"; in {dominant} it held more of the device than this service did"
    if also:
        text += f"; {also} were also larger than anything that succeeded beside it (capacity under pressure)"
    where = ", ".join(hosts)
    advice = (
        f"move job {job} off {where} or out of the traffic peak (its process holds {size(held)})"
        if job
        else f"move the neighbour process (pid {', '.join(map(str, pids[:3]))}, {size(held)}) off "
        f"host {where}, or give this service a card of its own"
        if pids
        else f"find what else holds {size(held)} of the GPU on {where} (nvidia-smi lists its processes) and move "
        "it off, or give this service a card of its own"
    )
    metrics = {
        "hosts": hosts,
        "job": job,
        "pids": pids,
        "median_neighbour_bytes": held,
        "ooms": group.height,
        "also_capacity": also,
    }
    return Finding(
        "external_pressure",
        key if job else f"neighbour on {key}",
        text,
        advice,
        _confidence(group),
        float(group.height),
        _window(group),
        metrics,
    )


def capacity_findings(con: duckdb.DuckDBPyConnection, events: pl.DataFrame) -> list[Finding]:
    """One finding per card: requests too large for it even on a healthy baseline; the budget that fits."""
    cap = events.filter(pl.col("cause") == "capacity")
    if cap.is_empty():
        return []
    cost = token_cost(con).select("model_version", "bytes_per_token", "fixed_bytes")
    edges = _token_edges(con, cap)
    out = []
    for (card,), group in cap.group_by(["card"], maintain_order=True):
        shown = edges.join(group.select("instance", "gpu_index").unique(), on=["instance", "gpu_index"])
        if _sized(group) or not shown.is_empty():
            out.append(_capacity(card, group, cost, shown))
    return out


def _sized(group: pl.DataFrame) -> bool:
    """Whether some OOM of a card shows by its request's size in bytes that the request alone was too large (rule
    `capacity`). A message with no request to size (`message_capacity`: little free, nobody else named;
    `own_memory`: the same, the card's accounting showing nobody else) fits a leak or a passing peak as well;
    such OOMs join a card's finding but make one only where their device's requests show an edge in tokens
    (`_token_edges`). So do those sized only in tokens against such a message (`tokens_failed_alone`)."""
    return not group.filter(pl.col("rule") == "capacity").is_empty()


def _token_edges(con: duckdb.DuckDBPyConnection, cap: pl.DataFrame) -> pl.DataFrame:
    """Per device and model version, of its capacity OOMs sized in tokens only (not by rule `capacity`): the
    smallest that failed (`tokens`), how many failed (`failed`), how many requests of at least that size succeeded
    there (`served_at_least`), the largest below it (`served_below`) and all that succeeded (`served`); only those
    where more failed, and where failures striking regardless of size would have landed that high improbably.

    A card's edge is a size: on a healthy process every request of the version above it fails, bar the few just
    above it that the scatter of bytes per token lets through. A leak or a passing peak fails a request whatever
    its size against the others, so requests as large as the smallest failure succeed at other times (earlier in
    the lifetime, without the peak), and of those sizes more succeed than fail. Where more failed, the size is what
    failed them, as a byte-sized OOM shows: fleet 109712 of `bench/truth.py --seed 109700`, where a version served
    only through a text log failed 31 requests from 14,489 tokens on an A10 that served 3 of that size or more
    (from its request lines) and 2,708 smaller ones.

    Failing where nothing is known to have succeeded proves nothing (a log that writes only its failures), so the
    failures must also be improbable as chance: were they k of the device's requests drawn regardless of size, all
    k would fall among the largest (served_at_least + k) of its (served + k) requests with the hypergeometric
    probability C(served_at_least + k, k) / C(served + k, k), which must be under the job tests' ALPHA."""
    keys = ["instance", "gpu_index", "model_version"]
    named = pl.col("tokens").is_not_null() & pl.col("model_version").is_not_null()
    sized = cap.filter(named & (pl.col("rule") != "capacity"))
    failed = sized.group_by(keys).agg(pl.col("tokens").min(), pl.len().cast(pl.Int64).alias("failed"))
    served = served_at_least(con, failed).drop("tokens")
    joined = failed.with_columns(pl.col("gpu_index").cast(pl.Int32)).join(served, on=keys, how="left")
    chance = [
        _all_among_largest(k, n, total)
        for k, n, total in zip(joined["failed"], joined["served_at_least"], joined["served"], strict=True)
    ]
    joined = joined.with_columns(pl.Series("chance", chance, dtype=pl.Float64))
    return joined.filter((pl.col("failed") > pl.col("served_at_least")) & (pl.col("chance") < ALPHA)).sort(keys)


def _all_among_largest(failed: int, larger: int, served: int) -> float:
    """P(`failed` requests drawn at random from `served` + `failed` all fall among the largest `larger` +
    `failed`): C(larger + failed, failed) / C(served + failed, failed), in logs (the counts run to millions)."""

    def log_comb(n: int, k: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)

    return math.exp(log_comb(larger + failed, failed) - log_comb(served + failed, failed))


def _capacity(card: str | None, group: pl.DataFrame, cost: pl.DataFrame, edges: pl.DataFrame) -> Finding:
    """Requests above the card's demonstrated limit: the token budget per model version and the cap to set.
    `edges` (`_token_edges`) are the card's devices whose requests show its edge in tokens."""
    tokens = group["tokens"].drop_nulls()
    peak = _num(group["card_limit_bytes"].max())
    limit = None if peak is None else int(peak)
    budgets = _budgets(group, cost, limit)
    # a version sized only in tokens: the largest request it served there below its smallest failure
    served = {
        row["model_version"]: int(row["served_below"])
        for row in edges.iter_rows(named=True)
        if row["model_version"] not in budgets and row["served_below"] is not None
    }
    budget = min([*budgets.values(), *served.values()], default=None)
    sized = group.filter(pl.col("tokens").is_not_null()).height
    text = (
        f"{ooms_text(group.height)} where the request alone needed at least the {size(limit)} largest peak "
        f"that succeeded on {card} cards"
        if limit is not None
        else f"{ooms_text(group.height)} where the request alone was too large for {card} cards"
    )
    for row in edges.iter_rows(named=True):
        text += (
            f"; on {row['instance']}, {row['failed']} requests of {row['model_version']} from {row['tokens']:,} "
            f"tokens failed while {row['served_at_least']} that large succeeded of {row['served']:,} served"
        )
    if not tokens.is_empty():
        low, high, mid = (int(_num(v) or 0) for v in (tokens.min(), tokens.max(), tokens.median()))
        text += f"; the {sized} with request sizes had batch x tokens {low:,} to {high:,} (median {mid:,})"
    if budgets:
        fits = ", ".join(f"{n:,} tokens fit for {v}" for v, n in budgets.items())
        text += f"; on a healthy baseline about {fits}"
    if served:
        most = ", ".join(f"{n:,} tokens for {v}" for v, n in served.items())
        text += f"; the largest served below the smallest failure: {most}"
    if sized < group.height:
        text += f"; {group.height - sized} came from logs without request sizes"
    advice = (
        f"cap batch x (input + output) tokens at {budget:,} on {card} cards (queue the rest), "
        f"or serve the largest prompts on a bigger card"
        if budget is not None
        else f"cap batch size and prompt length on {card} cards, or move the largest requests to a bigger card"
    )
    metrics = {
        "card": card,
        "ooms": group.height,
        "card_limit_bytes": limit,
        "token_budget": budget,
        "token_budget_by_model_version": {**budgets, **served},
        "min_failing_tokens": None if tokens.is_empty() else int(_num(tokens.min()) or 0),
        "model_versions": sorted(v for v in group["model_version"].unique().to_list() if v),
    }
    return Finding(
        "capacity", f"card {card}", text, advice, _confidence(group), float(group.height), _window(group), metrics
    )


def _budgets(group: pl.DataFrame, cost: pl.DataFrame, limit: int | None) -> dict[str, int]:
    """Per model version: batch x tokens that fit under the card's limit on its healthy baseline."""
    out: dict[str, int] = {}
    per_version = (
        group.filter(pl.col("model_version").is_not_null())
        .group_by("model_version")
        .agg(pl.col("healthy_baseline_bytes").median())
        .join(cost, on="model_version", how="left")
        .sort("model_version")
    )
    for row in per_version.iter_rows(named=True):
        per_token, base = row["bytes_per_token"], row["healthy_baseline_bytes"]
        if limit is None or base is None or not per_token or per_token <= 0:
            continue
        out[row["model_version"]] = max(0, int((limit - base - (row["fixed_bytes"] or 0)) / per_token))
    return out
