"""OOM classification: every `oom_events` row gets a cause, the evidence that decided it, and a confidence.

Facts come from the message (`fct_oom_context`), the failing request and its process lifetime (leaks.py),
what the card has been seen to serve (oom_limits.py), the processes nvidia-smi listed on the device
(`fct_oom_neighbours_seen`, when the message names none) and, when one recorded the same failure, a snapshot
(analyses/snapshot/ooms.py). The rules themselves are in classify_rules.py; the findings they add up to
are findings/causes.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import cast

import duckdb
import polars as pl

from ...load.settings import LIFETIME_GAP
from ...load.sql import sql_text
from ..shared import shared
from ..snapshot.ooms import oom_moments
from . import leaks
from .classify_rules import EDGE_ERRORS, OomFacts, Verdict, decide
from .oom_limits import instance_limits, token_cost

# Where the neighbours come from when neither the message nor nvidia-smi names one: the card's memory accounting.
UNNAMED = "memory accounting"
# Rules too weak to stand against a snapshot that shows the allocator's actual layout.
_WEAK_RULES = frozenset({"nearly_full_cache", "transient", "message_capacity", "own_memory", "none", "no_numbers"})

RESULT_SCHEMA: dict[str, pl.DataType] = {
    "event_id": pl.Int64(),
    "ts": pl.Datetime("us"),
    "instance": pl.Utf8(),
    "gpu_index": pl.Int32(),
    "model_version": pl.Utf8(),
    "origin": pl.Utf8(),
    "cause": pl.Utf8(),
    "confidence": pl.Float64(),
    "evidence": pl.Utf8(),
    "contributing": pl.List(pl.Utf8()),
    "rule": pl.Utf8(),
    "requested_bytes": pl.Int64(),
    "free_bytes": pl.Int64(),
    "reserved_unallocated_bytes": pl.Int64(),
    "process_in_use_bytes": pl.Int64(),
    "other_bytes": pl.Int64(),
    "other_pids": pl.List(pl.Int64()),
    "cap_bytes": pl.Int64(),
    "tokens": pl.Int64(),
    "batch_x_input": pl.Int64(),
    "baseline_bytes": pl.Int64(),
    "healthy_baseline_bytes": pl.Int64(),
    "need_bytes": pl.Int64(),
    "healthy_need_bytes": pl.Int64(),
    "card": pl.Utf8(),
    "card_limit_bytes": pl.Int64(),
    "lifetime": pl.Int64(),
    "sightings": pl.Int64(),
    "origins": pl.List(pl.Utf8()),
    "self_pid": pl.Int64(),
    "neighbours_seen_by": pl.Utf8(),
}


@shared(ignore=("lives",))
def classify_ooms(
    con: duckdb.DuckDBPyConnection,
    since: datetime | None = None,
    until: datetime | None = None,
    lives: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per OOM event in [since, until): cause, confidence, evidence and the numbers behind them.

    `lives` is `leaks.lifetimes(con, None, until)` when the caller has it already: the lifetimes give each
    OOM its starting baseline, so they are read from before `since` too. An event is one real OOM however
    many files saw it (stg_oom_events): `sightings` counts them, `origins` names their kinds.
    """
    # Every step before the verdicts is row by row, so the history up to the window's end is prepared once and the
    # window cut from it. What a card holds does not change with the window asked about: its largest peak served is
    # read from the whole history, and so are the failures that show or bound its edge (card_edges), so that a
    # week's report, an incident page and the findings say the same of one OOM.
    history = con.sql(sql_text("q_oom_context"), params={"until": until}).pl()
    in_window = pl.lit(True) if since is None else pl.col("ts") >= since
    if history.filter(in_window).is_empty():
        return pl.DataFrame(schema=RESULT_SCHEMA)
    lives = leaks.lifetimes(con, None, until) if lives is None else lives
    history = _prepared(con, history, lives)
    cards, versions = _edges(history) if _is_whole(con, until) else card_edges(con)
    events = (
        history.filter(in_window)
        .join(cards, on="card", how="left", nulls_equal=True)
        .join(versions, on=["card", "model_version"], how="left", nulls_equal=True)
    )
    events = events.with_columns(pl.col("edge_shown").fill_null(False))
    snapshots = _snapshot_verdicts(con, events)
    verdicts = [_verdict(row, snapshots) for row in events.iter_rows(named=True)]
    return _result(events, verdicts)


