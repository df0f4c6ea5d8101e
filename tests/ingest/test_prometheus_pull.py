"""`oomlab pull prometheus` against a real Prometheus (tests/prom_server.py): what was loaded into the server comes
back sample for sample; a range pulled again adds nothing; a server that stops mid-pull, a piece over the server's
sample limit, a missing password and a range past retention each give one clear line and lose nothing pulled."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from prom_server import DCGM_METRICS, Loaded, dcgm_week, prometheus, vllm_day

from oomlab import api
from oomlab.errors import OomlabError
from oomlab.ingest import http_get
from oomlab.ingest.http_get import Client
from oomlab.ingest.prometheus_pull import PullRequest, pull_prometheus
from oomlab.load.connection import connect

MIB = 2**20
STEP_S = 300  # one sample every 5 minutes: a week of 8 GPUs is 2,016 samples a series, 32,256 in all


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None, second=0, microsecond=0)


def _pulled(db: Path) -> dict[str, dict[tuple[int, datetime], float]]:
    """Per DCGM metric, (gpu, time) -> the value in the metric's own unit, as gpu_samples holds it."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT gpu_index, ts, memory_used_bytes, memory_free_bytes FROM gpu_samples").fetchall()
    finally:
        con.close()
    columns = dict(zip(DCGM_METRICS, (2, 3), strict=True))
    return {name: {(r[0], r[1]): r[i] / MIB for r in rows if r[i] is not None} for name, i in columns.items()}


def _assert_equal(db: Path, loaded: Loaded) -> None:
    pulled = _pulled(db)
    for name in DCGM_METRICS:
        assert pulled[name] == loaded.samples(name), name


def test_a_week_comes_back_sample_for_sample_and_twice_adds_nothing(tmp_path: Path) -> None:
    start = _now() - timedelta(days=7)
    text, loaded = dcgm_week(start, days=7, step_s=STEP_S)
    db = tmp_path / "pull.duckdb"
    with prometheus(tmp_path, text) as server:
        first = api.pull_prometheus(db, server.url, start - timedelta(hours=1), _now())
        again = api.pull_prometheus(db, server.url, start + timedelta(days=3), _now())
    assert first.samples == 2 * 8 * 2016 and first.rows == 8 * 2016 and first.missing == []
    assert again.samples == 2 * 8 * (2016 - 3 * 288) and again.rows == 0
    _assert_equal(db, loaded)
    con = duckdb.connect(str(db), read_only=True)
    hosts = con.execute("SELECT DISTINCT instance, gpu_name, origin FROM gpu_samples").fetchall()
    kinds = con.execute("SELECT kind, rows, note FROM sources ORDER BY source_id").fetchall()
    con.close()
    # the exporter's Hostname label names the device; the card's name is the scrape's
    assert hosts == [("nvidia-dcgm-exporter-d2khm", "NVIDIA A100 80GB PCIe", "dcgm")]
    assert kinds == [("prometheus_pull", 8 * 2016, None), ("prometheus_pull", 0, None)]


def test_pieces_within_the_step_limit_and_the_sample_limit(tmp_path: Path) -> None:
    """A server that loads at most 5,000 samples a query, holding a day of 8 GPUs every 30 s (2,880 samples a
    series): at one sample a step of 30 s the day is one piece of 23,040 samples, which the server refuses, so
    pieces halve; at one a second, 8 pieces of Prometheus' 11,000 steps. Every sample comes back either way."""
    start = _now() - timedelta(days=1)
    text, loaded = dcgm_week(start, days=1, step_s=30, gpus=8)
    with prometheus(tmp_path, text, "--query.max-samples=5000") as server:
        halved = api.pull_prometheus(tmp_path / "halved.duckdb", server.url, start, _now(), step="30s")
        fine = api.pull_prometheus(tmp_path / "fine.duckdb", server.url, start, _now(), step="1s")
    assert halved.missing == [] and fine.missing == []
    assert halved.series > 2 * 8 * 4 and fine.series >= 2 * 8 * 8  # pieces read: series per piece, summed
    _assert_equal(tmp_path / "halved.duckdb", loaded)
    _assert_equal(tmp_path / "fine.duckdb", loaded)


def test_server_stopped_mid_pull_keeps_what_was_pulled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    start = _now() - timedelta(days=2)
    text, loaded = dcgm_week(start, days=2, step_s=STEP_S)
    calls: list[str] = []
    real_get = http_get.Client.get_json
    with prometheus(tmp_path, text) as server:

        def get_json(client: Client, path: str, params: dict) -> object:
            answer = real_get(client, path, params)
            calls.append(path)
            if path == "/api/v1/query":  # the first metric's samples are in: the server goes away
                server.stop()
            return answer

        monkeypatch.setattr(http_get.Client, "get_json", get_json)
        client = Client(server.url, attempts=2, backoff_s=0.01, timeout_s=5)
        with connect(tmp_path / "pull.duckdb") as con:
            report = pull_prometheus(con, PullRequest(client, start, _now()))
    assert report.rows == 8 * 576 and report.missing
    assert all("cannot reach" in m for m in report.missing)
    pulled = _pulled(tmp_path / "pull.duckdb")
    assert pulled["DCGM_FI_DEV_FB_USED"] == loaded.samples("DCGM_FI_DEV_FB_USED")
    con = duckdb.connect(str(tmp_path / "pull.duckdb"), read_only=True)
    note, rejects = con.execute("SELECT note, rejects FROM sources").fetchone()
    con.close()
    assert note.startswith(f"{len(report.missing)} ranges not pulled, first: ") and rejects == len(report.missing)


