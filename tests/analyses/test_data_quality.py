"""The data-quality counts (analyses.data_quality) over the bad copies of real logs (conftest.write_impossible_copies):
what was set aside, per kind of row, file and reason; nothing for the sample fleet."""

from __future__ import annotations

from oomlab.analyses.data_quality import SET_ASIDE, QualityCount, data_quality
from oomlab.load.tables import connect


def test_counts_per_kind_file_and_reason(impossible_db) -> None:
    con = connect(impossible_db, read_only=True)
    try:
        quality = data_quality(con)
    finally:
        con.close()
    assert not quality.clean and quality.rows(SET_ASIDE) == 11
    assert quality.totals(SET_ASIDE) == [
        QualityCount(SET_ASIDE, "request rows", None, True, 9, 2),
        QualityCount(SET_ASIDE, "telemetry samples", None, True, 2, 1),
    ]
    assert quality.categories(SET_ASIDE, "request rows") == [
        QualityCount(SET_ASIDE, "request rows", "allocated above the card", True, 5, 1),
        QualityCount(SET_ASIDE, "request rows", "reserved below allocated", True, 3, 1),
        QualityCount(SET_ASIDE, "request rows", "negative allocated_before", True, 1, 1),
    ]
    assert quality.totals("left out") == [] and quality.totals("flagged") == []


def test_unreadable_input_is_counted_apart_from_impossible_values(tmp_path, db, run_cli) -> None:
    path = tmp_path / "mixed.jsonl"
    good = '{"ts": "2026-11-30T01:00:00Z", "instance": "gpu-1", "batch_size": 2, "input_sequence_length": 64}'
    path.write_text("\n".join([good, "{oops", good.replace('"batch_size": 2', '"batch_size": -2'), good]) + "\n")
    assert run_cli("ingest", path, "--db", db, "--quiet").exit_code == 0
    con = connect(db, read_only=True)
    try:
        quality = data_quality(con)
    finally:
        con.close()
    assert [(c.category, c.impossible, c.rows) for c in quality.categories(SET_ASIDE, "request rows")] == [
        ("invalid JSON", False, 1),
        ("negative batch_size", True, 1),
    ]


def test_the_sample_fleet_is_clean(fleet_con) -> None:
    assert data_quality(fleet_con).clean
