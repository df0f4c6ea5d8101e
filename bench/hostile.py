"""Benchmark: hostile and careless inputs (issue 14) through `oomlab ingest`, and the hostile snapshots.

    python bench/hostile.py [--scale 1] [--oomlab PATH] [--dir DIR] [--only NAME,...] [--no-snapshots]

Each case is generated at the size `--scale` gives (1: the whole run takes a few minutes here; `--scale 16`
makes the line without a newline 4 GiB, the audit's case) and ingested in a fresh child process, whose wall
time and peak RSS (its own VmHWM, read while it runs) are measured against the targets

    seconds <= 2 s + 1 s per MB of uncompressed input      peak RSS <= 300 MB + 10x the uncompressed size

Every text and request case must be read (exit 0: its bad rows are rejects, the rest loads), but for the ones
refused in one error line (a JSON nested 100,000 deep, a CSV of 100,000 columns, 200,000 one-record files); the
snapshot cases (bench/hostile_snapshots.py) must be read or refused as each says. The request logs are the real H200
serve_mixed log's rows repeated (tests/data/h200), with the hostile line put in. Exit status 1 when any case
fails its targets or its outcome.
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from hostile_snapshots import (
    MIB,
    CaseResult,
    HostileCase,
    _measure,
    _outcome,
    oomlab_executable,
    print_table,
    run_case,
    snapshot_cases,
    target_mb,
    target_seconds,
    uncompressed_size,
)

REPO = Path(__file__).resolve().parent.parent
SERVE_MIXED = REPO / "tests" / "data" / "h200" / "serve_mixed" / "requests.jsonl.gz"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 398.00 MiB."


def _records(count: int) -> list[dict]:
    """`count` requests: serve_mixed's, repeated with new ids."""
    with gzip.open(SERVE_MIXED, "rt", encoding="utf-8") as handle:
        real = [json.loads(line) for line in handle]
    return [{**real[i % len(real)], "request_id": f"r{i}"} for i in range(count)]


def _jsonl(name: str, count: int, change: Callable[[list[str]], None]) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        lines = [json.dumps(r) for r in _records(count)]
        change(lines)
        path = folder / name
        with open(path, "w", encoding="utf-8") as out:
            out.writelines(line + "\n" for line in lines)
        return path

    return build


def _set(line: int, key: str, value: object) -> Callable[[list[str]], None]:
    def change(lines: list[str]) -> None:
        record = json.loads(lines[line])
        record[key] = value
        lines[line] = json.dumps(record)

    return change


def _join_by_cr(line: int) -> Callable[[list[str]], None]:
    def change(lines: list[str]) -> None:
        lines[line : line + 2] = [lines[line] + "\r" + lines[line + 1]]

    return change


def _csv_long_field(count: int, field_bytes: int) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        keys = ["ts", "request_id", "batch_size", "input_sequence_length", "allocated_before", "status"]
        rows = [[str(r[k]) for k in keys] for r in _records(count)]
        rows[2][-1] = "x" * field_bytes
        path = folder / "long-field.csv"
        with open(path, "w", encoding="utf-8") as out:
            out.write(",".join(keys) + "\n")
            out.writelines(",".join(row) + "\n" for row in rows)
        return path

    return build


