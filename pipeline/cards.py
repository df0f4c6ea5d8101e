"""The card catalogue: the GPUs oomlab names, each with the total memory PyTorch reports for it.

Shared by the stages: ingest names the card a device_total in the wrong unit would be (`81050` is no card as
bytes, an H100 as MiB), the sizing analyses and findings the card a device has and the one that would fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from .units import GIB, format_bytes


@dataclass(frozen=True)
class Card:
    """A card from docs/domain.md's table; `total_bytes` is the total PyTorch reports for it (approximate for
    cards we have no capture of: nominal GB are decimal, the reported total is a little less)."""

    name: str
    nominal_gb: int
    total_bytes: int
    bandwidth_gbs: int

    @property
    def label(self) -> str:
        """The name with its size, as people say it: 'A10 24 GB', 'V100 32 GB'."""
        return self.name if self.name.endswith(" GB") else f"{self.name} {self.nominal_gb} GB"


def _gib(value: float) -> int:
    return int(value * GIB)


# Totals as PyTorch's OOM messages print them ("total capacity of ... GiB"): A10, A100 80 GB and H200 from
# the sample fleet and the real captures; the others from commonly seen messages, to within 0.1 GiB.
CARDS: tuple[Card, ...] = (
    Card("T4", 16, _gib(14.75), 320),
    Card("A10", 24, 23_581_097_984, 600),
    Card("V100 32 GB", 32, _gib(31.74), 900),
    Card("A100 40 GB", 40, _gib(39.39), 1555),
    Card("L20", 48, _gib(44.40), 864),
    Card("H100", 80, _gib(79.10), 3350),
    Card("H800", 80, _gib(79.10), 3350),
    Card("A100 80 GB", 80, 84_976_271_360, 2039),
    Card("H200", 141, 150_109_880_320, 4800),
)
# Device totals within this share of a card's total are that card.
_MATCH_TOLERANCE = 0.03


def card_name(device_total: int) -> str:
    """'A10 24 GB', '80 GB (H100 / H800 / A100 80 GB)', or the size in GiB for a card not in the table."""
    matches = matching_cards(device_total)
    if not matches:
        return format_bytes(device_total, "GiB")
    if len(matches) == 1:
        return matches[0].label
    return f"{matches[0].nominal_gb} GB ({' / '.join(c.name for c in matches)})"


def matching_cards(device_total: float) -> list[Card]:
    """The cards whose total is within the tolerance of `device_total` (the exact ones alone when any is exact)."""
    matches = [c for c in CARDS if abs(device_total - c.total_bytes) <= _MATCH_TOLERANCE * c.total_bytes]
    exact = [c for c in matches if c.total_bytes == device_total]
    return exact or matches
