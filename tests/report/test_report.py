"""Weekly and incident reports: real values from the bundled sample data, and the page's quality bar
(self-contained, deterministic, bounded, escaped, units on every axis)."""

from __future__ import annotations

import gzip
import json
import re
from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest

from oomlab import api
from oomlab.load.settings import INCIDENT_HOUR_REQUESTS
from oomlab.load.sql import sql_text
from oomlab.report.downsample import DEFAULT_MAX_POINTS, downsample
from oomlab.report.html import PLOTLY_JS
from oomlab.report.incident_data import CONTEXT

from conftest import H200, ROOT, read_jsonl_gz

MAX_BYTES = 5 * 1000 * 1000
FLEET_WEEK = (datetime(2026, 11, 30), datetime(2026, 12, 7))


@pytest.fixture(scope="module")
def demo(demo_result) -> api.DemoResult:
    return demo_result


@pytest.fixture(scope="module")
def weekly(demo: api.DemoResult) -> dict:
    return json.loads((demo.db_path.parent / "weekly.json").read_text())


def _charts(html: str) -> dict[str, dict]:
    """Chart id -> the figure JSON embedded for it."""
    found = re.findall(
        r'<script type="application/json" class="chart-data" data-target="([^"]+)">(.*?)</script>', html, flags=re.S
    )
    return {name: json.loads(body) for name, body in found}


def test_demo_writes_the_weekly_report_of_the_fleets_last_week_and_an_incident(demo, weekly):
    names = sorted(p.name for p in demo.written)
    assert names[-2:] == ["weekly.html", "weekly.json"]
    incidents = [p for p in demo.written if re.fullmatch(r"incident-\d+\.json", p.name)]
    assert len(incidents) == 2 and len([n for n in names if re.fullmatch(r"incident-\d+\.html", n)]) == 2
    top, recorded = (json.loads(p.read_text()) for p in incidents)
    assert top["verdict"]["cause"] == "capacity" and top["snapshot"] is None  # the A10 prompt threshold's
    assert recorded["verdict"]["cause"] == "leak" and recorded["event"]["request_id"] == "gpu-a-0-00039"
    assert recorded["snapshot"]["info"]["file"] == "gpu-a-0.snapshot_first_oom.pickle.gz"
    assert weekly["window"] == {"since": "2026-11-30T00:00:00", "until": "2026-12-07T00:00:00"}
    assert [f["title"] for f in demo.findings] == [f["title"] for f in weekly["findings"]]


def test_the_demo_names_each_page_and_leaves_nothing_behind(demo):
    """Issue 37, item 5: the summary says what each page is (the event's cause, place and time from the page's
    own JSON; the week holds the real captures too); the folder holds the database and the pages only (an empty
    `oomlab-demo.duckdb.tmp/` stayed)."""
    pages = {page.name: what for page, what in demo.pages}
    assert pages == {
        "weekly.html": "the week 2026-11-30 to 2026-12-06 of the sample fleet and the real H200 captures: findings "
        "ranked by impact, with the charts behind them",
        "incident-237.html": "the OOM behind the top finding: request too large for the card on a10-02 at 2026-12-06 "
        "20:30",
        "incident-875.html": "a real H200 OOM, with the snapshot that recorded it: memory leak on gpu-a-0 at "
        "2026-11-30 01:49",
    }
    assert sorted(p.name for p in demo.db_path.parent.iterdir()) == sorted(
        ["oomlab-demo.duckdb", *(p.name for p in demo.written)]
    )


def test_the_demo_says_its_first_step_at_once(tmp_path):
    """`oomlab demo` prints what it is doing on stderr before the first import of DuckDB (0.12 s here); the
    steps come in order, one line each."""
    import subprocess
    import sys
    import time

    started = time.perf_counter()
    argv = [sys.executable, "-m", "oomlab.cli.main", "demo", "--out", str(tmp_path / "demo")]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = child.stderr.readline() if child.stderr else ""
    first_after = time.perf_counter() - started
    rest, _ = child.communicate(timeout=600)[::-1]
    assert child.returncode == 0
    assert first.startswith("oomlab: ingesting the sample fleet (sample_logs/fleet")
    assert first_after < 10  # the bound is 2 s; a loaded CI machine gets slack, never the whole run's time
    steps = [line.split(" (")[0] for line in rest.splitlines()]
    assert steps == [
        "oomlab: ingesting the real H200 captures",
        "oomlab: rendering the weekly report",
        "oomlab: rendering incident-237.html",
        "oomlab: rendering incident-875.html",
    ]


