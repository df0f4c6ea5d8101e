"""A randomised fleet's files: request logs, text logs, nvidia-smi samples, in the fleet's time style."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import polars as pl

from ..gz import write_gzip
from ..oom_text import oom_message
from ..simulate import CAUSES
from ..write_smi import APPS_HEADER, GPU_HEADER
from ..write_text import TRACEBACK
from .load import load_shape
from .simulate import HostSim
from .spec import Scenario

LEVEL = 6
FORMATS = {
    "utc_z": "%Y-%m-%dT%H:%M:%S%.3fZ",
    "naive_utc": "%Y-%m-%dT%H:%M:%S%.3f",
    "naive_local": "%Y-%m-%dT%H:%M:%S%.3f",
    "offset": "%Y-%m-%dT%H:%M:%S%.3f%:z",
}
SMI_FORMAT = "%Y/%m/%d %H:%M:%S%.3f"


def _local(scenario: Scenario) -> bool:
    return scenario.style in ("naive_local", "offset")


def stamp(ms: pl.Expr, scenario: Scenario, smi: bool = False) -> pl.Expr:
    """Epoch milliseconds as the fleet's logs write them; nvidia-smi prints naive local times."""
    moment = pl.from_epoch(ms, time_unit="ms").dt.replace_time_zone("UTC")
    if smi:
        return moment.dt.convert_time_zone(scenario.tz).dt.strftime(SMI_FORMAT)
    if _local(scenario):
        moment = moment.dt.convert_time_zone(scenario.tz)
    return moment.dt.strftime(FORMATS[scenario.style])


def stamp_one(ms: int, scenario: Scenario) -> str:
    """One time (whole seconds) as the fleet writes it, for calendars."""
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    if _local(scenario):
        moment = moment.astimezone(ZoneInfo(scenario.tz))
    text = f"{moment:%Y-%m-%dT%H:%M:%S}"
    if scenario.style == "utc_z":
        return text + "Z"
    return text + (moment.strftime("%z")[:3] + ":" + moment.strftime("%z")[3:] if scenario.style == "offset" else "")


def messages(scenario: Scenario, sim: HostSim) -> list[str]:
    """The verbatim PyTorch 2.1+ message of each failed request, in row order."""
    out = []
    for k, row in enumerate(sim.oom_rows):
        own = sim.lifetimes[sim.life[row]].pid
        other = None
        if sim.other[row] > 0:
            other = (sim.runs[sim.run[row]].pid, int(sim.other[row]))
        reserved, allocated = int(sim.oom_reserved[k]), int(sim.oom_allocated[k])
        out.append(
            oom_message(
                int(sim.requested[row]),
                sim.host.card.device_total,
                int(sim.oom_free[k]),
                reserved + scenario.non_pytorch,
                allocated,
                reserved - allocated,
                other,
                other_first=other is not None and other[0] < own,
            )
        )
    return out


def _frame(scenario: Scenario, sim: HostSim, texts: list[str]) -> pl.DataFrame:
    rows = sim.oom_rows
    extra = np.full(len(sim.req.ts), "", dtype=object)
    for k, row in enumerate(rows):
        extra[row] = (
            f', "requested_size": {sim.requested[row]}, "available_memory": {sim.oom_free[k]}, '
            f'"allocator_allocated": {sim.oom_allocated[k]}, "reserved_memory": {sim.oom_reserved[k]}, '
            f'"error": {json.dumps(texts[k])}'
        )
    names = {i: v.name for i, v in enumerate(scenario.versions)}
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
    ).with_columns(version=pl.col("version").replace_strict(names, return_dtype=pl.String))


def write_request_log(path: Path, scenario: Scenario, sim: HostSim, texts: list[str]) -> int:
    """One JSON object per request, oomlab's canonical keys in the sample fleet's order."""
    lit, col = pl.lit, pl.col

    def num(name: str) -> pl.Expr:
        return col(name).cast(pl.String)

    name = sim.host.name
    parts = [
        lit('{"ts": "'),
        stamp(col("ts"), scenario),
        lit(f'", "instance": "{name}", "gpu_index": 0, "model_version": "'),
        col("version"),
        lit(f'", "request_id": "{name}-'),
        num("seq").str.zfill(7),
        lit('", "status": "'),
        col("status"),
        lit('", "latency_ms": '),
        num("latency"),
        *[
            piece
            for key, column in (
                ("batch_size", "batch"),
                ("input_sequence_length", "inp"),
                ("output_sequence_length", "out"),
                ("allocated_before", "before"),
                ("allocated_after", "after"),
                ("reserved_before", "res_before"),
                ("reserved_after", "res_after"),
                ("peak_allocated", "peak"),
            )
            for piece in (lit(f', "{key}": '), num(column))
        ],
        lit(f', "device_total": {sim.host.card.device_total}'),
        col("extra"),
        lit("}\n"),
    ]
    frame = _frame(scenario, sim, texts)
    body = frame.select(pl.concat_str(parts).str.join("")).item() if frame.height else ""
    return write_gzip(path, [body.encode()], LEVEL)


