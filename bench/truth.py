"""Benchmark: how many of the causes planted in randomised fleets `oomlab findings` recovers, and how many it
invents.

Generates N seeded scenario fleets (`sample_logs/generate.py --scenario`, seeds S, S+1, ...), ingests each
with `oomlab ingest` into its own DuckDB file, runs `oomlab.api.findings` on it and scores the findings
against the fleet's truths.json. Target: every cause kind precision >= 0.95 and recall >= 0.95, and no
decoy blamed, over fresh seeds.

    python bench/truth.py --fleets N [--seed S] [--dir D] [--jobs J] [--classic | --shapes A,B]

The fleets take the generator's shapes (sample_logs/fleetgen/scenario/shapes.py: Kubernetes pods and nodes,
memory fields in MiB/GiB, an OOM in both an access log and a pod's text log, PID namespaces, no
allocated_before, decoys overlapping a causal job, L40S/H100/MI300X cards), each drawn at random per fleet;
`--classic` draws none (the fleets and the scores of the harness before them), `--shapes A,B` exactly those.

Matching (the rule truths.json repeats under `rules`): a finding matches a planted cause when its kind is the
cause's kind and its subject names the cause's subject: `model_version V` (leak), `job NAME`
(scheduled_job, external_pressure), `neighbour on instance I` (external_pressure of a process no calendar
lists), `instance I` (fragmentation), the card's total (capacity: `card 21.96 GiB`; prompt_threshold:
metrics.device_total, and metrics.model_version when the finding names a version; a finding for the whole
card matches every version's threshold on it). Findings merged into another (metrics.related) are scored
like top-level ones. An instance is the host (on Kubernetes the node, never a pod); a finding naming the GPU's
UUID where the logs state it (`match.gpu_uuid`) names the same device. Per kind: precision = findings that
match a required cause / findings of that kind (findings matching an optional cause, one with too little
evidence, are left out of both); recall = required causes matched / required causes. P and R of the last
line are micro-averaged over all kinds. A decoy is blamed by every finding (any kind, merged ones included)
whose subject or metrics name a decoy job. Counts: for every required cause found, the OOM count its most
specific matching finding states (COUNT_METRIC: leak_ooms, ooms_in, ooms_by_size or ooms) against the
OOMs planted for the causes that finding matches (one per real OOM, however many files hold it); within 5 %
passes, a finding that states no count fails. A count off by more is also set against the causes' `ooms_range`
(what the count would be if each failed request at a cause's edge, where its cause changes with its bytes 2 sd
of the per-request noise either way, took the other side's cause): inside it, the count is off by what no log
states, and the line says so; it still fails.
Fails (exit 1) when a fleet cannot be generated, ingested or analysed, and (exit 2) when there is nothing to
measure: no required cause, or no finding of a scored kind.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import REPO, oomlab_argv

TARGET = 0.95
COUNT_TOLERANCE = 0.05  # a found cause's OOM count is right within 5 % of the planted count
# The metric in which a finding of each kind states how many OOMs it explains.
COUNT_METRIC = {
    "leak": "leak_ooms",
    "scheduled_job": "ooms_in",
    "external_pressure": "ooms",
    "fragmentation": "ooms",
    "prompt_threshold": "ooms_by_size",
    "capacity": "ooms",
}
KINDS = ("leak", "scheduled_job", "external_pressure", "fragmentation", "prompt_threshold", "capacity")
GENERATE = REPO / "sample_logs" / "generate.py"
DATA = ("requests", "textlogs", "nvidia-smi", "calendar_recurring.json", "calendar_occurrences.csv")
FINDINGS = (
    "import json, sys\n"
    "from oomlab import api\n"
    "result = api.findings(sys.argv[1])\n"
    "found = [f.to_json() for f in getattr(result, 'findings', result)]  # a FindingsResult, or the list itself\n"
    "open(sys.argv[2], 'w').write(json.dumps(found, default=str))\n"
)
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*(GiB|MiB|TiB)")
_CARD_SLACK = 0.006 * (1 << 30)  # a total printed with two decimals of GiB (messages, `_gib` fields)
_UNITS = {"MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def expand(findings: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every finding, then the findings merged into it (`metrics.related`)."""
    for finding in findings:
        yield finding
        yield from (finding.get("metrics") or {}).get("related") or []


def _subject(finding: dict[str, Any]) -> str:
    return str(finding.get("subject") or "").strip().lower()


