"""vLLM's start-up memory report, found in text logs: how the engine split the card at start.

The wordings, by version (vllm-project/vllm):
- v0 `vllm/worker/worker.py` `determine_num_available_blocks` (0.6.5 to 0.8), one message over three lines,
  each usually prefixed by the logger: `Memory profiling takes 1.73 seconds` / `the current vLLM instance can
  use total_gpu_memory (47.50GiB) x gpu_memory_utilization (0.78) = 37.18GiB` / `model weights take
  0.52GiB; non_torch_memory takes 0.08GiB; PyTorch activation peak memory takes 1.78GiB; the rest of the
  memory reserved for KV Cache is 34.81GiB.`
- v0 before that (0.6.x): `Memory profiling results: duration=..., total_gpu_memory=..GiB, ...,
  non_torch_memory=..GiB, kv_cache_size=..GiB, gpu_memory_utilization=0.90.`
- v1 `vllm/v1/worker/gpu_worker.py` `determine_available_memory`: `Available KV cache memory: 54.62 GiB`,
  after the model runner's `Model loading took 14.9888 GiB and 13.2 seconds` (later `... GiB memory and
  ...`; older `Loading model weights took 8.5107 GB`) and before `kv_cache_utils.py`'s `GPU KV cache size:
  447,088 tokens`.
- v1 since 0.10.2, `gpu_worker.py` `compile_or_warm_up_model`: `Free memory on device (78.66/79.19 GiB) on
  startup. Desired GPU memory utilization is (0.9, 71.27 GiB). Actual usage is 14.08 GiB for weight, 1.97
  GiB for peak activation, 0.07 GiB for non-torch memory, and 0.67 GiB for CUDAGraph memory. ... Current kv
  cache memory in use is 59212694937 bytes.`, later `Actual usage is 15.26 GiB for consumed memory (weights
  + non-torch), 1.44 GiB for peak activation, and 0.23 GiB for CUDAGraph memory. ... Current kv cache
  memory in use is 19.54 GiB.`

Each line is read for the amounts it states; consecutive lines of one start-up are merged into one
report (`StartupMemory`). GB in these lines means GiB (domain.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from datetime import datetime

from ...units import size_to_bytes, to_utc_naive
from ..text.logline import LineClock
from ..text.textscan import MarkerFinder, Window

# Marker strings: a line holding one of them may state start-up memory (searched by textscan).
MARKERS: tuple[bytes, ...] = (
    b"model weights take",
    b"x gpu_memory_utilization (",
    b"Memory profiling results:",
    b"Available KV cache memory:",
    b"Model loading took",
    b"Loading model weights took",
    b"GPU KV cache size:",
    b"Actual usage is",
    b"on startup. Desired GPU memory utilization",
)
MESSAGE_LIMIT = 4000
# Two readings of one amount closer than this are the same (messages print two decimals of GiB).
_SAME_BYTES = 12 << 20

# vLLM's own logger prefix: `INFO 08-12 22:32:11 [worker.py:295]`, after an optional `(EngineCore pid=1) `.
_VLLM_TS = re.compile(r"^\s*(?:\([^)]*\)\s*)?(?:INFO|WARNING|DEBUG|ERROR)\s+(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})")
FINDER = MarkerFinder(MARKERS)  # pass it to scan_text_log(also=...) to share the OOM scan's search

_NUM = r"(-?\d+(?:\.\d+)?)"
_AMOUNT = rf"{_NUM}\s*(GiB|GB|MiB|MB|bytes)"
# (regex, variant, fields in group order); a field ending in `_bytes` takes an amount (number and unit).
_PATTERNS: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = (
    (
        re.compile(
            rf"model weights take {_AMOUNT}; non_torch_memory takes {_AMOUNT}; PyTorch activation peak "
            rf"memory takes {_AMOUNT}; the rest of the memory reserved for KV Cache is {_AMOUNT}"
        ),
        "v0_profiling",
        ("weights_bytes", "non_torch_bytes", "activation_peak_bytes", "kv_cache_bytes"),
    ),
    (
        re.compile(rf"total_gpu_memory \({_AMOUNT}\) x gpu_memory_utilization \({_NUM}\) = {_AMOUNT}"),
        "v0_profiling",
        ("device_total_bytes", "gpu_memory_utilization", "budget_bytes"),
    ),
    (
        re.compile(
            rf"Memory profiling results:.*?total_gpu_memory={_AMOUNT}.*?non_torch_memory={_AMOUNT}.*?"
            rf"kv_cache_size={_AMOUNT}.*?gpu_memory_utilization={_NUM}"
        ),
        "v0_results",
        ("device_total_bytes", "non_torch_bytes", "kv_cache_bytes", "gpu_memory_utilization"),
    ),
    (re.compile(rf"Available KV cache memory: {_AMOUNT}"), "v1_available", ("kv_cache_bytes",)),
    # printed by every version around the report: they name no variant of their own
    (re.compile(rf"(?:Model loading took|Loading model weights took) {_AMOUNT}"), "", ("loaded_weights_bytes",)),
    (re.compile(r"GPU KV cache size: ([\d,]+) tokens"), "", ("kv_cache_tokens",)),
    (
        re.compile(
            rf"Free memory on device \({_NUM}/{_NUM} (GiB)\) on startup\. Desired GPU memory utilization is "
            rf"\({_NUM}, {_AMOUNT}\)"
        ),
        "v1_summary",
        ("device_free_gib", "device_total_gib", "unit", "gpu_memory_utilization", "budget_bytes"),
    ),
    (
        re.compile(
            rf"Actual usage is {_AMOUNT} for weights?, {_AMOUNT} for peak activation, {_AMOUNT} for "
            rf"non-torch memory, and {_AMOUNT} for CUDAGraph memory"
        ),
        "v1_summary",
        ("weights_bytes", "activation_peak_bytes", "non_torch_bytes", "cuda_graph_bytes"),
    ),
    (
        re.compile(
            rf"Actual usage is {_AMOUNT} for consumed memory \(weights \+ non-torch\), {_AMOUNT} for peak "
            rf"activation, and {_AMOUNT} for CUDAGraph memory"
        ),
        "v1_summary",
        ("consumed_bytes", "activation_peak_bytes", "cuda_graph_bytes"),
    ),
    (re.compile(rf"Current kv cache memory in use is {_AMOUNT}"), "v1_summary", ("kv_cache_bytes",)),
)


@dataclass(frozen=True, slots=True)
class StartupMemory:
    """One engine start-up's memory split, in bytes; None where its lines do not say."""

    line: int
    ts: datetime | None
    variant: str  # the wording: v0_profiling, v0_results, v1_available, v1_summary ("" for load lines alone)
    weights_bytes: int | None = None
    non_torch_bytes: int | None = None
    consumed_bytes: int | None = None
    activation_peak_bytes: int | None = None
    cuda_graph_bytes: int | None = None
    kv_cache_bytes: int | None = None
    kv_cache_tokens: int | None = None
    device_total_bytes: int | None = None
    device_free_bytes: int | None = None
    gpu_memory_utilization: float | None = None
    budget_bytes: int | None = None
    loaded_weights_bytes: int | None = None  # `Model loading took`: weights as loaded, before profiling
    message: str = field(default="")


