"""The folder tree is the architecture: data flows parse -> ingest -> load -> SQL views -> analyses ->
findings -> report, the facade (api) calls them, the CLI calls the facade. Imports say so, by folder."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "pipeline"

# The modules every stage shares (errors, records, field names, units, the card catalogue, options, asset folders).
SHARED = {"errors", "records", "fields", "units", "cards", "config", "assets", "__init__"}
# For each layer (a folder of the package, or one of its loose modules), the layers it may import.
ALLOWED: dict[str, set[str]] = {
    "shared": {"shared"},
    "parse": {"shared", "parse"},
    "load": {"shared", "parse", "load"},
    "ingest": {"shared", "parse", "load", "ingest"},
    "analyses": {"shared", "parse", "load", "analyses"},
    "findings": {"shared", "load", "analyses", "findings"},
    "report": {"shared", "load", "analyses", "findings", "report"},
    "api": {"shared", "parse", "load", "ingest", "analyses", "findings", "report"},
    # The weekly review job: runs of api functions (ingest, reports, prune), their files and the index.
    "weekly": {"shared", "api", "weekly"},
    "cli": {"shared", "api", "weekly", "cli"},
    # Runs inside a user's service: it writes what ingest reads, and may use parsers, nothing later.
    "capture": {"shared", "parse", "capture"},
}
MAX_LOOSE_MODULES = 8


def _layer(module: str) -> str:
    head = module.split(".")[0]
    return "shared" if head in SHARED else head


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "__init__"


MODULES = sorted(PACKAGE.rglob("*.py"))
NAMES = {_module_name(p) for p in MODULES}


def _under_type_checking(tree: ast.AST) -> set[int]:
    """Ids of the import nodes inside `if TYPE_CHECKING:` blocks (types only; nothing runs)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found.update(id(n) for n in ast.walk(node))
    return found


@cache
def _imports(path: Path) -> frozenset[str]:
    """oomlab modules a file imports at run time, as dotted names relative to the package."""
    module = _module_name(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = _under_type_checking(tree)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level and id(node) not in typing_only:
            base = package[: len(package) - node.level + 1]
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            for alias in node.names:
                named = f"{target}.{alias.name}" if target else alias.name
                found.add(named if named in NAMES else target or "__init__")
    return frozenset(found)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_later_stage(path: Path) -> None:
    layer = _layer(_module_name(path))
    bad = {m for m in _imports(path) if _layer(m) not in ALLOWED[layer]}
    assert bad == set(), f"{path.relative_to(PACKAGE)} ({layer}) imports {sorted(bad)}"


def test_every_folder_is_a_known_layer() -> None:
    # sql/, reports/ and sample_logs/ sit beside the package and are mapped into the wheel; a copy inside
    # pipeline/ (a wheel installed over a checkout) would shadow them (assets.asset_dir looks there first).
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(ALLOWED) - {"shared", "api"}


def test_few_modules_lie_loose_in_the_package() -> None:
    loose = sorted(p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= MAX_LOOSE_MODULES, loose
    assert set(loose) <= SHARED | {"api"}, loose


def _cycles() -> list[list[str]]:
    """Strongly connected groups of more than one module in the run-time import graph (Tarjan)."""
    graph = {_module_name(p): sorted(_imports(p) & NAMES) for p in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for succ in graph[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph[node]:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle() -> None:
    assert _cycles() == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_interface_draws_or_parses_options(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    layer = _layer(_module_name(path))
    if layer != "cli":
        assert "import click" not in source and "from rich" not in source, path.name
    if layer != "report":  # only the report layer draws
        assert "import plotly" not in source and "from plotly" not in source, path.name