def _is_whole(con: duckdb.DuckDBPyConnection, until: datetime | None) -> bool:
    """Is the history up to `until` the whole history (no OOM at or after it, none without a time)?"""
    return until is None or not con.execute(sql_text("q_oom_events_after"), {"until": until}).fetchall()[0][0]


@shared()
def card_edges(con: duckdb.DuckDBPyConnection) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`_edges` over every OOM the database holds: per card (card, edge_shown, card_ceiling_bytes), and per card
    and model version (card, model_version, tokens_failed_alone)."""
    history = con.sql(sql_text("q_oom_context"), params={"until": None}).pl()
    return _edges(_prepared(con, history, leaks.lifetimes(con, None, None)))


def _edges(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """What the OOMs show of each card's edge (`_card_edges`) and of each version's on it (`_token_edges`)."""
    return _card_edges(events), _token_edges(events)


def _prepared(con: duckdb.DuckDBPyConnection, history: pl.DataFrame, lives: pl.DataFrame) -> pl.DataFrame:
    """The events with what the rules read: neighbours seen, the card's limits, lifetimes, baselines and needs."""
    return _with_needs(
        _with_version_lives(_with_lifetimes(_with_limits(con, _with_telemetry(con, history)), lives), lives)
    )


def _with_limits(con: duckdb.DuckDBPyConnection, events: pl.DataFrame) -> pl.DataFrame:
    """Attach the card's demonstrated limit and the model's bytes per token."""
    limits = instance_limits(con).select("instance", "gpu_index", "card", "card_limit_bytes")
    cost = token_cost(con).select(
        "model_version",
        "bytes_per_token",
        "fixed_bytes",
        "residual_bytes",
        "edge_residual_bytes",
        "edge_relative_residual",
    )
    return events.join(limits, on=["instance", "gpu_index"], how="left").join(cost, on="model_version", how="left")


def _with_telemetry(con: duckdb.DuckDBPyConnection, events: pl.DataFrame) -> pl.DataFrame:
    """Neighbours nvidia-smi listed on the device where the message names none (a containerised PyTorch
    cannot see other containers' processes, older formats never name them); `neighbours_seen_by` says which."""
    seen = (
        con.table("fct_oom_neighbours_seen")
        .pl()
        .select(
            "event_id",
            "seen_at",
            pl.col("own_bytes").alias("seen_own_bytes"),
            pl.col("other_bytes").alias("seen_other_bytes"),
            pl.col("other_pids").alias("seen_other_pids"),
            pl.col("other_names").alias("seen_other_names"),
        )
    )
    joined = events.join(
        seen.with_columns(pl.col("event_id").cast(events.schema["event_id"])), on="event_id", how="left"
    )
    named = pl.col("other_bytes").fill_null(0) > 0
    use = ~named & (pl.col("seen_other_bytes").fill_null(0) > 0)
    # neither named nor listed: the card's memory in use beyond this process's (fct_oom_context), held by someone
    unnamed = ~named & ~use & (pl.col("unnamed_other_bytes").fill_null(0) > 0)
    by = (
        pl.when(named)
        .then(pl.lit("message"))
        .when(use)
        .then(pl.lit("nvidia-smi"))
        .when(unnamed)
        .then(pl.lit(UNNAMED))
        .otherwise(pl.lit(None, pl.Utf8))
    )
    seen_by = pl.col("neighbours_seen_by") == "nvidia-smi"
    return joined.with_columns(by.alias("neighbours_seen_by")).with_columns(
        pl.when(seen_by)
        .then(pl.col("seen_other_bytes"))
        .when(pl.col("neighbours_seen_by") == UNNAMED)
        .then(pl.col("unnamed_other_bytes"))
        .otherwise(pl.col("other_bytes"))
        .alias("other_bytes"),
        pl.when(seen_by).then(pl.col("seen_other_pids")).otherwise(pl.col("other_pids")).alias("other_pids"),
        pl.when(seen_by)
        .then(pl.coalesce("process_in_use_bytes", "seen_own_bytes"))
        .otherwise(pl.col("process_in_use_bytes"))
        .alias("process_in_use_bytes"),
        pl.when(seen_by).then(pl.col("seen_at")).otherwise(None).alias("seen_at"),
        pl.when(seen_by).then(pl.col("seen_other_names")).otherwise(None).alias("seen_other_names"),
    )


