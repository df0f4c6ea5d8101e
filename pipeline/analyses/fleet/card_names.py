"""A device's card as people name it: from its telemetry first (nvidia-smi `name`, DCGM `modelName`), from the
catalogue's totals (cards.py) only where telemetry names none.

The catalogue can only guess from a total, and cards of one memory size share a total: an L40S reports the same
44.4 GiB as an L20, so a total alone would call it an L20. A name the device gives itself is never overruled by
a total; the catalogue only supplies the label people use for it (`H200` -> `H200 141 GB`), when the name is a
catalogue card's and the total agrees (an `H100 NVL` is no `H100 80 GB`: its total is not one).
"""

from __future__ import annotations

import re

import duckdb
import polars as pl

from ...cards import CARDS, Card, card_name, matching_cards
from ...load.sql import sql_text
from ...units import format_bytes
from ..shared import shared
from .oom_limits import instance_limits

# What telemetry puts before the model: the vendor and retired brand names people leave out.
_VENDOR = re.compile(r"^(?:NVIDIA\s+|Tesla\s+)+", re.IGNORECASE)


def card_label(device_total: int | None, gpu_name: str | None = None) -> str:
    """'A10 24 GB', 'L40S (44.39 GiB)' for a name the catalogue lacks, the catalogue's guess from the total
    where telemetry names nothing, 'unknown card' with neither."""
    named = None if not gpu_name or not gpu_name.strip() else telemetry_label(gpu_name, device_total)
    if named is not None:
        return named
    return "unknown card" if device_total is None else card_name(device_total)


def telemetry_label(gpu_name: str, device_total: int | None) -> str:
    """The card telemetry names: the catalogue's label when the name is one of its cards and the total agrees,
    else the name itself with the size the process saw."""
    short = " ".join(_VENDOR.sub("", gpu_name.strip()).split())
    same = [c for c in CARDS if _family(c.name) == _family(short)]
    if device_total is not None:
        fitting = matching_cards(device_total)
        same = [c for c in same if c in fitting]
    chosen = _one(same, short)
    if chosen is not None:
        return chosen.label
    return short if device_total is None else f"{short} ({format_bytes(device_total, 'GiB')})"


def _family(name: str) -> str:
    """The model a name starts with: `A100` of `A100-SXM4-80GB` and of `A100 80 GB`, `L40S` of `L40S`."""
    return re.split(r"[\s-]", name.strip(), maxsplit=1)[0].upper()


def _one(cards: list[Card], short: str) -> Card | None:
    """The one catalogue card left; of several (no total to choose by), the one whose size the name states."""
    if len(cards) == 1:
        return cards[0]
    sized = [c for c in cards if f"{c.nominal_gb}GB" in short.replace(" ", "").upper()]
    return sized[0] if len(sized) == 1 else None


@shared()
def device_names(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, int], str]:
    """Per (instance, gpu_index): the card name its telemetry gives (its latest sample's)."""
    rows = con.sql(sql_text("q_device_names")).fetchall()
    return {(str(instance), int(gpu)): str(name) for instance, gpu, name in rows}


def device_label(con: duckdb.DuckDBPyConnection, instance: str, gpu_index: int, device_total: int | None) -> str:
    """One device's card: its telemetry's name first, the catalogue's guess from its total else."""
    return card_label(device_total, device_names(con).get((instance, gpu_index)))


def total_label(con: duckdb.DuckDBPyConnection, device_total: int) -> str:
    """The card of every device with this total (a finding per card size): the telemetry name they share
    when every named one agrees, else the catalogue's guess from the total."""
    names = device_names(con)
    devices = instance_limits(con).filter(pl.col("device_total") == device_total)
    given = {names[key] for key in zip(devices["instance"], devices["gpu_index"], strict=True) if key in names}
    return card_label(device_total, given.pop() if len(given) == 1 else None)


def with_device_cards(con: duckdb.DuckDBPyConnection, frame: pl.DataFrame) -> pl.DataFrame:
    """A frame of devices (instance, gpu_index, device_total) with `card` named telemetry first."""
    if frame.is_empty():
        return frame
    names = device_names(con)
    labels = [
        card_label(total, names.get((instance, int(gpu))))
        for instance, gpu, total in zip(frame["instance"], frame["gpu_index"], frame["device_total"], strict=True)
    ]
    return frame.with_columns(pl.Series("card", labels, dtype=pl.Utf8))
