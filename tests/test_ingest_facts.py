"""The facts ingest gathers beside its work: the sha256 that makes it idempotent, and line counts."""

from __future__ import annotations

import hashlib
import random

from oomlab.parse.facts import file_facts, sha256_of

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
