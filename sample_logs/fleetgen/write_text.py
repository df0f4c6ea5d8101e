"""A service's text log: one line per request, restarts, hourly stats, and every OOM with its traceback."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl

from .grounding import GIB
from .gz import write_gzip
from .plan import HOUR_MS
from .processes import Pids
from .simulate import Simulated
from .write_requests import iso_ms

# The frames of the service's generate call down to the MLP allocation that fails (see serve_mixed's
# snapshot: the large blocks are allocated in modeling_llama's MLP during prefill).
TRACEBACK = (
    "Traceback (most recent call last):",
    '  File "/srv/app/server.py", line 214, in handle_generate',
    "    output = self.engine.generate(batch)",
    '  File "/srv/app/engine.py", line 97, in generate',
    "    return self.model.generate(**inputs, max_new_tokens=max_new, do_sample=True)",
    '  File "/srv/venv/lib/python3.11/site-packages/torch/utils/_contextlib.py", line 116, in decorate_context',
    "    return func(*args, **kwargs)",
    '  File "/srv/venv/lib/python3.11/site-packages/transformers/generation/utils.py", line 2564, in generate',
    "    result = self._sample(",
    '  File "/srv/venv/lib/python3.11/site-packages/transformers/models/llama/modeling_llama.py", line 151, in forward',
    "    down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))",
)


def _stamp(ts_ms: int) -> str:
    """One timestamp in the log's format."""
    moment = datetime.fromtimestamp(ts_ms // 1000, UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{ts_ms % 1000:03d}Z"


def _request_lines(sim: Simulated, versions: list[str]) -> pl.DataFrame:
    """(ts, order, text) of the line each request ends with."""
    lit, col = pl.lit, pl.col
    frame = pl.DataFrame(
        {
            "ts": sim.req.ts,
            "seq": np.arange(1, len(sim.req.ts) + 1),
            "v": sim.version,
            "oom": sim.cause > 0,
            "b": sim.req.batch,
            "i": sim.req.inp,
            "o": sim.req.out,
            "lat": sim.latency,
        }
    )
    head = pl.when(col("oom")).then(lit(" ERROR [server] ")).otherwise(lit(" INFO [server] "))
    status = pl.when(col("oom")).then(lit(" failed status=500")).otherwise(lit(" done status=200"))
    text = pl.concat_str(
        [
            iso_ms(col("ts")),
            head,
            lit(f"{sim.inst.name}-"),
            col("seq").cast(pl.String).str.zfill(7),
            status,
            lit(" model="),
            col("v").replace_strict(dict(enumerate(versions)), return_dtype=pl.String),
            lit(" batch="),
            col("b").cast(pl.String),
            lit(" prompt_tokens="),
            col("i").cast(pl.String),
            lit(" max_new_tokens="),
            col("o").cast(pl.String),
            lit(" latency_ms="),
            col("lat").cast(pl.String),
        ]
    )
    return frame.select(col("ts"), lit(1).alias("order"), text.alias("text"))


def _oom_blocks(sim: Simulated, messages: list[str]) -> list[tuple[int, int, str]]:
    """The traceback after each failed request; a log shipper stamps every line it forwards."""
    out = []
    for k, row in enumerate(sim.oom_rows):
        ts = int(sim.req.ts[row])
        prefix = f"{_stamp(ts)} ERROR "
        lines = [*TRACEBACK, f"torch.OutOfMemoryError: {messages[k]}"]
        out.append((ts, 2, "\n".join(prefix + line for line in lines)))
    return out


def _lifecycle(sim: Simulated, versions: list[str], pids: Pids) -> list[tuple[int, int, str]]:
    """Start lines of each process, and why the one before it stopped."""
    out = []
    for restart in sim.lifetimes.restarts:
        if restart.reason == "watchdog":
            gib = restart.allocated_after / GIB
            text = f"WARNING [watchdog] memory_allocated {gib:.2f} GiB is above 50% of the device: restarting"
        else:
            text = f"INFO [deploy] rolling update to {versions[restart.version]}: stopping"
        out.append((restart.ts_ms, 0, f"{_stamp(restart.ts_ms)} {text}"))
    for life, start in enumerate(sim.lifetimes.starts_ms):
        text = (
            f"INFO [server] pid={pids.service[life]} serving model={versions[sim.lifetimes.version[life]]} "
            f"on cuda:0 ({sim.inst.card.smi_name}), empty_cache after each request"
        )
        out.append((start, 0, f"{_stamp(start)} {text}"))
    return out


def _hourly(sim: Simulated) -> list[tuple[int, int, str]]:
    """An hourly stats line: requests and memory after the last request of the hour."""
    hours = sim.req.ts // HOUR_MS
    last = np.flatnonzero(np.r_[hours[1:] != hours[:-1], True])
    counts = np.diff(np.r_[-1, last])
    out = []
    for row, count in zip(last, counts, strict=True):
        ts = int((hours[row] + 1) * HOUR_MS)
        out.append(
            (
                ts,
                3,
                f"{_stamp(ts)} INFO [stats] requests_last_hour={count} "
                f"allocated_gib={sim.after[row] / GIB:.2f} reserved_gib={sim.res_after[row] / GIB:.2f}",
            )
        )
    return out


def write_text_log(path: Path, sim: Simulated, versions: list[str], messages: list[str], pids: Pids, level: int) -> int:
    """Write the instance's service log, time-ordered; returns its size in bytes."""
    extra = _oom_blocks(sim, messages) + _lifecycle(sim, versions, pids) + _hourly(sim)
    others = pl.DataFrame(extra, schema={"ts": pl.Int64, "order": pl.Int32, "text": pl.String}, orient="row")
    lines = pl.concat([_request_lines(sim, versions).cast({"order": pl.Int32}), others])
    lines = lines.sort(["ts", "order"], maintain_order=True)
    body = lines.select(pl.col("text").str.join("\n"))["text"].item() + "\n"
    return write_gzip(path, [body.encode()], level)
