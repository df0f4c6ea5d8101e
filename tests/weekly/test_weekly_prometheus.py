"""The weekly job pulls its week from a real Prometheus (tests/prom_server.py): two consecutive past ISO weeks of
DCGM samples come back sample for sample, each run taking exactly its own week (the next Monday's first sample
belongs to the next week), a week run again adds nothing; a server that cannot be reached or refuses the
credentials still gets the week's pages written, and exit code 4 (3 when a finding is new: the alert wins)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from prom_server import DCGM_METRICS, Loaded, dcgm_week, prometheus

from oomlab.cli.main import cli
from oomlab.ingest import http_get
from oomlab.weekly.config import ConfigError, load_config
from oomlab.weekly.job import WeeklyRun, run_weekly
from oomlab.weekly.weeks import Week, last_complete_week

MIB = 2**20
STEP_S = 600  # 2 GPUs every 10 minutes over two weeks: 2,016 samples a series, 8,064 in all
GPUS = 2
CONFIDENCE = 0.7
COLUMNS = {"DCGM_FI_DEV_FB_USED": "memory_used_bytes", "DCGM_FI_DEV_FB_FREE": "memory_free_bytes"}
# bcrypt of "oomlab-test" at cost 4, as in tests/ingest/test_prometheus_pull.py: Prometheus' basic auth
WEB_CONFIG = "basic_auth_users:\n  oomlab: $2b$04$CIIJEE6Z9gyt0sbeVdQa.OdtoQgfoqbsGpupcviRkuaGvuHc.lfdi\n"


def _weeks() -> tuple[Week, Week]:
    """Two consecutive complete ISO weeks in the past (UTC, the config's default time zone)."""
    second = last_complete_week("UTC")
    return second.previous, second


def write_config(folder: Path, url: str, *prometheus_lines: str) -> Path:
    """A config without [[inputs]]: the week comes from the [[prometheus]] table alone."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ['database = "oomlab.duckdb"', 'output = "reports"', f"alert_confidence = {CONFIDENCE}"]
    lines += ["[[prometheus]]", f"url = {json.dumps(url)}", 'step = "30s"', "timeout = 10", *prometheus_lines]
    path = folder / "oomlab.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def held(db: Path) -> dict[str, dict[tuple[int, datetime], float]]:
    """Per DCGM metric, (gpu, time) -> the value in MiB as gpu_samples holds it."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(f"SELECT gpu_index, ts, {', '.join(COLUMNS.values())} FROM gpu_samples").fetchall()
    finally:
        con.close()
    return {
        name: {(r[0], r[1]): r[2 + i] / MIB for r in rows if r[2 + i] is not None}
        for i, name in enumerate(DCGM_METRICS)
    }


def expected(loaded: Loaded, *weeks: Week) -> dict[str, dict[tuple[int, datetime], float]]:
    """The loaded samples dated in the weeks ([Monday 00:00, next Monday 00:00))."""
    return {
        name: {
            key: value for key, value in loaded.samples(name).items() if any(w.since <= key[1] < w.until for w in weeks)
        }
        for name in DCGM_METRICS
    }


def duplicates(db: Path) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT count(*) FROM (SELECT gpu_index, ts FROM gpu_samples GROUP BY ALL HAVING count(*) > 1)"
        ).fetchone()[0]
    finally:
        con.close()


def findings_new(out: Path, week: Week, previous: Week) -> list[tuple[str, str]]:
    """The week's findings at or above the confidence whose kind and subject the previous week's JSON lacks,
    read from the pages written (not from the run's own summary)."""
    doc = json.loads((out / week.name / "weekly.json").read_text(encoding="utf-8"))
    path = out / previous.name / "weekly.json"
    before = json.loads(path.read_text(encoding="utf-8"))["findings"] if path.exists() else []
    seen = {(f["kind"], f["subject"]) for f in before}
    return [
        (f["kind"], f["subject"])
        for f in doc["findings"]
        if f["confidence"] >= CONFIDENCE and (f["kind"], f["subject"]) not in seen
    ]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Loaded]]:
    """A Prometheus holding DCGM samples from the first week's Monday 00:00 to the second week's Sunday 23:50."""
    first, second = _weeks()
    text, loaded = dcgm_week(first.since, days=14, step_s=STEP_S, gpus=GPUS)
    assert max(when for points in loaded.series.values() for when, _ in points) < second.until
    with prometheus(tmp_path_factory.mktemp("prom"), text) as running:
        yield running.url, loaded


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pull's client retries as ever, without sleeping between tries (0.5 + 1 + 2 s a request otherwise)."""
    real = http_get.Client.__init__

    def init(self: http_get.Client, *args: object, **kwargs: object) -> None:
        real(self, *args, **kwargs)
        object.__setattr__(self, "backoff_s", 0.0)

    monkeypatch.setattr(http_get.Client, "__init__", init)


