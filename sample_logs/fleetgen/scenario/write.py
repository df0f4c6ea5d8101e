"""A randomised fleet's files: request logs, text logs, nvidia-smi samples, in the fleet's time style; with
the fleet's shapes (shapes.py) where it has them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import polars as pl

from ..gz import write_gzip
from ..oom_text import HINT, format_size, oom_message
from ..simulate import CAUSES
from ..write_smi import APPS_HEADER, GPU_HEADER
from ..write_text import TRACEBACK
from .load import load_shape
from .models import AMD
from .shapes import Units
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


@dataclass(frozen=True)
class Names:
    """What one host's files call it: the node (the host's name), its GPU's UUID where the logs state it, and
    the pod of each process lifetime (Kubernetes fleets; empty otherwise)."""

    node: str
    gpu_uuid: str | None = None
    pods: tuple[str, ...] = ()


def messages(scenario: Scenario, sim: HostSim) -> list[str]:
    """The verbatim PyTorch 2.1+ message of each failed request, in row order: ROCm's `HIP out of memory`
    without process lines on an AMD card; the service listed as `Process <host pid>` under a PID namespace."""
    shapes = scenario.shapes
    hip = shapes is not None and sim.host.card.key in AMD
    pidns = shapes is not None and shapes.pid_namespace
    out = []
    for k, row in enumerate(sim.oom_rows):
        own = sim.lifetimes[sim.life[row]].pid
        other = None
        if sim.other[row] > 0:
            other = (sim.runs[sim.run[row]].pid, int(sim.other[row]))
        reserved, allocated = int(sim.oom_reserved[k]), int(sim.oom_allocated[k])
        args = (int(sim.requested[row]), sim.host.card.device_total, int(sim.oom_free[k]))
        if hip or pidns:
            out.append(
                shaped_message(
                    *args, (own, reserved + scenario.non_pytorch), allocated, reserved - allocated, other, hip
                )
            )
            continue
        out.append(
            oom_message(
                *args,
                reserved + scenario.non_pytorch,
                allocated,
                reserved - allocated,
                other,
                other_first=other is not None and other[0] < own,
            )
        )
    return out


def shaped_message(
    requested: int,
    total: int,
    free: int,
    own: tuple[int, int],
    allocated: int,
    unallocated: int,
    other: tuple[int, int] | None,
    hip: bool,
) -> str:
    """A message PyTorch prints where it cannot tell its own process: every process NVML lists (host pids, in
    pid order) as `Process P has M memory in use`, the failing one included; none at all on ROCm (`HIP`)."""
    listed = [] if hip else sorted([own, *([other] if other else [])])
    parts = [
        f"{'HIP' if hip else 'CUDA'} out of memory. Tried to allocate {format_size(requested)}.",
        f"GPU 0 has a total capacity of {format_size(total)} of which {format_size(free)} is free.",
        *(f"Process {pid} has {format_size(size)} memory in use." for pid, size in listed),
        f"Of the allocated memory {format_size(allocated)} is allocated by PyTorch, and "
        f"{format_size(unallocated)} is reserved by PyTorch but unallocated.",
    ]
    return " ".join(parts) + " " + HINT


def _frame(scenario: Scenario, sim: HostSim, texts: list[str], names: Names | None = None) -> pl.DataFrame:
    rows = sim.oom_rows
    extra = np.full(len(sim.req.ts), "", dtype=object)
    units = scenario.shapes.units if scenario.shapes is not None else None
    for k, row in enumerate(rows):
        if units is None:
            extra[row] = (
                f', "requested_size": {sim.requested[row]}, "available_memory": {sim.oom_free[k]}, '
                f'"allocator_allocated": {sim.oom_allocated[k]}, "reserved_memory": {sim.oom_reserved[k]}, '
                f'"error": {json.dumps(texts[k])}'
            )
            continue
        values = (sim.requested[row], sim.oom_free[k], sim.oom_allocated[k], sim.oom_reserved[k])
        keys = ("requested_size", "available_memory", "allocator_allocated", "reserved_memory")
        fields = "".join(
            f', "{units.name(key)}": {in_unit(int(v), units)}' for key, v in zip(keys, values, strict=True)
        )
        extra[row] = f'{fields}, "error": {json.dumps(texts[k])}'
    pods = names.pods if names is not None and names.pods else ()
    ids = request_ids(scenario, sim)
    version_names = {i: v.name for i, v in enumerate(scenario.versions)}
    frame = pl.DataFrame(
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
            "life": sim.life,
        }
    ).with_columns(version=pl.col("version").replace_strict(version_names, return_dtype=pl.String))
    if pods:
        frame = frame.with_columns(pod=pl.col("life").replace_strict(dict(enumerate(pods)), return_dtype=pl.String))
    if ids is None:
        return frame.with_columns(rid=pl.lit(f"{sim.host.name}-") + pl.col("seq").cast(pl.String).str.zfill(7))
    return frame.with_columns(rid=pl.Series(ids, dtype=pl.String))


def request_ids(scenario: Scenario, sim: HostSim) -> list[str] | None:
    """Opaque request ids (16 hex digits, as an ingress's x-request-id) on Kubernetes, where nothing in a pod's
    files names its node but the node fields; None elsewhere (`<host>-0000001`)."""
    if scenario.shapes is None or scenario.shapes.kube is None:
        return None
    index = [h.name for h in scenario.hosts].index(sim.host.name)
    rng = np.random.default_rng(np.random.SeedSequence([scenario.seed, index, 2027, 8]))
    return [f"{int(w):016x}" for w in rng.integers(0, 1 << 64, len(sim.req.ts), dtype=np.uint64)]


def in_unit(value: int, units: Units) -> str:
    """Bytes as a number of MiB or GiB with the fleet's decimals, as a JSON number."""
    scaled = round(value / units.divisor, units.decimals)
    return str(int(scaled)) if units.decimals == 0 else repr(scaled)


def write_request_log(
    path: Path, scenario: Scenario, sim: HostSim, texts: list[str], names: Names | None = None
) -> int:
    """One JSON object per request, oomlab's canonical keys in the sample fleet's order; with the fleet's
    shapes: the pod and node instead of `instance` (Kubernetes), memory in MiB or GiB under names that say so,
    no `_before` fields."""
    lit, col = pl.lit, pl.col
    shapes = scenario.shapes
    units = shapes.units if shapes is not None else None
    no_before = shapes is not None and shapes.no_before

    def num(name: str) -> pl.Expr:
        return col(name).cast(pl.String)

    def memory(name: str) -> pl.Expr:
        if units is None:
            return num(name)
        scaled = (col(name) / units.divisor).round(units.decimals)
        return scaled.cast(pl.Int64).cast(pl.String) if units.decimals == 0 else scaled.cast(pl.String)

    total = sim.host.card.device_total
    sizes = (
        ("allocated_before", "before"),
        ("allocated_after", "after"),
        ("reserved_before", "res_before"),
        ("reserved_after", "res_after"),
        ("peak_allocated", "peak"),
    )
    parts = [
        lit('{"ts": "'),
        stamp(col("ts"), scenario),
        *_identity(scenario, sim, names),
        col("version"),
        lit('", "request_id": "'),
        col("rid"),
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
            )
            for piece in (lit(f', "{key}": '), num(column))
        ],
        *[
            piece
            for key, column in sizes
            if not (no_before and key.endswith("_before"))
            for piece in (lit(f', "{units.name(key) if units else key}": '), memory(column))
        ],
        lit(
            f', "device_total": {total}'
            if units is None
            else f', "{units.name("device_total")}": {in_unit(total, units)}'
        ),
        col("extra"),
        lit("}\n"),
    ]
    frame = _frame(scenario, sim, texts, names)
    body = frame.select(pl.concat_str(parts).str.join("")).item() if frame.height else ""
    return write_gzip(path, [body.encode()], LEVEL)