def _with_lifetimes(events: pl.DataFrame, lives: pl.DataFrame) -> pl.DataFrame:
    """The process lifetime each event happened in: the latest one started at or before it."""
    keep = lives.select(
        "instance",
        "gpu_index",
        "lifetime",
        pl.col("start").alias("lifetime_start"),
        pl.col("end").alias("lifetime_end"),
        "baseline_start_bytes",
        "slope_bytes_per_hour",
        "is_leak",
        "is_preallocated_pool",
        (pl.col("windows") < leaks.MIN_WINDOWS).alias("too_short_to_judge"),
    ).sort("lifetime_start")
    joined = events.sort("ts").join_asof(
        keep, left_on="ts", right_on="lifetime_start", by=["instance", "gpu_index"], check_sortedness=False
    )
    # a message logged LIFETIME_GAP after a lifetime's last request belongs to no lifetime we saw
    late = pl.col("ts") > pl.col("lifetime_end") + LIFETIME_GAP
    cols = [
        "lifetime",
        "baseline_start_bytes",
        "slope_bytes_per_hour",
        "is_leak",
        "is_preallocated_pool",
        "too_short_to_judge",
    ]
    return joined.with_columns(pl.when(late).then(None).otherwise(pl.col(c)).alias(c) for c in cols)


def _with_version_lives(events: pl.DataFrame, lives: pl.DataFrame) -> pl.DataFrame:
    """For an OOM on a device whose logs state no memory levels (a text log only: no lifetime of its own), what
    its model version shows on cards of the same size elsewhere: the baseline a fresh process of it starts
    from (the median over its lifetimes), and whether the version leaks and how fast (`leaks.leaking_versions`).
    The same weights on the same card start from the same bytes; `baseline_inferred` marks these rows."""
    starts = (
        lives.filter(pl.col("card").is_not_null())
        .group_by("model_version", "card")
        .agg(pl.col("baseline_start_bytes").median().cast(pl.Int64).alias("version_start_bytes"))
    )
    versions = leaks.leaking_versions(lives).select(
        "model_version",
        pl.col("leaks").alias("version_leaks"),
        pl.col("median_slope_bytes_per_hour").alias("version_slope"),
    )
    joined = events.join(starts, on=["model_version", "card"], how="left").join(
        versions, on="model_version", how="left"
    )
    inferred = pl.col("lifetime").is_null() & pl.col("version_start_bytes").is_not_null()
    # a lifetime of fewer windows than a fit needs (a process restarted minutes after it started) cannot show a
    # leak itself, yet it runs its version's code: it leaks as the version does, from its own measured start. So
    # does one of a leaking version whose own fit shows none: its baseline's rise is the same code's leak, which
    # a plateau or a crash-cut climb can hide from a fit (fleet 56612 of bench/truth.py: lifetimes that rose
    # 79 MB in 93 % of their windows with r2 0.06)
    version_verdict = (
        inferred
        | pl.col("too_short_to_judge").fill_null(False)
        | (pl.col("version_leaks").fill_null(False) & ~pl.col("is_leak").fill_null(False))
    )
    return joined.with_columns(
        inferred.alias("baseline_inferred"),
        pl.when(inferred)
        .then(pl.col("version_start_bytes"))
        .otherwise(pl.col("baseline_start_bytes"))
        .alias("baseline_start_bytes"),
        pl.when(version_verdict)
        .then(pl.col("version_leaks").fill_null(False))
        .otherwise(pl.col("is_leak"))
        .alias("is_leak"),
        pl.when(version_verdict)
        .then(pl.col("version_slope"))
        .otherwise(pl.col("slope_bytes_per_hour"))
        .alias("slope_bytes_per_hour"),
    ).drop("version_start_bytes", "version_leaks", "version_slope", "too_short_to_judge")


