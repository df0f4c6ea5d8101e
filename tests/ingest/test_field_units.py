"""Byte fields whose numbers are in MiB, GiB or KiB: a unit in the field mapping (`--map f=col:MiB`, a TOML entry's
`unit`), a unit suffix in the column's name (`allocated_after_mib`), and a file refused with the fix when its card or
its levels cannot be bytes.

Every log here is derived from the real capture tests/data/h200/serve_leak/requests.jsonl.gz (an H200, 47 requests,
a leak on gpu-a-0, three OOMs): its size fields renamed and divided into the unit, nothing else changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from oomlab.fields import Mapped, column_unit, parse_map_options, resolve_columns, with_mapping
from oomlab.load.connection import connect
from oomlab.weekly.config import load_config

from conftest import H200, read_jsonl_gz

CAPTURE = H200 / "serve_leak" / "requests.jsonl.gz"
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
SIZES = (
    "requested_size",
    "available_memory",
    "allocator_allocated",
    "reserved_memory",
    "allocated_before",
    "allocated_after",
    "reserved_before",
    "reserved_after",
    "peak_allocated",
    "device_total",
)
LEVELS = ("allocated_before", "allocated_after", "reserved_before", "reserved_after", "peak_allocated")


def _derived(columns: dict[str, tuple[str, int]], digits: int | None = None) -> list[dict]:
    """The capture with each field of `columns` renamed and in its unit: `field -> (column, bytes per unit)`. Values
    rounded to `digits` decimals (0: whole numbers), or None: the exact quotient (a binary fraction, which JSON
    writes in full and DuckDB reads back to the same double)."""
    rows = []
    for record in read_jsonl_gz(CAPTURE):
        row = {}
        for key, value in record.items():
            if key in columns:
                key, unit = columns[key]
                value = None if value is None else _in_unit(value, unit, digits)
            row[key] = value
        rows.append(row)
    return rows


def _in_unit(value: int, unit: int, digits: int | None) -> float | int:
    if digits is None:
        return value / unit
    return round(value / unit) if digits == 0 else round(value / unit, digits)


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _loaded(sql: Callable[..., list[tuple]]) -> list[dict]:
    """The size fields of the loaded requests, in the file's order."""
    rows = sql(f"SELECT {', '.join(SIZES)} FROM requests ORDER BY line")
    return [dict(zip(SIZES, row, strict=True)) for row in rows]


def _assert_original_bytes(loaded: list[dict], fields: tuple[str, ...], tolerance: dict[str, float]) -> None:
    """Every size of `fields` equals the capture's bytes within its unit's rounding (`tolerance` bytes)."""
    original = read_jsonl_gz(CAPTURE)
    assert len(loaded) == len(original) == 47
    for got, want in zip(loaded, original, strict=True):
        for name in fields:
            if want.get(name) is None:
                assert got[name] is None, name
            else:
                assert isinstance(got[name], int) and abs(got[name] - want[name]) <= tolerance[name], (name, got, want)


def _rounding(columns: dict[str, tuple[str, int]], digits: int) -> dict[str, float]:
    """The most a value can move when written to `digits` decimals of its unit, and rounded back to whole bytes."""
    return {name: unit * 0.5 * 10**-digits + 0.5 for name, (_, unit) in columns.items()}


def test_map_states_the_unit_of_each_field(tmp_path, db, run_cli, sql):
    """Fractional MiB (330.0390625) come back as the very bytes they were: 81050.5 MiB is a whole number of bytes."""
    columns = {name: (f"gpu_mem_{name}", MIB) for name in SIZES}
    path = _write(tmp_path / "mib.jsonl", _derived(columns))
    # the unit's case does not matter: MiB, mib, MB (binary, as everywhere in oomlab)
    spelled = ("MiB", "mib", "MB")
    maps = [f"--map={name}=gpu_mem_{name}:{spelled[i % 3]}" for i, name in enumerate(SIZES)]
    result = run_cli("ingest", path, "--db", db, *maps)
    assert result.exit_code == 0, result.output
    _assert_original_bytes(_loaded(sql), SIZES, dict.fromkeys(SIZES, 0))


