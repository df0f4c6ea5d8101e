"""Wheel build hook: compiles the streaming snapshot reader (pipeline/parse/snapshot/_stream.c).

The extension is optional: where no C compiler works, the wheel is built without it and snapshots are read
by the full reader (more memory, same tables); `OOMLAB_REQUIRE_NATIVE=1` makes a failed compile fail the build
(CI sets it). `python hatch_build.py` compiles it in place, beside the source, for a checkout used directly.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

SOURCE = Path("pipeline/parse/snapshot/_stream.c")
MODULE = "parse/snapshot/_stream"  # under the package, which is `oomlab` in the wheel and `pipeline` here


def compile_reader(root: Path, target: Path) -> None:
    """Compile the reader from `root`'s source into `target` (a shared library for this interpreter)."""
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    flags = ["-shared", "-fPIC", "-O2", "-Wall", "-I", sysconfig.get_paths()["include"]]
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([*compiler, *flags, str(root / SOURCE), "-o", str(target)], check=True, capture_output=True)


def extension_name() -> str:
    return MODULE + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script, without hatchling
    BuildHookInterface = object  # type: ignore[assignment,misc]


class NativeReaderHook(BuildHookInterface):  # type: ignore[misc,valid-type]
    """Adds the compiled reader to the wheel, which then is specific to this interpreter and platform."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        target = root / "build" / "native" / extension_name()
        try:
            compile_reader(root, target)
        except (OSError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", b"") or b""
            message = (
                f"oomlab: the streaming snapshot reader was not compiled ({exc}) {detail.decode(errors='replace')}"
            )
            if os.environ.get("OOMLAB_REQUIRE_NATIVE") == "1":
                raise RuntimeError(message) from exc
            print(message + "; snapshots will be read by the full reader", file=sys.stderr)
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        build_data["force_include"][str(target)] = "oomlab/" + extension_name()


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    compile_reader(here, here / "pipeline" / extension_name())
    print(f"compiled {here / 'pipeline' / extension_name()}")
