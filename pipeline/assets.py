"""oomlab's own files on disk: the folders it ships (SQL, report templates, sample logs), found in a wheel or a
checkout alike, the one way it writes a file it makes (`write_atomic`), and the one folder its temporary files
live in (`scratch_dir`)."""

from __future__ import annotations

import contextlib
import os
import shutil
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


_RUN_PREFIX = "oomlab-run-"
_scratch: Path | None = None


def scratch_dir() -> Path:
    """This process's one folder for temporary files (decompressed copies, archive members, scratch databases),
    under the system's temp folder (TMPDIR), made at first use. The command line removes it at exit and on
    SIGTERM (`remove_scratch`); the folders of earlier runs that were killed outright (their process is gone)
    are removed when the next run makes its own."""
    global _scratch
    if _scratch is None or not _scratch.is_dir():
        base = Path(tempfile.gettempdir())
        _remove_stale_scratch(base)
        _scratch = Path(tempfile.mkdtemp(prefix=f"{_RUN_PREFIX}{os.getpid()}-", dir=base))
    return _scratch


def remove_scratch() -> None:
    """Remove this process's scratch folder, if it made one."""
    global _scratch
    if _scratch is not None:
        shutil.rmtree(_scratch, ignore_errors=True)
        _scratch = None


def _remove_stale_scratch(base: Path) -> None:
    with contextlib.suppress(OSError):
        for folder in base.glob(f"{_RUN_PREFIX}*"):
            pid = folder.name[len(_RUN_PREFIX) :].split("-", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether a process with this pid runs (one of another user's counts: its folder is not ours to remove)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
