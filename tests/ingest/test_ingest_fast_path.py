"""The typed readers' path: rows numbered by their order in the file, with rejects where values do not convert."""

from __future__ import annotations

import json

import polars as pl


def test_typed_jsonl_rejects_keep_their_lines(tmp_path, db, run_cli, sql):
    rows = [{"ts": f"2026-11-30T01:00:{i:02d}Z", "batch_size": i, "requested_size": f"{i} GiB"} for i in range(1, 9)]
    rows[2]["ts"] = "yesterday"  # valid JSON whose value does not convert: the typed reader still reads it
    rows[5]["requested_size"] = "12 parsecs"
    path = tmp_path / "typed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = run_cli("ingest", path, "--db", db)
    assert result.exit_code == 0, result.output
    assert sql("SELECT line, batch_size, requested_size FROM requests ORDER BY line") == [
        (i, i, i << 30) for i in (1, 2, 4, 5, 7, 8)
    ]
    assert sql("SELECT line, reason FROM rejects ORDER BY line") == [
        (3, "ts: yesterday is not a timestamp"),
        (6, "requested_size: 12 parsecs is not a byte size"),
    ]
    assert sql("SELECT sql FROM duckdb_tables() WHERE temporary") == []  # the copy is gone


def test_typed_csv_and_parquet_lines(tmp_path, db, run_cli, sql):
    frame = pl.DataFrame(
        {
            "ts": [f"2026-11-30T02:00:{i:02d}Z" for i in range(5)],
            "batch_size": [1, 2, 3, 4, 5],
            "input_sequence_length": [512] * 5,
        }
    )
    frame.with_columns(
        pl.when(pl.col("batch_size") == 4).then(pl.lit("soon")).otherwise(pl.col("ts")).alias("ts")
    ).write_csv(tmp_path / "r.csv")
    frame.write_parquet(tmp_path / "r.parquet")
    assert run_cli("ingest", tmp_path / "r.csv", tmp_path / "r.parquet", "--db", db).exit_code == 0
    assert sql(
        "SELECT s.kind, r.line, r.batch_size FROM requests r JOIN sources s USING (source_id) ORDER BY s.kind, r.line"
    ) == [
        ("csv", 2, 1),
        ("csv", 3, 2),
        ("csv", 4, 3),
        ("csv", 6, 5),  # line 1 is the header
        ("parquet", 1, 1),
        ("parquet", 2, 2),
        ("parquet", 3, 3),
        ("parquet", 4, 4),
        ("parquet", 5, 5),
    ]
    assert sql("SELECT line, reason FROM rejects") == [(5, "ts: soon is not a timestamp")]
