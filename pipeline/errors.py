"""The project's own exceptions: each carries its context and builds a one-line message from it."""

from __future__ import annotations

import threading

# Set when the process is asked to stop (SIGTERM; the command line's handler). The handler's own exception may
# land inside a DuckDB call, which turns it into that statement's error: a loop over files checks this between
# files (`stop_if_asked`) so a stop never reads as one file's failure followed by the rest of the run.
STOP_ASKED = threading.Event()
STOP_EXIT_CODE = 143  # 128 + SIGTERM, what a shell reports for a process ended by it


class OomlabError(Exception):
    """Base of every error oomlab reports to a user; `hint` says how to fix it."""

    def __init__(self, reason: str, *, hint: str | None = None) -> None:
        self.reason = reason
        self.hint = hint
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return f"{self.reason} ({self.hint})" if self.hint else self.reason


class InputError(OomlabError):
    """A file, or a line in it, that cannot be read as what it claims to be."""

    def __init__(self, path: str, reason: str, *, line: int | None = None, hint: str | None = None) -> None:
        self.path = path
        self.line = line
        super().__init__(reason, hint=hint)

    @property
    def message(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {super().message}"


class EmptyInputError(InputError):
    """A file with nothing in it: reported and skipped, not a failure."""


class UnsafePickleError(InputError):
    """A pickle that names a global: loading it could run code, so it is refused."""


class UsageError(OomlabError):
    """An option's value that cannot be used as given (a field mapping's unknown unit): the command line reports
    it as a usage error (exit 2); the message names the option or file and the value."""


class DatabaseBusyError(OomlabError):
    """Another process holds the DuckDB file."""

    def __init__(self, db_path: str) -> None:
        self.db_path = db_path
        super().__init__(
            f"database {db_path} is busy: another oomlab process is using it",
            hint="wait for it to finish or pass another --db",
        )


class DatabaseError(OomlabError):
    """The DuckDB file cannot be opened or queried."""


class ParseError(OomlabError):
    """Text that looked like an OOM message but could not be decoded."""


class FastPathRefused(Exception):
    """Not a user's error: DuckDB's typed reader refused a request log, or its rows do not line up with the
    file's lines (ingest/requests.py). A failed statement aborts DuckDB's transaction, so the caller rolls
    back and calls again with `robust=True`. Defined here so that ingest/run.py catches it without loading
    the request-log modules for every kind of file.
    """


# What DuckDB says when a limit of the machine stops it, by the start of its message (its exceptions are matched by
# name: this module loads nothing, and the command line imports it before DuckDB).
_MEMORY_HINT = (
    "raise OOMLAB_MEMORY_LIMIT (a DuckDB size such as 12GB; the default is a quarter of this machine's memory), "
    "or run on a machine with more memory"
)
_SPILL_HINT = "free space where the database lives (DuckDB spills beside it, in DB.tmp/) or move the database"


def resource_error(exc: BaseException) -> OomlabError | None:
    """A limit of the machine that stopped DuckDB or Python (memory, spill space, a full disk) as one line that says
    which and how to get past it; None for any other exception (a bug: its traceback is the report)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    name = type(exc).__name__
    said = text.removeprefix("Out of Memory Error: ")
    if name == "OutOfMemoryException" and "offload" in text:  # the buffer pool is full and so is the spill space
        return OomlabError(f"DuckDB ran out of memory and of spill space: {said}", hint=_SPILL_HINT)
    if name == "OutOfMemoryException" or isinstance(exc, MemoryError):
        return OomlabError(f"out of memory: {said}", hint=_MEMORY_HINT)
    if (isinstance(exc, OSError) and exc.errno == 28) or "No space left on device" in text:  # ENOSPC
        return OomlabError(f"the disk is full: {text}", hint=_SPILL_HINT)
    return None


def stop_if_asked() -> None:
    """End the run (SystemExit 143) if a stop was asked for since it started."""
    if STOP_ASKED.is_set():
        raise SystemExit(STOP_EXIT_CODE)
