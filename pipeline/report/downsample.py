"""Bounded series for charts: at most a fixed number of points, keeping every peak, trough and marker.

A plain stride would drop the one request that hit 99 % or the minute an OOM happened; here the series is
cut into equal buckets and each keeps its first, minimum and maximum row, plus every row marked `keep`.
"""

from __future__ import annotations

import polars as pl

# Per series: enough for a week of minutes at chart width, small enough that a report stays a few MB.
DEFAULT_MAX_POINTS = 1500


def downsample(
    frame: pl.DataFrame, x: str, y: str, max_points: int = DEFAULT_MAX_POINTS, keep: str | None = None
) -> pl.DataFrame:
    """Rows of `frame` (sorted by `x`) reduced to about `max_points`, keeping each bucket's min and max of `y`.

    `keep` names a boolean column whose true rows always stay (OOM markers). The result is sorted by `x`;
    the same input gives the same rows.
    """
    frame = frame.sort(x, maintain_order=True)
    if frame.height <= max_points:
        return frame
    buckets = max(1, max_points // 3)
    indexed = frame.with_row_index("_row").with_columns((pl.col("_row") * buckets // frame.height).alias("_bucket"))
    chosen = indexed.group_by("_bucket").agg(
        pl.col("_row").first().alias("first"),
        pl.col("_row").get(pl.col(y).fill_null(float("-inf")).arg_max()).alias("high"),
        pl.col("_row").get(pl.col(y).fill_null(float("inf")).arg_min()).alias("low"),
    )
    rows = pl.concat([chosen["first"], chosen["high"], chosen["low"]])
    if keep is not None:
        rows = pl.concat([rows, indexed.filter(pl.col(keep))["_row"]])
    wanted = rows.unique()
    return indexed.filter(pl.col("_row").is_in(wanted.to_list())).drop("_row", "_bucket")
