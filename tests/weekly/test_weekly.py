"""`oomlab weekly` over the bundled sample fleet (data in ISO weeks 2026-W47 to W49) and `oomlab prune`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner, Result

from oomlab.cli.main import cli

FLEET = Path(__file__).parent.parent.parent / "sample_logs" / "fleet"
FIRST, SECOND, EMPTY = "2026-W48", "2026-W49", "2026-W40"
CONFIDENCE = 0.7
TIME_TABLES = {
    "requests": "ts",
    "oom_events": "ts",
    "gpu_samples": "ts",
    "gpu_process_samples": "ts",
    "engine_samples": "ts",
    "engine_memory": "ts",
    "allocator_stats": "ts",
    "allocator_settings": "ts",
    "job_occurrences": "end_ts",
}


def run(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def write_config(folder: Path, db: Path, out: str, **extra: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f'database = "{db}"', f'output = "{out}"', *(f"{k} = {json.dumps(v)}" for k, v in extra.items())]
    lines += ["[[inputs]]", f'paths = ["{FLEET}"]', 'tags = {site = "sample"}']
    path = folder / "oomlab.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Two consecutive weeks run through the CLI; the first run ingests the fleet."""
    root = tmp_path_factory.mktemp("weekly")
    config = write_config(root, root / "fleet.duckdb", "out", alert_confidence=CONFIDENCE, keep_weeks=10)
    first = run("weekly", "--config", config, "--week", FIRST, "--json")
    second = run("weekly", "--config", config, "--week", SECOND, "--json")
    return {"root": root, "config": config, "db": root / "fleet.duckdb", "out": root / "out", "runs": (first, second)}


def _doc(out: Path, week: str) -> dict:
    return json.loads((out / week / "weekly.json").read_text(encoding="utf-8"))


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_each_week_writes_its_pages_and_the_index_lists_both(job: dict) -> None:
    first, second = job["runs"]
    assert first.exit_code in (0, 3) and second.exit_code in (0, 3), first.output + second.output
    index = (job["out"] / "index.html").read_text(encoding="utf-8")
    for week in (FIRST, SECOND):
        folder = job["out"] / week
        assert (folder / "weekly.html").is_file()
        assert 1 <= len(list(folder.glob("incident-*.html"))) <= 3
        assert f'href="{week}/weekly.html"' in index
        for h in _doc(job["out"], week)["headline"]:
            value = h["current"]
            assert (f"{value:,.2f}" if isinstance(value, float) else f"{value:,}") in index, h
    assert index.index(SECOND) < index.index(FIRST)  # newest first


def test_exit_3_exactly_when_the_second_week_has_a_new_confident_finding(job: dict) -> None:
    before = {(f["kind"], f["subject"]) for f in _doc(job["out"], FIRST)["findings"]}
    new = [
        f
        for f in _doc(job["out"], SECOND)["findings"]
        if f["confidence"] >= CONFIDENCE and (f["kind"], f["subject"]) not in before
    ]
    summary = json.loads(job["runs"][1].output)
    assert job["runs"][1].exit_code == (3 if new else 0)
    assert [(f["kind"], f["subject"]) for f in summary["new_findings"]] == [(f["kind"], f["subject"]) for f in new]


def test_a_threshold_above_every_finding_exits_0(job: dict) -> None:
    top = max(f["confidence"] for week in (FIRST, SECOND) for f in _doc(job["out"], week)["findings"])
    assert top < 1.0
    config = write_config(job["root"] / "strict", job["db"], "out", alert_confidence=1.0)
    result = run("weekly", "--config", config, "--week", SECOND)
    assert result.exit_code == 0, result.output
    assert "0 new at confidence >= 1.0" in result.output


def test_a_rerun_of_the_same_week_is_byte_identical(job: dict) -> None:
    before = _files(job["out"])
    result = run("weekly", "--config", job["config"], "--week", SECOND, "--json")
    assert result.exit_code == job["runs"][1].exit_code
    assert json.loads(result.output)["ingest"]["ingested"] == 0  # unchanged files are skipped
    after = _files(job["out"])
    assert after.keys() == before.keys()
    assert [name for name in before if before[name] != after[name]] == []


