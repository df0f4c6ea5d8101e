"""Serving engines' start-up memory reports, found in text logs: how each engine split the card at start.

Every engine's wordings (vllm.py: vLLM and vllm-ascend; engines.py: SGLang, TGI, TensorRT-LLM, MLC LLM, vllm.rs;
llamacpp.py: llama.cpp and ollama) are read line by line, and the lines of one start-up are merged into
reports (`StartupMemory`), one per device the lines name (llama.cpp's and ollama's `CUDA0`, ...; most engines
name none). A line that contradicts its device's report, comes from another engine, names another version of
the engine in its prefix, or loads a model after that device's KV cache was sized begins the next start-up.
Lines repeated by tensor-parallel workers merge.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime

from ...units import to_utc_naive
from ..text.logline import LineClock
from ..text.textscan import MarkerFinder, Window
from . import engines, llamacpp, vllm
from .wording import COUNT_FIELDS, Reading, Wording, markers, read_wordings

WORDINGS: tuple[Wording, ...] = (*vllm.WORDINGS, *engines.WORDINGS, *llamacpp.WORDINGS)
MARKERS: tuple[bytes, ...] = markers(WORDINGS)  # a line holding one may state start-up memory
FINDER = MarkerFinder(MARKERS)  # pass it to scan_text_log(also=...) to share the OOM scan's search
MESSAGE_LIMIT = 4000
# Two readings of one amount closer than this are the same (messages print two decimals of GiB).
_SAME_BYTES = 12 << 20
# A plugin's start-up: the lines of the engine it plugs into (vLLM's own, in a vllm-ascend log) are its own.
_REFINES = {"vllm-ascend": "vllm"}
# The engine's name and a version right after it in a line's prefix (`- vLLM 0.2.4: `, `vllm==0.4.1 | `): one
# start-up runs one version, so lines that name two are two start-ups however alike their amounts (a poster's
# list of the same line under several releases). A tensor-parallel worker's repeat names its engine's version.
_NAMED_VERSION = r"(?<![\w.-]){engine}\s*(?:==|[-:=]\s*|version\s+)?v?(\d+\.\d+(?:\.\d+)?(?:\.post\d+)?)(?![\w.])"

# vLLM's own logger stamp, `INFO 08-12 22:32:11`, after whatever prefixes wrap it (`(EngineCore pid=1) `,
# `[Stage-1] `, a re-logging job runner's own `07:29:02 [INFO] ...`).
_VLLM_TS = re.compile(r"\b(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL)\s+(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})\b")
_ISO_TS = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}")
_YEARS_BACK = 8  # a year-less `02-29` is in the last leap year


@dataclass(frozen=True, slots=True)
class StartupMemory:
    """One engine start-up's memory split (on one device, where its lines name it), in bytes; None where its
    lines do not say."""

    line: int
    ts: datetime | None
    variant: str  # the wording: v0_profiling, v0_results, v1_available, v1_summary, estimate ("" for others)
    framework: str
    device: str | None = None  # the engine's name for the card (`CUDA0`, ollama's GPU id)
    weights_bytes: int | None = None
    non_torch_bytes: int | None = None
    consumed_bytes: int | None = None
    activation_peak_bytes: int | None = None
    cuda_graph_bytes: int | None = None
    kv_cache_bytes: int | None = None
    kv_cache_tokens: int | None = None
    kv_cache_blocks_gpu: int | None = None
    device_total_bytes: int | None = None
    device_free_bytes: int | None = None
    gpu_memory_utilization: float | None = None
    budget_bytes: int | None = None
    loaded_weights_bytes: int | None = None  # `Model loading took`: weights as loaded, before profiling
    message: str = ""


STARTUP_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(StartupMemory))


def read_line(text: str) -> Reading | None:
    """What a line states about start-up memory in any engine's wording, or None when it states nothing."""
    return read_wordings(text, WORDINGS)


@dataclass
class StartupMerger:
    """Merges the lines of one start-up into a report per device; a line that ends the start-up (see `_ends`)
    hands its reports over and begins the next."""

    reports: dict[str | None, StartupMemory] = field(default_factory=dict)
    lines: dict[str | None, list[str]] = field(default_factory=dict)
    versions: dict[str | None, str] = field(default_factory=dict)  # the engine version a start-up's lines named
    hosts: set[str] = field(default_factory=set)  # host engines (ollama) whose own lines this log has shown

    def add(self, line: int, ts: datetime | None, text: str) -> Iterator[StartupMemory]:
        """Take one line; yields the reports of the start-up before when this line begins the next."""
        reading = read_line(text)
        if reading is not None:
            yield from self.take(line, ts, text, reading)

    def take(self, line: int, ts: datetime | None, text: str, reading: Reading) -> Iterator[StartupMemory]:
        """`add`, for a line already read."""
        reading = self._hosted(reading, text)
        report = self.reports.get(reading.device)
        version = named_version(text[: reading.at], reading.framework)
        started = self.versions.get(reading.device)
        if report is not None and (_ends(report, reading) or _other_version(started, version)):
            yield from self.close()
            report = None
        if not reading.amounts and not reading.soft:
            return  # a report's header alone: it only ended the start-up before it
        if report is None:
            report = StartupMemory(line, ts, reading.variant, reading.framework, reading.device)
        self.reports[reading.device] = _merged(report, reading)
        self.lines.setdefault(reading.device, []).append(text.strip())
        if version is not None:
            self.versions.setdefault(reading.device, version)

    def close(self) -> list[StartupMemory]:
        """The reports of the start-up being read, completed, in line order; the merger is empty afterwards."""
        done = [
            _complete(replace(report, message="\n".join(self.lines[device])[:MESSAGE_LIMIT]))
            for device, report in sorted(self.reports.items(), key=lambda item: item[1].line)
        ]
        self.reports, self.lines, self.versions = {}, {}, {}
        return done

    def _hosted(self, reading: Reading, text: str) -> Reading:
        """The line's engine: a guest's line is its host's where the log shows the host (llamacpp.EMBEDDED)."""
        for host, guest in llamacpp.EMBEDDED.items():
            if reading.framework == host:
                self.hosts.add(host)
            elif reading.framework == guest and (host in self.hosts or host in text[: reading.at]):
                return replace(reading, framework=host)
        return reading


