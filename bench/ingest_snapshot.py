"""Benchmark: reading, ingesting and inspecting a large PyTorch memory snapshot against plain pickle.load.

    python bench/ingest_snapshot.py [SNAPSHOT] [--repeat 3] [--copies 4] [--scale-gb 5]

The input is decompressed to a temporary file first, so decompression is not timed. Every measurement runs
in its own subprocess; its peak memory is that process's ru_maxrss (from wait4), so the runs do not
pollute each other. Wall times are whole-process times (interpreter start and imports included), the
median of --repeat runs: this machine's timings are noisy.

--copies N derives a larger snapshot FROM the real one (bench/derive_snapshot.py: its trace repeated N times,
times shifted past the previous copy, new entry dicts and frames lists per copy, the frame dicts shared as
real snapshots do; written op by op, so deriving it does not need the memory that loading it does) and
reports the time and peak memory of reading, inspecting and ingesting it (issue 15 target 3: 4 copies ingest
in under 3 GB). --scale-gb G derives as many copies as make about G GB (target 3: a 5 GB snapshot ingests on
this machine). pickle.load of a derived file runs only where its memory, estimated from the real file's
measured ratio, fits in three quarters of this machine's memory. The derived trace is not a consistent
allocator history; it only measures size.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import oomlab_command

DEFAULT_SNAPSHOT = "/work/shared/fixtures/h200/big_trace/snapshot_end.pickle.xz"

# Child programs, one per measurement; each gets the snapshot path as argv[1].
CHILDREN = {
    "pickle.load": "import pickle, sys\nwith open(sys.argv[1], 'rb') as f: pickle.load(f)",
    "pickle.load (gc off)": ("import gc, pickle, sys\ngc.disable()\nwith open(sys.argv[1], 'rb') as f: pickle.load(f)"),
    # the streaming reader by name: a file it declines exits 3 instead of being timed through the whole load
    "read_snapshot": (
        "import sys\nfrom oomlab.parse.snapshot.read import read_snapshot_streaming\n"
        "sys.exit(0 if read_snapshot_streaming(sys.argv[1]) is not None else 3)"
    ),
    "inspect_snapshot": (
        "import sys\nfrom oomlab.analyses.snapshot.inspect import inspect_snapshot\ninspect_snapshot(sys.argv[1])"
    ),
}


def measure(argv: list[str]) -> tuple[float, int, int]:
    """(wall seconds, peak RSS in bytes, exit status) of one subprocess; its last error line if it fails."""
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=errors)
        _pid, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            errors.seek(0)
            lines = errors.read().decode(errors="replace").strip().splitlines()
            print(f"  {argv[-1] if len(argv) < 4 else argv[1]}: {lines[-1] if lines else 'no message'}")
    return wall, usage.ru_maxrss * 1024, process.returncode


def median_of(argv: list[str], repeat: int) -> tuple[float, int, int]:
    """Median wall and peak RSS over `repeat` runs; the status of the last run."""
    runs = [measure(argv) for _ in range(repeat)]
    return (statistics.median(r[0] for r in runs), int(statistics.median(r[1] for r in runs)), runs[-1][2])


def decompressed_copy(source: str, folder: Path) -> Path:
    """The snapshot as a plain pickle in `folder` (decompression is not what we measure)."""
    from oomlab.parse.compression import open_binary

    target = folder / "snapshot.pickle"
    with open_binary(source) as stream, open(target, "wb") as out:
        shutil.copyfileobj(stream, out, 1 << 20)
    return target


def report(
    name: str,
    result: tuple[float, int, int],
    base: tuple[float, int, int] | None,
    target: str = "",
    reference: tuple[float, int, int] | None = None,
) -> None:
    """One line: wall, peak memory, ratios to pickle.load (and wall ratio to the gc-off load)."""
    wall, rss, status = result
    if status != 0:
        print(f"{name:28s} failed (exit {status})")
        return
    ratio = "(pickle.load not run)" if base is None else f"wall x{wall / base[0]:.2f}  memory x{rss / base[1]:.2f}"
    if reference is not None:
        ratio += f"  (gc-off load x{wall / reference[0]:.2f})"
    print(f"{name:28s} {wall:7.2f} s  {rss / 1e9:6.2f} GB   {ratio}  {target}")


def run_cli_ingest(snapshot: Path, folder: Path, repeat: int) -> tuple[float, int, int] | None:
    """`oomlab ingest FILE --db TMP --quiet`, or None (with a message) where the CLI cannot ingest it yet."""
    exe = oomlab_command()  # the CLI beside this interpreter (or $OOMLAB_BENCH_CLI), never another on PATH
    db = folder / "bench.duckdb"
    probe = subprocess.run([exe, "ingest", str(snapshot), "--db", str(db), "--quiet"], capture_output=True, text=True)
    if probe.returncode != 0:
        message = (probe.stderr or probe.stdout).strip().splitlines()
        print(f"{'oomlab ingest':28s} skipped: {message[-1] if message else 'exit ' + str(probe.returncode)}")
        return None
    results = []
    for _ in range(repeat):
        db.unlink(missing_ok=True)
        results.append(measure([exe, "ingest", str(snapshot), "--db", str(db), "--quiet"]))
    return (statistics.median(r[0] for r in results), int(statistics.median(r[1] for r in results)), 0)


def torch_memory_viz(snapshot: Path, repeat: int) -> None:
    """`python -m torch.cuda._memory_viz stats FILE` where torch is installed."""
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode != 0:
        print(f"{'torch _memory_viz stats':28s} skipped: torch is not installed")
        return
    wall, rss, status = median_of([sys.executable, "-m", "torch.cuda._memory_viz", "stats", str(snapshot)], repeat)
    print(f"{'torch _memory_viz stats':28s} {wall:7.2f} s  {rss / 1e9:6.2f} GB   (exit {status})")


def derive(snapshot: Path, folder: Path, copies: int) -> Path:
    """A snapshot with the real one's trace repeated `copies` times (bench/derive_snapshot.py)."""
    derived = folder / "derived.pickle"
    script = Path(__file__).with_name("derive_snapshot.py")
    subprocess.run([sys.executable, str(script), str(snapshot), str(derived), "--copies", str(copies)], check=True)
    return derived