def test_headline_counts_match_the_database(demo, weekly):
    con = duckdb.connect(str(demo.db_path), read_only=True)
    ooms, instances = con.execute(
        "SELECT count(*), count(DISTINCT instance) FROM oom_events WHERE origin <> 'snapshot' AND ts >= ? AND ts < ?",
        list(FLEET_WEEK),
    ).fetchall()[0]
    requests = con.execute("SELECT count(*) FROM requests WHERE ts >= ? AND ts < ?", list(FLEET_WEEK)).fetchall()[0][0]
    con.close()
    head = {h["metric"]: h for h in weekly["headline"]}
    assert head["ooms"]["current"] == ooms
    assert head["instances_affected"]["current"] == instances
    assert head["requests"]["current"] == requests
    assert head["ooms"]["change"] == head["ooms"]["current"] - head["ooms"]["previous"]


def test_findings_carry_the_planted_truths_as_actions(weekly):
    actions = [f["title"] for f in weekly["findings"]]
    assert re.fullmatch(r"Cap batch x \(input \+ output\) tokens at [\d,]+ on A10 24 GB", actions[0])
    assert "Move nightly-backup out of its window (daily 01:00-02:30 UTC)" in actions
    assert "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True on a100-05" in actions
    assert "Fix the leak in assist-1.8b-v1.5" in actions
    assert [f["rank"] for f in weekly["findings"]] == list(range(1, len(actions) + 1))


def test_heatmap_marks_the_blamed_backup_window(weekly):
    grid = weekly["heatmap"]
    assert grid["days"] == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    assert len(grid["rate"]) == 7 and all(len(row) == 24 for row in grid["rate"])
    backup = next(j for j in weekly["jobs"] if j["name"] == "nightly-backup")
    assert backup["blamed"] and backup["spans"] == [[1.0, 2.5]] and backup["weekdays"] == [1, 2, 3, 4, 5, 6, 7]
    assert not next(j for j in weekly["jobs"] if j["name"] == "log-rotate")["blamed"]
    # the backup hours have the highest OOM rate of the day, summed over the week
    by_hour = [
        sum(grid["ooms"][d][h] for d in range(7)) / max(1, sum(grid["requests"][d][h] for d in range(7)))
        for h in range(24)
    ]
    assert max(range(24), key=by_hour.__getitem__) in (1, 2)


def test_leak_trends_show_the_leaking_version_rising(weekly):
    """The fleet's planted leak and the real H200 capture's (its last week holds both)."""
    leaking = [t for t in weekly["leaks"] if t["kind"] == "leak"]
    assert leaking and {t["model_version"] for t in leaking} == {"assist-1.8b-v1.5", "llama-mini-v2"}
    for trend in leaking:
        assert trend["baseline_bytes"][-1] > trend["baseline_bytes"][0]


def test_weekly_page_is_self_contained_bounded_and_has_every_chart(demo):
    html = (demo.db_path.parent / "weekly.html").read_text()
    assert len(html.encode()) <= MAX_BYTES
    assert html.count("plotly.js (cartesian - minified) v4.1.1") == 1
    bundle = (ROOT / "reports" / PLOTLY_JS).read_text()
    page = html.replace(bundle, "")  # the vendored bundle names a CDN only as a default for map traces
    assert len(page) < len(html) - 1_000_000
    assert not re.search(r"<script[^>]+src=|<link|<img|<iframe|https?://(?!docs\.pytorch\.org)", page)
    charts = _charts(html)
    assert {"heatmap", "water", "versions", "prompt-input", "prompt-batch-tokens", "leaks"} <= {
        n.removeprefix("chart-") for n in charts
    }
    for name in charts:
        assert f'<div id="{name}" class="chart">' in html


def test_every_axis_has_a_title_with_its_unit(demo):
    for page in (
        "weekly.html",
        *[p.name for p in demo.written if p.name.startswith("incident-") and p.suffix == ".html"],
    ):
        for name, fig in _charts((demo.db_path.parent / page).read_text()).items():
            for axis in ("xaxis", "yaxis"):
                title = fig["layout"][axis]["title"]["text"]
                assert re.search(
                    r"\((UTC|UTC, h|GiB|tokens|% of the card|file:function:line)\)|OOMs per 1,000"
                    r"|day of week|model version",
                    title,
                ), (page, name, axis, title)