def test_a_mapping_file_entry_gives_its_unit_and_plain_names_keep_working(tmp_path, db, run_cli, sql):
    columns = {name: (f"mem_{name}", GIB) for name in SIZES}
    rows = [{("host_name" if k == "instance" else k): v for k, v in row.items()} for row in _derived(columns, 9)]
    path = _write(tmp_path / "gib.jsonl", rows)
    mapping = tmp_path / "fields.toml"
    units = ("GiB", "gb")  # GB is GiB, as everywhere in oomlab
    entries = [f'{name} = {{ field = "mem_{name}", unit = "{units[i % 2]}" }}' for i, name in enumerate(SIZES)]
    mapping.write_text('[fields]\ninstance = "host_name"\n' + "\n".join(entries) + "\n", encoding="utf-8")
    result = run_cli("ingest", path, "--db", db, "--mapping", mapping)
    assert result.exit_code == 0, result.output
    _assert_original_bytes(_loaded(sql), SIZES, _rounding(columns, 9))
    assert sql("SELECT DISTINCT instance FROM requests") == [("gpu-a-0",)]


# Names as real logs write them: the canonical name or an alias, then the unit; case and dashes do not matter.
SUFFIXED = {
    "requested_size": ("requested_size_bytes", 1),
    "available_memory": ("free_memory_mib", MIB),
    "allocator_allocated": ("memory_allocated_gib", GIB),
    "reserved_memory": ("reserved_memory_mib", MIB),
    "allocated_before": ("memory_allocated_before_mib", MIB),
    "allocated_after": ("allocated_after_mib", MIB),
    "reserved_before": ("reserved_before_gib", GIB),
    "reserved_after": ("Reserved-After-MB", MIB),
    "peak_allocated": ("max_memory_allocated_kb", KIB),
    "device_total": ("total_memory_gb", GIB),
}


def test_unit_suffixes_in_field_names_are_read_without_a_mapping(tmp_path, db, run_cli, sql):
    rows = _derived(SUFFIXED, 3)
    # a value with its own unit keeps it, in a column whose bare numbers are MiB
    first = read_jsonl_gz(CAPTURE)[0]["allocated_after"]
    rows[0]["allocated_after_mib"] = f"{first / GIB:.9f} GiB"
    path = _write(tmp_path / "suffixed.jsonl", rows)
    result = run_cli("ingest", path, "--db", db)
    assert result.exit_code == 0, result.output
    _assert_original_bytes(_loaded(sql), SIZES, _rounding(SUFFIXED, 3))
    assert abs(sql("SELECT allocated_after FROM requests WHERE line = 1")[0][0] - first) <= GIB * 0.5e-9 + 0.5
    extras = {key for (extra,) in sql("SELECT extra FROM requests") for key in json.loads(extra)}
    assert extras == {"device_free_after"}  # every size column was read as its field


