"""Byte fields read in the wrong unit: a request log's sizes in MiB or GiB taken for bytes (or the other way).

A log that writes `device_total: 81050` meaning MiB would load an 81 KB card: every level a fraction of nothing,
the leak too small to see, the threshold on a card that does not exist, a T4 advised. No row of such a file is
impossible (its values agree with each other), so the per-row checks let it through; what gives it away is the
whole file: no value of the card is a card, no level is what a process holding a model holds. The file is then
refused as a whole, before its rows load, with the unit that makes its numbers sizes and the `--map` that says so.
A unit the user stated (`--map f=col:MiB`) is taken as said and not checked.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from ..cards import CARDS, card_name, matching_cards
from ..errors import OomlabError
from ..fields import FIELDS, Field, column_unit, unit_stated
from ..load.settings import CARD_MAX_BYTES, CARD_MIN_BYTES
from ..load.sql import bind
from ..parse.structured import Stage
from ..units import GIB, KIB, MIB, TIB, format_bytes, format_bytes_short, unit_name
from .normalize import Staged

# The bounds of a card are physics, not the catalogue (sql/macros/oomlab_settings.sql says why): no GPU an LLM
# is served from has under CARD_MIN_BYTES (512 MiB; the smallest vGPU profile has 1 GB), none over
# CARD_MAX_BYTES (4 TiB, four times the largest announced). The catalogue (cards.py) only names the card a
# number would be in another unit, and picks that unit when two would land within the bounds.
CARD_FIELD = "device_total"
# The levels of a process (what PyTorch's counters say it holds). A process serving a model holds its weights
# for its whole life, and PyTorch's caching allocator reserves in segments of at least 2 MiB: no serving
# process's levels all stay under 1 MiB; sizes in MiB or GiB taken for bytes do (a 330 MiB model is 330
# "bytes"). requested_size and available_memory are left out: a failed allocation can be a few KiB, and a
# full card can have a few KiB free at every OOM.
LEVEL_FIELDS = tuple(
    f.name for f in FIELDS if f.kind == "bytes" and f.name not in {"requested_size", "available_memory", CARD_FIELD}
)
LEVEL_MIN_BYTES = MIB
# The units a log's numbers may be in, smallest first.
_UNITS = (1, KIB, MIB, GIB, TIB)


class UnitMistake(OomlabError):
    """A request log whose byte fields are in another unit than they are read in; ingest/requests.py names the
    file and refuses it."""


@dataclass(frozen=True)
class Misread:
    """A byte field whose numbers are not in the unit they are read in: the column, its largest number as the log
    writes it, the bytes one of them was read as, and the units that make it a size (the likeliest first)."""

    field: str
    column: str
    largest: float
    per_unit: int
    units: tuple[int, ...]

    @property
    def label(self) -> str:
        """The field, and the log's column where it names it otherwise."""
        return self.field if self.column == self.field else f"{self.field} ({self.column})"

    def fix(self) -> str:
        """The `--map` option that states the likeliest unit."""
        return f"--map {self.field}={self.column}:{unit_name(self.units[0])}"

    def readings(self) -> str:
        """Its largest value in the units that make it a size: `as MiB 139.80 GiB`."""
        return " or ".join(f"as {_unit_words(u)} {format_bytes(self.largest * u)}" for u in self.units)


def check_byte_units(con: duckdb.DuckDBPyConnection, stage: Stage, staged: Staged, fields: tuple[Field, ...]) -> None:
    """Raise UnitMistake when the file's card or its levels are in another unit than they are read in."""
    checked = _checked_fields(staged, fields)
    if not checked:
        return
    largest = _largest_values(con, stage, staged, checked)
    card = _misread_card(staged, checked, largest)
    card_bytes = _card_bytes(card, largest.get(CARD_FIELD))
    levels = [m for name in LEVEL_FIELDS if (m := _misread_level(staged, checked, largest, name, card_bytes))]
    if card is None and not levels:
        return
    misread = ([card] if card is not None else []) + levels
    sentences = ([_card_sentence(card)] if card is not None else []) + _level_sentences(levels)
    others = sorted({u for m in misread for u in m.units[1:]})
    choice = f"; or {', '.join(unit_name(u) for u in others)} where that is theirs" if others else ""
    raise UnitMistake(
        "sizes not in the unit they are read in: " + "; ".join(sentences),
        hint="give their unit: " + " ".join(m.fix() for m in misread) + choice,
    )


def _card_sentence(card: Misread) -> str:
    """Why the card's numbers are in another unit, and the card they make."""
    bound = f"under {format_bytes_short(CARD_MIN_BYTES)}" if card.largest * card.per_unit < CARD_MIN_BYTES else None
    bound = bound or f"over {format_bytes(CARD_MAX_BYTES, 'TiB', 0)}"
    likeliest = card.largest * card.units[0]
    named = f" ({card_name(round(likeliest))})" if matching_cards(likeliest) else ""
    read = format_bytes(card.largest * card.per_unit)
    return (
        f"{card.label} is at most {_number(card.largest)}: as {_unit_words(card.per_unit)} {read}, and no GPU has "
        f"{bound}; {card.readings()}{named}"
    )


