"""The data-quality note: what was set aside, left out, kept or flagged, counted, in words a user can act on; and
no note at all for the real captures and the sample fleet.

The bad data are copies of real logs (conftest.write_impossible_copies says which lines were made impossible),
plus, here, what else the note speaks of: a real public OOM message whose numbers contradict themselves, a
request row with a latency of two days, and rows as an earlier version, which checked nothing, would have
loaded them (inserted into the tables directly).
"""

from __future__ import annotations

import json
import shutil

import duckdb
import pytest

from oomlab.findings.data_quality import data_quality_note
from oomlab.load.tables import connect

from conftest import CASES, H200, read_jsonl_gz, write_impossible_copies

REJECTS = "see `oomlab query 'SELECT * FROM rejects'`"
SET_ASIDE = (
    "9 request rows of 2 files set aside (impossible values: 5 allocated above the card, 3 reserved below "
    "allocated, 1 negative allocated_before) and 2 telemetry samples of 1 file set aside (impossible values: 2 "
    f"used above the card); {REJECTS}"
)


def _note(db):
    con = connect(db, read_only=True)
    try:
        return data_quality_note(con)
    finally:
        con.close()


def test_the_rows_set_aside_are_counted_by_kind_file_and_reason(impossible_db) -> None:
    note = _note(impossible_db)
    assert note is not None
    assert note.text == f"data quality: {SET_ASIDE}"
    assert note.set_aside_rows == 11
    json.dumps(note.to_json())  # JSON-able as the findings document writes it


@pytest.fixture(scope="module")
def everything_db(tmp_path_factory, impossible_db):
    """The bad copies, a contradicting OOM message, an implausible latency, and rows of an earlier version."""
    work = tmp_path_factory.mktemp("everything")
    db = work / "everything.duckdb"
    shutil.copy(impossible_db, db)
    message = json.loads((CASES / "oom" / "035_pytorch_v22-app-prefix-allocated-exceeds-total.json").read_text())
    (work / "kv-edit.log").write_text(f"2026-11-30T02:00:00Z ERROR {message['message']}\n")
    slow = read_jsonl_gz(H200 / "serve_leak" / "requests.jsonl.gz")[0] | {"latency_ms": 2 * 86_400_000.0}
    (work / "slow.jsonl").write_text(json.dumps(slow) + "\n")
    from oomlab import api
    from oomlab.config import IngestOptions

    assert not api.ingest(db, [str(work / "kv-edit.log"), str(work / "slow.jsonl")], IngestOptions()).failed
    con = duckdb.connect(str(db))
    try:  # what an earlier version, which checked nothing, would have loaded
        con.execute(
            "INSERT INTO requests SELECT * REPLACE (line + 100000 AS line, device_total + (1 << 30) AS reserved_after) "
            "FROM requests WHERE instance = 'a10-01' AND line BETWEEN 100 AND 102"
        )
        con.execute(
            "INSERT INTO gpu_samples SELECT * REPLACE (line + 100000 AS line, "
            "memory_total_bytes + 1 AS memory_used_bytes) FROM gpu_samples WHERE line = 10"
        )
    finally:
        con.close()
    return db


def test_every_part_of_the_note_in_its_order(everything_db) -> None:
    assert _note(everything_db).text == (
        f"data quality: {SET_ASIDE}; "
        "3 request rows of 1 file loaded by an earlier version left out of water levels (3 impossible values) and 1 "
        "telemetry sample of 1 file loaded by an earlier version left out of water levels (1 used above the card) "
        "(ingest their files into a new database to set them aside); "
        "1 OOM message of 1 file contradicts itself (1 allocated above the total capacity); such a message is kept "
        "and counted, but no card size is taken from it; "
        "1 request row of 1 file kept but implausible (1 latency over a day); "
        "see `oomlab query 'SELECT * FROM fct_request_flags'`"
    )


def test_a_contradicting_message_is_kept_but_sets_no_card_size(everything_db) -> None:
    con = connect(everything_db, read_only=True)
    try:
        event = con.execute(
            "SELECT total_capacity_bytes, allocated_by_pytorch_bytes, contradiction FROM stg_oom_events "
            "WHERE instance = 'kv-edit'"
        ).fetchall()
        limits = con.execute(
            "SELECT message_total_bytes FROM fct_oom_instance_limits WHERE instance = 'kv-edit'"
        ).fetchall()
        context = con.execute("SELECT device_total_bytes FROM fct_oom_context WHERE instance = 'kv-edit'").fetchall()
    finally:
        con.close()
    # "total capacity of 6.00 GiB ... 20.56 GiB is allocated by PyTorch" (Windows' shared GPU memory)
    assert event == [(6 << 30, 22_076_131_901, "allocated above the total capacity")]
    assert limits == [(None,)] and context == [(None,)]


def test_the_flag_says_what_is_implausible(everything_db) -> None:
    con = connect(everything_db, read_only=True)
    try:
        rows = con.execute("SELECT request_id, flag, reason FROM fct_request_flags").fetchall()
    finally:
        con.close()
    assert rows == [("gpu-a-0-00001", "latency over a day", "latency_ms 172800000 is 2.0 days")]


def test_no_note_for_the_real_captures(tmp_path, run_cli) -> None:
    db = tmp_path / "real.duckdb"
    logs = sorted(H200.glob("*/requests.jsonl.gz")) + sorted(H200.glob("*/oom_messages.txt.gz"))
    assert (
        run_cli("ingest", *logs, *sorted((H200 / "env").glob("nvsmi_*.csv.gz")), "--db", db, "--quiet").exit_code == 0
    )
    assert _note(db) is None


def test_no_note_for_the_sample_fleet(fleet_con) -> None:
    assert data_quality_note(fleet_con) is None


def test_a_copy_with_nothing_changed_has_no_note(tmp_path, run_cli) -> None:
    # the copies' writer itself plants nothing else: the untouched lines of the same files load cleanly
    folder = write_impossible_copies(tmp_path / "logs")
    clean = [json.loads(line) for line in (folder / "a10-01.jsonl").read_text().splitlines()]
    (folder / "a10-01.jsonl").write_text("".join(json.dumps(r) + "\n" for r in clean[30:]))
    db = tmp_path / "clean.duckdb"
    assert run_cli("ingest", folder / "a10-01.jsonl", "--db", db, "--quiet").exit_code == 0
    assert _note(db) is None