def test_the_line_by_line_reader_reads_units_the_same(tmp_path, db, run_cli, sql):
    """A line that is not JSON sends the file to the robust reader, where every value is text."""
    path = _write(tmp_path / "suffixed.jsonl", _derived(SUFFIXED, 3))
    path.write_text(path.read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    result = run_cli("ingest", path, "--db", db)
    assert result.exit_code == 0, result.output
    assert sql("SELECT line, reason FROM rejects") == [(48, "invalid JSON")]
    _assert_original_bytes(_loaded(sql), SIZES, _rounding(SUFFIXED, 3))
    card = _write(tmp_path / "card.jsonl", _derived({"device_total": ("device_total", MIB)}, 0))
    card.write_text(card.read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    refused = run_cli("ingest", card, "--db", db)
    assert refused.exit_code == 1 and "(give their unit: --map device_total=device_total:MiB)" in refused.stderr


_OOM_SIZES = "SELECT requested_bytes, free_bytes, allocated_by_pytorch_bytes FROM oom_events ORDER BY line"


def test_an_oom_field_rounded_coarser_than_its_message_yields_to_the_message(tmp_path, db, run_cli, sql):
    """The capture's three OOMs with their four allocator fields in GiB to two decimals (10 MiB steps), the message
    unchanged: "Tried to allocate 44.00 MiB" is 46,137,344 bytes where `requested_size_gib` 0.04 says 42,949,673. Sizes
    the message prints no finer (134.11 GiB free) and sizes it states otherwise beyond both roundings (the
    observer's 4.41 GiB allocated against the message's 4.49 GiB) keep the logged value."""
    fields = ("requested_size", "available_memory", "allocator_allocated", "reserved_memory")
    oom = {name: (f"{name}_gib", GIB) for name in fields}
    path = _write(tmp_path / "gib.jsonl", _derived(oom, 2))
    result = run_cli("ingest", path, "--db", db)
    assert result.exit_code == 0, result.output
    original = [r for r in read_jsonl_gz(CAPTURE) if r["status"] == "oom"]
    # 44, 22 and 16 MiB, as the messages print them; 0.04, 0.02 and 0.02 GiB in the fields
    requested = [r["requested_size"] for r in original]
    assert requested == [44 * MIB, 22 * MIB, 16 * MIB]
    logged = [(round(r["available_memory"] / GIB, 2), round(r["allocator_allocated"] / GIB, 2)) for r in original]
    sizes = zip(requested, logged, strict=True)
    want = [(size, round(free * GIB), round(allocated * GIB)) for size, (free, allocated) in sizes]
    assert sql(_OOM_SIZES) == want


def test_exact_oom_fields_win_over_the_message(db, run_cli, sql):
    result = run_cli("ingest", CAPTURE, "--db", db)
    assert result.exit_code == 0, result.output
    original = [r for r in read_jsonl_gz(CAPTURE) if r["status"] == "oom"]
    want = [(r["requested_size"], r["available_memory"], r["allocator_allocated"]) for r in original]
    assert sql(_OOM_SIZES) == want and want[0][2] == 4_733_015_040  # the message says 4.49 GiB


def test_names_without_a_unit_come_first_and_b_is_no_unit():
    fields = {f.name: f for f in with_mapping(parse_map_options(("allocated_after=gpu_mem_allocated_mib",)))}
    resolved = resolve_columns(["ts", "allocated_after_mib", "allocated_after", "gpu_mem_allocated_mib", "allocated_b"])
    assert resolved["allocated_after"] == ["allocated_after", "allocated_after_mib"]
    assert "allocator_allocated" not in resolved  # `_b` abbreviates "before" as often as "bytes"
    mapped = resolve_columns(["ts", "gpu_mem_allocated_mib"], tuple(fields.values()))
    assert mapped["allocated_after"] == ["gpu_mem_allocated_mib"]
    # a mapped name is read in the unit its name ends in, unless the mapping states one
    assert column_unit(fields["allocated_after"], "gpu_mem_allocated_mib") == MIB
    stated = {f.name: f for f in with_mapping(parse_map_options(("allocated_after=gpu_mem_allocated_mib:GiB",)))}
    assert column_unit(stated["allocated_after"], "gpu_mem_allocated_mib") == GIB
    # a field that takes no unit keeps a colon in its name, as before units
    assert parse_map_options(("instance=k8s:pod",)) == {"instance": Mapped("k8s:pod")}


def test_fractional_sizes_round_to_whole_bytes(tmp_path):
    con = connect(tmp_path / "macros.duckdb")
    try:
        got = con.execute(
            "SELECT oomlab_bytes_in('81050.5', $mib), oomlab_bytes_in('1.3', 1024), "
            "oomlab_bytes_in('14.23 GiB', $mib), oomlab_bytes_in('-2', $mib), oomlab_bytes_in('1e30', $mib), "
            "oomlab_bytes_in('2 XB', $mib)",
            {"mib": MIB},
        ).fetchall()
    finally:
        con.close()
    assert got == [(84_987_609_088, 1331, round(14.23 * GIB), -2 * MIB, None, None)]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (("--map", "allocated_after=gpu_mem:XB"), "--map 'allocated_after=gpu_mem:XB': unknown unit 'XB' (units: B,"),
        (("--map", "allocated_after=gpu_mem:"), "--map 'allocated_after=gpu_mem:': unknown unit ''"),
        (("--map", "latency_ms=lat:MiB"), "--map 'latency_ms=lat:MiB': unknown time unit 'MiB' (units: s, ms, us, ns)"),
        (("--map", "batch_size=bs:MiB"), "--map 'batch_size=bs:MiB': batch_size takes no unit (byte fields:"),
    ],
)
def test_a_bad_unit_is_a_one_line_usage_error(db, run_cli, option, message):
    result = run_cli("ingest", CAPTURE, "--db", db, *option)
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and errors[0].startswith(f"Error: {message}"), result.stderr
    assert not db.exists()  # refused before anything was opened