def test_reports_are_byte_identical_on_rerun(demo):
    first = api.weekly_report(demo.db_path, *FLEET_WEEK)
    again = api.weekly_report(demo.db_path, *FLEET_WEEK)
    assert first.html == again.html and first.json_text() == again.json_text()
    at = datetime(2026, 11, 30, 1, 49, 36)
    first, again = (api.incident_report(demo.db_path, instance="gpu-a-0", at=at) for _ in range(2))
    assert first.html == again.html and first.json_text() == again.json_text()


def test_incident_of_the_real_leak_matches_its_snapshot(demo):
    report = api.incident_report(demo.db_path, instance="gpu-a-0", at=datetime(2026, 11, 30, 1, 49, 36))
    doc = report.doc
    assert doc["event"]["request_id"] == "gpu-a-0-00039"
    assert doc["verdict"]["cause"] == "leak"
    decoded = {f["field"]: f["value"] for f in doc["decoded"]}
    assert decoded["requested_bytes"] == 46137344  # 44.00 MiB
    assert decoded["cap_bytes"] == 5 * 1024**3  # "5.00 GiB allowed"
    snapshot = doc["snapshot"]
    assert snapshot["info"]["file"] == "gpu-a-0.snapshot_first_oom.pickle.gz"
    assert snapshot["leak_suspects"][0]["site"] == "transformers/cache_utils.py:update:146"
    # issue 37, item 3: the capture script's own frame that called into transformers' KV cache
    assert snapshot["leak_suspects"][0]["caller"] == "/srv/app/scenarios.py:generate:117"
    moment = snapshot["ooms"][0]
    assert (moment["requested_bytes"], moment["largest_free_block_bytes"]) == (46137344, 16 * 1024**2)
    assert doc["next_steps"][0].startswith(
        "Fix the leak at transformers/cache_utils.py:update:146 (called from /srv/app/scenarios.py:generate:117) in "
        "llama-mini-v2"
    )
    assert {"timeline", "replay", "sites"} <= {n.removeprefix("chart-") for n in _charts(report.html)}
    assert "CUDA out of memory. Tried to allocate 44.00 MiB." in report.html


def test_incident_of_the_neighbour_names_its_process(demo):
    report = api.incident_report(demo.db_path, instance="gpu-b-1", at=datetime(2026, 11, 30, 1, 50, 12))
    doc = report.doc
    assert doc["event"]["request_id"] == "gpu-b-1-00058"
    assert doc["verdict"]["cause"] == "external_pressure"
    assert doc["event"]["other_pids"] == [1030]
    assert "Move process 1030 (135.29 GiB) off gpu-b-1's GPU" in doc["next_steps"][0]
    # the one earlier OOM there: request gpu-b-1-00031, the first
    assert [s["ts"] for s in doc["similar"]] == [datetime(2026, 11, 30, 1, 50, 3, 302000)]


def test_incident_without_a_time_still_renders(demo):
    con = duckdb.connect(str(demo.db_path), read_only=True)
    event = con.execute("SELECT min(event_id) FROM stg_oom_events WHERE ts IS NULL").fetchall()[0][0]
    con.close()
    report = api.incident_report(demo.db_path, event_id=event)
    assert report.doc["timeline"] is None and report.doc["verdict"]["cause"] == "fragmentation"
    assert "This OOM has no time" in report.html


def test_user_strings_are_escaped(tmp_path):
    """Names from logs land in tables, titles, chart labels and JSON: none may become markup."""
    evil_instance = '<script>alert("x")</script>'
    evil_version = '"><img src=x onerror=alert(1)>'
    rows = read_jsonl_gz(H200 / "serve_mixed" / "requests.jsonl.gz")
    for row in rows:
        row["instance"], row["model_version"] = evil_instance, evil_version
    log = tmp_path / "evil.jsonl.gz"
    log.write_bytes(gzip.compress("\n".join(json.dumps(r) for r in rows).encode()))
    db = tmp_path / "evil.duckdb"
    assert not api.ingest(db, [str(log)], api.IngestOptions()).failed
    pages = [
        api.weekly_report(db).html,
        api.incident_report(db, instance=evil_instance, at=datetime(2026, 11, 30, 1, 50, 3)).html,
    ]
    for html in pages:
        body = html[: html.index("<script>")]  # the page before plotly.js and the chart scripts
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert" in body
        bodies = re.findall(r'class="chart-data" data-target="[^"]+">(.*?)</script>', html, flags=re.S)
        assert bodies and all("<" not in b for b in bodies)  # chart JSON escapes every "<"