def _identity(scenario: Scenario, sim: HostSim, names: Names | None) -> list[pl.Expr]:
    """From the end of `ts` to the start of `model_version`'s value: the instance, or the pod and its node as
    the fleet's log pipeline writes them; the GPU; its UUID where logged."""
    lit, col = pl.lit, pl.col
    kube = scenario.shapes.kube if scenario.shapes is not None else None
    if kube is None or names is None:
        return [lit(f'", "instance": "{sim.host.name}", "gpu_index": 0, "model_version": "')]
    node, ns = names.node, kube.namespace
    if kube.style == "pod_node":
        head = [lit('", "pod": "'), col("pod"), lit(f'", "node": "{node}"')]
    elif kube.style == "nested":
        head = [
            lit(f'", "kubernetes": {{"namespace_name": "{ns}", "pod_name": "'),
            col("pod"),
            lit(f'", "node_name": "{node}", "container_name": "server"}}'),
        ]
    elif kube.style == "dotted":
        head = [
            lit(f'", "kubernetes.namespace_name": "{ns}", "kubernetes.pod_name": "'),
            col("pod"),
            lit(f'", "kubernetes.node_name": "{node}"'),
        ]
    else:  # a node's log shipper stamps its hostname; the service names its pod
        head = [lit(f'", "hostname": "{node}", "pod_name": "'), col("pod"), lit('"')]
    uuid = f', "gpu_uuid": "{names.gpu_uuid}"' if kube.gpu_uuid and names.gpu_uuid else ""
    return [*head, lit(f', "gpu_index": 0{uuid}, "model_version": "')]


def write_text_log(path: Path, scenario: Scenario, sim: HostSim, texts: list[str]) -> int:
    """The service's log: a line per request, process starts and stops, every OOM with its traceback."""
    lines = text_lines(scenario, sim, texts, Names(sim.host.name))
    return write_gzip(path, [(lines.select(pl.col("text").str.join("\n")).item() + "\n").encode()], LEVEL)


