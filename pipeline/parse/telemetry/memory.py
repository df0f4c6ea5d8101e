"""Memory readings no card can show: telemetry rows set aside instead of drawn above 100 % of the card.

nvidia-smi and DCGM state used, free and total memory of one card (and what each process uses). No amount is
negative, and neither used nor free can exceed the card's total (the real H200 says used + free < total: the
driver keeps the rest). A row that says otherwise came from a broken exporter or a unit mix-up; its reason
names both numbers under the source's own field names, so that the user can find which.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...units import format_bytes

# The columns a card's memory is stated in (gpu_samples, gpu_process_samples).
MEMORY_COLUMNS = ("memory_used_bytes", "memory_total_bytes", "memory_free_bytes", "memory_reserved_bytes", "used_bytes")
# (part, whole): a part of the card that cannot be larger than the card.
_WITHIN_TOTAL = (("memory_used_bytes", "memory_total_bytes"), ("memory_free_bytes", "memory_total_bytes"))


def impossible_memory(row: Mapping[str, object], names: Mapping[str, str]) -> str | None:
    """Why a sample's memory cannot be (a negative amount, used or free above the total), or None; `names`
    gives each column's name in the source (`memory.used`, `DCGM_FI_DEV_FB_USED`)."""
    reasons = [
        f"{names.get(column, column)} {format_bytes(value)} is negative"
        for column in MEMORY_COLUMNS
        if isinstance(value := row.get(column), int) and value < 0
    ]
    for part, whole in _WITHIN_TOTAL:
        value, total = row.get(part), row.get(whole)
        if isinstance(value, int) and isinstance(total, int) and total > 0 and value > total:
            reasons.append(
                f"{names.get(part, part)} {bytes_against(value, total)} above "
                f"{names.get(whole, whole)} {bytes_against(total, value)}"
            )
    return "; ".join(reasons) or None


def bytes_against(value: int, other: int) -> str:
    """`value` for people, or in exact bytes when the rounding would show it equal to `other` (as the SQL
    macro oomlab_bytes_against writes request-log reasons)."""
    text = format_bytes(value)
    return f"{value} B" if text == format_bytes(other) else text
