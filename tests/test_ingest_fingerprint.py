"""The content fingerprint that makes ingest idempotent (xxh3-128), and databases that still hold sha256."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import duckdb
import xxhash

from oomlab.parse.facts import file_facts, fingerprint_of

from conftest import H200

SERVE_MIXED = H200 / "serve_mixed" / "requests.jsonl.gz"


def test_fingerprint_is_xxh3_128_of_the_stored_bytes_across_pieces(tmp_path):
    data = random.Random(3).randbytes((32 << 20) + 12345)  # over one of the 32 MiB pieces
    big = tmp_path / "big.bin"
    big.write_bytes(data)
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    assert fingerprint_of(big) == xxhash.xxh3_128(data).hexdigest()
    assert fingerprint_of(empty) == "99aa06d3014798d86001c324468d497f"  # xxh3-128 of no bytes
    assert fingerprint_of(SERVE_MIXED) == xxhash.xxh3_128(SERVE_MIXED.read_bytes()).hexdigest()


def test_file_facts_count_lines_of_the_text(tmp_path):
    text = b"".join(b"%d\n" % i for i in range(2_000_000)) + b"last line without its newline"
    plain = tmp_path / "lines.txt"
    plain.write_bytes(text)
    facts = file_facts(plain)
    assert (facts.fingerprint, facts.lines) == (xxhash.xxh3_128(text).hexdigest(), 2_000_001)
    gz = file_facts(SERVE_MIXED)  # a compressed file: the stored bytes are hashed, the text's lines counted
    assert (gz.fingerprint, gz.lines) == (fingerprint_of(SERVE_MIXED), 101)


def _make_it_look_old(db: Path) -> None:
    """Turn a database into what the sha256 builds wrote: the column `sha256` holding sha256 digests."""
    con = duckdb.connect(str(db))
    try:
        con.execute("ALTER TABLE sources RENAME COLUMN fingerprint TO sha256")
        con.execute("UPDATE sources SET sha256 = ?", [hashlib.sha256(SERVE_MIXED.read_bytes()).hexdigest()])
        con.execute("CREATE OR REPLACE VIEW rpt_sources AS SELECT source_id, path, kind, rows, rejects, "
                    "ingested_at, size_bytes, sha256 FROM sources ORDER BY source_id")
        con.execute("COMMENT ON TABLE sources IS 'oomlab schema 0123456789abcdef'")
    finally:
        con.close()


def test_a_database_written_with_sha256_is_upgraded_and_reads_each_file_once_more(db, run_cli, sql):
    assert run_cli("ingest", SERVE_MIXED, "--db", db).exit_code == 0
    _make_it_look_old(db)
    assert run_cli("sources", "--db", db, "--format", "csv").exit_code == 0  # read-only: the old view still works

    again = run_cli("ingest", SERVE_MIXED, "--db", db)
    assert again.exit_code == 0 and "1 ingested" in again.stderr + again.stdout
    assert sql("SELECT column_name FROM duckdb_columns() WHERE table_name = 'sources' AND column_name "
               "IN ('sha256', 'fingerprint')") == [("fingerprint",)]
    assert sql("SELECT count(*), count(DISTINCT source_id) FROM requests") == [(101, 1)]  # replaced, not doubled
    assert sql("SELECT fingerprint FROM rpt_sources") == [(fingerprint_of(SERVE_MIXED),)]

    third = run_cli("ingest", SERVE_MIXED, "--db", db)
    assert third.exit_code == 0 and "already ingested" in third.stderr