def write_text_logs(
    folder: Path, scenario: Scenario, sim: HostSim, texts: list[str], names: Names, echo: bool, rng: np.random.Generator
) -> tuple[int, list[str]]:
    """The text logs of a host in a fleet with shapes: `<host>.log.gz`, or one `<pod>.log.gz` per process
    lifetime on Kubernetes. An `echo` host also writes a request log: its text log has no request lines, only
    starts, stops and the tracebacks, stamped 1-40 ms after the request's row. (bytes, file names)"""
    delay = None
    if echo:
        assert scenario.shapes is not None
        low, high = scenario.shapes.echo_delay_ms
        delay = rng.integers(low, high + 1, len(sim.oom_rows))
    lines = text_lines(scenario, sim, texts, names, requests=not echo, delay=delay)
    files = [(f"{names.node}.log.gz", lines)]
    if names.pods:  # every pod's own log, named after it
        files = [(f"{pod}.log.gz", lines.filter(pl.col("life") == life)) for life, pod in enumerate(names.pods)]
    size = 0
    for name, mine in files:
        body = (mine.select(pl.col("text").str.join("\n")).item() + "\n") if mine.height else ""
        size += write_gzip(folder / name, [body.encode()], LEVEL)
    return size, [name for name, _ in files]


def text_lines(
    scenario: Scenario,
    sim: HostSim,
    texts: list[str],
    names: Names,
    requests: bool = True,
    delay: np.ndarray | None = None,
) -> pl.DataFrame:
    """(ts, order, text, life) of every line of a host's service log, in time order."""
    lit, col = pl.lit, pl.col
    frame = _frame(scenario, sim, texts)
    ok = col("status") == "ok"
    line = pl.concat_str(
        [
            stamp(col("ts"), scenario),
            pl.when(ok).then(lit(" INFO [server] ")).otherwise(lit(" ERROR [server] ")),
            col("rid"),
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
    lines = frame.select(col("ts"), lit(1).alias("order"), line.alias("text"), col("life").cast(pl.Int64))
    if not requests:
        lines = lines.clear()
    extra: list[tuple[int, int, str, int]] = []
    for k, row in enumerate(sim.oom_rows):
        at = int(sim.req.ts[row]) + (int(delay[k]) if delay is not None else 0)
        for j, text in enumerate([*TRACEBACK, f"torch.OutOfMemoryError: {texts[k]}"]):
            extra.append((at, 2 + j, text, int(sim.life[row])))
    for life_index in range(len(sim.lifetimes)):
        extra += _lifecycle(scenario, sim, names, life_index)
    others = pl.DataFrame(
        extra, schema={"ts": pl.Int64, "order": pl.Int32, "text": pl.String, "life": pl.Int64}, orient="row"
    )
    others = others.with_columns(
        text=pl.concat_str(
            [
                stamp(col("ts"), scenario),
                pl.when(col("order") >= 2).then(lit(" ERROR ")).otherwise(lit(" ")),
                col("text"),
            ]
        )
    )
    return pl.concat([lines.cast({"order": pl.Int32}), others]).sort(["ts", "order"], maintain_order=True)


def _lifecycle(scenario: Scenario, sim: HostSim, names: Names, index: int) -> list[tuple[int, int, str, int]]:
    """A process's start line and, when someone stopped it, the line saying so. Under a PID namespace the
    service knows only its pid inside the container; a pod's log names its node (the downward API's NODE_NAME)
    and its GPU, and ends with the SIGTERM the kubelet sends it."""
    life = sim.lifetimes[index]
    shapes = scenario.shapes
    version = scenario.versions[life.version].name
    pid = shapes.container_pid if shapes is not None and shapes.pid_namespace else life.pid
    out = []
    if names.pods:
        gpu = f" ({names.gpu_uuid})" if names.gpu_uuid else ""
        start = f"INFO [server] pod={names.pods[index]} node={names.node} pid={pid} serving model={version}"
        out.append((life.start_ms, 0, f"{start} on cuda:0{gpu}", index))
        if life.end_reason in ("deploy", "operator"):
            out.append((life.end_ms, 0, f"WARNING [server] pid={pid} received SIGTERM: shutting down", index))
        return out
    out.append((life.start_ms, 0, f"INFO [server] pid={pid} serving model={version} on cuda:0", index))
    if life.end_reason in ("deploy", "operator", "crash"):
        why = {"deploy": "rolling update: stopping", "operator": "restart requested by operator", "crash": "exited"}
        out.append((life.end_ms, 0, f"WARNING [supervisor] pid={pid} {why[life.end_reason]}", index))
    return out


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


def cause_rows(scenario: Scenario, sim: HostSim, source: str | None = None) -> list[str]:
    """`instance,ts,request_id,cause,subject,leak_too,source` of every failed request (ts in UTC); `source` is
    the host's log (`requests`, `text`, or `requests+text` where both hold each OOM)."""
    out = []
    ids = request_ids(scenario, sim)
    for row in sim.oom_rows:
        cause = CAUSES[sim.cause[row]]
        rid = f"{sim.host.name}-{row + 1:07d}" if ids is None else ids[row]
        out.append(
            f"{sim.host.name},{datetime.fromtimestamp(sim.req.ts[row] / 1000, UTC):%Y-%m-%dT%H:%M:%S.%f}"[:-3]
            + f"Z,{rid},{cause},{cause_subject(scenario, sim, row)},"
            f"{str(bool(sim.leak_too[row])).lower()},{source or sim.host.log}\n"
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