def test_a_bad_unit_in_a_mapping_file_names_the_file_and_field(tmp_path, db, run_cli):
    mapping = tmp_path / "fields.toml"
    mapping.write_text('allocated_after = { field = "gpu_mem", unit = "MiBs" }\n', encoding="utf-8")
    result = run_cli("ingest", CAPTURE, "--db", db, "--mapping", mapping)
    assert result.exit_code == 2
    assert f"Error: {mapping}: allocated_after: unknown unit 'MiBs'" in result.stderr


def _refused(result, path: Path, sql) -> str:
    """The one error line of a file refused as a whole; nothing of it loaded."""
    assert result.exit_code == 1, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {path}: sizes not in the unit they are read in: ")
    assert sql("SELECT count(*) FROM sources") == [(0,)]
    assert sql("SELECT count(*) FROM requests") == [(0,)]
    return errors[0]


def test_a_card_in_mib_read_as_bytes_is_refused_with_the_fix(tmp_path, db, run_cli, sql):
    columns = {"device_total": ("gpu_mem_total", MIB)}
    path = _write(tmp_path / "card.jsonl", _derived(columns, 0))
    result = run_cli("ingest", path, "--db", db, "--map", "device_total=gpu_mem_total")
    error = _refused(result, path, sql)
    assert "device_total (gpu_mem_total) is at most 143,156: as bytes 139.80 KiB, and no GPU has under 512 MiB" in error
    assert "as MiB 139.80 GiB (H200 141 GB)" in error
    assert error.endswith("(give their unit: --map device_total=gpu_mem_total:MiB)")
    fixed = run_cli("ingest", path, "--db", db, "--map", "device_total=gpu_mem_total:MiB")
    assert fixed.exit_code == 0, fixed.output
    _assert_original_bytes(_loaded(sql), ("device_total", *LEVELS), _rounding(columns, 0) | dict.fromkeys(LEVELS, 0))


def test_an_80_gb_card_in_mib_is_named(tmp_path, db, run_cli, sql):
    """The issue's log: 81,050 (MiB) in device_total. The capture's levels (at most 4.7 GiB) fit that card too."""
    rows = [row | {"device_total": 81_050} for row in read_jsonl_gz(CAPTURE)]
    path = _write(tmp_path / "a100.jsonl", rows)
    error = _refused(run_cli("ingest", path, "--db", db), path, sql)
    assert "device_total is at most 81,050: as bytes 79.15 KiB" in error
    assert "as MiB 79.15 GiB (80 GB (H100 / H800 / A100 80 GB))" in error
    assert error.endswith("(give their unit: --map device_total=device_total:MiB)")


def test_levels_all_under_a_mib_on_a_gib_card_are_refused(tmp_path, db, run_cli, sql):
    columns = {name: (f"gpu_mem_{name}", MIB) for name in LEVELS}
    path = _write(tmp_path / "levels.jsonl", _derived(columns, 0))
    maps = [f"--map={name}=gpu_mem_{name}" for name in LEVELS]
    error = _refused(run_cli("ingest", path, "--db", db, *maps), path, sql)
    named = ", ".join(f"{name} (gpu_mem_{name})" for name in LEVELS)
    assert f"{named} are at most 5,110: as bytes under 1 MiB, where no process holding a model stays" in error
    assert "as MiB 4.99 GiB" in error  # reserved_after, the largest
    assert error.endswith("(give their unit: " + " ".join(f"--map {n}=gpu_mem_{n}:MiB" for n in LEVELS) + ")")