def _ends(report: StartupMemory, reading: Reading) -> bool:
    """Whether a line begins the next start-up: another engine's, an amount that differs from its device's report
    (one start-up repeats, never changes), or a model load after that device's KV cache was sized."""
    return (
        not _same_engine(report.framework, reading.framework)
        or _contradicts(report, reading.amounts)
        or (reading.opens and report.kv_cache_bytes is not None)
    )


def named_version(prefix: str, framework: str) -> str | None:
    """The version of `framework` (or the engine it refines) that a line's prefix names, or None."""
    for engine in dict.fromkeys((framework, _REFINES.get(framework, framework))):
        found = re.search(_NAMED_VERSION.format(engine=re.escape(engine)), prefix, re.IGNORECASE)
        if found:
            return found.group(1)
    return None


def _other_version(started: str | None, version: str | None) -> bool:
    """Whether a line names a version other than the one its start-up's lines named."""
    return started is not None and version is not None and version != started


def _same_engine(one: str, other: str) -> bool:
    return one == other or _REFINES.get(one) == other or _REFINES.get(other) == one


def _contradicts(report: StartupMemory, amounts: dict[str, object]) -> bool:
    """Whether an amount differs from the one already read, beyond what printing rounds away."""
    for name, value in amounts.items():
        old = getattr(report, name)
        if old is None or value is None:
            continue
        if abs(float(old) - float(value)) > _tolerance(name):  # type: ignore[arg-type]
            return True
    return False


def _tolerance(name: str) -> float:
    if name == "gpu_memory_utilization":
        return 0.005
    return 0 if name in COUNT_FIELDS else _SAME_BYTES


def _merged(report: StartupMemory, reading: Reading) -> StartupMemory:
    """The report with what the line adds: amounts not read yet (the first reading stands), the variant, and the
    plugin's name where the line is the plugin's."""
    stated = {**reading.soft, **reading.amounts}
    framework = reading.framework if _REFINES.get(reading.framework) == report.framework else report.framework
    return replace(
        report,
        framework=framework,
        variant=report.variant or reading.variant,
        **{k: v for k, v in stated.items() if getattr(report, k) is None},
    )


def _complete(report: StartupMemory) -> StartupMemory:
    """Fill what follows from what was read: weights from the load, consumed = weights + non-torch."""
    weights = (
        report.weights_bytes
        if report.weights_bytes is not None
        else (report.loaded_weights_bytes if report.consumed_bytes is None else None)
    )
    consumed = report.consumed_bytes
    if consumed is None and weights is not None and report.non_torch_bytes is not None:
        consumed = weights + report.non_torch_bytes
    budget = report.budget_bytes
    if budget is None and report.device_total_bytes is not None and report.gpu_memory_utilization is not None:
        budget = round(report.device_total_bytes * report.gpu_memory_utilization)
    return replace(report, weights_bytes=weights, consumed_bytes=consumed, budget_bytes=budget)


@dataclass
class StartupScanner:
    """Reads the start-up memory lines of successive windows of one log: the text-log scan hands it each window
    (`scan_text_log(on_window=...)`), so the log is read and decompressed once.

    Only the lines holding a marker are decoded. `ts` is the line's timestamp, read in the clock's zone (see
    `line_time`).
    """

    clock: LineClock
    merger: StartupMerger = field(default_factory=StartupMerger)
    found: list[StartupMemory] = field(default_factory=list)

    def window(self, window: Window) -> None:
        """Take the marker lines of one window (found by the OOM scan's search when it was given `FINDER`)."""
        for line, text in window.marked_lines(FINDER):
            reading = read_line(text)
            if reading is not None:
                ts = line_time(self.clock, text, reading.at)
                self.found.extend(self.merger.take(line, ts, text, reading))

    def reports(self) -> list[StartupMemory]:
        """Every report, the last start-up's closed."""
        return [*self.found, *self.merger.close()]


def line_time(clock: LineClock, text: str, prefix_end: int) -> datetime | None:
    """The line's timestamp: what LineClock reads at its start, else the first ISO time in its prefix (the text
    before `prefix_end`, after a shipper's tag such as docker compose's `name  | ` or ANSI codes), else vLLM's
    `MM-DD HH:MM:SS` in the latest year, up to the clock's, in which it is a date and not in the future."""
    moment = clock(text)
    if moment is not None:
        return moment
    prefix = text[:prefix_end]
    iso = _ISO_TS.search(prefix)
    if iso is not None and (moment := clock(prefix[iso.start() :])) is not None:
        return moment
    stamp = _VLLM_TS.search(prefix)
    return None if stamp is None else _latest_past(clock, *(int(g) for g in stamp.groups()))


def _latest_past(clock: LineClock, month: int, day: int, hour: int, minute: int, second: int) -> datetime | None:
    """A year-less moment in the latest year, from the clock's back, where it exists and has already happened."""
    now = datetime.now(UTC).replace(tzinfo=None)
    for year in range(clock.year, clock.year - _YEARS_BACK, -1):
        try:
            moment = to_utc_naive(datetime(year, month, day, hour, minute, second), clock.zone)
        except ValueError:  # 02-29 of a common year
            continue
        if moment <= now:
            return moment
    return None