# bcrypt of "oomlab-test" at cost 4 (Python's crypt.crypt with METHOD_BLOWFISH, rounds=16): Prometheus' basic auth
WEB_CONFIG = "basic_auth_users:\n  oomlab: $2b$04$CIIJEE6Z9gyt0sbeVdQa.OdtoQgfoqbsGpupcviRkuaGvuHc.lfdi\n"


def test_without_the_password_one_line_and_with_it_the_samples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    start = _now() - timedelta(hours=6)
    text, loaded = dcgm_week(start, days=0.25, step_s=STEP_S, gpus=2)
    db = tmp_path / "pull.duckdb"
    with prometheus(tmp_path, text, web_config=WEB_CONFIG) as server:
        command = [sys.executable, "-m", "oomlab.cli.main", "pull", "prometheus", "--url", server.url, "--db", str(db)]
        refused = subprocess.run(command, capture_output=True, text=True, timeout=120)
        monkeypatch.setenv("OOMLAB_TEST_PASSWORD", "oomlab-test")
        secrets = {"user": "oomlab", "password_env": "OOMLAB_TEST_PASSWORD"}
        report = api.pull_prometheus(db, server.url, start, _now(), credentials=secrets)
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "Error: HTTP 401: the server refused the credentials (set --token-env / --token-file, or --user)"
    ]
    assert report.missing == [] and report.rows == 2 * 72
    _assert_equal(db, loaded)


def test_unset_secret_variable_is_named(tmp_path: Path) -> None:
    with pytest.raises(OomlabError, match="OOMLAB_NOT_SET_ANYWHERE is not set"):
        api.pull_prometheus(
            tmp_path / "x.duckdb", "http://127.0.0.1:9", credentials={"token_env": "OOMLAB_NOT_SET_ANYWHERE"}
        )


def test_range_past_retention_is_said(tmp_path: Path) -> None:
    start = _now() - timedelta(hours=12)
    text, loaded = dcgm_week(start, days=0.5, step_s=STEP_S, gpus=2)
    db = tmp_path / "pull.duckdb"
    with prometheus(tmp_path, text, retention="2d") as server:
        report = api.pull_prometheus(db, server.url, _now() - timedelta(days=10), _now())
    assert report.missing == []
    (note,) = report.notes
    assert "past the server's retention (2d)" in note
    _assert_equal(db, loaded)
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT note FROM sources").fetchone()[0] == note
    con.close()


def test_vllm_series_come_back_into_engine_samples_with_their_labels(tmp_path: Path) -> None:
    """vLLM's KV-cache usage (the real v1 scrape's series, tests/prom_server.py): every sample, its model and
    labels; the engine's own address is no device, so the rows stand on --instance."""
    start = _now() - timedelta(hours=6)
    text, points = vllm_day(start, hours=6, step_s=60)
    db = tmp_path / "pull.duckdb"
    with prometheus(tmp_path, text) as server:
        report = api.pull_prometheus(db, server.url, start, _now(), instance="gpu-node-7")
    assert report.missing == [] and report.rows == len(points) == 360
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(
        "SELECT ts, value, instance, framework, model_name, labels FROM engine_samples ORDER BY ts"
    ).fetchall()
    con.close()
    assert [(r[0], r[1]) for r in rows] == points
    assert {(r[2], r[3], r[4]) for r in rows} == {("gpu-node-7", "vllm", "zai-org/GLM-4.5")}
    assert json.loads(rows[0][5]) == {"engine": "0", "model_name": "zai-org/GLM-4.5"}


def test_pulled_into_a_lake_twice_holds_each_sample_once(tmp_path: Path) -> None:
    """`--lake`: two overlapping pulls of a day into a Parquet lake, each a source of its own; the lake's gpu_samples
    hold every loaded sample once (the second pull saw the first's samples of its range in the lake)."""
    start = _now() - timedelta(days=1)
    text, loaded = dcgm_week(start, days=1, step_s=STEP_S, gpus=2)
    lake, unused = tmp_path / "lake", tmp_path / "unused.duckdb"
    with prometheus(tmp_path, text) as server:
        first = api.pull_prometheus(unused, server.url, start, start + timedelta(hours=16), lake_dir=lake)
        second = api.pull_prometheus(unused, server.url, start + timedelta(hours=8), _now(), lake_dir=lake)
    assert first.rows == 2 * 193 and second.rows == 2 * 288 - first.rows and not unused.exists()
    files = f"{lake}/gpu_samples/**/*.parquet"
    rows = duckdb.sql(f"SELECT gpu_index, ts, memory_used_bytes FROM read_parquet('{files}')").fetchall()
    assert len(rows) == len({(g, t) for g, t, _ in rows}) == 2 * 288
    assert {(g, t): used / MIB for g, t, used in rows} == loaded.samples("DCGM_FI_DEV_FB_USED")