def _metric(finding: dict[str, Any], key: str) -> Any:
    return (finding.get("metrics") or {}).get(key)


def _card_bytes(finding: dict[str, Any]) -> float | None:
    """The card total a capacity finding names: metrics.device_total, else the size in metrics.card or subject."""
    if isinstance(_metric(finding, "device_total"), int | float):
        return float(_metric(finding, "device_total"))
    for text in (_metric(finding, "card"), finding.get("subject")):
        match = _SIZE.search(str(text or ""))
        if match:
            return float(match[1]) * _UNITS[match[2]]
    return None


def matches(truth: dict[str, Any], finding: dict[str, Any]) -> bool:
    """Whether `finding` names the planted cause `truth` (kind and subject, see the module docstring)."""
    kind, want, subject = truth["kind"], truth["match"], _subject(finding)
    if finding.get("kind") != kind:
        return False
    if kind == "leak":
        return subject == f"model_version {want['model_version']}".lower()
    if kind == "scheduled_job":
        return subject == f"job {want['job']}".lower()
    if kind == "external_pressure" and "job" in want:
        return subject == f"job {want['job']}".lower()
    devices = [d.lower() for d in (want.get("instance"), want.get("gpu_uuid")) if d]
    if kind == "external_pressure":
        return subject in {f"neighbour on instance {d}" for d in devices}
    if kind == "fragmentation":
        return subject in {f"instance {d}" for d in devices}
    if kind == "prompt_threshold":
        version, total = _metric(finding, "model_version"), _metric(finding, "device_total")
        near = isinstance(total, int | float) and abs(total - want["device_total"]) <= _CARD_SLACK
        return near and version in (None, want["model_version"])
    total = _card_bytes(finding)  # capacity: the total as messages print it, two decimals of GiB
    return total is not None and abs(total - want["device_total"]) <= _CARD_SLACK


def blamed_decoy(finding: dict[str, Any], decoys: list[str]) -> str | None:
    """The decoy job a finding names, if any."""
    for name in decoys:
        if _subject(finding) == f"job {name}".lower() or name in (_metric(finding, "job"), _metric(finding, "name")):
            return name
    return None


@dataclass(frozen=True)
class Count:
    """One found cause's OOM count: what its most specific finding states against what was planted for every
    cause that finding matches (a threshold for a whole card speaks for each version's on it)."""

    kind: str
    subject: str  # the first cause's subject, and how many more the finding matches
    planted: int
    found: int | None  # None: the finding states no count (COUNT_METRIC)
    # [fewest, most] planted with the requests at a cause's edge on either side (truths' ooms_range); None where
    # the truths state no range
    edges: tuple[int, int] | None = None

    @property
    def error(self) -> float | None:
        """(found - planted) / planted; None without a stated count."""
        if self.found is None:
            return None
        if self.planted == 0:
            return 0.0 if self.found == 0 else math.inf
        return (self.found - self.planted) / self.planted

    @property
    def ok(self) -> bool:
        return self.found is not None and abs(self.found - self.planted) <= COUNT_TOLERANCE * self.planted

    @property
    def at_edge(self) -> bool:
        """Off, but within COUNT_TOLERANCE of a count the requests at a cause's edge allow (`edges`)."""
        if self.ok or self.found is None or self.edges is None:
            return False
        low, high = self.edges
        return low * (1 - COUNT_TOLERANCE) <= self.found <= high * (1 + COUNT_TOLERANCE)

    def line(self) -> str:
        if self.found is None:
            return (
                f"{self.kind} {self.subject}: no OOM count stated ({COUNT_METRIC[self.kind]}), {self.planted} planted"
            )
        verdict = "ok" if self.ok else f"off by more than {COUNT_TOLERANCE:.0%}"
        if self.at_edge and self.edges is not None:
            verdict += f"; {self.edges[0]} to {self.edges[1]} with the requests at a cause's edge on either side"
        return (
            f"{self.kind} {self.subject}: {self.found} OOMs found, {self.planted} planted "
            f"({_percent(self.error)}, {verdict})"
        )


