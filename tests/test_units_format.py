"""The one byte formatter: what it writes reads back (units.size_to_bytes) to within its last digit."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from oomlab.units import BYTE_UNITS, GIB, MIB, format_bytes, format_bytes_short, size_to_bytes


@given(st.integers(min_value=-(1 << 50), max_value=1 << 50))
@example(1_099_506_259_067)  # 1023.995 GiB: found by CI, shown as 1024.00 GiB
def test_auto_unit_reads_back_within_its_last_digit(value: int) -> None:
    text = format_bytes(value)
    number, unit = text.split(" ")
    assert unit in BYTE_UNITS
    scaled = abs(float(number))
    # the largest unit that keeps the number >= 1; rounding to two decimals can show 1023.995 GiB as 1024.00
    assert scaled <= 1024 or unit == "TiB", text
    assert unit == "B" or scaled >= 1, text
    assert abs(size_to_bytes(number, unit) - value) <= BYTE_UNITS[unit] * 0.005 + 0.5, text


def test_fixed_units_digits_and_grouping() -> None:
    # 14.23 GiB is how PyTorch's OOM message on the H200 captures writes the model's allocation.
    assert format_bytes(size_to_bytes("14.23", "GiB")) == "14.23 GiB"
    assert format_bytes(1023) == "1023 B"
    assert format_bytes(5 * MIB + MIB // 2, "MiB", 1) == "5.5 MiB"
    assert format_bytes(1234 * GIB + GIB // 2, "GiB", grouped=True) == "1,234.50 GiB"
    assert format_bytes_short(522 * MIB) == "522 MiB"
    assert format_bytes_short(-2 * GIB) == "-2.00 GiB"
