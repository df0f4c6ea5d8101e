"""Headless Chromium for the report tests: where it is, whether CI requires it, and one call to run it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REQUIRED = os.environ.get("OOMLAB_REQUIRE_BROWSER") == "1"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--virtual-time-budget=20000",
]


def chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        pytest.fail("OOMLAB_REQUIRE_BROWSER=1 but chromium is not installed (apt-get install chromium)")
    command = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, page.resolve().as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
