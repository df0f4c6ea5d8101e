"""nvidia-smi --query-gpu and --query-compute-apps samples, in the exact CSV format of the real H200 runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from .grounding import MIB, MemoryModel
from .gz import write_gzip
from .plan import FleetPlan, Job
from .processes import Pids, window_index
from .simulate import Simulated
from .traffic import load_shape

GPU_HEADER = (
    "timestamp, index, name, memory.used [MiB], memory.total [MiB], memory.free [MiB], "
    "utilization.gpu [%], utilization.memory [%], temperature.gpu, power.draw [W]"
)
APPS_HEADER = "timestamp, pid, process_name, used_gpu_memory [MiB]"


def smi_time(ts: pl.Expr) -> pl.Expr:
    """Epoch milliseconds as nvidia-smi prints them: `2026/11/30 01:49:09.001`."""
    return pl.from_epoch(ts, time_unit="ms").dt.strftime("%Y/%m/%d %H:%M:%S%.3f")


def _service_state(sim: Simulated, model: MemoryModel, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(service MiB incl. context or 0 while down, lifetime index) at each sample time."""
    starts = np.array(sim.lifetimes.starts_ms, dtype=np.int64)
    life = np.searchsorted(starts, t, side="right") - 1
    last = np.searchsorted(sim.req.ts, t, side="right") - 1
    fresh = (last < 0) | (sim.life[np.maximum(last, 0)] != life)  # no request of this process yet
    start_res = sim.res_before[np.searchsorted(sim.life, life).clip(0, len(sim.life) - 1)]
    reserved = np.where(fresh, start_res, sim.res_after[np.maximum(last, 0)])
    down = np.zeros(len(t), dtype=bool)
    for restart in sim.lifetimes.restarts:  # between a stop and the next start nothing runs
        nxt = starts[starts > restart.ts_ms]
        if len(nxt):
            down |= (t >= restart.ts_ms) & (t < nxt[0])
    mib = np.where(down, 0, (reserved + model.non_pytorch) // MIB)
    return mib, life


def write_smi(
    folder: Path,
    plan: FleetPlan,
    sim: Simulated,
    model: MemoryModel,
    pids: Pids,
    backup: Job,
    windows: list[tuple[int, int]],
    interval_s: int,
    level: int,
    rng: np.random.Generator,
) -> int:
    """Write `<instance>.gpu.csv.gz` and `<instance>.apps.csv.gz`; returns their total size."""
    inst, card = sim.inst, sim.inst.card
    t = np.arange(plan.start_ms, plan.end_ms, interval_s * 1000, dtype=np.int64) + rng.integers(0, 40)
    t += rng.integers(0, 3, len(t))  # the sampling loop drifts by a few ms
    service, life = _service_state(sim, model, t)
    win = window_index(t, windows) if inst.name in backup.hosts else np.full(len(t), -1)
    backup_mib = np.where(win >= 0, backup.gpu_mib, 0)
    used = service + backup_mib
    load = load_shape(t) / load_shape(t).max() * (0.8 if card.key == "A10" else 0.55)
    util = np.clip(np.round(100 * load + 14 * (win >= 0) + rng.normal(0, 6, len(t))), 0, 100).astype(np.int64)
    util = np.where(service > 0, util, np.where(win >= 0, 14, 0))
    gpu = pl.DataFrame(
        {
            "t": t,
            "used": used,
            "free": np.maximum(card.smi_total_mib - card.driver_reserved_mib - used, 0),
            "util": util,
            "mem": np.clip(np.round(util * 0.42 + rng.normal(0, 3, len(t))), 0, 100).astype(np.int64),
            "temp": np.round(30 + 0.32 * util + rng.normal(0, 1, len(t))).astype(np.int64),
            "cw": np.round(
                100 * (card.idle_w + (card.max_w - card.idle_w) * util / 100 * 0.9 + rng.normal(0, 2, len(t)))
            ).astype(np.int64),  # centiwatts
        }
    )
    size = write_gzip(folder / f"{inst.name}.gpu.csv.gz", [_gpu_csv(gpu, card.smi_name, card.smi_total_mib)], level)
    apps = _apps_frame(t, service, life, win, pids, backup)
    return size + write_gzip(folder / f"{inst.name}.apps.csv.gz", [_apps_csv(apps)], level)


def _gpu_csv(gpu: pl.DataFrame, name: str, total_mib: int) -> bytes:
    """The --query-gpu CSV body."""
    col, lit = pl.col, pl.lit
    line = pl.concat_str(
        [
            smi_time(col("t")),
            lit(f", 0, {name}, "),
            col("used").cast(pl.String),
            lit(f" MiB, {total_mib} MiB, "),
            col("free").cast(pl.String),
            lit(" MiB, "),
            col("util").cast(pl.String),
            lit(" %, "),
            col("mem").cast(pl.String),
            lit(" %, "),
            col("temp").cast(pl.String),
            lit(", "),
            (col("cw") // 100).cast(pl.String),
            lit("."),
            (col("cw") % 100).cast(pl.String).str.zfill(2),
            lit(" W"),
        ]
    )
    return (GPU_HEADER + "\n" + gpu.select(line.str.join("\n")).item() + "\n").encode()


def _apps_frame(
    t: np.ndarray, service: np.ndarray, life: np.ndarray, win: np.ndarray, pids: Pids, backup: Job
) -> pl.DataFrame:
    """One row per process per sample: the service while it runs, the backup during its windows."""
    up = service > 0
    svc = pl.DataFrame(
        {
            "t": t[up],
            "pid": np.array(pids.service, dtype=np.int64)[life[up]],
            "name": "python3",
            "mib": service[up],
        }
    )
    on = win >= 0
    bkp = pl.DataFrame(
        {
            "t": t[on],
            "pid": np.array([pids.backup.get(int(w), 0) for w in win[on]], dtype=np.int64),
            "name": backup.process_name,
            "mib": np.full(int(on.sum()), backup.gpu_mib, dtype=np.int64),
        }
    )
    return pl.concat([svc, bkp]).sort(["t", "pid"])


def _apps_csv(apps: pl.DataFrame) -> bytes:
    """The --query-compute-apps CSV body."""
    col, lit = pl.col, pl.lit
    line = pl.concat_str(
        [
            smi_time(col("t")),
            lit(", "),
            col("pid").cast(pl.String),
            lit(", "),
            col("name"),
            lit(", "),
            col("mib").cast(pl.String),
            lit(" MiB"),
        ]
    )
    body = apps.select(line.str.join("\n")).item() if apps.height else ""
    return (APPS_HEADER + "\n" + body + ("\n" if body else "")).encode()
