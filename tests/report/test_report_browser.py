"""The reports in a real browser: headless Chromium loads each page from disk, offline, with no console
message, no drawing error, and every chart drawn as SVG. Screenshots at 1366x768 (and the whole page) are
kept in $OOMLAB_TEST_ARTIFACTS (default tests/artifacts/) to look at.

Skipped where Chromium is not installed, unless OOMLAB_REQUIRE_BROWSER=1 (CI sets it: .ci/run installs it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from browser import CHROMIUM, REQUIRED, chromium

from conftest import TESTS

ARTIFACTS = Path(os.environ.get("OOMLAB_TEST_ARTIFACTS", TESTS / "artifacts"))

pytestmark = pytest.mark.skipif(CHROMIUM is None and not REQUIRED, reason="chromium is not installed")


def _pages(demo_result) -> list[Path]:
    """The demo's weekly page and its two incident pages (one with the snapshot view)."""
    pages = [p for p in demo_result.written if p.suffix == ".html"]
    assert len(pages) == 3
    return pages


def test_every_report_loads_and_draws_every_chart(demo_result, tmp_path):
    for page in _pages(demo_result):
        charts = re.findall(r'<div id="(chart-[^"]+)" class="chart">', page.read_text())
        assert charts, page.name
        run = chromium(page, tmp_path / "profile", "--enable-logging=stderr", "--v=0", "--dump-dom")
        assert run.returncode == 0, run.stderr[-2000:]
        console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
        assert console == [], f"{page.name}: {console}"
        dom = run.stdout
        assert re.search(r'id="render-errors"[^>]*hidden', dom), f"{page.name}: a drawing error was shown"
        for chart in charts:
            drawn = re.search(rf'<div id="{chart}" class="chart js-plotly-plot".*?<svg class="main-svg"', dom, re.S)
            assert drawn, f"{page.name}: {chart} has no SVG"


def test_screenshots_at_1366x768(demo_result, tmp_path):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for page in _pages(demo_result):
        for size, suffix in (("1366,768", ""), ("1366,4800", "-full")):
            shot = ARTIFACTS / f"{page.stem}{suffix}.png"
            shot.unlink(missing_ok=True)
            run = chromium(page, tmp_path / "profile", f"--window-size={size}", f"--screenshot={shot}")
            assert run.returncode == 0 and shot.stat().st_size > 20_000, (page.name, run.stderr[-2000:])
