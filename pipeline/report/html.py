"""Self-contained HTML: one page, plotly.js embedded once, every figure as escaped JSON, no network.

Deterministic: the same document gives the same bytes (sorted JSON keys, no clock, fixed element ids).
Every string from the data passes through Jinja's autoescape or JSON escaping of `<`, `>` and `&`.
"""

from __future__ import annotations

import html
import json
from functools import cache
from typing import Any

import jinja2

from ..assets import asset_dir
from . import formatting

PLOTLY_JS = "vendor/plotly-cartesian-4.1.1.min.js"


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(asset_dir("reports") / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters.update(formatting.FILTERS)
    env.filters["chart_json"] = chart_json
    return env


@cache
def plotly_js() -> str:
    """The plotly.js bundle (cartesian traces: scatter, bar, heatmap), as shipped in reports/vendor."""
    return (asset_dir("reports") / PLOTLY_JS).read_text(encoding="utf-8")


# The only markup oomlab's own chart strings use; plotly renders <a>, <b>, <span style> and others in any
# string it draws (labels, hover text, titles), so everything else is escaped, data and our text alike.
_OWN_MARKUP = ("<br>", "<extra></extra>")


def plotly_safe(value: Any) -> Any:
    """`value` with every string's markup escaped (plotly shows `&lt;` as `<`), oomlab's own <br> kept: an
    instance named `<a href=...>` is drawn as that text, not as a link."""
    if isinstance(value, str):
        text = html.escape(value, quote=False)
        for markup in _OWN_MARKUP:
            text = text.replace(html.escape(markup, quote=False), markup)
        return text
    if isinstance(value, dict):
        return {k: plotly_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plotly_safe(v) for v in value]
    return value


def chart_json(fig: dict[str, Any]) -> str:
    """A figure as JSON that is safe inside <script type="application/json">, its strings drawn as text."""
    text = json.dumps(plotly_safe(fig), sort_keys=True, separators=(",", ":"), default=str, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render(template: str, doc: dict[str, Any], charts: dict[str, dict[str, Any]]) -> str:
    """The page for a report document and its figures."""
    page = _environment().get_template(template)
    css = (asset_dir("reports") / "templates" / "report.css").read_text(encoding="utf-8")
    return page.render(doc=doc, charts=charts, css=css, plotly_js=plotly_js())