def write_text_log(path: Path, scenario: Scenario, sim: HostSim, texts: list[str]) -> int:
    """The service's log: a line per request, process starts and stops, every OOM with its traceback."""
    lit, col = pl.lit, pl.col
    frame = _frame(scenario, sim, texts)
    ok = col("status") == "ok"
    line = pl.concat_str(
        [
            stamp(col("ts"), scenario),
            pl.when(ok).then(lit(" INFO [server] ")).otherwise(lit(" ERROR [server] ")),
            lit(f"{sim.host.name}-"),
            col("seq").cast(pl.String).str.zfill(7),
            pl.when(ok).then(lit(" done status=200")).otherwise(lit(" failed status=500")),
            lit(" model="),
            col("version"),
            lit(" batch="),
            col("batch").cast(pl.String),
            lit(" prompt_tokens="),
            col("inp").cast(pl.String),
            lit(" max_new_tokens="),
            col("out").cast(pl.String),
            lit(" latency_ms="),
            col("latency").cast(pl.String),
        ]
    )
    lines = frame.select(col("ts"), lit(1).alias("order"), line.alias("text"))
    extra: list[tuple[int, int, str]] = []
    for k, row in enumerate(sim.oom_rows):
        for j, text in enumerate([*TRACEBACK, f"torch.OutOfMemoryError: {texts[k]}"]):
            extra.append((int(sim.req.ts[row]), 2 + j, text))
    for life in sim.lifetimes:
        version = scenario.versions[life.version].name
        extra.append((life.start_ms, 0, f"INFO [server] pid={life.pid} serving model={version} on cuda:0"))
        if life.end_reason in ("deploy", "operator", "crash"):
            why = {"deploy": "rolling update: stopping", "operator": "restart requested by operator", "crash": "exited"}
            extra.append((life.end_ms, 0, f"WARNING [supervisor] pid={life.pid} {why[life.end_reason]}"))
    others = pl.DataFrame(extra, schema={"ts": pl.Int64, "order": pl.Int32, "text": pl.String}, orient="row")
    others = others.with_columns(
        text=pl.concat_str(
            [
                stamp(col("ts"), scenario),
                pl.when(col("order") >= 2).then(lit(" ERROR ")).otherwise(lit(" ")),
                col("text"),
            ]
        )
    )
    both = pl.concat([lines.cast({"order": pl.Int32}), others]).sort(["ts", "order"], maintain_order=True)
    return write_gzip(path, [(both.select(col("text").str.join("\n")).item() + "\n").encode()], LEVEL)


