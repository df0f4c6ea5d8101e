"""No level above 100 % of a card reaches a report: rows set aside at ingest draw none, rows an earlier version
loaded with impossible sizes are left out (not capped), and the weekly report's findings section opens with the
data-quality note.

The data: the bad copies of conftest.write_impossible_copies (the sample fleet's a10-01 log with 5 rows 2 GiB
above its 21.96 GiB card and 3 with reserved below allocated, all on 2026-11-16 between 00:24 and 00:49 UTC),
and, for the earlier version, the first 2,000 requests and the nvidia-smi samples of the sample fleet's a10-01
with impossible rows inserted into the tables directly, as a version that checked nothing would have loaded them.
"""

from __future__ import annotations

import gzip
import json
from datetime import datetime
from itertools import chain

import duckdb
import pytest

from oomlab import api

from conftest import A10_TOTAL, FLEET, read_jsonl_gz

WEEK = (datetime(2026, 11, 16), datetime(2026, 11, 23))


def _levels(doc: dict) -> list[float]:
    """Every level the weekly document draws: held, peak and telemetry per device and hour, and the forecasts."""
    water = [v for s in doc["water"] for key in ("held_level", "peak_level", "device_level") for v in s[key]]
    forecast = [f.get("level_now") for f in doc["forecast"]]
    return [v for v in chain(water, forecast) if v is not None]


@pytest.fixture(scope="module")
def bad_weekly(impossible_db) -> api.Report:
    return api.weekly_report(impossible_db, *WEEK)


def test_rows_set_aside_draw_no_level(bad_weekly) -> None:
    doc = bad_weekly.doc
    (a10,) = [s for s in doc["water"] if s["instance"] == "a10-01"]
    assert a10["device_total"] == A10_TOTAL
    levels = _levels(doc)
    assert levels and max(levels) <= 1.0
    # The hour of the planted rows shows what the kept rows held: the highest reserved_after of that hour's
    # requests as logged, less the 8 planted lines (with them it read 23.96 / 21.96 GiB = 109 %); the document
    # rounds levels to 4 digits.
    rows = read_jsonl_gz(FLEET / "requests" / "a10-01.jsonl.gz")
    kept = [
        r for i, r in enumerate(rows, start=1) if r["ts"] < "2026-11-16T01" and i not in (*range(11, 16), 21, 22, 23)
    ]
    first_hour = a10["hour"].index(datetime(2026, 11, 16, 0))
    assert a10["held_level"][first_hour] == round(max(r["reserved_after"] for r in kept) / A10_TOTAL, 4) == 0.1707


def test_the_findings_section_opens_with_the_note(bad_weekly) -> None:
    note = bad_weekly.doc["data_quality"]["note"]
    assert note.startswith("data quality: 9 request rows of 2 files set aside (impossible values: 5 allocated")
    html = bad_weekly.html
    section = html[html.index('<section id="findings">') :]
    assert section.index('<p class="data-quality">data quality: 9 request rows') < section.index('class="finding')


@pytest.fixture(scope="module")
def earlier_db(tmp_path_factory):
    """a10-01's first 2,000 requests and its telemetry, then impossible rows as an earlier version loaded them."""
    work = tmp_path_factory.mktemp("earlier")
    requests = read_jsonl_gz(FLEET / "requests" / "a10-01.jsonl.gz")[:2000]
    (work / "a10-01.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requests))
    with gzip.open(FLEET / "nvidia-smi" / "a10-01.gpu.csv.gz", "rb") as handle:
        (work / "a10-01.gpu.csv").write_bytes(handle.read())
    db = work / "earlier.duckdb"
    from oomlab.config import IngestOptions

    assert not api.ingest(db, [str(work / "a10-01.jsonl"), str(work / "a10-01.gpu.csv")], IngestOptions()).failed
    con = duckdb.connect(str(db))
    try:
        # reserved 10x the card on 4 requests of the first hours; used 10x the card on 6 telemetry samples
        con.execute(
            "INSERT INTO requests SELECT * REPLACE (line + 100000 AS line, 10 * device_total AS reserved_after, "
            "10 * device_total AS peak_allocated) FROM requests WHERE line BETWEEN 30 AND 33"
        )
        con.execute(
            "INSERT INTO gpu_samples SELECT * REPLACE (line + 100000 AS line, 10 * memory_total_bytes AS "
            "memory_used_bytes) FROM gpu_samples WHERE line BETWEEN 2 AND 7"
        )
    finally:
        con.close()
    return db


def test_rows_an_earlier_version_loaded_are_left_out_not_capped(earlier_db) -> None:
    doc = api.weekly_report(earlier_db, *WEEK).doc
    levels = _levels(doc)
    assert levels and max(levels) <= 1.0
    (a10,) = doc["water"]
    assert 1.0 not in a10["held_level"]  # not drawn as a full card either
    assert any(v is not None for v in a10["device_level"])  # the telemetry that is possible is still drawn
    assert doc["data_quality"]["note"] == (
        "data quality: 4 request rows of 1 file loaded by an earlier version left out of water levels (4 impossible "
        "values) and 6 telemetry samples of 1 file loaded by an earlier version left out of water levels (6 used "
        "above the card) (ingest their files into a new database to set them aside)"
    )


def test_the_water_views_leave_those_rows_out(earlier_db) -> None:
    con = duckdb.connect(str(earlier_db), read_only=True)
    try:
        assert con.execute("SELECT count(*), max(peak_level), max(held_level) FROM fct_water_requests").fetchone()[
            :1
        ] == (2000,)
        assert con.execute("SELECT max(held_level) <= 1, max(peak_level) <= 1 FROM fct_water_hourly").fetchone() == (
            True,
            True,
        )
        assert con.execute("SELECT count(*) FROM stg_gpu_samples WHERE level IS NULL AND line > 100000").fetchone() == (
            6,
        )
    finally:
        con.close()
