"""Hostile text logs (issue 14 item 7): a line of many megabytes, with or without a newline, is read with bounded
memory and time; the OOM message on it is still found, and the other files of the same call load whole.

The messages are the real H200 ones (tests/data/h200/serve_mixed/oom_messages.txt.gz: the verbatim text of
PyTorch's OutOfMemoryError on the H200), padded to a giant line as a logger that never flushes a newline would.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from oomlab.parse.text.textscan import LINE_TEXT_BYTES

from conftest import H200

MESSAGES = H200 / "serve_mixed" / "oom_messages.txt.gz"
GOOD = H200 / "fragmentation" / "oom_messages.txt.gz"


def _first_message() -> str:
    with gzip.open(MESSAGES, "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    return next(line for line in lines if line.startswith("CUDA out of memory."))


def _write(path: Path, *parts: bytes) -> Path:
    path.write_bytes(b"".join(parts))
    return path


def test_a_giant_line_without_a_newline_yields_its_message(tmp_path, db, run_cli, sql) -> None:
    message = _first_message()
    assert message.startswith("CUDA out of memory. Tried to allocate 398.00 MiB.")
    padding = b"a" * (8 << 20)
    path = _write(
        tmp_path / "giant.log",
        b"2026-11-30 01:50:03,302 ERROR worker: start\n",
        b"2026-11-30 01:50:03,302 ERROR worker: ",
        padding,
        b" torch.OutOfMemoryError: " + message.encode(),  # no newline: the file ends on this line
    )
    result = run_cli("ingest", path, GOOD, "--db", db)
    assert result.exit_code == 0 and "Traceback" not in result.output
    rows = sql(
        "SELECT line, requested_bytes, free_bytes, length(message) FROM oom_events e JOIN sources s USING (source_id) "
        "WHERE s.path LIKE '%giant.log'"
    )
    assert len(rows) == 1
    line, requested, free, length = rows[0]
    assert (line, requested, free) == (2, 398 << 20, round(281.56 * (1 << 20)))
    # the message kept is the text around the marker, not the 8 MiB line
    assert length < LINE_TEXT_BYTES + 4096
    assert sql("SELECT rows FROM sources WHERE path LIKE '%fragmentation/oom_messages.txt.gz'")[0][0] > 0


def test_giant_lines_keep_the_line_numbers_of_what_follows(tmp_path, db, run_cli, sql) -> None:
    message = _first_message().encode()
    path = _write(
        tmp_path / "giant.log",
        b"x" * (3 << 20) + b"\n",  # line 1: 3 MiB of nothing
        b"2026-11-30 01:50:03 ERROR " + message + b"\n",  # line 2
        b"y" * (2 << 20) + b" CUDA out of memory. Tried to allocate 2.00 GiB\n",  # line 3: the marker at its end
        b"2026-11-30 01:50:04 ERROR " + message + b"\n",  # line 4
    )
    assert run_cli("ingest", path, "--db", db).exit_code == 0
    assert sql("SELECT line, requested_bytes FROM oom_events ORDER BY line") == [
        (2, 398 << 20),
        (3, 2 << 30),
        (4, 398 << 20),
    ]
