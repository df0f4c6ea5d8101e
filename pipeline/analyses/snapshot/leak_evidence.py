"""What a snapshot shows about each allocation site's live memory, for telling a leak from weights and pools:
the call path of its blocks, how many shapes and rounds of blocks it holds, and how much predates the trace
(what the visible trace did there: `leak_trace`)."""

from __future__ import annotations

from math import gcd

import duckdb
import polars as pl

from ...load.sql import sql_text

# Frames that mark a block allocated while the model was built or loaded, or a pool reserved at start-up: such
# memory is meant to stay for the life of the process. Each mark is a function name and a part of its file
# name ("" for any file). Module._apply is what .to() / .cuda() / .half() on a module run.
LOAD_FRAMES: tuple[dict[str, str], ...] = (
    {"file": "torch/nn/modules/module.py", "name": "_apply"},
    {"file": "torch/nn/modules/module.py", "name": "load_state_dict"},
    {"file": "torch/nn/modules/module.py", "name": "_load_from_state_dict"},
    {"file": "torch/serialization.py", "name": "load"},
    {"file": "safetensors/", "name": "load_file"},
    {"file": "accelerate/", "name": "set_module_tensor_to_device"},
    {"file": "", "name": "from_pretrained"},
    {"file": "", "name": "_load_pretrained_model"},
    {"file": "vllm/", "name": "load_model"},
    {"file": "vllm/", "name": "load_weights"},
    {"file": "vllm/", "name": "initialize_kv_cache"},
    {"file": "vllm/", "name": "_allocate_kv_cache"},
    {"file": "vllm/", "name": "capture_model"},
)
# Frames that mark a block allocated while serving: inside a module's forward (Module._call_impl runs every
# `module(x)`), or in generation. Memory allocated here belongs to one request and should go when it ends.
REQUEST_FRAMES: tuple[dict[str, str], ...] = (
    {"file": "torch/nn/modules/module.py", "name": "_call_impl"},
    {"file": "", "name": "generate"},
    {"file": "vllm/", "name": "execute_model"},
)
# A site matters once it holds (or grows by) at least this much, absolutely and relative to the allocated
# memory: below 1 MiB or 1 % of what is allocated, no pile explains an OOM.
MIN_GROWTH_BYTES = 1 << 20
MIN_GROWTH_SHARE = 0.01
# Paths whose memory stays by design: weights and start-up pools, and CUDA graph / MemPool private pools.
RESIDENT_PATHS = frozenset({"load", "pool"})


def floor_bytes(allocated_bytes: int) -> int:
    """The least a site must hold or grow by to matter, for a snapshot with `allocated_bytes` allocated."""
    return max(MIN_GROWTH_BYTES, int(MIN_GROWTH_SHARE * allocated_bytes))


def site_live(con: duckdb.DuckDBPyConnection, snapshot_id: int) -> pl.DataFrame:
    """Per site: live bytes and blocks at the end, and the part allocated before the trace began."""
    return con.sql(sql_text("q_snapshot_leaks_live"), params={"snapshot_id": snapshot_id}).pl()


def site_shapes(con: duckdb.DuckDBPyConnection, snapshot_id: int) -> pl.DataFrame:
    """Per site: its call path (by bytes), how many shapes its live blocks have, blocks per round, and the
    bytes of its largest round (a round of its largest shape)."""
    params = {"snapshot_id": snapshot_id, "load_frames": list(LOAD_FRAMES), "request_frames": list(REQUEST_FRAMES)}
    rows = con.sql(sql_text("q_snapshot_leaks_shapes"), params=params).pl()
    if rows.is_empty():
        schema = {"site": pl.String, "path": pl.String, "shapes": pl.Int64, "round_blocks": pl.Int64}
        return pl.DataFrame(schema={**schema, "largest_round_bytes": pl.Int64})
    by_path = rows.group_by("site", "path").agg(pl.col("bytes").sum()).sort("site", "bytes", "path", descending=True)
    paths = by_path.group_by("site", maintain_order=True).agg(pl.col("path").first())
    shapes = (
        rows.group_by("site", "shape")
        .agg(pl.col("blocks").sum(), pl.col("bytes").sum())
        .group_by("site")
        .agg("blocks", (pl.col("bytes") / pl.col("blocks")).max().alias("largest_block"))
    )
    rounds = [_gcd_of(c) for c in shapes["blocks"].to_list()]
    counts = pl.DataFrame(
        {
            "site": shapes["site"],
            "shapes": [len(c) for c in shapes["blocks"].to_list()],
            "round_blocks": rounds,
            "largest_round_bytes": [int(b * r) for b, r in zip(shapes["largest_block"], rounds, strict=True)],
        },
        schema={"site": pl.String, "shapes": pl.Int64, "round_blocks": pl.Int64, "largest_round_bytes": pl.Int64},
    )
    return paths.join(counts, on="site")


def site_callers(con: duckdb.DuckDBPyConnection, snapshot_id: int) -> pl.DataFrame:
    """Per site: `caller`, the service's own frame that led to it (q_snapshot_site_callers.sql), or null."""
    return con.sql(sql_text("q_snapshot_site_callers"), params={"snapshot_id": snapshot_id}).pl()


def _gcd_of(counts: list[int]) -> int:
    """The largest number of blocks every shape's count is a whole multiple of (blocks per round)."""
    return gcd(*counts)
