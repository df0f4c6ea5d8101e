"""A file that yields no fact and no reject is never silently an empty success: it ends as `nothing found`,
with its kind, the lines read and what was looked for, in the summary, on stderr and in `oomlab sources`;
the exit code stays 0."""

from __future__ import annotations

from conftest import H200


def test_a_text_file_without_anything_oomlab_reads(run_cli, sql, db) -> None:
    versions = H200 / "env" / "versions_run1.txt.gz"  # the capture's `python / torch / transformers` versions
    messages = H200 / "serve_leak" / "oom_messages.txt.gz"
    result = run_cli("ingest", versions, messages, "--db", db, "--quiet")
    assert result.exit_code == 0, result.output
    assert "nothing found" in result.stdout and "1 with nothing found" in result.stdout
    note = (
        "nothing found: a text file of 3 lines, no OOM message, request line, engine start-up memory report, "
        "memory_summary() table or pasted GPU telemetry"
    )
    assert f"{versions}: {note}" in result.stderr
    rows = sql("SELECT path, rows, rejects, note FROM sources ORDER BY source_id")
    assert [(r[1], r[2], r[3]) for r in rows] == [(0, 0, note), (3, 0, None)]
    listed = run_cli("sources", "--db", db, "--format", "json")
    assert note in listed.stdout