def test_downsample_keeps_peaks_and_markers_within_its_budget():
    n = 200_000
    frame = pl.DataFrame({"t": range(n), "v": [(i * 7919) % 1000 for i in range(n)], "oom": [False] * n})
    frame = frame.with_columns(
        pl.when(pl.col("t") == 123_457).then(5000).otherwise(pl.col("v")).alias("v"),
        (pl.col("t") % 50_000 == 7).alias("oom"),
    )
    small = downsample(frame, "t", "v", max_points=1500, keep="oom")
    assert small.height <= 1500 + 4
    assert small["v"].max() == 5000 and small.filter(pl.col("oom")).height == 4
    assert small["t"].is_sorted()
    assert downsample(frame.head(10), "t", "v", 1500).equals(frame.head(10))


def test_vendored_plotly_matches_the_python_package():
    import plotly.offline

    assert plotly.offline.get_plotlyjs_version() in Path(PLOTLY_JS).name


def test_cli_report_commands(demo, run_cli, tmp_path):
    out = tmp_path / "w.html"
    result = run_cli(
        "report",
        "weekly",
        "--db",
        demo.db_path,
        "--since",
        "2026-11-30",
        "--until",
        "2026-12-07",
        "-o",
        out,
        "--json",
        tmp_path / "w.json",
    )
    assert result.exit_code == 0 and f"wrote {out}" in result.output
    assert json.loads((tmp_path / "w.json").read_text())["window"]["since"] == "2026-11-30T00:00:00"
    bad = run_cli("report", "weekly", "--db", demo.db_path, "--since", "2026-11-30", "--until", "2026-11-24", "-o", out)
    assert bad.exit_code == 1
    assert bad.stderr == "Error: --since 2026-11-30 00:00 is not before --until 2026-11-24 00:00\n"
    both = run_cli("report", "incident", "--db", demo.db_path, "--event", 1, "--instance", "a10-01", "-o", out)
    assert both.exit_code == 2 and "give either --event ID or --instance NAME --at TIME, not both" in both.stderr
    # neither: the latest OOM, and the terminal says which
    latest = run_cli("report", "incident", "--db", demo.db_path, "-o", out, "--json", tmp_path / "i.json")
    event = json.loads((tmp_path / "i.json").read_text())["event"]
    con = duckdb.connect(str(demo.db_path), read_only=True)
    try:
        (last,) = con.execute("SELECT max(ts) FROM oom_events").fetchone()
    finally:
        con.close()
    assert latest.exit_code == 0 and event["ts"] == last.isoformat()
    assert f"the latest OOM: event {event['event_id']} on {event['instance']}" in latest.stderr
    unknown = run_cli("report", "incident", "--db", demo.db_path, "--event", 10**9, "-o", out)
    assert unknown.exit_code == 1 and unknown.stderr.startswith("Error: no OOM event 1000000000 (see:")


def test_reports_show_what_gpu_telemetry_saw(demo, weekly):
    """The fleet's nvidia-smi samples: a device level beside the request-log levels, and in an incident's hours."""
    a10 = next(s for s in weekly["water"] if s["instance"] == "a10-01")
    levels = [v for v in a10["device_level"] if v is not None]
    assert levels and all(0 < v <= 1 for v in levels)
    page = next(p for p in demo.written if p.name.startswith("incident-") and p.suffix == ".json")
    incident = json.loads(page.read_text())
    seen = incident["timeline"]["telemetry"]
    assert seen["ts"] and all(used > 0 for used in seen["memory_used_bytes"])
    assert {t["name"] for t in _charts(page.with_suffix(".html").read_text())["chart-timeline"]["data"]} >= {
        "device used (nvidia-smi / DCGM)",
        "allocated after request",
    }


def test_docs_list_every_key_of_both_documents(demo, weekly):
    doc = (ROOT / "docs" / "reports.md").read_text()
    incident = json.loads(
        next(p for p in demo.written if p.name.startswith("incident-") and p.suffix == ".json").read_text()
    )
    for key in [*weekly, *incident]:
        assert f"`{key}`" in doc, key
    for key in incident["timeline"]:
        assert f"`{key}`" in doc, key


