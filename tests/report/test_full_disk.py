"""A real full disk (issue 36): a tmpfs of a few hundred KiB, filled, as the target of a report page and as the
home of a database. Each is one line naming the path and "No space left on device", the previous page intact,
no temporary file left. Mounting needs root in a mount namespace that allows it: where it is refused the test
is skipped (test_atomic_write.py injects the same error on any machine)."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

import pytest

from conftest import H200


@pytest.fixture
def full_disk(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"no tmpfs can be mounted here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def _fill(folder: Path) -> None:
    """Everything left on the tmpfs taken by one file."""
    with open(folder / "filler", "wb", buffering=0) as out:
        try:
            while out.write(b"\0" * 4096):
                pass
        except OSError:
            pass


@pytest.fixture(scope="module")
def h200_db(tmp_path_factory):
    folder = tmp_path_factory.mktemp("h200")
    log = folder / "requests.jsonl"
    log.write_bytes(gzip.decompress((H200 / "serve_mixed" / "requests.jsonl.gz").read_bytes()))
    db = folder / "h200.duckdb"
    from oomlab import api
    from oomlab.config import IngestOptions

    api.ingest(db, [str(log)], IngestOptions())
    return db


def test_a_page_written_to_a_full_disk_keeps_last_weeks(full_disk, h200_db, run_cli):
    page = full_disk / "weekly.html"
    page.write_text("<p>last week</p>", encoding="utf-8")
    _fill(full_disk)
    result = run_cli("report", "weekly", "--db", str(h200_db), "-o", str(page))
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"Error: cannot write {page}: No space left on device")
    assert page.read_text(encoding="utf-8") == "<p>last week</p>"
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler", "weekly.html"]


def test_an_ingest_into_a_full_disk_is_one_line(full_disk, run_cli):
    log = full_disk.parent / "requests.jsonl"
    log.write_bytes(gzip.decompress((H200 / "serve_mixed" / "requests.jsonl.gz").read_bytes()))
    _fill(full_disk)
    result = run_cli("ingest", str(log), "--db", str(full_disk / "fleet.duckdb"), "--quiet")
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert str(full_disk / "fleet.duckdb") in line
    assert "No space left on device" in line or "could not" in line.lower()
