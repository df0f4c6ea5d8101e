"""What a folder may hold besides files (issue 14, item 7): a dangling or looping symlink, a FIFO (reading it
waits for a writer forever: the ingest hung), a file whose name is not UTF-8; and a device named on the
command line (it said "no such file"). Each is one error line with a true reason; every real file is ingested."""

from __future__ import annotations

import os
import shutil

import pytest

from conftest import H200


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_special_entries_are_one_error_each_and_the_files_are_ingested(run_cli, sql, db, tmp_path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(H200 / "serve_leak" / "oom_messages.txt.gz", folder / "good.txt.gz")
    (folder / "dangling.log").symlink_to(tmp_path / "nowhere")
    (folder / "loop-a").symlink_to(folder / "loop-b")
    (folder / "loop-b").symlink_to(folder / "loop-a")
    os.mkfifo(folder / "pipe.log")
    bad_name = os.fsencode(folder) + b"/bad\xffname.log"
    shutil.copy(H200 / "serve_leak" / "oom_messages.txt.gz", bad_name)
    result = run_cli("ingest", folder, "/dev/null", "--db", db, "--quiet")  # returns: nothing waits on the FIFO
    assert result.exit_code == 1  # some inputs failed
    errors = sorted(line for line in result.stderr.splitlines() if line.startswith("error:"))
    assert errors == [
        "error: /dev/null: a character device, not a file: nothing to read from it",
        f"error: {folder}/bad\\udcffname.log: its name is not UTF-8 text, which the database keeps paths as: "
        "rename the file",
        f"error: {folder}/dangling.log: a symbolic link to nothing readable (No such file or directory)",
        f"error: {folder}/loop-a: a symbolic link to nothing readable (Too many levels of symbolic links)",
        f"error: {folder}/loop-b: a symbolic link to nothing readable (Too many levels of symbolic links)",
        f"error: {folder}/pipe.log: a FIFO, not a file: nothing to read from it",
    ]
    assert sql("SELECT count(*) FROM oom_events") == [(3,)]  # the good file, whole