def write_smi(folder: Path, scenario: Scenario, sim: HostSim, rng: np.random.Generator, interval_s: int = 120) -> int:
    """`<host>.gpu.csv.gz` and `<host>.apps.csv.gz`: the service (reserved + context) and neighbours that run."""
    card, host = sim.host.card, sim.host
    t = np.arange(scenario.start_ms, scenario.end_ms, interval_s * 1000, dtype=np.int64) + int(rng.integers(0, 40))
    starts = np.array([lt.start_ms for lt in sim.lifetimes], dtype=np.int64)
    ends = np.array([lt.end_ms for lt in sim.lifetimes], dtype=np.int64)
    life = np.searchsorted(starts, t, side="right") - 1
    up = (life >= 0) & (t < ends[np.maximum(life, 0)])
    last = np.searchsorted(sim.req.ts, t, side="right") - 1
    same = (last >= 0) & (sim.life[np.maximum(last, 0)] == life) if len(sim.req.ts) else np.zeros(len(t), dtype=bool)
    start_res = sim.res_before[np.searchsorted(sim.life, np.maximum(life, 0)).clip(0, max(len(sim.life) - 1, 0))]
    reserved = np.where(same, sim.res_after[np.maximum(last, 0)] if len(sim.req.ts) else 0, start_res)
    service = np.where(up, (reserved + scenario.non_pytorch) // (1 << 20), 0)
    running = [r for r in sim.runs if r.started]
    nb = np.zeros(len(t), dtype=np.int64)
    for r in running:
        nb += np.where((t >= r.start_ms) & (t < r.end_ms), r.bytes >> 20, 0)
    used = service + nb
    load = load_shape(t, scenario.traffic.peak_hour_utc)
    util = np.clip(np.round(90 * load / load.max() + rng.normal(0, 6, len(t))), 0, 100).astype(np.int64)
    util = np.where(up, util, 0)
    free = np.maximum(card.smi_total_mib - card.driver_reserved_mib - used, 0)
    gpu = pl.DataFrame({"t": t, "used": used, "free": free, "util": util})
    col, lit = pl.col, pl.lit
    line = pl.concat_str(
        [
            stamp(col("t"), scenario, smi=True),
            lit(f", 0, {card.smi_name}, "),
            col("used").cast(pl.String),
            lit(f" MiB, {card.smi_total_mib} MiB, "),
            col("free").cast(pl.String),
            lit(" MiB, "),
            col("util").cast(pl.String),
            lit(" %, "),
            (col("util") * 2 // 5).cast(pl.String),
            lit(" %, "),
            (30 + col("util") // 3).cast(pl.String),
            lit(", "),
            (lit(card.idle_w) + (card.max_w - card.idle_w) * col("util") / 100).round(2).cast(pl.String),
            lit(" W"),
        ]
    )
    body = GPU_HEADER + "\n" + gpu.select(line.str.join("\n")).item() + "\n"
    size = write_gzip(folder / f"{host.name}.gpu.csv.gz", [body.encode()], LEVEL)
    pids = np.array([lt.pid for lt in sim.lifetimes], dtype=np.int64)
    frames = [pl.DataFrame({"t": t[up], "pid": pids[life[up]], "name": "python3", "mib": service[up]})]
    for r in running:
        on = (t >= r.start_ms) & (t < r.end_ms)
        name = scenario.neighbours[r.neighbour].process_name
        frames.append(
            pl.DataFrame({"t": t[on], "pid": np.full(int(on.sum()), r.pid), "name": name, "mib": r.bytes >> 20})
        )
    apps = pl.concat([f.cast({"pid": pl.Int64, "mib": pl.Int64}) for f in frames]).sort(["t", "pid"])
    line = pl.concat_str(
        [
            stamp(col("t"), scenario, smi=True),
            lit(", "),
            col("pid").cast(pl.String),
            lit(", "),
            col("name"),
            lit(", "),
            col("mib").cast(pl.String),
            lit(" MiB"),
        ]
    )
    text = apps.select(line.str.join("\n")).item() if apps.height else ""
    return size + write_gzip(folder / f"{host.name}.apps.csv.gz", [(APPS_HEADER + "\n" + text + "\n").encode()], LEVEL)


def cause_rows(scenario: Scenario, sim: HostSim) -> list[str]:
    """`instance,ts,request_id,cause,subject,leak_too,source` of every failed request (ts in UTC)."""
    out = []
    for row in sim.oom_rows:
        cause = CAUSES[sim.cause[row]]
        out.append(
            f"{sim.host.name},{datetime.fromtimestamp(sim.req.ts[row] / 1000, UTC):%Y-%m-%dT%H:%M:%S.%f}"[:-3]
            + f"Z,{sim.host.name}-{row + 1:07d},{cause},{cause_subject(scenario, sim, row)},"
            f"{str(bool(sim.leak_too[row])).lower()},{sim.host.log}\n"
        )
    return out


def cause_subject(scenario: Scenario, sim: HostSim, row: int) -> str:
    """Who caused one OOM: the job or the host of a neighbour, the leaking version, the card."""
    cause = CAUSES[sim.cause[row]]
    if cause == "external_pressure":
        n = scenario.neighbours[sim.runs[sim.run[row]].neighbour]
        return f"job {n.job}" if n.job else f"instance {sim.host.name}"
    if cause == "leak":
        return f"model_version {scenario.versions[sim.version[row]].name}"
    if cause == "fragmentation":
        return f"instance {sim.host.name}"
    return f"card {sim.host.card.device_total}"
