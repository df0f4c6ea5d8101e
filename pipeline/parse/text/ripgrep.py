"""Every place in a plain file where one of some literals occurs, with its line number, found by ripgrep.

`rg` (the `ripgrep` wheel puts it beside Python) searches for many literals at once with SIMD and numbers
the lines in the same pass, at grep's speed: several times faster than a search from Python, and in a
process of its own, so the Python that parses what it finds runs beside it on the other core. Its output
is read as it comes. The literals are `needles`: a hit says where to check for a marker, not that one is
there. Where no `rg` can be found or run, `textscan` searches in-process (same results).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator, Sequence
from pathlib import Path

RIPGREP_ENV = "OOMLAB_RIPGREP"  # the rg to run, or `off` for the in-process search
_OFF = ("off", "0", "no", "false")
_READ_BYTES = 1 << 16  # rg's output is taken in pieces this size: each becomes one batch of hits
_EXE = "rg.exe" if os.name == "nt" else "rg"

Hit = tuple[int, int, bytes]  # a literal found: its offset in the file, its line's 1-based number, the literal


def ripgrep_binary() -> str | None:
    """The rg to run: $OOMLAB_RIPGREP, else the one installed with this Python, else one on PATH; None when
    there is none or the setting is `off`."""
    setting = os.environ.get(RIPGREP_ENV, "").strip()
    if setting.lower() in _OFF:
        return None
    if setting:
        return setting if os.access(setting, os.X_OK) else None
    return _installed_binary()


@functools.cache
def _installed_binary() -> str | None:
    """rg beside this interpreter's scripts (a venv's bin/, or the user scheme's), or on PATH."""
    folders = [sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]
    user_scheme = f"{os.name}_user"
    if user_scheme in sysconfig.get_scheme_names():
        folders.append(sysconfig.get_path("scripts", user_scheme))
    for folder in folders:
        candidate = Path(folder) / _EXE
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("rg")


def _command(binary: str, path: Path, literals: Sequence[bytes]) -> list[str]:
    """rg reading `path` as bytes (no config file, no binary-file cut-off, no BOM transcoding), printing for
    each occurrence of a literal (hits that overlap an earlier one are not reported) its line's number, its
    offset and the literal, never the line."""
    return [
        binary,
        "--no-config",
        "--text",
        "--encoding",
        "none",
        "--fixed-strings",
        "--case-sensitive",
        "--line-number",
        "--byte-offset",
        "--only-matching",
        "--no-filename",
        "--no-heading",
        "--color",
        "never",
        *(f"--regexp={m.decode('ascii')}" for m in literals),
        "--",
        str(path),
    ]


class RipgrepSearch:
    """rg searching `path` for `literals`, started at once: an rg that cannot run here at all (another
    platform's binary) raises OSError now, before anything is read. Iterate for the hits in order,
    in batches as rg reports them; an error of rg's (exit status 2, or a signal) is raised as OSError once
    its output is read, so a search cut short loses no line quietly. `close` ends rg if it still runs."""

    def __init__(self, binary: str, path: Path, literals: Sequence[bytes]) -> None:
        self.child = subprocess.Popen(
            _command(binary, path, literals), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

    def __iter__(self) -> Iterator[list[Hit]]:
        stdout, stderr = self.child.stdout, self.child.stderr
        assert stdout is not None and stderr is not None
        rest = b""
        while piece := stdout.read1(_READ_BYTES):
            complete, _, rest = (rest + piece).rpartition(b"\n")
            if complete:
                yield [_hit(line) for line in complete.split(b"\n")]
        if rest:
            yield [_hit(rest)]
        problem = stderr.read().decode("utf-8", errors="replace").strip()
        if self.child.wait() not in (0, 1):  # 1: no line matched; 2: an error; negative: killed by a signal
            raise OSError(f"ripgrep failed: {problem.splitlines()[0] if problem else _status(self.child.returncode)}")

    def close(self) -> None:
        """End rg (if its reader stopped early) and reap it."""
        if self.child.poll() is None:
            self.child.kill()
        for stream in (self.child.stdout, self.child.stderr):
            if stream is not None:
                stream.close()
        self.child.wait()


def _status(code: int) -> str:
    """How rg ended, in words."""
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


def _hit(line: bytes) -> Hit:
    """`NUMBER:OFFSET:LITERAL` as (offset, number, literal)."""
    number, offset, literal = line.split(b":", 2)
    return int(offset), int(number), literal