STARTUP_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(StartupMemory))


def read_line(text: str) -> tuple[str, dict[str, object]] | None:
    """(variant, amounts) a line states about start-up memory, or None when it states none."""
    found: dict[str, object] = {}
    variant = ""
    for pattern, name, names in _PATTERNS:
        match = pattern.search(text)
        if match is None:
            continue
        variant = variant or name
        found.update(_values(match, names))
    return (variant, found) if found else None


def _values(match: re.Match[str], names: tuple[str, ...]) -> dict[str, object]:
    """The named amounts of one match: an amount takes two groups (number, unit), a plain number one."""
    groups = list(match.groups())
    out: dict[str, object] = {}
    for name in names:
        if name.endswith("_bytes"):
            number, unit = groups.pop(0), groups.pop(0)
            out[name] = int(number) if unit == "bytes" else size_to_bytes(number, unit)
        elif name == "kv_cache_tokens":
            out[name] = int(groups.pop(0).replace(",", ""))
        else:
            out[name] = groups.pop(0)
    if "device_total_gib" in out:  # `Free memory on device (F/T GiB)`: both share the closing unit
        unit = str(out.pop("unit"))
        out["device_free_bytes"] = size_to_bytes(str(out.pop("device_free_gib")), unit)
        out["device_total_bytes"] = size_to_bytes(str(out.pop("device_total_gib")), unit)
    if "gpu_memory_utilization" in out:
        out["gpu_memory_utilization"] = float(str(out["gpu_memory_utilization"]))
    return out


