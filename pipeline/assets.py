"""oomlab's own files on disk: the folders it ships (SQL, report templates, sample logs), found in a wheel or a
checkout alike, and the one way it writes a file it makes (`write_atomic`)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from .errors import OomlabError


def asset_dir(name: str) -> Path:
    """`oomlab/<name>` inside the installed package, or the repository's top-level `<name>/` in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / name, here.parent / name):
        if candidate.is_dir():
            return candidate
    raise OomlabError(f"the {name}/ folder was not found next to {here}", hint="reinstall oomlab")


def write_atomic(path: str | Path, text: str) -> Path:
    """Write `text` to `path` whole or not at all: into a temporary file in the same folder, flushed to disk, then
    renamed over `path`. A kill or a full disk leaves the previous file as it was (never a 0-byte or cut page a
    weekly comparison would read), and a symbolic link planted at `path` is replaced, its target never written."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise _unwritable(target, exc) from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o666 & ~_umask())  # what a plain write would have given it (mkstemp gives 0600)
        os.replace(temporary, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            raise _unwritable(target, exc) from None
        raise
    return target


def _unwritable(target: Path, exc: OSError) -> OomlabError:
    """One line for a file that cannot be written: which, why, and what to check; the previous file is intact."""
    return OomlabError(
        f"cannot write {target}: {exc.strerror or exc}",
        hint="check the folder's free space and permissions; any earlier file there is unchanged",
    )


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