def test_levels_in_mib_without_a_card_name_the_likeliest_unit_first(tmp_path, db, run_cli, sql):
    """No card to bound them: 4,702 may be MiB or KiB; MiB keeps the level within the largest card we know."""
    columns = {name: (name, MIB) for name in LEVELS}
    rows = [{k: v for k, v in row.items() if k != "device_total"} for row in _derived(columns, 0)]
    path = _write(tmp_path / "no-card.jsonl", rows)
    error = _refused(run_cli("ingest", path, "--db", db), path, sql)
    assert f"{', '.join(LEVELS)} are at most 5,110: " in error
    assert "as MiB 4.99 GiB or as KiB 4.99 MiB" in error
    assert error.endswith(" ".join(f"--map {n}={n}:MiB" for n in LEVELS) + "; or KiB where that is theirs)")


def test_a_unit_the_user_states_is_taken_as_said(tmp_path, db, run_cli, sql):
    columns = {"allocated_after": ("allocated_after", MIB)}
    rows = [{k: v for k, v in row.items() if k not in SIZES or k == "allocated_after"} for row in _derived(columns, 3)]
    path = _write(tmp_path / "after.jsonl", rows)
    _refused(run_cli("ingest", path, "--db", db), path, sql)
    result = run_cli("ingest", path, "--db", db, "--map", "allocated_after=allocated_after:B")
    assert result.exit_code == 0, result.output
    mib = [round(row["allocated_after"]) for row in rows]  # the MiB numbers, as bytes: the user said so
    assert sql("SELECT min(allocated_after), max(allocated_after) FROM requests") == [(min(mib), max(mib))]


def test_a_weekly_config_map_takes_the_same_entries(tmp_path):
    config = tmp_path / "oomlab.toml"
    config.write_text(
        f'database = "{tmp_path / "w.duckdb"}"\noutput = "out"\n[[inputs]]\npaths = ["{CAPTURE}"]\n'
        'map = { instance = "pod", allocated_after = { field = "mem_mib", unit = "GiB" } }\n',
        encoding="utf-8",
    )
    fields = {f.name: f for f in with_mapping(load_config(config).inputs[0].fields_map)}
    assert column_unit(fields["allocated_after"], "mem_mib") == GIB
    assert fields["instance"].aliases[0] == "pod"


def _leak(run_cli, db: Path) -> dict:
    """The leak finding `oomlab findings` reports for gpu-a-0."""
    result = run_cli("findings", "--db", db, "--json", "-")
    assert result.exit_code == 0, result.output
    leaks = [f for f in json.loads(result.stdout)["findings"] if f["kind"] == "leak"]
    assert len(leaks) == 1 and leaks[0]["metrics"]["instances"] == ["gpu-a-0"], leaks
    return leaks[0]


def test_findings_on_the_mib_log_find_the_leak_the_bytes_log_has(tmp_path, run_cli):
    original, converted = tmp_path / "bytes.duckdb", tmp_path / "mib.duckdb"
    assert run_cli("ingest", CAPTURE, "--db", original, "--quiet").exit_code == 0
    path = _write(tmp_path / "gpu-a-0.jsonl", _derived(SUFFIXED, 3))
    assert run_cli("ingest", path, "--db", converted, "--quiet").exit_code == 0
    want, got = _leak(run_cli, original), _leak(run_cli, converted)
    assert got["subject"] == want["subject"] and got["confidence"] == pytest.approx(want["confidence"], rel=1e-4)
    assert got["metrics"]["leak_ooms"] == want["metrics"]["leak_ooms"] == 3
    # every measure the same, to the rounding of sizes written to 0.001 MiB (0.5 KiB of GiB)
    for key, value in want["metrics"].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert got["metrics"][key] == pytest.approx(value, rel=1e-4), key
        else:
            assert got["metrics"][key] == value, key
