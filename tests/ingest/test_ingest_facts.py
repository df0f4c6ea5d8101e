"""The facts ingest gathers beside its work: the sha256 that makes it idempotent, and line counts."""

from __future__ import annotations

import hashlib
import random
from concurrent.futures import Future

from oomlab import api
from oomlab.config import IngestOptions
from oomlab.fields import FIELDS
from oomlab.ingest.ahead import Ahead, start_first
from oomlab.ingest.paths import expand_paths
from oomlab.ingest.run import ingest_files
from oomlab.load.tables import connect
from oomlab.parse.facts import FileFacts, file_facts, sha256_of

from conftest import H200

SERVE_MIXED = H200 / "serve_mixed" / "requests.jsonl.gz"


def test_sha256_of_the_stored_bytes_across_pieces(tmp_path):
    data = random.Random(3).randbytes((32 << 20) + 12345)  # over one of the 32 MiB pieces
    big = tmp_path / "big.bin"
    big.write_bytes(data)
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    assert sha256_of(big) == hashlib.sha256(data).hexdigest()
    assert sha256_of(empty) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"  # of no bytes
    assert sha256_of(SERVE_MIXED) == hashlib.sha256(SERVE_MIXED.read_bytes()).hexdigest()


def test_file_facts_count_lines_of_the_text(tmp_path):
    text = b"".join(b"%d\n" % i for i in range(2_000_000)) + b"last line without its newline"
    plain = tmp_path / "lines.txt"
    plain.write_bytes(text)
    facts = file_facts(plain)
    assert (facts.sha256, facts.lines) == (hashlib.sha256(text).hexdigest(), 2_000_001)
    gz = file_facts(SERVE_MIXED)  # a compressed file: the stored bytes are hashed, the text's lines counted
    assert (gz.sha256, gz.lines) == (sha256_of(SERVE_MIXED), 101)


def test_the_first_file_is_read_ahead_with_its_kind(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    assert start_first(expand_paths([str(folder)]), FIELDS) is None  # an empty folder: nothing to read
    assert start_first(expand_paths([str(tmp_path / "gone")]), FIELDS) is None  # not there
    assert start_first([], FIELDS) is None
    request_log = start_first(expand_paths([str(SERVE_MIXED)]), FIELDS)
    assert request_log is not None and request_log.for_path(str(SERVE_MIXED)) is request_log.facts
    assert request_log.for_path(str(folder)) is None
    assert request_log.facts.result() == FileFacts(sha256_of(SERVE_MIXED), 101)  # lines counted: a request log
    text_log = H200 / "serve_mixed" / "oom_messages.txt.gz"
    assert start_first(expand_paths([str(text_log)]), FIELDS).facts.result() == FileFacts(sha256_of(text_log), -1)
    (folder / "b.txt").write_text("x\n")
    (folder / ".a.part").write_text("half\n")  # dot files are skipped, so the first file is b.txt
    in_folder = start_first(expand_paths([str(folder)]), FIELDS)  # the walk is done first: its first file too
    assert in_folder is not None and in_folder.path == str(folder / "b.txt")


def test_ingest_takes_the_facts_read_ahead(db):
    fake = Future()
    fake.set_result(FileFacts("f" * 64, -1))
    log = H200 / "serve_mixed" / "oom_messages.txt.gz"
    files = expand_paths([str(log)])
    with connect(db) as con:
        report = ingest_files(con, files, IngestOptions(), ahead=Ahead(str(log), fake))
    assert [r.status for r in report.results] == ["ingested"]
    assert api.query(db, "SELECT sha256, rows FROM sources").rows == [("f" * 64, 4)]
    with connect(db) as con:  # the same facts: skipped
        again = ingest_files(con, files, IngestOptions(), ahead=Ahead(str(log), fake))
    assert [r.status for r in again.results] == ["skipped"]
