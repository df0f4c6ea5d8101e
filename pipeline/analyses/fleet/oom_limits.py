"""What the logs prove about memory limits: per card the highest peak that succeeded, per model the bytes
per token.

Instances are grouped into cards by device size (whole GiB, so a message's rounded `21.96 GiB` and a log's
exact bytes agree) and per-process cap: a request that succeeded on one A10 shows what fits on every A10.
"""

from __future__ import annotations

import duckdb
import polars as pl

from ...units import GIB, format_bytes
from ..shared import shared


def card_label(device_total: int | None, cap: int | None) -> str:
    """A readable card key: `21.96 GiB` or `139.80 GiB capped at 5.00 GiB`."""
    size = "unknown size" if device_total is None else format_bytes(device_total, "GiB")
    return size if cap is None else f"{size} capped at {format_bytes(cap, 'GiB')}"


@shared()
def instance_limits(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Per instance and GPU: device size, cap, card key and the card's demonstrated `card_limit_bytes`.

    The demonstrated limit is the highest `peak_allocated` any request on the same card reached without
    failing: a lower bound of what the allocator can serve there, and in practice close to it, because
    the largest requests find the edge.
    """
    frame = con.sql("SELECT * FROM fct_oom_instance_limits").pl()
    frame = frame.with_columns(
        (pl.col("device_total") / GIB).round(0).cast(pl.Int64).alias("card_gib"),
        (pl.col("cap_bytes") / GIB).round(1).alias("cap_gib"),
    )
    cards = frame.group_by(["card_gib", "cap_gib"]).agg(
        pl.col("max_ok_peak_bytes").max().alias("card_limit_bytes"),
        pl.col("ok_requests").sum().alias("card_ok_requests"),
    )
    labels = [card_label(d, c) for d, c in zip(frame["device_total"], frame["cap_bytes"], strict=True)]
    return (
        frame.join(cards, on=["card_gib", "cap_gib"], how="left", nulls_equal=True)
        .with_columns(pl.Series("card", labels, dtype=pl.Utf8))
        .select(
            "instance",
            "gpu_index",
            "device_total",
            "cap_bytes",
            "card",
            "card_limit_bytes",
            "card_ok_requests",
            "max_ok_peak_bytes",
            "p95_request_bytes",
        )
    )


@shared()
def token_cost(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Per model version: bytes a request needs above its baseline per batch x (input + output) token."""
    return con.sql("SELECT * FROM fct_oom_token_cost").pl()