def _with_needs(events: pl.DataFrame) -> pl.DataFrame:
    """Baseline at the failure and the request's estimated peak need on it and on the healthy baseline."""
    hours = (pl.col("ts") - pl.col("lifetime_start")).dt.total_seconds() / 3600
    # a message without its request row: the lifetime's fitted baseline at that moment
    fitted = pl.col("baseline_start_bytes") + pl.when(pl.col("is_leak")).then(
        pl.col("slope_bytes_per_hour").fill_null(0) * hours
    ).otherwise(0)
    per_request = pl.col("fixed_bytes") + pl.col("bytes_per_token") * pl.col("tokens")
    # with no lifetime of its own, what the message says: PyTorch held `allocated` when the request asked for
    # `requested` more, and everything the request itself held then is part of its peak need, so the baseline
    # under it was at least allocated + requested - need (and never below a fresh process's)
    floor = pl.col("allocated_bytes") + pl.col("requested_bytes") - per_request
    inferred = pl.max_horizontal(pl.col("baseline_start_bytes"), floor)
    baseline = pl.coalesce(
        pl.col("allocated_before"), pl.when(pl.col("baseline_inferred")).then(inferred).otherwise(fitted).cast(pl.Int64)
    )
    # the need's error: the token-cost line's residual over all requests or among the largest tenth, whichever is
    # larger; and, as bytes per token vary per request, a request's error grows with it: the largest tenth's scatter
    # as a share of their needs, scaled to this request's (it may be larger than any of them). The absolute errors
    # stand for what does not grow with the size, such as the allocator's rounding.
    need_error = pl.max_horizontal(
        "residual_bytes", "edge_residual_bytes", pl.col("edge_relative_residual") * per_request
    )
    return (
        events.with_columns(baseline.alias("baseline_bytes"))
        .with_columns(
            pl.coalesce("baseline_start_bytes", "baseline_bytes").alias("healthy_baseline_bytes"),
            need_error.alias("need_error_bytes"),
        )
        .with_columns(
            (pl.col("baseline_bytes") + per_request).cast(pl.Int64).alias("need_bytes"),
            (pl.col("healthy_baseline_bytes") + per_request).cast(pl.Int64).alias("healthy_need_bytes"),
        )
    )


def _card_edges(events: pl.DataFrame) -> pl.DataFrame:
    """Per card, what its OOMs show about the edge the largest peak served (`card_limit_bytes`) only bounds below.
    Only failures of size count (`_by_size`; else fragmentation or a cap refused it, whatever the card holds).
    (Fleet 105506 of `bench/truth.py --classic --seed 105500`: fragmentation failures at 24.96 GiB on a 79.14 GiB
    card had shown its largest request served, 25.00 GiB, as its edge.)

    `edge_shown`: some OOM on it failed at that peak (within the need estimate's error, as `OomFacts.at_edge`) with
    no neighbour of known bytes beside it. Only such a failure shows that peak to be what the card holds; otherwise
    it is the largest request seen. (A neighbour inferred from the card's accounting is an upper bound that may be
    this process's own, so it does not count as one.)

    `card_ceiling_bytes`: the smallest need that failed with nothing at all beside it, an upper bound of what the
    card holds: a need that large did not fit."""
    alone = _nobody() | (pl.col("neighbours_seen_by") == UNNAMED)
    edge = pl.col("card_limit_bytes") - EDGE_ERRORS * pl.col("need_error_bytes").fill_null(0)
    failed_there = (alone & _by_size() & (pl.col("need_bytes") >= edge)).fill_null(False)
    return events.group_by("card").agg(
        failed_there.any().alias("edge_shown"),
        pl.col("need_bytes").filter(_nobody() & _by_size()).min().alias("card_ceiling_bytes"),
    )