@dataclass
class KindScore:
    """Counts of one cause kind."""

    planted: int = 0  # required causes
    found: int = 0  # required causes some finding matches
    findings: int = 0  # findings of the kind, those matching only an optional cause left out
    true_positives: int = 0  # findings that match a required cause
    counted: int = 0  # found causes whose OOM count was compared (a finding for several counts once)
    counts_ok: int = 0  # of those, within COUNT_TOLERANCE of the planted count
    counts_at_edge: int = 0  # of the others, within what the requests at a cause's edge allow (Count.at_edge)
    ooms_planted: int = 0  # OOMs planted for the counted causes
    ooms_found: int = 0  # OOMs their findings state (those stating none add nothing and fail)

    def add(self, other: KindScore) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class Score:
    """One fleet's (or several fleets') score, with what was missed, invented and blamed."""

    kinds: dict[str, KindScore] = field(default_factory=lambda: {k: KindScore() for k in KINDS})
    decoys: int = 0
    missed: list[str] = field(default_factory=list)
    false_positives: list[str] = field(default_factory=list)
    blamed: list[str] = field(default_factory=list)
    counts: list[Count] = field(default_factory=list)

    def add(self, other: Score) -> None:
        for kind, counts in other.kinds.items():
            self.kinds[kind].add(counts)
        self.decoys += other.decoys
        self.missed += other.missed
        self.false_positives += other.false_positives
        self.blamed += other.blamed
        self.counts += other.counts

    @property
    def total(self) -> KindScore:
        out = KindScore()
        for counts in self.kinds.values():
            out.add(counts)
        return out


def score(truths: dict[str, Any], findings: list[dict[str, Any]]) -> Score:
    """Score one fleet's findings (the documented JSON shape) against its truths.json."""
    out = Score()
    causes = [c for c in truths["causes"] if c["kind"] in KINDS]
    decoys = [d["name"] for d in truths.get("decoys", [])]
    hit: set[int] = set()
    matching: list[tuple[dict[str, Any], list[int]]] = []  # scored findings and the causes each matches
    for finding in expand(findings):
        decoy = blamed_decoy(finding, decoys)
        if decoy is not None:
            out.decoys += 1
            out.blamed.append(f"{finding.get('kind')} {finding.get('subject')} (decoy {decoy})")
        kind = finding.get("kind")
        if kind not in out.kinds:
            continue
        matched = [i for i, c in enumerate(causes) if matches(c, finding)]
        required = [i for i in matched if causes[i]["required"]]
        if matched and not required:
            continue  # it names a cause with too little evidence to demand: neither right nor wrong
        out.kinds[kind].findings += 1
        if required:
            out.kinds[kind].true_positives += 1
            hit.update(required)
            matching.append((finding, matched))
        else:
            out.false_positives.append(f"{kind} {finding.get('subject')}")
    for i, cause in enumerate(causes):
        if cause["required"]:
            out.kinds[cause["kind"]].planted += 1
            if i in hit:
                out.kinds[cause["kind"]].found += 1
            else:
                out.missed.append(f"{cause['kind']} {cause['subject']} ({cause['ooms']} OOMs)")
    _count(out, causes, hit, matching)
    return out


def _count(out: Score, causes: list[dict[str, Any]], hit: set[int], matching: list) -> None:
    """Each found cause's OOM count: its most specific matching finding (the one matching fewest causes, the
    first of those) against the causes that finding matches; a group of causes is counted once. A card-wide
    threshold that is the most specific finding of one version is compared with every version's OOMs on the
    card (its count covers them all), so a version with a finding of its own is then in two groups."""
    seen: set[tuple[int, ...]] = set()
    for i in sorted(hit):
        finding, group = min(((f, g) for f, g in matching if i in g), key=lambda fg: len(fg[1]))
        key = tuple(group)
        if key in seen:
            continue
        seen.add(key)
        kind = causes[i]["kind"]
        stated = _metric(finding, COUNT_METRIC[kind])
        found = int(stated) if isinstance(stated, int | float) and not isinstance(stated, bool) else None
        subject = causes[i]["subject"] + (f" and {len(group) - 1} more causes of its finding" if len(group) > 1 else "")
        ranges = [causes[j].get("ooms_range") for j in group]
        edges = None if None in ranges else (sum(r[0] for r in ranges), sum(r[1] for r in ranges))
        count = Count(kind, subject, sum(causes[j]["ooms"] for j in group), found, edges)
        out.counts.append(count)
        row = out.kinds[kind]
        row.counted += 1
        row.counts_ok += count.ok
        row.counts_at_edge += count.at_edge
        row.ooms_planted += count.planted
        row.ooms_found += found or 0


def _ratio(num: int, den: int) -> str:
    return f"{num / den:.2f}" if den else "-"