def test_the_incident_timeline_keeps_each_minutes_extremes_and_every_oom(fleet_con):
    """What an incident timeline draws (q_incident_requests over agg_incident_minutes and agg_incident_detail),
    checked against the raw requests of every instance of the sample fleet and the real H200 logs (gpu-a-0 and
    gpu-b-1: 47 and 79 requests in a minute, with their OOMs; gpu-c-2: 400 in a minute): an instance's hour of at
    most INCIDENT_HOUR_REQUESTS keeps every request, as does a request that ended in OOM; a busier hour keeps of
    each GPU's minute its first request and its highest and lowest peak (peak_allocated, else allocated_after),
    and nothing else."""
    since, until = fleet_con.execute("SELECT min(ts), max(ts) + INTERVAL 1 SECOND FROM stg_requests").fetchall()[0]
    raw = fleet_con.sql(
        "WITH r AS (SELECT *, date_trunc('minute', ts) AS minute, coalesce(peak_allocated, allocated_after) AS p, "
        "count(*) OVER (PARTITION BY instance, date_trunc('hour', ts)) AS in_hour "
        "FROM stg_requests WHERE instance IS NOT NULL AND ts IS NOT NULL) "
        "SELECT instance, gpu_index, minute, count(*) AS n, max(p) AS high, min(p) AS low, min(ts) AS first, "
        "count(*) FILTER (WHERE is_oom) AS ooms, bool_and(in_hour <= $1) AS quiet FROM r GROUP BY ALL",
        params=[INCIDENT_HOUR_REQUESTS],
    ).pl()
    assert raw.filter(pl.col("instance").is_in(["gpu-a-0", "gpu-b-1"]))["quiet"].all()
    # the one busy hour: the real gpu-c-2 log, 400 requests in one minute without an OOM
    assert raw.filter(~pl.col("quiet")).select("instance", "n").rows() == [("gpu-c-2", 400)]
    drawn = pl.concat(
        [
            fleet_con.sql(sql_text("q_incident_requests"), params={"instance": name, "since": since, "until": until})
            .pl()
            .with_columns(instance=pl.lit(name), minute=pl.col("ts").dt.truncate("1m"))
            for name in raw["instance"].unique().sort().to_list()
        ]
    )
    per_minute = drawn.group_by("instance", "gpu_index", "minute").agg(
        pl.len().alias("n_drawn"),
        pl.col("peak_allocated").max().alias("high_drawn"),
        pl.col("peak_allocated").min().alias("low_drawn"),
        pl.col("ts").min().alias("first_drawn"),
        pl.col("is_oom").sum().alias("ooms_drawn"),
    )
    joined = raw.join(per_minute, on=["instance", "gpu_index", "minute"], how="full", nulls_equal=True)
    assert joined.filter(pl.col("n").is_null() | pl.col("n_drawn").is_null()).is_empty()
    assert joined.filter(
        (pl.col("high") != pl.col("high_drawn"))
        | (pl.col("low") != pl.col("low_drawn"))
        | (pl.col("first") != pl.col("first_drawn"))
        | (pl.col("ooms") != pl.col("ooms_drawn"))
    ).is_empty()
    quiet, busy = joined.filter(pl.col("quiet")), joined.filter(~pl.col("quiet"))
    assert (quiet["n"] == quiet["n_drawn"]).all() and quiet["n"].sum() > 100
    assert busy["n_drawn"].to_list() == [3]


def test_a_quiet_hour_is_what_the_timeline_draws_whole():
    """INCIDENT_HOUR_REQUESTS is the chart's points per hour: 1500 points over 3 hours either side of the OOM."""
    hours = 2 * CONTEXT.total_seconds() / 3600
    assert DEFAULT_MAX_POINTS // hours == INCIDENT_HOUR_REQUESTS


def test_a_rate_says_which_ooms_it_counts(weekly):
    """The rate counts the OOMs of instances with a request log; a bar whose OOMs are not all such says how many
    it counts (a real corpus folder of pasted messages had a 0.0 rate under `47 OOMs`)."""
    from oomlab.report.weekly_charts import _rate_label

    rows = [row for cut in weekly["rates"].values() for row in cut]
    assert rows and all(0 <= row["ooms_with_traffic"] <= row["ooms"] for row in rows)
    assert _rate_label({"ooms": 47, "ooms_with_traffic": 0}) == "47 OOMs (0 in request logs)"
    assert _rate_label({"ooms": 1, "ooms_with_traffic": 1}) == "1 OOM"
