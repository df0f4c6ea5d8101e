"""Folders shipped with oomlab (SQL, report templates, sample logs), found in a wheel or a checkout alike."""

from __future__ import annotations

from pathlib import Path

from .errors import OomlabError


def asset_dir(name: str) -> Path:
    """`oomlab/<name>` inside the installed package, or the repository's top-level `<name>/` in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / name, here.parent / name):
        if candidate.is_dir():
            return candidate
    raise OomlabError(f"the {name}/ folder was not found next to {here}", hint="reinstall oomlab")
