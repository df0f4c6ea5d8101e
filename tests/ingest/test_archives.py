"""Archives as inputs (issue 36): a `.zip`, `.tar`, `.tar.gz` or `.tar.zst` of a fleet's files gives exactly what
the same files give extracted into a folder, each member a source of its own known by `archive/member`; what an
archive holds that is not a log (links, hidden files, archives inside it) is a skipped source with the reason, and
a damaged archive keeps the members before the damage. Members are copies of the sample fleet's real files."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import duckdb
import pytest
import zstandard

from oomlab import api
from oomlab.config import IngestOptions
from oomlab.records import FAILED, INGESTED, SKIPPED

from conftest import FLEET

MEMBERS = {
    "requests/a10-01.jsonl.gz": FLEET / "requests" / "a10-01.jsonl.gz",
    "nvidia-smi/a10-01.gpu.csv.gz": FLEET / "nvidia-smi" / "a10-01.gpu.csv.gz",
    "textlogs/a10-06.log.gz": FLEET / "textlogs" / "a10-06.log.gz",
    "calendar_recurring.json": FLEET / "calendar_recurring.json",
}
_TABLES = ("requests", "oom_events", "gpu_samples", "calendar_rules")


def _counts(db: Path) -> dict[str, object]:
    with duckdb.connect(str(db), read_only=True) as con:
        counts: dict[str, object] = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in _TABLES}
        counts["instances"] = con.execute("SELECT list(DISTINCT instance ORDER BY instance) FROM requests").fetchone()
    return counts


def _write_archive(path: Path, kind: str, extra: dict[str, bytes] | None = None) -> Path:
    files = {name: source.read_bytes() for name, source in MEMBERS.items()} | (extra or {})
    if kind == "zip":
        with zipfile.ZipFile(path, "w") as archive:
            for name, data in files.items():
                archive.writestr(name, data)
        return path
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("requests/latest.jsonl.gz")
        link.type, link.linkname = tarfile.SYMTYPE, "a10-01.jsonl.gz"
        archive.addfile(link)
    data = buffer.getvalue()
    if kind == "tar.gz":
        import gzip

        data = gzip.compress(data)
    elif kind == "tar.zst":
        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    return path


@pytest.fixture(scope="module")
def extracted(tmp_path_factory) -> dict[str, object]:
    folder = tmp_path_factory.mktemp("extracted")
    for name, source in MEMBERS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(source.read_bytes())
    db = folder.parent / "extracted.duckdb"
    api.ingest(db, [str(folder)], IngestOptions())
    return _counts(db)


@pytest.mark.parametrize("kind", ["zip", "tar", "tar.gz", "tar.zst"])
def test_an_archive_gives_what_its_files_give_extracted(tmp_path, kind, extracted):
    archive = _write_archive(tmp_path / f"fleet.{kind}", kind)
    db = tmp_path / "a.duckdb"
    results = api.ingest(db, [str(archive)], IngestOptions()).results
    ingested = {r.path: r.status for r in results if r.status == INGESTED}
    assert sorted(ingested) == sorted(f"{archive}/{name}" for name in MEMBERS)
    assert _counts(db) == extracted
    assert extracted["requests"] > 10_000 and extracted["instances"] == (["a10-01"],)
    with duckdb.connect(str(db), read_only=True) as con:
        paths = sorted(p for (p,) in con.execute("SELECT path FROM sources").fetchall())
    assert paths == sorted(f"{archive.resolve()}/{name}" for name in MEMBERS)
    again = api.ingest(db, [str(archive)], IngestOptions()).results  # a second run finds every member ingested
    assert {r.status for r in again if r.path.endswith(tuple(MEMBERS))} == {SKIPPED}


def test_what_is_not_a_log_in_an_archive_is_skipped_with_its_reason(tmp_path):
    inner = _write_archive(tmp_path / "inner.zip", "zip")
    archive = _write_archive(
        tmp_path / "fleet.tar", "tar", {"__MACOSX/._a10-01.jsonl.gz": b"\0\5\26\7", "old/fleet.zip": inner.read_bytes()}
    )
    results = {
        r.path.removeprefix(f"{archive}/"): r
        for r in api.ingest(tmp_path / "a.duckdb", [str(archive)], IngestOptions()).results
    }
    assert results["requests/latest.jsonl.gz"].status == SKIPPED
    assert results["requests/latest.jsonl.gz"].message == "a link or device inside the archive: not followed"
    assert results["__MACOSX/._a10-01.jsonl.gz"].message.startswith("a hidden file")
    assert results["old/fleet.zip"].message == "an archive inside the archive: extract it and ingest the inner one"
    assert sum(r.status == INGESTED for r in results.values()) == len(MEMBERS)


def test_a_cut_archive_keeps_the_members_before_the_cut(tmp_path):
    whole = _write_archive(tmp_path / "whole.tar", "tar").read_bytes()
    requests_end = 512 + MEMBERS["requests/a10-01.jsonl.gz"].stat().st_size
    cut = tmp_path / "cut.tar"
    cut.write_bytes(whole[: requests_end + 4096])  # inside the second member
    results = api.ingest(tmp_path / "a.duckdb", [str(cut)], IngestOptions()).results
    assert [(r.path, r.status) for r in results] == [
        (f"{cut}/requests/a10-01.jsonl.gz", INGESTED),
        (str(cut), FAILED),
    ]
    assert results[1].message.startswith(f"{cut}: the archive is damaged after its last whole member")