def _percent(error: float | None) -> str:
    if error is None:
        return "-"
    return f"{'+' if error >= 0 else ''}{error:.0%}" if math.isinf(error) else f"{error:+.1%}"


def table(total: Score) -> list[str]:
    """The per-cause table and its total row: precision and recall, then the found causes' OOM counts (planted,
    found, the relative error of the sums, and how many causes came within 5 %)."""
    rows = [
        f"{'kind':<18} {'planted':>7} {'found':>6} {'findings':>8} {'true_pos':>8} {'precision':>9} {'recall':>6}"
        f" {'ooms_planted':>12} {'ooms_found':>10} {'ooms_err':>8} {'counts_ok':>9}"
    ]
    for kind, c in [*total.kinds.items(), ("all", total.total)]:
        err = (c.ooms_found - c.ooms_planted) / c.ooms_planted if c.counted and c.ooms_planted else None
        ok = f"{c.counts_ok}/{c.counted}" if c.counted else "-"
        rows.append(
            f"{kind:<18} {c.planted:>7} {c.found:>6} {c.findings:>8} {c.true_positives:>8} "
            f"{_ratio(c.true_positives, c.findings):>9} {_ratio(c.found, c.planted):>6}"
            f" {c.ooms_planted if c.counted else '-':>12} {c.ooms_found if c.counted else '-':>10}"
            f" {_percent(err):>8} {ok:>9}"
        )
    return rows


def shape_table(fleets: list[tuple[dict[str, Any], Score]]) -> list[str]:
    """Precision, recall and counts over the fleets that drew each shape (a fleet counts under each of its
    shapes; `classic`: fleets with none), to see which shape a failure follows."""
    by_shape: dict[str, tuple[int, Score]] = {}
    for truths, fleet in fleets:
        for name in _shapes(truths) or ["classic"]:
            n, total = by_shape.get(name, (0, Score()))
            total.add(fleet)
            by_shape[name] = (n + 1, total)
    rows = [f"{'shape':<14} {'fleets':>6} {'precision':>9} {'recall':>6} {'counts_ok':>9} {'decoys':>6}"]
    for name, (n, total) in sorted(by_shape.items()):
        c = total.total
        ok = f"{c.counts_ok}/{c.counted}" if c.counted else "-"
        rows.append(
            f"{name:<14} {n:>6} {_ratio(c.true_positives, c.findings):>9} {_ratio(c.found, c.planted):>6} "
            f"{ok:>9} {total.decoys:>6}"
        )
    return rows


def _shapes(truths: dict[str, Any]) -> list[str]:
    """The shapes a fleet drew (none for a classic one)."""
    return list(((truths.get("generator") or {}).get("shapes") or {}).get("drawn") or [])


def _run(argv: list[str], what: str) -> float:
    """Run a child process; its output becomes the error if it fails. Returns wall seconds."""
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({' '.join(argv)}):\n{proc.stdout}{proc.stderr}")
    return time.perf_counter() - started


def run_fleet(seed: int, work: Path, shapes: tuple[str, ...] = ()) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """Generate (with the generator's `shapes` options: `--classic`, `--shapes A,B` or none), ingest and analyse
    the fleet of `seed`: (truths, findings, a timing line)."""
    folder, db, found = work / f"fleet-{seed}", work / f"fleet-{seed}.duckdb", work / f"findings-{seed}.json"
    for stale in (db, db.with_name(db.name + ".wal"), found):
        stale.unlink(missing_ok=True)
    argv = [sys.executable, str(GENERATE), "--scenario", "--seed", str(seed), "--out", str(folder), *shapes]
    gen = _run(argv, "generate")
    truths = json.loads((folder / "truths.json").read_text())
    paths = [str(folder / name) for name in DATA if (folder / name).exists()]
    tz = truths["time"]["ingest_tz"]
    argv = oomlab_argv("ingest", *paths, "--db", str(db), "--quiet", *(["--tz", tz] if tz else []), *_field_map(truths))
    ingest = _run(argv, f"ingest of seed {seed}")
    analyse = _run([sys.executable, "-c", FINDINGS, str(db), str(found)], f"findings of seed {seed}")
    times = f"generate {gen:.1f} s, ingest {ingest:.1f} s, findings {analyse:.1f} s"
    return truths, json.loads(found.read_text()), times


