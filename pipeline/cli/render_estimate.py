"""Terminal and JSON output of `oomlab estimate`, and the rule file of `oomlab alerts export`."""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import TYPE_CHECKING

from rich.table import Table

from ..assets import write_atomic
from ..errors import OomlabError
from ..units import GIB, format_bytes
from .terminal import pipe_console

if TYPE_CHECKING:
    from ..analyses.estimate import MeasuredPeak, MemoryEstimate, ModelShape, Workload
    from ..api import AlertRules, EstimateResult


def _gib(value: float) -> str:
    return format_bytes(value, "GiB", grouped=True)


def estimate_document(run: EstimateResult) -> dict[str, object]:
    """The JSON document: model, workload, the estimate with its totals, and the measured peaks if read."""
    shape, work, result, measured = run.model, run.workload, run.estimate, run.measured
    totals = {
        "total_bytes": result.total_bytes,
        "need_low_bytes": result.need_low_bytes,
        "need_high_bytes": result.need_high_bytes,
    }
    return {
        "model": asdict(shape),
        "workload": asdict(work),
        "estimate": {**asdict(result), **totals},
        "measured": None if measured is None else [asdict(m) for m in measured],
    }


def print_estimate(run: EstimateResult) -> None:
    """The estimate's parts, the cards, the limits and, when read, the measured peaks beside it."""
    shape, work, result, measured = run.model, run.workload, run.estimate, run.measured
    console = pipe_console(soft_wrap=True, highlight=False)
    console.print(_parts_table(shape, work, result))
    for line in _card_lines(result):
        console.print(line)
    if shape.derived:
        console.print(f"Derived, not given: {', '.join(shape.derived)}.")
    for row in measured or []:
        console.print(_measured_table(row))


def _parts_table(shape: ModelShape, work: Workload, result: MemoryEstimate) -> Table:
    model = shape.source or f"{shape.params / 1e9:,.2f}B parameters"
    title = (
        f"{model}, {shape.dtype}: batch {work.batch} x ({work.input_len} + {work.output_len}) tokens"
        f"{f', KV cache {work.kv_dtype}' if work.kv_dtype else ''}"
    )
    table = Table("part", "GiB", "bytes", "how", title=title)
    rows = [
        ("weights", result.weights_bytes, f"{shape.params:,} parameters x {shape.dtype}"),
        ("KV cache", result.kv_bytes, f"{result.kv_bytes_per_token:,.0f} bytes per token"),
        (
            "activations",
            result.activation_bytes,
            f"{result.activation_bytes_per_token:,.0f} bytes per prompt token + last-position logits",
        ),
        ("CUDA context", result.context_bytes, "per process, outside PyTorch"),
        ("total", result.total_bytes, ""),
        ("x 1.3", result.need_low_bytes, "the least to provision"),
        ("x 1.5", result.need_high_bytes, "comfortable"),
    ]
    for name, value, how in rows:
        table.add_row(name, f"{value / GIB:,.2f}", f"{value:,}", how)
    return table


def _card_lines(result: MemoryEstimate) -> list[str]:
    lines = [
        f"Smallest card for 1.3 x: {result.card or 'none in the table'}; "
        f"for 1.5 x: {result.card_comfortable or 'none in the table'}."
    ]
    if result.gpu is not None:
        verdict = "holds" if result.gpu_fits else "does not hold"
        lines.append(f"{result.gpu} {verdict} 1.3 x the estimate ({_gib(result.need_low_bytes)}).")
    if result.limits is not None:
        limits = result.limits
        lines.append(
            f"On {limits.card} at 1.3 x: batch up to {limits.max_batch:,} at these lengths; "
            f"prompts up to {limits.max_input_len:,} tokens at this batch."
        )
    return lines


def _measured_table(row: MeasuredPeak) -> Table:
    """One card size's measured peaks beside the estimate of the same requests."""
    peak = row.peak_request
    table = Table(
        "quantity",
        "measured",
        "estimated",
        "estimate / measured",
        title=f"Measured: {row.model_version} on {row.card} ({', '.join(row.devices)}; "
        f"{row.requests:,} requests; PyTorch's allocated memory)",
    )
    quantities = [
        (
            f"peak: batch {peak.batch} x ({peak.input_len} + {peak.output_len})",
            row.peak_allocated_bytes,
            row.estimated_peak_bytes,
            _gib,
        ),
        ("at rest / weights", row.at_rest_bytes, row.estimated_weights_bytes, _gib),
        ("bytes per token", row.bytes_per_token, row.estimated_bytes_per_token, lambda v: f"{v:,.0f}"),
    ]
    for name, seen, guess, fmt in quantities:
        table.add_row(name, "" if seen is None else fmt(seen), fmt(guess), f"{guess / seen:.3f}" if seen else "")
    if row.context_bytes is not None:
        table.add_row("CUDA context (OOM messages)", _gib(row.context_bytes), "", "")
    return table


def write_rules(rules: AlertRules, path: str | None) -> None:
    """The rule file to `path` (with a one-line note on stderr) or stdout."""
    text, document, tunings = rules.yaml, rules.document, rules.tunings
    if path is None:
        sys.stdout.write(text)
        return
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise OomlabError(f"cannot write {path}: {exc.strerror or exc}") from None
    groups: list[dict[str, list[object]]] = document["groups"]  # type: ignore[assignment]
    rules = sum(len(group["rules"]) for group in groups)
    tuned = sum(1 for t in tunings or [] if t.tuned)
    source = "untuned" if tunings is None else f"{len(tunings)} devices from the database, {tuned} tuned"
    pipe_console(stderr=True, soft_wrap=True, highlight=False).print(f"Wrote {rules} rules ({source}) to {path}.")
