"""Per-request JSON Lines logs in oomlab's canonical schema, built column-wise with polars."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl

from .gz import write_gzip
from .simulate import CAUSES, Simulated

CHUNK_ROWS = 250_000


def iso_ms(ts: pl.Expr) -> pl.Expr:
    """Epoch milliseconds as `2026-11-03T01:12:09.123Z`."""
    return pl.from_epoch(ts, time_unit="ms").dt.strftime("%Y-%m-%dT%H:%M:%S%.3fZ")


def request_frame(sim: Simulated, versions: list[str], messages: list[str]) -> pl.DataFrame:
    """One row per request with the values to print; `extra` holds the OOM fields of failed rows."""
    rows = sim.oom_rows
    extra = np.full(len(sim.req.ts), "", dtype=object)
    for k, row in enumerate(rows):
        extra[row] = (
            f', "requested_size": {sim.oom_requested[k]}, "available_memory": {sim.oom_free[k]}, '
            f'"allocator_allocated": {sim.oom_allocated[k]}, "reserved_memory": {sim.oom_reserved[k]}, '
            f'"error": {json.dumps(messages[k])}'
        )
    return pl.DataFrame(
        {
            "ts": sim.req.ts,
            "seq": np.arange(1, len(sim.req.ts) + 1),
            "version": sim.version,
            "status": np.where(sim.cause > 0, "oom", "ok"),
            "latency": sim.latency,
            "batch": sim.req.batch,
            "inp": sim.req.inp,
            "out": sim.req.out,
            "before": sim.before,
            "after": sim.after,
            "res_before": sim.res_before,
            "res_after": sim.res_after,
            "peak": sim.peak,
            "extra": pl.Series(extra, dtype=pl.String),
        }
    ).with_columns(version=pl.col("version").replace_strict(dict(enumerate(versions)), return_dtype=pl.String))


def _lines(frame: pl.DataFrame, instance: str, device_total: int) -> pl.Series:
    """The JSON line of every row, keys in the canonical order."""
    lit, col = pl.lit, pl.col

    def num(name: str) -> pl.Expr:
        return col(name).cast(pl.String)

    parts = [
        lit('{"ts": "'),
        iso_ms(col("ts")),
        lit(f'", "instance": "{instance}", "gpu_index": 0, "model_version": "'),
        col("version"),
        lit(f'", "request_id": "{instance}-'),
        num("seq").str.zfill(7),
        lit('", "status": "'),
        col("status"),
        lit('", "latency_ms": '),
        num("latency"),
        lit(', "batch_size": '),
        num("batch"),
        lit(', "input_sequence_length": '),
        num("inp"),
        lit(', "output_sequence_length": '),
        num("out"),
        lit(', "allocated_before": '),
        num("before"),
        lit(', "allocated_after": '),
        num("after"),
        lit(', "reserved_before": '),
        num("res_before"),
        lit(', "reserved_after": '),
        num("res_after"),
        lit(', "peak_allocated": '),
        num("peak"),
        lit(f', "device_total": {device_total}'),
        col("extra"),
        lit("}\n"),
    ]
    return frame.select(pl.concat_str(parts).alias("line"))["line"]


def write_request_log(path: Path, sim: Simulated, versions: list[str], messages: list[str], level: int) -> int:
    """Write the instance's request log; returns its size in bytes."""
    frame = request_frame(sim, versions, messages)

    def chunks() -> Iterator[bytes]:
        for start in range(0, frame.height, CHUNK_ROWS):
            lines = _lines(frame.slice(start, CHUNK_ROWS), sim.inst.name, sim.inst.card.device_total)
            yield lines.str.join("").item().encode()

    return write_gzip(path, chunks(), level)


def cause_rows(sim: Simulated) -> list[tuple[str, str, str, str, bool]]:
    """(instance, ts, request_id, cause, leak_too) of each failed request."""
    frame = pl.DataFrame({"ts": sim.req.ts[sim.oom_rows]}).select(iso_ms(pl.col("ts")))
    return [
        (sim.inst.name, ts, f"{sim.inst.name}-{row + 1:07d}", CAUSES[sim.cause[row]], bool(sim.leak_too[row]))
        for ts, row in zip(frame["ts"].to_list(), sim.oom_rows, strict=True)
    ]
