"""The code stays as strict as pyproject.toml's ruff configuration says."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


@pytest.mark.skipif(
    shutil.which("ruff") is None and not (Path(sys.executable).parent / "ruff").exists(),
    reason="ruff is installed with the test extras",
)
@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff_finds_nothing(command: list[str]) -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    folders = ["pipeline", "tests", "bench", "sample_logs"]
    result = subprocess.run([ruff, *command, *folders], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_one_conftest_module() -> None:
    # Test folders have no __init__.py, so every conftest.py is the module `conftest`: a second one would
    # shadow tests/conftest.py for the test files that import its helpers (`from conftest import H200`).
    found = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("conftest.py"))
    assert found == ["tests/conftest.py"]
