"""Data flows one way: parse -> normalize -> load -> SQL views -> analyses -> output. Imports say so."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "pipeline"

# For each layer, the layers it must never import (later stages, or the user interface).
FORBIDDEN: dict[str, set[str]] = {
    "parse": {"normalize", "load", "load_snapshot", "ingest", "analyses", "api", "cli", "output", "report"},
    "normalize": {"load", "ingest", "analyses", "api", "cli", "output", "report"},
    "load": {"ingest", "analyses", "api", "cli", "output", "report"},
    "ingest": {"analyses", "api", "cli", "output", "report"},
    "analyses": {"ingest", "api", "cli", "output"},
    # Runs inside a user's service: it writes what ingest reads, and may use parsers, nothing later.
    "capture": {"normalize", "load", "ingest", "analyses", "api", "cli", "output"},
}


def _layer(module: str) -> str:
    head = module.split(".")[0]
    for prefix in ("ingest", "load", "output"):
        if head.startswith(prefix):
            return prefix
    return head


def _imports(path: Path) -> set[str]:
    """oomlab modules a file imports, as dotted paths relative to the package."""
    package = path.relative_to(PACKAGE).with_suffix("").parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(package[: len(package) - node.level + 1])
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names = [target] if node.module else [".".join([*base, a.name]) for a in node.names]
            found.update(n for n in names if n)
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_later_stage(path):
    layer = _layer(".".join(path.relative_to(PACKAGE).with_suffix("").parts))
    bad = {m for m in _imports(path) if _layer(m) in FORBIDDEN.get(layer, set())}
    assert bad == set(), f"{path.name} ({layer}) imports {sorted(bad)}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_interface_draws_or_parses_options(path):
    source = path.read_text(encoding="utf-8")
    name = path.stem
    if not (name.startswith(("output", "cli"))):
        assert "import click" not in source and "from rich" not in source, path.name
    if path.parent.name != "report":  # only the report layer draws
        assert "import plotly" not in source and "from plotly" not in source, path.name