def _nobody() -> pl.Expr:
    """Nothing of known bytes stood beside the process on the card."""
    return pl.col("other_bytes").fill_null(0) <= 0


def _by_size() -> pl.Expr:
    """A failure of size: the cache held less than the request unallocated and the device had less free, and no
    cap refused it; where the message states neither, the request log's failure is one of size."""
    full = (pl.col("reserved_unallocated_bytes").fill_null(0) < pl.col("requested_bytes")) & (
        pl.col("free_bytes") < pl.col("requested_bytes")
    )
    return full.fill_null(True) & pl.col("cap_bytes").is_null()


def _token_edges(events: pl.DataFrame) -> pl.DataFrame:
    """Per card and model version, `tokens_failed_alone`: the fewest batch x (input + output) tokens of a request
    that failed by its size with nothing beside it, on a process that neither leaks nor holds a preallocated pool.

    A version's need grows with its tokens, so a request of at least as many tokens on the same card fails without
    any neighbour too. This sizes requests that no token-cost line sizes in bytes: a version seen only in text
    logs, whose messages state the request's tokens but no memory levels (fleet 107010 of `bench/truth.py --seed
    107000`: 22 requests of agent-5b-int8-v3.5 from 100,264 tokens failed alone on an A100 40 GB; 12 more of
    102,096 to 124,352 tokens, beside the 25.62 GiB of a job's process, had been the job's). A leaking process
    fails smaller requests as its baseline rises, and a pool fails within itself, so neither bounds the size; nor
    does a failure that names no version, which may be any model."""
    plain = ~pl.col("is_leak").fill_null(False) & ~pl.col("is_preallocated_pool").fill_null(False)
    named = pl.col("model_version").is_not_null() & pl.col("tokens").is_not_null()
    failed = _nobody() & _by_size() & plain & named
    return (
        events.filter(failed.fill_null(False))
        .group_by("card", "model_version")
        .agg(pl.col("tokens").min().alias("tokens_failed_alone"))
    )


def _snapshot_verdicts(con: duckdb.DuckDBPyConnection, events: pl.DataFrame) -> dict[int, tuple[str, str]]:
    """(cause, explanation) of every event a snapshot recorded, from the allocator's replayed state at its
    `oom` entry (found by the snapshot's own time and size of it: stg_oom_events.snapshot_ts)."""
    out: dict[int, tuple[str, str]] = {}
    snaps = events.filter(pl.col("snapshot_id").is_not_null() & pl.col("snapshot_ts").is_not_null())
    for (snapshot_id,), rows in snaps.group_by(["snapshot_id"]):
        peak = rows["device_total_bytes"].max()
        total = None if peak is None else int(cast(int, peak))
        moments = oom_moments(con, int(cast(int, snapshot_id)), total)
        by_time = {(m.time_us, m.requested_bytes): m for m in moments}
        for row in rows.sort("event_id").iter_rows(named=True):
            moment = by_time.get((_epoch_us(row["snapshot_ts"]), row["snapshot_requested_bytes"]))
            if moment is not None:
                out[row["event_id"]] = (moment.cause, moment.explanation)
    return out


