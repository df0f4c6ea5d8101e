"""What a device served, by size: the requests of a model version that succeeded there at or above the smallest
that failed (q_served_at_least), from request logs and text logs' request lines alike."""

from __future__ import annotations

import duckdb
import polars as pl

from ...load.sql import sql_text

_SIZES_SCHEMA = {"instance": pl.Utf8, "gpu_index": pl.Int32, "model_version": pl.Utf8, "tokens": pl.Int64}


def served_at_least(con: duckdb.DuckDBPyConnection, failed: pl.DataFrame) -> pl.DataFrame:
    """For each row of `failed` (instance, gpu_index, model_version, tokens): `served_at_least`, the requests of
    that version on that device of at least `tokens` that succeeded, `served_below`, the largest below it (None
    when none did), and `served`, all that succeeded there."""
    sizes = failed.select(pl.col(c).cast(t) for c, t in _SIZES_SCHEMA.items())
    params = {
        "instances": sizes["instance"].to_list(),
        "gpus": sizes["gpu_index"].to_list(),
        "versions": sizes["model_version"].to_list(),
        "tokens": sizes["tokens"].to_list(),
    }
    return con.sql(sql_text("q_served_at_least"), params=params).pl()