def _line_without_newline(size: int) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        path = folder / "no-newline.log"
        block = b"a" * MIB
        with open(path, "wb") as out:
            out.write(b"2026-11-30 01:50:03 ERROR worker: ")
            for _ in range(size // MIB):
                out.write(block)
            out.write(b" " + OOM.encode())  # the OOM message at the end of the line; no newline
        return path

    return build


def _text_dated_wrong(lines: int) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        path = folder / "year-9999.log"
        with open(path, "w", encoding="utf-8") as out:
            for i in range(lines):
                year = 9999 if i % 100 == 0 else 2026
                text = f"ERROR {OOM}" if i % 10 == 0 else f"INFO request r{i} done"
                out.write(f"{year}-11-30 01:{(i // 60) % 60:02d}:{i % 60:02d} {text}\n")
        return path

    return build


def _every_minute_calendar(folder: Path) -> Path:
    """A calendar rule firing every minute, and requests a year apart: the expansion covers the year."""
    data = folder / "every-minute"
    data.mkdir(exist_ok=True)
    records = _records(2)
    records[0]["ts"], records[1]["ts"] = "2025-12-01T00:00:00Z", "2026-11-30T00:00:00Z"
    (data / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (data / "calendar.csv").write_text("name,cron,duration_minutes,hosts\nscrape,* * * * *,1,\n")
    return data


def input_cases(scale: float) -> list[HostileCase]:
    """The text and request-log cases at `scale`: each must be read (exit 0), or, where it says so, refused in
    one error line naming the file (exit 1)."""
    rows = max(1000, round(100_000 * scale))
    long_line = max(MIB, round(200 * MIB * scale))
    return [
        HostileCase(
            "epoch-among-iso",
            f"{rows:,} rows, an epoch number in line 1",
            _jsonl("epoch.jsonl", rows, _set(0, "ts", 1764467390.81)),
            False,
        ),
        HostileCase(
            "size-with-unit",
            f"{rows:,} rows, '3.5 GiB' in line 1",
            _jsonl("unit.jsonl", rows, _set(0, "requested_size", "3.5 GiB")),
            False,
        ),
        HostileCase(
            "int-2^63-late",
            f"{rows:,} rows, 2^63 after the type sample",
            _jsonl("big-int.jsonl", rows, _set(rows - 10, "allocated_before", 2**63)),
            False,
        ),
        HostileCase(
            "float-1e30",
            f"{rows:,} rows, 1e30 bytes in line 7",
            _jsonl("1e30.jsonl", rows, _set(6, "allocated_before", 1e30)),
            False,
        ),
        HostileCase(
            "batch-2^70",
            f"{rows:,} rows, batch_size 2^70",
            _jsonl("batch.jsonl", rows, _set(6, "batch_size", 2**70)),
            False,
        ),
        HostileCase(
            "cr-line",
            f"{rows:,} rows, two joined by a bare CR",
            _jsonl("cr.jsonl", rows, _join_by_cr(rows // 2)),
            False,
        ),
        HostileCase(
            "long-line",
            f"a {long_line / MIB:.0f} MiB line among 1,000 rows",
            _jsonl("long.jsonl", 1000, _set(3, "prompt", "x" * long_line)),
            False,
        ),
        HostileCase(
            "csv-1MB-field", f"{rows:,} CSV rows, a 1 MB field in line 4", _csv_long_field(rows, 1_000_000), False
        ),
        HostileCase(
            "no-newline",
            f"a {long_line * 5 // 4 / MIB:.0f} MiB text line without a newline",
            _line_without_newline(long_line * 5 // 4),
            False,
        ),
        HostileCase("year-9999", f"{rows:,} text lines, 1 in 100 dated 9999", _text_dated_wrong(rows), False),
        HostileCase("cron-every-minute", "a '* * * * *' rule over a year of data", _every_minute_calendar, False),
        # issue 36: each of these fails or is cut alone, in one line
        HostileCase("gzip-cut", f"{rows:,} rows gzipped, the stream cut in half", _gzip_cut(rows), False),
        HostileCase("json-100k-deep", "a JSON array nested 100,000 deep", _deep_json(100_000), True),
        HostileCase("csv-100k-columns", "a CSV of 100,004 columns", _wide_csv(100_000), True),
        HostileCase("200k-files", "200,000 one-record request logs in a folder", _one_record_files(200_000), True),
    ]


def _one_record_files(count: int) -> Callable[[Path], Path]:
    """A folder of `count` request logs of one record each: refused in one line saying how to pass them (each
    file is a transaction of its own), or read in the time target; never hours of work."""

    def build(folder: Path) -> Path:
        data = folder / "one-record-files"
        data.mkdir(exist_ok=True)
        for index, record in enumerate(_records(count)):
            (data / f"r{index:06d}.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
        return data

    return build


def _gzip_cut(count: int) -> Callable[[Path], Path]:
    """The requests gzipped and cut at half their compressed size (a log copied while it was written): its whole
    lines are read, one reject says where it ends."""

    def build(folder: Path) -> Path:
        data = gzip.compress("".join(json.dumps(r) + "\n" for r in _records(count)).encode())
        path = folder / "cut.jsonl.gz"
        path.write_bytes(data[: len(data) // 2])
        return path

    return build


def _deep_json(depth: int) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        path = folder / "deep.json"
        path.write_text("[" * depth + "]" * depth, encoding="utf-8")
        return path

    return build


def _wide_csv(extra: int) -> Callable[[Path], Path]:
    """A request log's header with `extra` more columns: refused from its header, not after minutes of typing."""

    def build(folder: Path) -> Path:
        columns = ["ts", "instance", "batch_size", "allocated_after", *(f"c{i}" for i in range(extra))]
        values = ["2026-11-30T01:00:00Z", "a", "4", "100", *("1" for _ in range(extra))]
        path = folder / "wide.csv"
        path.write_text(",".join(columns) + "\n" + ",".join(values) + "\n", encoding="utf-8")
        return path

    return build


def built_in_child(case: HostileCase, folder: Path) -> Path:
    """`case.build(folder)` in a forked child: a child's peak RSS counts its parent's at the fork, so building
    a 200 MB line here would inflate every measurement after it."""
    context = multiprocessing.get_context("fork")
    queue = context.SimpleQueue()
    child = context.Process(target=lambda: queue.put(case.build(folder)))
    child.start()
    child.join()
    if child.exitcode != 0:
        raise SystemExit(f"building {case.name} failed (exit {child.exitcode})")
    return queue.get()


def run_input(case: HostileCase, folder: Path, oomlab: Path) -> CaseResult:
    """Build an input case and ingest it in a fresh child."""
    path = built_in_child(case, folder)
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    disk = sum(f.stat().st_size for f in files)
    raw = sum(uncompressed_size(f) for f in files)
    db = folder / f"{case.name}.duckdb"
    db.unlink(missing_ok=True)
    argv = [str(oomlab), "ingest", str(path), "--db", str(db), "--quiet"]
    seconds, peak_mb, status, output, killed = _measure(argv, 4 * target_seconds(raw), 2 * target_mb(raw))
    outcome = killed or _outcome(status, output, path)
    expected = "refused" if case.refused else "read"
    passed = outcome == expected and seconds <= target_seconds(raw) and peak_mb <= target_mb(raw)
    for f in files:  # the big inputs are not kept
        if f.stat().st_size > 64 * MIB:
            f.unlink()
    return CaseResult(case.name, "ingest", disk, raw, seconds, peak_mb, outcome, passed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="size of the generated cases (default 1)")
    parser.add_argument("--oomlab", help="the oomlab command (default: the one beside this python)")
    parser.add_argument("--dir", type=Path, help="where the cases are written (default: a temporary folder)")
    parser.add_argument("--only", help="comma-separated case names")
    parser.add_argument("--no-snapshots", action="store_true", help="skip bench/hostile_snapshots.py's cases")
    args = parser.parse_args()
    oomlab = oomlab_executable(args.oomlab)
    wanted = set(args.only.split(",")) if args.only else None
    results: list[CaseResult] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        for case in input_cases(args.scale):
            if wanted is None or case.name in wanted:
                results.append(run_input(case, folder, oomlab))
                done = results[-1]
                print(f"{done.case}: {done.seconds:.2f} s, {done.peak_mb:.0f} MB, {done.outcome}", flush=True)
        if not args.no_snapshots:
            for case in snapshot_cases(args.scale):
                if wanted is None or case.name in wanted:
                    results.extend(run_case(case, folder, oomlab))
    print()
    print_table(results)
    failed = [r for r in results if not r.passed]
    print(f"\n{len(results) - len(failed)} of {len(results)} passed (targets: 2 s + 1 s/MB, 300 MB + 10x the size)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