def _field_map(truths: dict[str, Any]) -> list[str]:
    """`--map` options for memory fields the fleet names its own way (`gpu_mem_allocated_gib` for allocated_after),
    as their user would write them: the name only, its unit is read from the suffix. A name that is the canonical
    one plus a unit suffix needs none."""
    units = ((truths.get("generator") or {}).get("shapes") or {}).get("units") or {}  # a classic fleet has none
    options = []
    for canonical, name in sorted((units.get("fields") or {}).items()):
        if name.rpartition("_")[0] != canonical:
            options += ["--map", f"{canonical}={name}"]
    return options


def report_fleet(seed: int, truths: dict[str, Any], fleet: Score, times: str) -> list[str]:
    """What one fleet planted and what the findings got wrong."""
    counts = truths["counts"]
    required = sum(c["required"] for c in truths["causes"])
    lines = [
        f"fleet {seed}: {len(truths['instances'])} hosts, {counts['requests'] + counts['requests_in_text_logs']:,} "
        f"requests, {counts['oom_events']:,} OOMs, {required} causes planted "
        f"({len(truths['causes']) - required} optional), {len(truths['decoys'])} decoys; {times}"
    ]
    if (truths.get("generator") or {}).get("shapes") is not None:
        lines.append(f"  shapes: {', '.join(_shapes(truths)) or 'none'}")
    lines += [f"  missed: {m}" for m in fleet.missed]
    lines += [f"  false positive: {f}" for f in fleet.false_positives]
    lines += [f"  decoy blamed: {b}" for b in fleet.blamed]
    lines += [f"  count: {c.line()}" for c in fleet.counts]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleets", type=int, required=True, help="how many fleets (seeds S, S+1, ...)")
    parser.add_argument("--seed", type=int, default=1, help="the first fleet's seed (default 1)")
    parser.add_argument(
        "--dir", type=Path, default=None, help="where fleets and databases go (default: a new temp folder)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="fleets processed at once (default 1)")
    shapes = parser.add_mutually_exclusive_group()
    shapes.add_argument(
        "--classic", action="store_true", help="fleets without the new shapes: the harness as it was before them"
    )
    shapes.add_argument(
        "--shapes", metavar="A,B", help="exactly these shapes in every fleet instead of each at random ('' for none)"
    )
    args = parser.parse_args(argv)
    if args.fleets < 1:
        parser.error("--fleets must be at least 1")
    options = ("--classic",) if args.classic else () if args.shapes is None else (f"--shapes={args.shapes}",)
    work = args.dir or Path(tempfile.mkdtemp(prefix="oomlab-truth-"))
    work.mkdir(parents=True, exist_ok=True)
    seeds = [args.seed + i for i in range(args.fleets)]
    print(f"fleets, databases and findings in {work}", flush=True)
    total = Score()
    fleets: list[tuple[dict[str, Any], Score]] = []
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        try:
            runs = pool.map(lambda s: run_fleet(s, work, options), seeds)
            for seed, (truths, found, times) in zip(seeds, runs, strict=True):
                fleet = score(truths, found)
                total.add(fleet)
                fleets.append((truths, fleet))
                print("\n".join(report_fleet(seed, truths, fleet, times)), flush=True)
        except RuntimeError as exc:
            print(f"truth: {exc}", file=sys.stderr)
            return 1
    if any(_shapes(t) for t, _ in fleets):
        print("\n".join(shape_table(fleets)))
    print("\n".join(table(total)))
    every = total.total
    if every.planted == 0:
        print(f"truth: no required cause in {args.fleets} fleets: recall cannot be measured", file=sys.stderr)
        return 2
    if every.findings == 0:
        print("truth: no finding of a scored kind: precision cannot be measured", file=sys.stderr)
        return 2
    if every.counted:
        print(
            f"counts: {every.counts_ok} of {every.counted} found causes within {COUNT_TOLERANCE:.0%} of the OOMs "
            f"planted ({every.counted - every.counts_ok} off or not stated, {every.counts_at_edge} of them within "
            "what the requests at a cause's edge allow)"
        )
    print(
        f"target: precision and recall >= {TARGET:.2f} for every kind, found causes' OOM counts within "
        f"{COUNT_TOLERANCE:.0%}, no decoy blamed, over fresh seeds"
    )
    print(
        f"truth: precision {every.true_positives / every.findings:.2f} recall {every.found / every.planted:.2f} "
        f"decoys {total.decoys} over {args.fleets} fleets (seed {args.seed})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