def test_a_week_without_data_says_so_and_exits_0(job: dict) -> None:
    config = write_config(job["root"] / "empty", job["db"], "out")
    result = run("weekly", "--config", config, "--week", EMPTY)
    assert result.exit_code == 0, result.output
    assert "no data in this week" in result.output
    page = (job["root"] / "empty" / "out" / EMPTY / "weekly.html").read_text(encoding="utf-8")
    assert "No data in this window" in page
    assert not list((job["root"] / "empty" / "out" / EMPTY).glob("incident-*"))
    assert EMPTY in (job["root"] / "empty" / "out" / "index.html").read_text(encoding="utf-8")


def test_retention_keeps_the_most_recent_weeks(job: dict) -> None:
    config = write_config(job["root"] / "keep", job["db"], "out", keep_weeks=1)
    for week in (FIRST, SECOND):
        assert run("weekly", "--config", config, "--week", week).exit_code in (0, 3)
    out = job["root"] / "keep" / "out"
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [SECOND]
    assert FIRST not in (out / "index.html").read_text(encoding="utf-8")
    # a rerun of the older week keeps the pages it has just written (only the others beyond keep_weeks go)
    assert run("weekly", "--config", config, "--week", FIRST).exit_code in (0, 3)
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [FIRST, SECOND]
    assert (out / FIRST / "weekly.html").is_file()


def _counts(db: Path, cut: str, op: str) -> dict[str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            t: con.execute(f"SELECT count(*) FROM {t} WHERE {c} {op} CAST(? AS TIMESTAMP)", [cut]).fetchone()[0]
            for t, c in TIME_TABLES.items()
        }
    finally:
        con.close()


def test_prune_removes_exactly_the_rows_before_the_date(job: dict) -> None:
    db = job["root"] / "prune.duckdb"
    shutil.copy(job["db"], db)
    cut = "2026-11-26 00:00:00"
    old, kept = _counts(db, cut, "<"), _counts(db, cut, ">=")
    assert old["requests"] > 0 and old["oom_events"] > 0
    result = run("prune", "--db", db, "--before", "2026-11-26", "--json")
    assert result.exit_code == 0, result.output
    deleted = json.loads(result.output)
    assert {t: deleted[t] for t in TIME_TABLES} == old
    assert _counts(db, cut, "<") == dict.fromkeys(TIME_TABLES, 0)
    assert _counts(db, cut, ">=") == kept
    text = run("prune", "--db", db, "--before", "2026-11-26")
    assert text.exit_code == 0 and "0 rows deleted" in text.output


def test_a_bad_config_key_is_a_one_line_error(job: dict) -> None:
    config = job["root"] / "bad.toml"
    config.write_text(f'databse = "{job["db"]}"\noutput = "out"\n', encoding="utf-8")
    result = run("weekly", "--config", config)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and str(config) in lines[0] and "databse" in lines[0], result.output


def test_keep_weeks_1_compares_with_last_week_before_deleting_it(job: dict) -> None:
    """Retention runs after the comparison: with keep_weeks = 1 the second week's new findings are the same as
    with ten weeks kept, not every finding."""
    config = write_config(job["root"] / "keep1", job["db"], "out", alert_confidence=CONFIDENCE, keep_weeks=1)
    first = run("weekly", "--config", config, "--week", FIRST, "--json")
    second = run("weekly", "--config", config, "--week", SECOND, "--json")
    assert first.exit_code in (0, 3)
    assert json.loads(second.output)["new_findings"] == json.loads(job["runs"][1].output)["new_findings"]
    assert second.exit_code == job["runs"][1].exit_code


def test_planted_links_are_never_written_through(job: dict, tmp_path: Path) -> None:
    """A link planted at a page is replaced by the page (its target untouched); a week folder that is a link is
    refused in one line, and retention passes it by."""
    root = job["root"] / "links"
    config = write_config(root, job["db"], "out", keep_weeks=1)
    target = tmp_path / "precious.txt"
    target.write_text("keep me", encoding="utf-8")
    page = root / "out" / FIRST / "weekly.html"
    page.parent.mkdir(parents=True)
    page.symlink_to(target)
    assert run("weekly", "--config", config, "--week", FIRST).exit_code in (0, 3)
    assert target.read_text(encoding="utf-8") == "keep me" and not page.is_symlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "out" / SECOND).symlink_to(elsewhere, target_is_directory=True)
    refused = run("weekly", "--config", config, "--week", SECOND)
    assert refused.exit_code == 1 and "is a symbolic link" in refused.output
    assert list(elsewhere.iterdir()) == []
    assert run("weekly", "--config", config, "--week", FIRST).exit_code in (0, 3)  # retention passes the link by
    assert (root / "out" / SECOND).is_symlink()