def test_two_weeks_pulled_sample_for_sample_and_again_adds_nothing(server, tmp_path: Path) -> None:
    url, loaded = server
    first, second = _weeks()
    config = write_config(tmp_path, url)
    db, out = tmp_path / "oomlab.duckdb", tmp_path / "reports"

    one = run_weekly(config, first.name)
    per_week = len(expected(loaded, first)["DCGM_FI_DEV_FB_USED"])
    assert per_week == GPUS * 7 * 86400 // STEP_S
    assert one.pulls == [_whole_week(url, per_week)]
    # exactly the first week: the second week's Monday 00:00 sample, loaded too, is not pulled with it
    assert held(db) == expected(loaded, first)
    assert one.exit_code == (3 if one.new_findings else 0)
    assert (out / first.name / "weekly.html").is_file()

    command = [sys.executable, "-m", "oomlab.cli.main", "weekly", "--config", str(config), "--week", second.name]
    cli_run = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=120, env=os.environ)
    summary = json.loads(cli_run.stdout)
    assert summary["pulls"] == [_whole_week(url, per_week)], cli_run.stderr
    new = findings_new(out, second, first)
    assert [(f["kind"], f["subject"]) for f in summary["new_findings"]] == new
    assert cli_run.returncode == summary["exit_code"] == (3 if new else 0), cli_run.stderr
    assert held(db) == expected(loaded, first, second)
    assert duplicates(db) == 0

    again = run_weekly(config, second.name)
    assert again.pulls[0]["samples"] == len(DCGM_METRICS) * per_week
    assert again.pulls[0]["rows"] == 0 and again.pulls[0]["missing"] == 0 and again.pulls[0]["error"] is None
    assert held(db) == expected(loaded, first, second)
    assert duplicates(db) == 0
    assert again.exit_code == (3 if again.new_findings else 0)
    assert again.to_json()["pulls"] == again.pulls


def _free_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_unreachable_server_exit_4_and_the_pages_still_written(tmp_path: Path, no_backoff: None) -> None:
    week = _weeks()[1]
    url = f"http://127.0.0.1:{_free_port()}"
    config = write_config(tmp_path, url)
    result = CliRunner().invoke(cli, ["weekly", "--config", str(config), "--week", week.name, "--json"])
    assert result.exit_code == 4, result.output
    summary = json.loads(result.stdout)
    (pull,) = summary["pulls"]
    # no server there: the pull ends at its first request, with one line, and nothing of it is written
    assert pull["url"] == url and pull["samples"] == pull["rows"] == pull["missing"] == 0
    assert pull["error"].startswith(f"cannot reach {url}")
    assert summary["new_findings"] == [] and summary["exit_code"] == 4
    assert (tmp_path / "reports" / week.name / "weekly.html").is_file()
    assert (tmp_path / "reports" / "index.html").is_file()

    text = CliRunner().invoke(cli, ["weekly", "--config", str(config), "--week", week.name])
    assert text.exit_code == 4, text.output
    lines = text.stdout.splitlines()
    assert f"  error: {pull['error']}" in lines


def test_refused_credentials_and_unset_secret_are_errors_of_the_pull(tmp_path: Path, monkeypatch) -> None:
    week = _weeks()[1]
    text, _ = dcgm_week(week.since, days=0.25, step_s=STEP_S, gpus=1)
    monkeypatch.setenv("OOMLAB_TEST_PASSWORD", "not-the-password")
    monkeypatch.delenv("OOMLAB_TOKEN_NOT_SET", raising=False)
    (tmp_path / "prom").mkdir()
    with prometheus(tmp_path / "prom", text, web_config=WEB_CONFIG) as running:
        refused = run_weekly(
            write_config(tmp_path / "refused", running.url, 'user = "oomlab"', 'password_env = "OOMLAB_TEST_PASSWORD"'),
            week.name,
        )
    assert refused.pulls[0]["error"].startswith("HTTP 401: the server refused the credentials")
    assert refused.exit_code == 4 and refused.to_json()["exit_code"] == 4
    assert (tmp_path / "refused" / "reports" / week.name / "weekly.html").is_file()

    unset = run_weekly(
        write_config(tmp_path / "unset", "http://127.0.0.1:9", 'token_env = "OOMLAB_TOKEN_NOT_SET"'), week.name
    )
    assert "environment variable OOMLAB_TOKEN_NOT_SET is not set" in unset.pulls[0]["error"]
    assert unset.exit_code == 4


def test_a_new_finding_wins_over_an_incomplete_pull(tmp_path: Path) -> None:
    failed = {"url": "http://x:9090", "samples": 0, "rows": 0, "missing": 3, "first_missing": "...", "notes": []}
    run = WeeklyRun(_weeks()[1], tmp_path, {}, {}, 1, [], [], pulls=[failed | {"error": None}])
    assert run.exit_code == 4
    run.new_findings.append({"kind": "leak", "subject": "model_version v1", "confidence": 0.9, "title": None})
    assert run.exit_code == 3
    assert WeeklyRun(_weeks()[1], tmp_path, {}, {}, 0, [], [], pulls=[]).exit_code == 0


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ('tokn_env = "PROM_TOKEN"', "prometheus[0].tokn_env"),
        (None, "prometheus[0].url"),
    ],
)
def test_config_errors_name_the_prometheus_key(tmp_path: Path, line: str | None, key: str) -> None:
    config = write_config(tmp_path, "http://prom:9090" if line else "prom:9090", *([line] if line else []))
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    message = caught.value.message
    assert message.startswith(f"{config}: {key}: ") and "\n" not in message
    result = CliRunner().invoke(cli, ["weekly", "--config", str(config)])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [f"Error: {message}"]


def _whole_week(url: str, per_week: int) -> dict[str, object]:
    """The summary of a pull that read every sample of its week (two metrics a row)."""
    samples = len(DCGM_METRICS) * per_week
    return {
        "url": url,
        "samples": samples,
        "rows": per_week,
        "missing": 0,
        "first_missing": None,
        "notes": [],
        "error": None,
    }
