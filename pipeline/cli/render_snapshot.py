"""Terminal rendering of `oomlab snapshot inspect` and `diff` results (the dicts the library returns)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ..units import format_bytes, format_share
from .terminal import first_column_width, fold_name, pipe_console


def human_bytes(value: float | None) -> str:
    """Bytes in binary units with two decimals, as PyTorch prints them."""
    return "-" if value is None else format_bytes(value)


def _state_table(report: dict[str, Any]) -> Table:
    table = Table("state", "value", title=f"snapshot {report['path']}", title_justify="left")
    rows = [
        ("allocated", human_bytes(report["allocated_bytes"])),
        ("reserved", human_bytes(report["reserved_bytes"])),
        ("reserved but unallocated", human_bytes(report["reserved_unallocated_bytes"])),
        ("largest free block", human_bytes(report["largest_free_block_bytes"])),
        ("external fragmentation", f"{report['fragmentation']:.1%}" if report["fragmentation"] is not None else "-"),
        ("internal waste", human_bytes(report.get("internal_waste_bytes"))),
        ("segments", f"{report['segments']:,}" + (" (expandable)" if report["expandable_segments"] else "")),
        ("blocks / trace events", f"{report['blocks']:,} / {report['trace_events']:,}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def _pools_table(report: dict[str, Any]) -> Table:
    table = Table(
        "pool", "segments", "reserved", "allocated", "unallocated", "largest free", title="pools", title_justify="left"
    )
    for pool in report.get("pools", []):
        table.add_row(
            pool["pool"],
            str(pool["segments"]),
            human_bytes(pool["reserved_bytes"]),
            human_bytes(pool["allocated_bytes"]),
            human_bytes(pool["reserved_unallocated_bytes"]),
            human_bytes(pool["largest_free_block_bytes"]),
        )
    return table


def _sites_table(
    title: str, rows: list[dict[str, Any]], columns: list[tuple[str, str, bool]], width: int = 80
) -> Table:
    """Sites and their numbers; a site too long for what the other columns leave of `width` is folded at its
    separators (terminal.fold_name), never inside a name."""
    cells = [[human_bytes(row[key]) if is_bytes else str(row[key]) for _, key, is_bytes in columns] for row in rows]
    budget = first_column_width(width, [c[0] for c in columns], cells)
    table = Table(*(c[0] for c in columns), title=title, title_justify="left")
    table.columns[0].overflow = "fold"
    for row in cells:
        table.add_row(fold_name(row[0], budget), *row[1:])
    return table


def _ooms_table(report: dict[str, Any]) -> Table:
    table = Table(
        "requested", "device free", "unallocated", "largest free", "cause", title="OOM moments", title_justify="left"
    )
    for oom in report.get("oom_events", []):
        table.add_row(
            human_bytes(oom["requested_bytes"]),
            human_bytes(oom["device_free_bytes"]),
            human_bytes(oom["reserved_unallocated_bytes"]),
            human_bytes(oom["largest_free_block_bytes"]),
            oom["cause"],
        )
    return table


def _print_suspects(console: Console, suspects: list[dict[str, Any]], stacks: bool = False) -> None:
    """Each suspect as a heading line (site, confidence, live bytes) and its reasons below: the reasons are
    prose, too long for a table column in a terminal. With `stacks`, its largest live stack, innermost first."""
    console.print("leak suspects")
    for suspect in suspects:
        console.print(
            f"  {suspect['site']}  {format_share(suspect['confidence'])} sure, "
            f"{human_bytes(suspect['live_bytes'])} live",
            markup=False,
        )
        if suspect.get("caller") and suspect["caller"] != suspect["site"]:
            console.print(f"    called from {suspect['caller']} (the service's own code)", markup=False)
        console.print(f"    {suspect['reason']}", markup=False)
        if stacks:
            frames = suspect.get("stack") or []
            console.print(
                f"    stack ({len(frames)} frames, innermost first):" if frames else "    no stack", markup=False
            )
            for frame in frames:
                mark = "  <- the service's own code" if frame == suspect.get("caller") else ""
                text = fold_name(frame + mark, console.width - 6).replace("\n", "\n      ")
                console.print(f"      {text}", markup=False)


def _series_table(series: dict[str, Any]) -> Table:
    count = len(series["snapshots"])
    table = Table(
        "site",
        "first",
        "last",
        "change",
        "blocks change",
        title=f"growth across {count} snapshots",
        title_justify="left",
    )
    table.columns[0].overflow = "fold"
    for site in series["sites"]:
        table.add_row(
            site["site"],
            human_bytes(site["first_bytes"]),
            human_bytes(site["last_bytes"]),
            human_bytes(site["growth_bytes"]),
            f"{site['growth_blocks']:+,}",
        )
    return table


def no_suspect_reason(basis: dict[str, Any]) -> str:
    """Why no site is a suspect, and what the judgement rested on."""
    seen = {
        "none": "the final blocks alone (the snapshot has no trace)",
        "wrapped": "the final blocks and a trace that began after some of them",
        "whole": "the final blocks and a trace of their whole life",
    }[basis["trace"]]
    across = f", across {basis['snapshots']} snapshots" if basis["snapshots"] > 1 else ""
    return f"no site holds memory of more requests than are in flight, or grew; judged from {seen}{across}"


def print_inspect(report: dict[str, Any], stacks: bool = False) -> None:
    """State, pools, top sites, leak suspects (with their stacks when asked), OOM moments and the fit verdict."""
    console = pipe_console(soft_wrap=True)
    console.print(_state_table(report))
    console.print(_pools_table(report))
    console.print(
        _sites_table(
            "top allocation sites (live)",
            report["top_sites"],
            [("site", "site", False), ("bytes", "bytes", True), ("blocks", "blocks", False)],
            console.width,
        )
    )
    if report.get("series"):
        console.print(_series_table(report["series"]))
    if report["leak_suspects"]:
        _print_suspects(console, report["leak_suspects"], stacks)
    else:
        console.print(f"leak suspects: none ({no_suspect_reason(report['leak_basis'])})", markup=False)
    unplaced = report["leak_basis"]["no_stack_bytes"]
    if unplaced:
        console.print(
            f"{human_bytes(unplaced)} of live memory has no call stack, so no leak judgement can place it: record "
            'the history with stacks (torch.cuda.memory._record_memory_history(enabled="all"))',
            markup=False,
        )
    if report["oom_events"]:
        console.print(_ooms_table(report))
    fit = report.get("fit")
    if fit:
        verdict = "fits" if fit["fits"] else f"does not fit ({fit['cause']})"
        console.print(f"a request of {human_bytes(fit['requested_bytes'])} {verdict}: {fit['reason']}", markup=False)


def print_diff(diff: dict[str, Any]) -> None:
    """Totals before and after, then the sites that changed most."""
    console = pipe_console(soft_wrap=True)
    before, after = diff["before"], diff["after"]
    console.print(
        f"allocated {human_bytes(before['allocated_bytes'])} -> {human_bytes(after['allocated_bytes'])} "
        f"({human_bytes(diff['delta_allocated_bytes'])}), reserved {human_bytes(before['reserved_bytes'])}"
        f" -> {human_bytes(after['reserved_bytes'])}, segments {before['segments']} -> {after['segments']}"
        f" ({len(diff['segments_added'])} added, {len(diff['segments_removed'])} removed)",
        markup=False,
    )
    console.print(
        _sites_table(
            "sites by change",
            diff["sites"],
            [
                ("site", "site", False),
                ("before", "before_bytes", True),
                ("after", "after_bytes", True),
                ("change", "delta_bytes", True),
                ("blocks change", "delta_blocks", False),
            ],
            console.width,
        )
    )
    if diff.get("leak_suspects"):
        _print_suspects(console, diff["leak_suspects"])
