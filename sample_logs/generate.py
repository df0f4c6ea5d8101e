"""Generate the sample fleet: request logs, text logs, nvidia-smi samples, a job calendar and truths.json.

    python sample_logs/generate.py [--out DIR] [--scale S | --requests N] [--seed N] [--weeks W]
    python sample_logs/generate.py --scenario --seed N --out DIR [--classic | --shapes A,B]

The same arguments always give the same bytes. What is planted is described in sample_logs/FLEET.md and,
with exact parameters and counts, in DIR/truths.json. `--scenario` draws a randomised fleet from the seed
instead (cards, models, leaks, jobs, neighbours, time zones: sample_logs/README.md), with its planted causes
in DIR/truths.json; bench/truth.py scores the findings against them. Its fleets also take shapes drawn at
random (Kubernetes pods and nodes, memory fields in MiB/GiB, OOMs in two logs, PID namespaces, no
allocated_before, decoys overlapping a job, more cards: fleetgen/scenario/shapes.py); `--classic` draws none
(the fleets of earlier versions, byte for byte), `--shapes A,B` exactly those.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fleetgen.build import Options, build
from fleetgen.plan import DEFAULT_SCALE, REQUESTS_PER_WEEK
from fleetgen.scenario.build import build_scenario, summary
from fleetgen.scenario.shapes import SHAPES, parse_shapes

DEFAULT_OUT = Path(__file__).resolve().parent / "fleet"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (replaced)")
    size = parser.add_mutually_exclusive_group()
    size.add_argument(
        "--scale",
        type=float,
        default=DEFAULT_SCALE,
        help=f"traffic multiplier; 1 = {REQUESTS_PER_WEEK:,} requests per week, 33 = 10M in 3 weeks "
        f"(default {DEFAULT_SCALE}: the committed set)",
    )
    size.add_argument("--requests", type=int, help="total requests instead of --scale (e.g. 10000000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--weeks", type=int, default=3)
    parser.add_argument(
        "--smi-interval",
        type=int,
        help="seconds between nvidia-smi samples (default: 300, or 60 above 2M requests)",
    )
    parser.add_argument("--gzip-level", type=int, choices=range(1, 10), help="default: 9, or 1 above 2M requests")
    parser.add_argument("--workers", type=int, default=2, help="instances generated at once")
    parser.add_argument(
        "--scenario",
        action="store_true",
        help="a randomised scenario fleet drawn from --seed, with its truths (needs --out; ignores the size options)",
    )
    parser.add_argument("--traffic", type=float, default=1.0, help="with --scenario: traffic multiplier (default 1)")
    shapes = parser.add_mutually_exclusive_group()
    shapes.add_argument(
        "--classic", action="store_true", help="with --scenario: no shapes (the classic fleets, byte for byte)"
    )
    shapes.add_argument(
        "--shapes",
        metavar="A,B",
        help=f"with --scenario: exactly these shapes instead of each at random ({', '.join(SHAPES)}; '' for none)",
    )
    args = parser.parse_args(argv)
    if args.scenario and args.out == DEFAULT_OUT:
        parser.error("--scenario needs --out: the bundled fleet is not a scenario")
    if (args.classic or args.shapes is not None) and not args.scenario:
        parser.error("--classic and --shapes go with --scenario")
    try:
        args.forced = parse_shapes(args.shapes)
    except ValueError as exc:
        parser.error(str(exc))
    return args


def main(argv: list[str] | None = None) -> int:
    """Generate into --out, replacing what was there."""
    args = parse_args(argv)
    scale = args.requests / (REQUESTS_PER_WEEK * args.weeks) if args.requests else args.scale
    if args.out.exists():
        shutil.rmtree(args.out)
    started = time.perf_counter()
    if args.scenario:
        truths = build_scenario(args.out, args.seed, args.traffic, args.classic, args.forced)
        print(f"{summary(truths)} ({time.perf_counter() - started:.1f} s)")
        return 0
    truths = build(Options(args.out, args.seed, scale, args.weeks, args.smi_interval, args.gzip_level, args.workers))
    counts = truths["counts"]
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(
        f"{counts['requests'] + counts['requests_in_text_logs']:,} requests, {counts['oom_events']:,} OOMs, "
        f"{size / 1e6:.1f} MB in {args.out} ({time.perf_counter() - started:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
