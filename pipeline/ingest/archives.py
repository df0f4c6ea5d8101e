"""Archives given as inputs (`.zip`; `.tar`, plain or compressed with gzip, xz or zstd): each regular member is a
source of its own, read from a copy in the run's scratch folder (assets.scratch_dir) that is deleted once it is
ingested, so an archive costs the disk of its largest member, never all of them at once.

Bounds: a member is copied only while the disk keeps SPARE_BYTES free after it, and never past the size its
archive declares (a zip bomb's lie stops there). A member that is a link, a device, a hidden file or an archive
itself is a skipped source with the reason; a damaged archive fails with one line, after the members read whole.
"""

from __future__ import annotations

import shutil
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..assets import scratch_dir
from ..parse.compression import INPUT_ERRORS, open_binary

SPARE_BYTES = 1 << 30  # the free disk a member's copy must leave: the database and DuckDB's spills need room too
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a local file header; an empty archive's end record
_TAR_MAGIC_AT = 257  # "ustar" in a tar header (POSIX and GNU alike)


@dataclass(frozen=True)
class Member:
    """One member of an archive: the name a user knows it by (`archive/member`), and its copy on disk or why
    there is none (`skip`: passed over on purpose; `error`: could not be read)."""

    name: str
    path: str | None = None
    size: int = 0
    skip: str | None = None
    error: str | None = None


def archive_kind(path: str) -> str | None:
    """ "zip" or "tar" (under any compression oomlab reads) by the file's first bytes; None for anything else."""
    try:
        with open(path, "rb") as raw:
            if raw.read(4) in _ZIP_MAGIC:
                return "zip"
        with open_binary(path) as stream:
            head = stream.read(_TAR_MAGIC_AT + 5)
    except (OSError, *INPUT_ERRORS):
        return None  # the reader of its kind says what is wrong with it
    return "tar" if head[_TAR_MAGIC_AT:].startswith(b"ustar") else None


def members(path: str, kind: str) -> Iterator[Member]:
    """The members of the archive at `path`, each copied out just before it is handed over; the caller ingests it
    and calls `discard` before asking for the next. A damaged archive ends with a Member whose error says so."""
    folder = Path(scratch_dir()) / f"archive-{Path(path).name}"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        yield from (_zip_members if kind == "zip" else _tar_members)(path, folder)
    except (OSError, tarfile.TarError, zipfile.BadZipFile, *INPUT_ERRORS) as exc:
        yield Member(path, error=f"the archive is damaged after its last whole member: {_reason(exc)}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def discard(member: Member) -> None:
    """Delete a member's copy once it is ingested."""
    if member.path is not None:
        Path(member.path).unlink(missing_ok=True)


def _zip_members(path: str, folder: Path) -> Iterator[Member]:
    with zipfile.ZipFile(path) as archive:
        for index, info in enumerate(archive.infolist()):
            if info.is_dir():
                continue  # a folder is structure, not content
            name = f"{path}/{info.filename}"
            why = _passed_over(info.filename) or _encrypted(info)
            if why is not None:
                yield Member(name, skip=why)
                continue
            with archive.open(info) as stream:
                yield _copied(name, stream, info.file_size, folder / str(index))


def _tar_members(path: str, folder: Path) -> Iterator[Member]:
    with open_binary(path) as raw, tarfile.open(fileobj=raw, mode="r|") as archive:  # a stream: one pass, in order
        for index, info in enumerate(archive):
            if info.isdir():
                continue
            name = f"{path}/{info.name}"
            why = _passed_over(info.name) or (None if info.isfile() else _NOT_A_FILE)
            if why is not None:
                yield Member(name, skip=why)
                continue
            stream = archive.extractfile(info)
            if stream is None:
                yield Member(name, skip=_NOT_A_FILE)
                continue
            yield _copied(name, stream, info.size, folder / str(index))


_NOT_A_FILE = "a link or device inside the archive: not followed"


def _passed_over(member_name: str) -> str | None:
    """Why a member is not read by its name: hidden (dot) files, as a folder walk passes them over, and archives
    inside the archive (extracting one level is the bound)."""
    base = member_name.rstrip("/").rsplit("/", 1)[-1]
    if base.startswith(".") or "/." in f"/{member_name}":
        return "a hidden file (its name or a folder's starts with a dot), passed over as in a folder"
    if base.lower().endswith((".zip", ".tar", ".tar.gz", ".tgz", ".tar.xz", ".tar.zst")):
        return "an archive inside the archive: extract it and ingest the inner one"
    return None


def _encrypted(info: zipfile.ZipInfo) -> str | None:
    return "encrypted: extract it with its password and ingest the copy" if info.flag_bits & 0x1 else None


def _copied(name: str, stream: IO[bytes], declared: int, folder: Path) -> Member:
    """The member's bytes copied to `folder/<its base name>` (the name a folder of extracted files would give it:
    instances default to file names), or why not."""
    free = shutil.disk_usage(folder.parent).free
    if declared > free - SPARE_BYTES:
        return Member(name, error=f"{declared:,} bytes would leave less than 1 GiB free where it is extracted")
    folder.mkdir()
    target = folder / name.rsplit("/", 1)[-1]
    copied = 0
    with open(target, "wb") as out:
        while chunk := stream.read(min(1 << 20, declared + 1 - copied)):
            copied += len(chunk)
            if copied > declared:
                target.unlink()
                return Member(name, error=f"holds more than the {declared:,} bytes its archive declares for it")
            out.write(chunk)
    return Member(name, str(target), copied)


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
