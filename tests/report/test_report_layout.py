"""No two labels of a chart overlap, in a real browser (issue 37, item 4): headless Chromium draws each page at
1400 and 420 px wide; a probe added to a copy of the page reads the bounding rectangle of every visible text of
every chart (ticks, axis titles, legend entries, annotations, bar labels) and lists each pair that overlaps.

The heatmap's job names overprinted each other ("log-rometrigdatybackup"), its 24 hour ticks ran together at
420 px, and legends sat on the x axis title. Pages: the demo's (the week of the sample fleet and the H200
captures, and its two incidents), the H200 captures' own week, and a fleet of one host (a10-01's files of the
sample fleet).

Skipped where Chromium is not installed, unless OOMLAB_REQUIRE_BROWSER=1 (CI sets it).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from browser import CHROMIUM, REQUIRED, chromium

from conftest import FLEET

pytestmark = pytest.mark.skipif(CHROMIUM is None and not REQUIRED, reason="chromium is not installed")

WIDTHS = (1400, 420)
PROBE = Path(__file__).with_name("label_probe.js").read_text()


def _with_probe(page: Path, folder: Path) -> Path:
    copy = folder / f"probe-{page.name}"
    copy.write_text(page.read_text().replace("</body>", f"<script>{PROBE}</script></body>"))
    return copy


def _overlaps(page: Path, width: int, folder: Path) -> list[str]:
    run = chromium(_with_probe(page, folder), folder / "profile", f"--window-size={width},1000", "--dump-dom")
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r'<pre id="label-overlaps"[^>]*>(.*?)</pre>', run.stdout, re.S)
    assert found, f"{page.name}: the probe did not run"
    result = json.loads(html.unescape(found.group(1)))
    assert result["texts"] > 0, f"{page.name}: no chart text was drawn"
    return result["overlaps"]


@pytest.fixture(scope="module")
def pages(demo_result, h200_db, tmp_path_factory, run_cli_module) -> list[Path]:
    """The demo's three pages, the H200 captures' week, and a one-host fleet's week."""
    folder = tmp_path_factory.mktemp("layout")
    host_db = folder / "one-host.duckdb"
    one_host = [
        FLEET / "requests" / "a10-01.jsonl.gz",
        *sorted((FLEET / "nvidia-smi").glob("a10-01.*")),
        FLEET / "calendar_recurring.json",
    ]
    out = [p for p in demo_result.written if p.suffix == ".html"]
    assert run_cli_module("ingest", *one_host, "--db", host_db, "--quiet").exit_code == 0
    for db, name in ((h200_db, "h200-week.html"), (host_db, "one-host-week.html")):
        page = folder / name
        done = run_cli_module("report", "weekly", "--db", db, "-o", page)
        assert done.exit_code == 0, done.output
        out.append(page)
    return out


@pytest.mark.parametrize("width", WIDTHS)
def test_no_two_chart_labels_overlap(pages, width, tmp_path) -> None:
    found = {page.name: _overlaps(page, width, tmp_path) for page in pages}
    assert {name: overlaps for name, overlaps in found.items() if overlaps} == {}
