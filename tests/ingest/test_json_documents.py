"""A JSON document of request objects is read whatever holds them: an array, an object keyed by id (a profiler's
`json.dump(records)`, pandas' `orient="index"`: corpus case requests/008 is a real one), or an object with the
array under a key. The documents here are derived from real case requests/010 (LLMPerf's per-request results,
https://github.com/ray-project/llmperf-leaderboard): its 150 objects rewritten in each shape must yield the rows
the array does."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from oomlab import api
from oomlab.config import IngestOptions
from oomlab.fields import parse_map_options, with_mapping
from oomlab.parse.detect import detect_kind

REQUESTS = Path(__file__).resolve().parent.parent / "cases" / "realworld" / "requests"
ARRAY = REQUESTS / "010_json_llmperf-perplexity-70b-429-json-error" / "artifact.json"
OPTIONS = IngestOptions(
    fields=with_mapping(
        parse_map_options(("status=error_code", "error=error_msg", "latency_ms=end_to_end_latency_s:s"))
    ),
    at=datetime(2024, 1, 10, 12),
)
COLUMNS = "line, input_sequence_length, output_sequence_length, latency_ms, status, error"


def _rows(path: Path, db: Path) -> list[tuple]:
    api.ingest(db, [str(path)], OPTIONS)
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(f"SELECT {COLUMNS} FROM requests ORDER BY line").fetchall()
    finally:
        con.close()


def _keyed(items: list[dict]) -> object:
    return {str(index * 3): item for index, item in enumerate(items)}  # ids as a profiler writes them


SHAPES = {
    "keyed by id": lambda items: _keyed(items),
    "under one key": lambda items: {"results": items},
    "under one key beside metadata": lambda items: {"model": "llama-2-70b", "count": len(items), "results": items},
}


@pytest.mark.parametrize("indent", [None, 2])
@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_yields_the_arrays_rows(tmp_path: Path, shape: str, indent: int | None) -> None:
    items = json.loads(ARRAY.read_text())
    expected = _rows(ARRAY, tmp_path / "array.duckdb")
    assert len(expected) == len(items) == 150
    path = tmp_path / "results.json"
    path.write_text(json.dumps(SHAPES[shape](items), indent=indent))
    assert detect_kind(path) == "json"
    assert _rows(path, tmp_path / "shaped.duckdb") == expected


def test_a_json_lines_record_with_a_nested_object_first_stays_json_lines(tmp_path: Path) -> None:
    """One nested object is a record's field, not a record: it takes two objects in a row to be keyed records."""
    items = json.loads(ARRAY.read_text())[:3]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps({"meta": {"run": 1}, **item}) + "\n" for item in items))
    assert detect_kind(path) == "jsonl"
