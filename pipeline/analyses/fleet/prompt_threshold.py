"""Prompt thresholds found directly: per card and model version, where in batch x tokens requests start to
fail, between the largest success and the smallest failure.

Only clean requests count (fct_prompt_requests: no intermittent neighbour process, no fragmentation), so
the boundary is the request's own size against the card. A request on a baseline a leak has raised is sized
as it weighs on a fresh process (its size plus the rise in units of size), so that a leaking version's
threshold is found on all its requests, not only on the first minutes of each lifetime; and a threshold is
claimed only when MIN_FAILURES failures are above it, and above every clean success, by their own size:
requests that fail on a fresh process too, not leak OOMs that the adjusted sizes alone place above it. (A
success at an adjusted size S shows that a load of S fits on a fresh process, so a failure whose own size is
at most S failed for its raised baseline, not for its size: fleet 93312 of bench/truth.py claimed a leaking
version's threshold on 5 failures whose own sizes were above the cut, 2 of them under the largest success.)
Two sizes are tried: batch x input tokens (the prefill, where the failing allocation usually happens) and
batch x (input + output) tokens (the KV cache at the end); the one whose best cut misclassifies fewer
requests is reported, and batch x input on a tie.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb
import numpy as np
import polars as pl

from ...load.sql import sql_text
from ..window import window_params

METRICS: dict[str, str] = {
    "batch_x_input": "batch x input tokens",
    "batch_x_tokens": "batch x (input + output) tokens",
}
# A threshold is claimed only with enough clean failures, most of the requests above it failing, and few
# requests on the wrong side of it (sizes within about 1 % of the boundary can go either way).
MIN_FAILURES = 3
MIN_FAILURE_RATE_ABOVE = 0.5
MAX_ERROR_SHARE = 0.25
CAP_MARGIN = 0.9  # the advised cap: 10 % below the largest clean success under the threshold

# Row by row, for inspection and tests; the analyses below aggregate in SQL.


def prompt_requests(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """Every request with sizes and a known card in the window, with `excluded_because` (null: clean)."""
    return con.sql(sql_text("q_prompt_rows"), params=window_params(since, until)).pl()


@dataclass(frozen=True)
class Cut:
    """The best single cut of one size metric: requests above `threshold` are predicted to fail."""

    threshold: float
    largest_success: int  # the largest clean success at or below the cut
    smallest_failure: int  # the smallest clean failure above it
    errors: int  # failures at or below the cut plus successes above it
    failures_above: int
    requests_above: int


def best_cut(
    sizes: np.ndarray,
    oks: np.ndarray,
    fails: np.ndarray,
    max_ok: np.ndarray | None = None,
    min_fail: np.ndarray | None = None,
) -> Cut | None:
    """The cut between two adjacent distinct sizes (ascending, with their success and failure counts) with
    the fewest misclassified requests (the lowest such cut on a tie: the cautious one); None without both
    a success and a failure. Where the sizes are buckets, `max_ok` / `min_fail` are each bucket's exact largest
    success and smallest failure (default: the sizes themselves)."""
    if oks.sum() == 0 or fails.sum() == 0:
        return None
    max_ok = sizes if max_ok is None else max_ok
    min_fail = sizes if min_fail is None else min_fail
    # errors when the cut sits just above sizes[i]: failures up to i, successes after i
    errors = np.cumsum(fails) + (oks.sum() - np.cumsum(oks))
    i = int(np.argmin(errors[:-1])) if len(sizes) > 1 else 0  # above the largest size: no failure predicted
    below_ok = max_ok[: i + 1][oks[: i + 1] > 0]
    above_fail = min_fail[i + 1 :][fails[i + 1 :] > 0]
    if below_ok.size == 0 or above_fail.size == 0:
        return None
    lower, upper = int(below_ok.max()), int(above_fail.min())
    return Cut(
        threshold=(lower + upper) / 2,
        largest_success=lower,
        smallest_failure=upper,
        errors=int(errors[i]),
        failures_above=int(fails[i + 1 :].sum()),
        requests_above=int(fails[i + 1 :].sum() + oks[i + 1 :].sum()),
    )


# Both size metrics in one pass over the requests: a grouping set each.
_CARD = ["device_total", "capacity_bytes"]


def size_counts(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """Clean successes and failures per size metric, card, model version and bucket of size (agg_prompt_sizes:
    under 0.8 % wide, with each bucket's exact largest success and smallest failure)."""
    return con.sql(sql_text("q_prompt_size_counts"), params=window_params(since, until)).pl()


def boundaries(
    con: duckdb.DuckDBPyConnection,
    since: datetime | None = None,
    until: datetime | None = None,
    *,
    per_version: bool = True,
    counts: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per card (device_total and usable capacity), model version (or all versions: model_version null) and
    size metric: clean requests and failures, the raw largest success and smallest failure, the best cut,
    and whether a threshold is `claimed` and the metric `chosen`. `counts`: size_counts, if at hand."""
    counts = size_counts(con, since, until) if counts is None else counts
    keys = [*_CARD, "model_version"] if per_version else _CARD
    grouped = counts.group_by(["metric", *keys, "size"]).agg(
        pl.col("oks").sum(),
        pl.col("fails").sum(),
        pl.col("adjusted").sum(),
        pl.col("max_ok_size").max(),
        pl.col("min_fail_size").min(),
        pl.col("own_fail_sizes").list.explode(keep_nulls=False, empty_as_null=False),
        pl.col("own_fail_counts").list.explode(keep_nulls=False, empty_as_null=False),
        pl.col("model_version").unique().alias("versions"),
    )
    rows = [
        dict(zip(["metric", *keys], key, strict=True)) | _boundary(group.sort("size"), key[0])
        for key, group in grouped.group_by(["metric", *keys])
    ]
    if not rows:
        return pl.DataFrame()
    frame = pl.DataFrame(rows)
    if not per_version:
        frame = frame.with_columns(pl.lit(None, pl.String).alias("model_version"))
    return _choose_metric(frame).sort(*_CARD, "model_version", "metric", nulls_last=True)


def _boundary(group: pl.DataFrame, metric: str) -> dict[str, object]:
    """One group's boundary in one metric, from its counts by ascending size."""
    sizes, oks, fails = (group[c].to_numpy() for c in ("size", "oks", "fails"))
    max_ok, min_fail = (group[c].fill_null(0).to_numpy() for c in ("max_ok_size", "min_fail_size"))
    cut = best_cut(sizes, oks, fails, max_ok, min_fail)
    requests, ooms = int(oks.sum() + fails.sum()), int(fails.sum())
    versions = sorted({v for vs in group["versions"].to_list() for v in vs if v is not None})
    own_fail_sizes = np.array([size for sizes in group["own_fail_sizes"].to_list() for size in sizes or ()])
    own_fail_counts = np.array([n for counts in group["own_fail_counts"].to_list() for n in counts or ()])
    row: dict[str, object] = {
        "metric": metric,
        "requests": requests,
        "ooms": ooms,
        "adjusted_requests": int(group["adjusted"].sum()),
        "versions": ", ".join(versions),
        "max_success": int(max_ok[oks > 0].max()) if (oks > 0).any() else None,
        "min_failure": int(min_fail[fails > 0].min()) if ooms else None,
        "threshold": None,
        "largest_success": None,
        "smallest_failure": None,
        "errors": None,
        "failures_above": 0,
        "failures_above_by_own_size": 0,
        "requests_above": 0,
        "failure_rate_above": None,
        "failure_rate_below": None,
        "cap": None,
        "claimed": False,
    }
    if cut is None:
        return row
    below = requests - cut.requests_above
    fits_fresh = max(cut.threshold, float(row["max_success"] or 0))  # see the module's docstring
    row |= {
        "threshold": cut.threshold,
        "largest_success": cut.largest_success,
        "smallest_failure": cut.smallest_failure,
        "errors": cut.errors,
        "failures_above": cut.failures_above,
        "failures_above_by_own_size": int(own_fail_counts[own_fail_sizes > fits_fresh].sum()),
        "requests_above": cut.requests_above,
        "failure_rate_above": cut.failures_above / cut.requests_above,
        "failure_rate_below": (ooms - cut.failures_above) / below if below else None,
        "cap": round_down(CAP_MARGIN * cut.largest_success),
    }
    row["claimed"] = (
        row["failures_above_by_own_size"] >= MIN_FAILURES  # type: ignore[operator]
        and row["failure_rate_above"] >= MIN_FAILURE_RATE_ABOVE  # type: ignore[operator]
        and cut.errors <= MAX_ERROR_SHARE * ooms
    )
    return row


def round_down(value: float, digits: int = 3) -> int:
    """`value` rounded down to `digits` significant digits: 41,904 -> 41,900."""
    if value <= 0:
        return 0
    step = 10 ** max(int(np.floor(np.log10(value))) - digits + 1, 0)
    return int(value // step * step)


def _choose_metric(frame: pl.DataFrame) -> pl.DataFrame:
    """Mark per group the metric to report: claimed first, then fewer errors, then batch x input."""
    order = {m: i for i, m in enumerate(METRICS)}
    ranked = frame.with_columns(
        pl.col("metric").replace_strict(order, return_dtype=pl.Int64).alias("_order"),
        pl.col("errors").fill_null(1 << 62).alias("_errors"),
    )
    group = ["device_total", "capacity_bytes", "model_version"]
    best = (
        ranked.sort(["claimed", "_errors", "_order"], descending=[True, False, False])
        .group_by(group, maintain_order=True)
        .first()
        .select(*group, pl.col("metric").alias("_best"))
    )
    joined = ranked.join(best, on=group, how="left", nulls_equal=True)
    return joined.with_columns((pl.col("metric") == pl.col("_best")).alias("chosen")).drop("_order", "_errors", "_best")


def thresholds(
    con: duckdb.DuckDBPyConnection,
    since: datetime | None = None,
    until: datetime | None = None,
    *,
    per_version: bool = True,
    counts: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The claimed thresholds, one per card (and model version) in its chosen metric."""
    frame = boundaries(con, since, until, per_version=per_version, counts=counts)
    if frame.is_empty():
        return frame
    return frame.filter(pl.col("chosen") & pl.col("claimed"))