def _epoch_us(ts: datetime | None) -> int | None:
    if ts is None:
        return None
    return int((ts - datetime(1970, 1, 1)) / timedelta(microseconds=1))


def _verdict(row: dict, snapshots: dict[int, tuple[str, str]]) -> Verdict:
    """Decide one event, then let a snapshot of the same failure overrule a weak verdict."""
    snapshot = snapshots.get(row["event_id"])
    verdict = decide(_facts(row, snapshot))
    if snapshot is None or row["origin"] == "snapshot":
        return verdict
    cause, explanation = snapshot
    if cause == "fragmentation" and verdict.rule in _WEAK_RULES:
        return Verdict("fragmentation", 0.9, f"snapshot of the same failure: {explanation}", "snapshot")
    if _same(cause, verdict.cause):
        return Verdict(
            verdict.cause,
            min(1.0, verdict.confidence + 0.05),
            f"{verdict.evidence}; a snapshot of the same failure agrees",
            verdict.rule,
            verdict.contributing,
        )
    return verdict


def _same(snapshot_cause: str, cause: str) -> bool:
    return ("process_cap" if snapshot_cause == "per_process_cap" else snapshot_cause) == cause


def _facts(row: dict, snapshot: tuple[str, str] | None) -> OomFacts:
    """The event's row as the rules read it."""
    return OomFacts(
        origin=row["origin"],
        framework=row["framework"],
        requested=row["requested_bytes"],
        free=row["free_bytes"],
        reserved=row["reserved_bytes"],
        unallocated=row["reserved_unallocated_bytes"],
        in_use=row["process_in_use_bytes"],
        other=row["other_bytes"],
        other_pids=tuple(row["other_pids"] or ()),
        cap=row["cap_bytes"],
        device_total=row["device_total_bytes"],
        batch=row["batch_size"],
        input_tokens=row["input_sequence_length"],
        output_tokens=row["output_sequence_length"],
        tokens=row["tokens"],
        baseline=row["baseline_bytes"],
        healthy_baseline=row["healthy_baseline_bytes"],
        need=row["need_bytes"],
        healthy_need=row["healthy_need_bytes"],
        limit=row["card_limit_bytes"],
        card=row["card"] or "these",
        leaking=bool(row["is_leak"]),
        pool=bool(row["is_preallocated_pool"]),
        slope=row["slope_bytes_per_hour"] if row["is_leak"] else None,
        snapshot=snapshot,
        other_seen_at=row["seen_at"],
        other_names=tuple(row["seen_other_names"] or ()),
        self_basis=row["self_basis"],
        other_unnamed=row["neighbours_seen_by"] == UNNAMED,
        in_use_on_card=row["in_use_on_card_bytes"],
        baseline_inferred=bool(row["baseline_inferred"]),
        need_error=row["need_error_bytes"],
        edge_shown=bool(row["edge_shown"]),
        ceiling=row["card_ceiling_bytes"],
        tokens_failed_alone=row["tokens_failed_alone"],
    )


def _result(events: pl.DataFrame, verdicts: list[Verdict]) -> pl.DataFrame:
    """The documented columns, in event order."""
    decided = pl.DataFrame(
        {
            "cause": [v.cause for v in verdicts],
            "confidence": [v.confidence for v in verdicts],
            "evidence": [v.evidence for v in verdicts],
            "contributing": [list(v.contributing) for v in verdicts],
            "rule": [v.rule for v in verdicts],
        },
        schema={
            "cause": pl.Utf8,
            "confidence": pl.Float64,
            "evidence": pl.Utf8,
            "contributing": pl.List(pl.Utf8),
            "rule": pl.Utf8,
        },
    )
    frame = pl.concat([events, decided], how="horizontal").with_columns(
        (pl.col("batch_size") * pl.col("input_sequence_length")).alias("batch_x_input")
    )
    return frame.select(pl.col(c).cast(t) for c, t in RESULT_SCHEMA.items()).sort(["ts", "event_id"])
