"""Temporary files of a run (issue 36): all under one folder per run in TMPDIR (assets.scratch_dir), removed when
the run ends, when it is stopped with SIGTERM, and, after a kill -9, by the next run. The inputs are the sample
fleet's real a10-01 request log recompressed with xz (which DuckDB cannot read, so each is decompressed into the
scratch folder first)."""

from __future__ import annotations

import gzip
import lzma
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from conftest import FLEET


def _xz_logs(folder: Path, copies: int) -> Path:
    folder.mkdir()
    text = gzip.decompress((FLEET / "requests" / "a10-01.jsonl.gz").read_bytes())
    for index in range(copies):  # each copy its own content: a changed first line
        (folder / f"a10-{index:02d}.jsonl.xz").write_bytes(lzma.compress(text + b"\n" * index, preset=0))
    return folder


def _start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    command = [sys.executable, "-m", "oomlab.cli.main", *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _scratch_folders(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "tmp").glob("oomlab-run-*"))


def test_a_run_removes_its_scratch_folder_and_those_of_runs_killed_before(tmp_path):
    logs = _xz_logs(tmp_path / "logs", 1)
    stale = tmp_path / "tmp" / "oomlab-run-999999999-k9"  # no pid is this high: a run killed with -9
    (stale / "work-x").mkdir(parents=True)
    (stale / "work-x" / "a10-01.jsonl.xz.plain").write_bytes(b"{}" * 1000)
    done = _start(tmp_path, "ingest", str(logs), "--db", str(tmp_path / "f.duckdb"), "--quiet")
    assert done.wait(timeout=300) == 0, done.stderr.read() if done.stderr else ""
    assert _scratch_folders(tmp_path) == []


def test_sigterm_rolls_back_removes_the_scratch_folder_and_exits_143(tmp_path):
    logs = _xz_logs(tmp_path / "logs", 30)
    db = tmp_path / "f.duckdb"
    run = _start(tmp_path, "ingest", str(logs), "--db", str(db), "--quiet")
    deadline = time.monotonic() + 120
    while not _scratch_folders(tmp_path) and time.monotonic() < deadline:  # the first file is being read
        time.sleep(0.05)
    assert _scratch_folders(tmp_path), "the run never made its scratch folder"
    time.sleep(0.5)
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=120) == 143, run.communicate()
    assert _scratch_folders(tmp_path) == []
    with duckdb.connect(str(db), read_only=True) as con:  # whole sources only: each file's rows or none
        ingested, rows = con.execute("SELECT count(*), coalesce(sum(rows), 0) FROM sources").fetchone()
        assert ingested < 30
        assert con.execute("SELECT count(*) FROM requests").fetchone() == (rows,)