@dataclass
class StartupMerger:
    """Merges the lines of one start-up; a line that contradicts the report so far starts the next one."""

    current: StartupMemory | None = None
    lines: list[str] = field(default_factory=list)

    def add(self, line: int, ts: datetime | None, text: str) -> Iterator[StartupMemory]:
        """Take one line; yields the previous report when this line starts a new one."""
        read = read_line(text)
        if read is None:
            return
        variant, amounts = read
        if self.current is not None and (_contradicts(self.current, amounts) or _restarts(self.current, amounts)):
            yield self.finish()
        if self.current is None:
            self.current = StartupMemory(line, ts, variant)
        self.current = replace(
            self.current,
            variant=self.current.variant or variant,
            **{k: v for k, v in amounts.items() if getattr(self.current, k) is None},
        )
        self.lines.append(text.strip())

    def finish(self) -> StartupMemory:
        """The report being built, completed; the merger is empty afterwards."""
        assert self.current is not None
        done = _complete(replace(self.current, message="\n".join(self.lines)[:MESSAGE_LIMIT]))
        self.current, self.lines = None, []
        return done

    def close(self) -> Iterator[StartupMemory]:
        """The last report, if any."""
        if self.current is not None:
            yield self.finish()


def _contradicts(report: StartupMemory, amounts: dict[str, object]) -> bool:
    """Whether an amount differs from the one already read (the same start-up repeats, never changes)."""
    for name, value in amounts.items():
        old = getattr(report, name)
        if old is None or value is None:
            continue
        limit = 0.005 if name == "gpu_memory_utilization" else _SAME_BYTES
        if abs(float(old) - float(value)) > limit:  # type: ignore[arg-type]
            return True
    return False


def _restarts(report: StartupMemory, amounts: dict[str, object]) -> bool:
    """A model load after the KV cache was sized begins the next start-up."""
    return "loaded_weights_bytes" in amounts and report.kv_cache_bytes is not None


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

    Only the lines holding a marker are decoded. `ts` is the line's timestamp (log-shipper ISO stamps, or
    vLLM's own `MM-DD HH:MM:SS` in the clock's year), read in the clock's zone.
    """

    clock: LineClock
    merger: StartupMerger = field(default_factory=StartupMerger)
    found: list[StartupMemory] = field(default_factory=list)

    def window(self, window: Window) -> None:
        """Take the marker lines of one window (found by the OOM scan's search when it was given `FINDER`)."""
        for hit, line in window.marked(FINDER):
            end = window.buf.find(b"\n", hit, len(window.buf))
            text = window.buf[hit : len(window.buf) if end < 0 else end].decode("utf-8", errors="replace")
            self.found.extend(self.merger.add(line, _line_time(self.clock, text), text))

    def reports(self) -> list[StartupMemory]:
        """Every report, the last one closed."""
        return [*self.found, *self.merger.close()]


def _line_time(clock: LineClock, text: str) -> datetime | None:
    """The line's timestamp: what LineClock reads, else vLLM's prefix in the clock's year."""
    moment = clock(text)
    if moment is not None:
        return moment
    match = _VLLM_TS.match(text)
    if match is None:
        return None
    try:
        naive = datetime(clock.year, *(int(g) for g in match.groups()))
    except ValueError:
        return None
    return to_utc_naive(naive, clock.zone)