def copies_for(snapshot: Path, folder: Path, gigabytes: float) -> int:
    """How many copies make about `gigabytes`, from the size of a one-copy derivative."""
    one = derive(snapshot, folder, 1).stat().st_size
    return max(1, math.ceil(gigabytes * 1e9 / one))


def scaled(snapshot: Path, folder: Path, copies: int, load_bytes_per_byte: float, target: str) -> None:
    """Derive `copies` copies and report reading, inspecting and ingesting them (and pickle.load where it fits)."""
    derived = derive(snapshot, folder, copies)
    size = derived.stat().st_size
    print(f"\nderived snapshot: {size / 1e9:.2f} GB ({copies} copies of the trace)")
    need = load_bytes_per_byte * size
    if need < 0.75 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"):
        base = measure([sys.executable, "-c", CHILDREN["pickle.load"], str(derived)])
        report("pickle.load", base, base)
    else:
        print(f"{'pickle.load':28s} not run: it would need about {need / 1e9:.0f} GB (the real file's ratio)")
        base = None
    for name in ("read_snapshot", "inspect_snapshot"):
        result = measure([sys.executable, "-c", CHILDREN[name], str(derived)])
        report(name, result, base)
    cli = run_cli_ingest(derived, folder, 1)
    if cli is not None:
        report("oomlab ingest", cli, base, target)
    derived.unlink()


def require_streaming_reader() -> None:
    """Targets 3 and 4 name the streaming reader: stop where the oomlab beside this interpreter lacks it."""
    probe = "from oomlab.parse.snapshot.safe_pickle import _stream\nraise SystemExit(_stream is None)"
    if subprocess.run([sys.executable, "-c", probe]).returncode != 0:
        sys.exit(
            "the streaming snapshot reader is not built (pip install . with a C compiler, or python hatch_build.py)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snapshot", nargs="?", default=DEFAULT_SNAPSHOT)
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median reported)")
    parser.add_argument("--copies", type=int, help="also read a derived snapshot: the trace repeated this often")
    parser.add_argument("--scale-gb", type=float, help="also read a derived snapshot of about this size")
    args = parser.parse_args()
    require_streaming_reader()
    with tempfile.TemporaryDirectory(prefix="oomlab-bench-") as tmp:
        folder = Path(tmp)
        snapshot = decompressed_copy(args.snapshot, folder)
        print(
            f"{args.snapshot}: {snapshot.stat().st_size / 1e6:.0f} MB uncompressed, "
            f"median of {args.repeat} run(s), python {sys.version.split()[0]}, {os.cpu_count()} CPUs\n"
        )
        runs = {
            name: median_of([sys.executable, "-c", code, str(snapshot)], args.repeat) for name, code in CHILDREN.items()
        }
        base = runs["pickle.load"]
        report("pickle.load", base, base, "(baseline)")
        report("pickle.load (gc off)", runs["pickle.load (gc off)"], base, "(reference)")
        reference = runs["pickle.load (gc off)"]
        report("read_snapshot", runs["read_snapshot"], base, "(target: wall <= 1.4, memory <= 2)", reference)
        cli = run_cli_ingest(snapshot, folder, args.repeat)
        if cli is not None:
            report("oomlab ingest", cli, base, "(issue 15 target 4: wall <= 1.0)", reference)
        report("inspect_snapshot", runs["inspect_snapshot"], base, "(target: wall <= 1.5)", reference)
        torch_memory_viz(snapshot, args.repeat)
        ratio = base[1] / snapshot.stat().st_size  # pickle.load's peak memory per byte of pickle
        if args.copies:
            scaled(snapshot, folder, args.copies, ratio, f"(issue 15 target 3: peak < 3 GB for {args.copies} copies)")
        if args.scale_gb:
            copies = copies_for(snapshot, folder, args.scale_gb)
            scaled(
                snapshot, folder, copies, ratio, f"(issue 15 target 3: a {args.scale_gb:g} GB snapshot ingests here)"
            )


if __name__ == "__main__":
    main()
