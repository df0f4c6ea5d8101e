"""Every page and JSON oomlab writes is whole or absent (assets.write_atomic): a full disk or a kill in the
middle of a write leaves the previous file intact and no temporary file behind."""

from __future__ import annotations

import errno
import os

import pytest

from oomlab import assets
from oomlab.assets import write_atomic
from oomlab.errors import OomlabError


def test_a_full_disk_mid_write_keeps_the_previous_page(tmp_path, monkeypatch):
    page = tmp_path / "weekly.json"
    page.write_text('{"findings": [1, 2, 3]}\n', encoding="utf-8")

    def full(_fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(assets.os, "fsync", full)
    with pytest.raises(OomlabError, match=r"cannot write .*weekly.json: No space left on device"):
        write_atomic(page, '{"findings": []}\n')
    assert page.read_text(encoding="utf-8") == '{"findings": [1, 2, 3]}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["weekly.json"]


def test_a_kill_mid_write_keeps_the_previous_page(tmp_path, monkeypatch):
    page = tmp_path / "weekly.html"
    page.write_text("<p>last week</p>", encoding="utf-8")

    def killed(*_args):
        raise KeyboardInterrupt  # what SIGINT raises between the write and the rename

    monkeypatch.setattr(assets.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(page, "<p>this week</p>")
    assert page.read_text(encoding="utf-8") == "<p>last week</p>"
    assert [p.name for p in tmp_path.iterdir()] == ["weekly.html"]


def test_the_written_file_has_the_permissions_a_plain_write_gives(tmp_path):
    plain, atomic = tmp_path / "plain.txt", tmp_path / "atomic.txt"
    plain.write_text("x", encoding="utf-8")
    write_atomic(atomic, "x")
    assert atomic.stat().st_mode == plain.stat().st_mode
