"""Strings from the data are drawn as text in every chart (issue 14, item 10): plotly renders <a href>, <b>
and <span style> in labels, hover text and titles, so an instance named like a link would become a live link
in an offline report."""

from __future__ import annotations

import gzip
import json
import re

from oomlab import api
from oomlab.config import IngestOptions
from oomlab.report.html import chart_json, plotly_safe

from conftest import H200

HOSTILE = '<a href="https://evil.example/">gpu-0</a><b>bold</b><span style="color:red">x</span>'


def test_markup_is_escaped_and_our_line_breaks_kept() -> None:
    figure = {
        "data": [{"x": [HOSTILE], "name": HOSTILE, "hovertemplate": f"{HOSTILE}<br>%{{y:.2f}} GiB<extra></extra>"}],
        "layout": {"title": {"text": "OOMs per<br>1,000 req. & more"}},
    }
    safe = plotly_safe(figure)
    trace = safe["data"][0]
    assert trace["x"] == ['&lt;a href="https://evil.example/"&gt;gpu-0&lt;/a&gt;&lt;b&gt;bold&lt;/b&gt;'
                          '&lt;span style="color:red"&gt;x&lt;/span&gt;']  # fmt: skip
    assert trace["hovertemplate"].endswith("<br>%{y:.2f} GiB<extra></extra>") and "<a" not in trace["hovertemplate"]
    assert safe["layout"]["title"]["text"] == "OOMs per<br>1,000 req. &amp; more"
    assert "<" not in chart_json(figure)  # and nothing can close the <script> it sits in


def test_a_report_of_a_hostile_instance_name_draws_it_as_text(tmp_path) -> None:
    """The real serve_mixed request log with its instance renamed (derived from the H200 capture): the weekly
    page's charts name the instance; none of its markup is live."""
    rows = [
        json.loads(line)
        for line in gzip.decompress((H200 / "serve_mixed" / "requests.jsonl.gz").read_bytes()).splitlines()
    ]
    log = tmp_path / "requests.jsonl"
    log.write_text("".join(json.dumps(row | {"instance": HOSTILE}) + "\n" for row in rows))
    db = tmp_path / "hostile.duckdb"
    api.ingest(db, [str(log)], IngestOptions())
    page = api.weekly_report(db).html
    assert 'href="https://evil.example/"' not in page
    charts = [json.loads(block) for block in re.findall(r'<script type="application/json"[^>]*>(.*?)</script>', page)]
    drawn = json.dumps(charts)
    assert "&lt;a href" in drawn  # the name is there, as text
    assert "<a " not in drawn and "<b>" not in drawn and "<span" not in drawn