def _level_sentences(levels: list[Misread]) -> list[str]:
    """The misread levels, one sentence per reading they share (a log writes its levels in one unit)."""
    groups: dict[tuple[int, tuple[int, ...]], list[Misread]] = {}
    for level in levels:
        groups.setdefault((level.per_unit, level.units), []).append(level)
    sentences = []
    for (per_unit, _), group in groups.items():
        top = max(group, key=lambda m: m.largest)
        sentences.append(
            f"{', '.join(m.label for m in group)} {'are' if len(group) > 1 else 'is'} at most {_number(top.largest)}: "
            f"as {_unit_words(per_unit)} under {format_bytes_short(LEVEL_MIN_BYTES)}, where no process holding a model "
            f"stays; {top.readings()}"
        )
    return sentences


def _checked_fields(staged: Staged, fields: tuple[Field, ...]) -> dict[str, Field]:
    """The card and level fields the log has whose unit no mapping states (a stated unit is the user's word)."""
    wanted = {CARD_FIELD, *LEVEL_FIELDS}
    return {
        f.name: f
        for f in fields
        if f.name in wanted and f.name in staged.mapping and not any(unit_stated(f, c) for c in staged.mapping[f.name])
    }


def _largest_values(
    con: duckdb.DuckDBPyConnection, stage: Stage, staged: Staged, checked: dict[str, Field]
) -> dict[str, int | None]:
    """Each checked field's largest value above 0 in bytes as read, over every row of the file. Only those columns
    are converted: a typed copy's few numeric columns cost a scan, not a second normalization."""
    names = list(checked)
    columns = ", ".join(f"max({staged.values[n]}) FILTER (WHERE {staged.values[n]} > 0)" for n in names)
    sql = f"SELECT {columns} FROM {stage.relation}"
    (row,) = con.execute(sql, bind(sql, stage.params)).fetchall()  # fetched whole: the insert runs on next
    return dict(zip(names, row, strict=True))


def _misread_card(staged: Staged, checked: dict[str, Field], largest: dict[str, int | None]) -> Misread | None:
    """device_total misread: its largest value no card can have, and a unit that makes it one."""
    top = largest.get(CARD_FIELD)
    if CARD_FIELD not in checked or top is None or CARD_MIN_BYTES <= top <= CARD_MAX_BYTES:
        return None
    column = staged.mapping[CARD_FIELD][0]
    per_unit = column_unit(checked[CARD_FIELD], column)
    number = top / per_unit
    candidates = [u for u in _UNITS if u != per_unit and CARD_MIN_BYTES <= number * u <= CARD_MAX_BYTES]
    known = [u for u in candidates if matching_cards(number * u)]
    units = known or candidates
    if not units:
        return None  # no unit makes it a card: a garbage value, flagged per row (fct_request_flags)
    return Misread(CARD_FIELD, column, number, per_unit, tuple(units))


def _card_bytes(misread: Misread | None, top: int | None) -> float | None:
    """The card's size in bytes: the misread card in its likeliest unit, the logged one when that is a card."""
    if misread is not None:
        return misread.largest * misread.units[0]
    return top if top is not None and CARD_MIN_BYTES <= top <= CARD_MAX_BYTES else None


def _misread_level(
    staged: Staged, checked: dict[str, Field], largest: dict[str, int | None], name: str, card: float | None
) -> Misread | None:
    """A level misread: every value under LEVEL_MIN_BYTES, and a larger unit that puts the largest at least
    there and within the card (or within any card's bound when the log gives none)."""
    top = largest.get(name)
    if name not in checked or top is None or top >= LEVEL_MIN_BYTES:
        return None
    column = staged.mapping[name][0]
    per_unit = column_unit(checked[name], column)
    number = top / per_unit
    ceiling = card if card is not None else CARD_MAX_BYTES
    units = [u for u in _UNITS if u > per_unit and LEVEL_MIN_BYTES <= number * u <= ceiling]
    if not units:
        return None
    # With a card, the largest unit that keeps the level within it: one smaller leaves a model of a few MiB on
    # a GiB card. Without one the numbers leave a choice, and every candidate is named: the likeliest first, the
    # largest that keeps the level within the largest card we know (330 is 330 MiB rather than 330 GiB).
    if card is not None:
        return Misread(name, column, number, per_unit, (units[-1],))
    largest_card = max(c.total_bytes for c in CARDS)
    likely = [u for u in units if number * u <= largest_card][-1:]
    return Misread(name, column, number, per_unit, (*likely, *(u for u in units if u not in likely)))


def _unit_words(per_unit: int) -> str:
    """A unit in a sentence: `bytes`, `MiB`."""
    return "bytes" if per_unit == 1 else unit_name(per_unit)


def _number(value: float) -> str:
    """A number as the log would write it: whole with thousands separators, else with two decimals."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
