"""The facts ingest gathers beside its work: the content hash that makes it idempotent, and line counts."""

from __future__ import annotations

import hashlib
import random
from concurrent.futures import Future

import xxhash

from oomlab import api
from oomlab.config import IngestOptions
from oomlab.fields import FIELDS
from oomlab.ingest.ahead import Ahead, Started, start_first
from oomlab.ingest.paths import expand_paths
from oomlab.ingest.run import ingest_files
from oomlab.load.tables import connect
from oomlab.parse.facts import FileFacts, content_hash_of, file_facts, hash_of

from conftest import H200

SERVE_MIXED = H200 / "serve_mixed" / "requests.jsonl.gz"


def test_the_content_hash_of_the_stored_bytes_across_pieces(tmp_path):
    data = random.Random(3).randbytes((32 << 20) + 12345)  # over one of the 32 MiB pieces
    big = tmp_path / "big.bin"
    big.write_bytes(data)
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    assert content_hash_of(big) == xxhash.xxh3_128(data).hexdigest()
    assert content_hash_of(empty) == "99aa06d3014798d86001c324468d497f"  # xxh3-128 of no bytes
    assert content_hash_of(SERVE_MIXED) == xxhash.xxh3_128(SERVE_MIXED.read_bytes()).hexdigest()
    # the digest databases written before hold, still computed for them
    assert hash_of(SERVE_MIXED, "sha256") == hashlib.sha256(SERVE_MIXED.read_bytes()).hexdigest()


def test_file_facts_count_lines_of_the_text(tmp_path):
    text = b"".join(b"%d\n" % i for i in range(2_000_000)) + b"last line without its newline"
    plain = tmp_path / "lines.txt"
    plain.write_bytes(text)
    facts = file_facts(plain)
    assert (facts.content_hash, facts.lines) == (xxhash.xxh3_128(text).hexdigest(), 2_000_001)
    gz = file_facts(SERVE_MIXED)  # a compressed file: the stored bytes are hashed, the text's lines counted
    assert (gz.content_hash, gz.lines) == (content_hash_of(SERVE_MIXED), 101)


def test_the_first_file_is_read_ahead_with_its_kind(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    assert start_first(expand_paths([str(folder)]), FIELDS).first is None  # an empty folder: nothing to read
    assert start_first(expand_paths([str(tmp_path / "gone")]), FIELDS).first is None  # not there
    assert start_first([], FIELDS).first is None
    request_log = start_first(expand_paths([str(SERVE_MIXED)]), FIELDS)
    first = request_log.for_path(str(SERVE_MIXED))
    assert first is not None and first is request_log.first
    assert request_log.for_path(str(folder)) is None
    assert first.facts.result() == FileFacts(content_hash_of(SERVE_MIXED), 101)  # lines counted: a request log
    assert (first.kind.result(), first.search) == ("jsonl", None)  # no search: not a text log
    text_log = H200 / "serve_mixed" / "oom_messages.txt.gz"
    started = start_first(expand_paths([str(text_log)]), FIELDS).first
    assert started.facts.result() == FileFacts(content_hash_of(text_log), -1)
    assert started.kind.result() == "text"
    (folder / "b.txt").write_text("x\n")
    (folder / ".a.part").write_text("half\n")  # dot files are skipped, so the first file is b.txt
    in_folder = start_first(expand_paths([str(folder)]), FIELDS)  # the walk is done first: its first file too
    assert in_folder.first is not None and in_folder.first.path == str(folder / "b.txt")
    in_folder.close()


def test_ingest_takes_the_facts_read_ahead(db):
    fake, kind = Future(), Future()
    fake.set_result(FileFacts("f" * 64, -1))
    kind.set_result("text")
    log = H200 / "serve_mixed" / "oom_messages.txt.gz"
    files = expand_paths([str(log)])
    ahead = Ahead(Started(str(log), kind, fake, None))
    with connect(db) as con:
        report = ingest_files(con, files, IngestOptions(), ahead=ahead)
    assert [r.status for r in report.results] == ["ingested"]
    assert api.query(db, "SELECT content_hash, rows FROM sources").rows == [("f" * 64, 4)]
    with connect(db) as con:  # the same facts: skipped
        again = ingest_files(con, files, IngestOptions(), ahead=ahead)
    assert [r.status for r in again.results] == ["skipped"]


def test_a_database_that_stored_sha256_is_migrated_and_its_files_still_skipped(tmp_path, run_cli):
    db = tmp_path / "old.duckdb"
    assert run_cli("ingest", SERVE_MIXED, "--db", db, "--quiet").exit_code == 0
    # what an earlier version wrote: the column `sha256` holding the sha256 digest, and its own fingerprint
    import duckdb

    con = duckdb.connect(str(db))
    con.execute("ALTER TABLE sources DROP COLUMN hash_algorithm")
    con.execute("ALTER TABLE sources RENAME COLUMN content_hash TO sha256")
    con.execute("UPDATE sources SET sha256 = $digest", {"digest": hash_of(SERVE_MIXED, "sha256")})
    con.execute("COMMENT ON TABLE sources IS 'oomlab schema 0000000000000000'")
    con.close()
    again = run_cli("ingest", SERVE_MIXED, "--db", db, "--quiet")
    assert again.exit_code == 0 and "already ingested" in again.output
    # found unchanged, the source now carries the new digest, so a copy elsewhere is recognised too
    assert api.query(db, "SELECT content_hash, hash_algorithm, rows FROM sources").rows == [
        (content_hash_of(SERVE_MIXED), "xxh3-128", 101)
    ]
    copy = tmp_path / "copy.jsonl.gz"
    copy.write_bytes(SERVE_MIXED.read_bytes())
    assert f"already ingested as {SERVE_MIXED.resolve()}" in run_cli("ingest", copy, "--db", db).output
