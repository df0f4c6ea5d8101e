"""`oomlab pull prometheus`: the GPU and serving-engine memory series oomlab knows, over a time range, from a
Prometheus server's HTTP API into the same tables a scrape file fills (ingest/series.py).

For each known metric that has series in the range (`/api/v1/series`), the range is read in pieces, each the
samples the server stored in it: an instant query of a range selector (`metric[<piece>]` at the piece's end),
kept to at most one sample per `--step`. Not `query_range`: its answer evaluates every step, so it repeats a
series' last sample until the server's lookback (5 minutes) runs out and dates each sample at the step rather
than when it was scraped; asking for the samples' own times as well (`timestamp(metric)`) took the real
Prometheus 2.42 of the tests 11.6 s for one piece that the range selector reads in 0.05 s. Stored samples at
their own times also make a range pulled again add nothing.

A piece that cannot be read after the client's retries is recorded as missing, with the reason, in the pull's
`sources` row and as a reject; what was read is kept.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import duckdb
import numpy as np
import xxhash

from ..load import tables as load
from ..load.sql import run_file
from ..parse.telemetry.prom import DCGM_FIELDS
from ..parse.telemetry.series import Series, answer_series
from ..parse.telemetry.series_rows import series_rows
from ..records import Reject
from ..units import parse_duration
from .http_get import Client, FetchError
from .series import insert_series

PULL_KIND = "prometheus_pull"
# Samples per series asked for at once, as Prometheus bounds a query_range (web/api/v1/api.go: "exceeded maximum
# resolution of 11,000 points per timeseries"): at one sample per step, a piece is at most this many steps.
POINTS_LIMIT = 11_000
# Points one answer may carry over all its series: a fleet of 1,000 GPUs would otherwise ask for 11 M points
# (several hundred MB of JSON) at once. 2 M points is about 60 MB of answer, well under http_get's bound.
MAX_POINTS_PER_QUERY = 2_000_000
# The serving engines' memory series: KV-cache use (vLLM v1 and v0, SGLang's token pool; SGLang re-exposed by a
# gateway as `sglang_`) and TGI's batch, the requests that hold it.
ENGINE_METRICS = (
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "sglang:token_usage",
    "sglang_token_usage",
    "tgi_batch_current_size",
    "tgi_batch_current_max_tokens",
)
KNOWN_METRICS = (*DCGM_FIELDS, *ENGINE_METRICS)
_NAMES_A_METRIC = re.compile(r"^\s*[a-zA-Z_:][a-zA-Z0-9_:]*\s*(\{|$)")


@dataclass(frozen=True)
class PullRequest:
    """What to pull: a range of the known metrics, each restricted by the label-only matchers (`{pod=~"vllm.*"}`);
    a matcher that names a metric (`DCGM_FI_DEV_FB_USED{Hostname="n1"}`) is pulled as written instead."""

    client: Client
    since: datetime  # UTC, naive
    until: datetime
    step_s: float = 30.0
    matchers: tuple[str, ...] = ()
    instance: str | None = None  # --instance: every row on one device

    def selectors(self) -> list[tuple[str, str]]:
        """(metric name, selector) pairs to pull."""
        named = [m.strip() for m in self.matchers if _NAMES_A_METRIC.match(m)]
        restrict = [m.strip() for m in self.matchers if not _NAMES_A_METRIC.match(m)]
        pairs = [(re.split(r"[{\s]", m, maxsplit=1)[0], m) for m in named]
        if named and not restrict:
            return pairs
        labels = ",".join(r.strip().strip("{}") for r in restrict)
        return pairs + [(name, f"{name}{{{labels}}}" if labels else name) for name in KNOWN_METRICS]


@dataclass
class PullReport:
    """What one pull did."""

    source_id: int
    url: str
    since: datetime
    until: datetime
    series: int = 0
    samples: int = 0  # samples read from the server
    rows: int = 0  # rows added (a sample already held is not added again)
    missing: list[str] = field(default_factory=list)  # the pieces that could not be read, each with its reason
    notes: list[str] = field(default_factory=list)


def pull_prometheus(con: duckdb.DuckDBPyConnection, request: PullRequest) -> PullReport:
    """Pull the request's range into the open database: one `sources` row, its rows, the missing pieces."""
    if request.until <= request.since:
        raise FetchError(f"nothing to pull: --until {request.until} is not after --since {request.since}")
    if not (math.isfinite(request.step_s) and request.step_s >= 1e-3):
        raise FetchError(f"--step {request.step_s}s is not a step Prometheus can evaluate")
    source_id = load.next_source_id(con)
    report = PullReport(source_id, request.client.base_url, request.since, request.until)
    rejects: list[Reject] = []
    _check_retention(request, report)  # before anything is written: a server not there ends the pull here
    # The source row next: each piece's rows are committed as it lands, and a pull cut short keeps them.
    load.insert_source(con, _source_row(request, report))
    for name, selector in request.selectors():
        try:
            count = _series_count(request, selector)
        except FetchError as exc:
            if exc.status in (401, 403):
                raise
            _missing(report, rejects, selector, request.since, request.until, str(exc))
            continue
        if count:
            _pull_metric(con, request, name, selector, count, report, rejects)
    counts = {"rows": report.rows, "rejects": load.insert_rejects(con, source_id, rejects), "note": _note(report)}
    run_file(con, "update_source_counts", counts | {"source_id": source_id})
    return report


def _series_count(request: PullRequest, selector: str) -> int:
    """How many series the selector has in the range (the index only: no sample is read)."""
    answer = request.client.get_json(
        "/api/v1/series",
        {"match[]": selector, "start": _unix(request.since), "end": _unix(request.until)},
    )
    return len(answer.get("data") or [])


def _pull_metric(
    con: duckdb.DuckDBPyConnection,
    request: PullRequest,
    name: str,
    selector: str,
    count: int,
    report: PullReport,
    rejects: list[Reject],
) -> None:
    """One metric, piece by piece: each piece's rows go in as soon as it is read."""
    points = max(1, min(POINTS_LIMIT, MAX_POINTS_PER_QUERY // count))
    span = timedelta(seconds=request.step_s * points)
    pieces = []
    start = request.since - timedelta(milliseconds=1)  # a range selector's window is open on the left
    while start < request.until:
        pieces.append((start, min(start + span, request.until)))
        start = pieces[-1][1]
    while pieces:
        start, end = pieces.pop(0)
        try:
            found = _piece(request, name, selector, start, end)
        except FetchError as exc:
            if exc.status in (401, 403):
                raise
            if _too_many(exc) and end - start > timedelta(seconds=2 * request.step_s):
                middle = start + (end - start) / 2  # more samples than the server loads at once: halves
                pieces[:0] = [(start, middle), (middle, end)]
                continue
            _missing(report, rejects, selector, start, end, str(exc))
            continue
        rows = series_rows(found, request.instance)
        report.series += len(found)
        report.samples += sum(len(s.values) for s in found)
        report.rows += insert_series(con, rows, report.source_id, fallback=None)
        rejects += rows.rejects


def _piece(request: PullRequest, name: str, selector: str, start: datetime, end: datetime) -> list[Series]:
    """The samples stored in (start, end], at most one per step."""
    window_ms = round((end - start).total_seconds() * 1000)
    answer = request.client.get_json(
        "/api/v1/query", {"query": f"{selector}[{window_ms}ms]", "time": f"{_unix(end):.3f}"}
    )
    return [_one_per_step(s, name, request.step_s) for s in answer_series(answer)]


def _one_per_step(series: Series, name: str, step_s: float) -> Series:
    """The series with its first sample of each step (counted from the epoch, so pieces agree on the grid)."""
    step_ms = max(1, round(step_s * 1000))
    slots = series.ts_ms // step_ms
    first = np.ones(len(slots), dtype=bool)
    first[1:] = slots[1:] != slots[:-1]
    return Series(series.name or name, series.labels, series.ts_ms[first], series.values[first])


def _too_many(exc: FetchError) -> bool:
    """The server refused to load that many samples at once (Prometheus' --query.max-samples)."""
    return exc.status in (400, 422, 503) and "too many samples" in exc.body


def _check_retention(request: PullRequest, report: PullReport) -> None:
    """A note when the range starts before what the server keeps (its runtime info's retention): that part
    cannot be pulled, whatever the queries say. The first request of a pull: a server that cannot be reached
    (after the client's retries) or refuses the credentials ends the pull here, with one line."""
    try:
        info = request.client.get_json("/api/v1/status/runtimeinfo", {})
    except FetchError as exc:
        if exc.status is None or exc.status in (401, 403):
            raise  # no server there, or one that refuses us: every query would fail the same way
        return  # an older server, or a proxy that hides it: the queries still say what is there
    kept = parse_duration((info.get("data") or {}).get("storageRetention", "").split(" or ")[0])
    if kept is None:
        return
    oldest = datetime.now(UTC).replace(tzinfo=None) - kept
    if request.since < oldest:
        report.notes.append(
            f"{request.since:%Y-%m-%d %H:%M} to {min(oldest, request.until):%Y-%m-%d %H:%M} is past the server's "
            f"retention ({info['data']['storageRetention']}): nothing before {oldest:%Y-%m-%d %H:%M} is kept"
        )


def _missing(
    report: PullReport, rejects: list[Reject], selector: str, start: datetime, end: datetime, why: str
) -> None:
    """A piece that could not be read: in the report (and so the source's note) and as a reject."""
    piece = f"{selector} {start:%Y-%m-%d %H:%M:%S} to {end:%Y-%m-%d %H:%M:%S}"
    report.missing.append(f"{piece}: {why}")
    rejects.append(Reject(None, f"not pulled: {why}", piece))


def _note(report: PullReport) -> str | None:
    parts = list(report.notes)
    if report.missing:
        parts.append(f"{len(report.missing)} ranges not pulled, first: {report.missing[0]}")
    if not report.samples and not report.missing:
        parts.append("nothing found: no known GPU or serving-engine series in the range")
    return "; ".join(parts) or None


def _source_row(request: PullRequest, report: PullReport) -> load.SourceRow:
    """The pull's `sources` row, its counts zero until the pull ends; its labels say what was asked."""
    labels = {
        "url": request.client.base_url,
        "since": request.since.isoformat(),
        "until": request.until.isoformat(),
        "step_s": request.step_s,
        "matchers": list(request.matchers),
    }
    if request.instance:
        labels["instance"] = request.instance
    # Not a file's digest: a pull is never skipped as seen before (its samples are merged instead).
    digest = xxhash.xxh3_128_hexdigest(f"{json.dumps(labels, sort_keys=True)}@{datetime.now(UTC).isoformat()}".encode())
    return load.SourceRow(report.source_id, f"prometheus:{request.client.base_url}", digest, PULL_KIND, 0, 0, 0, labels)


def _unix(moment: datetime) -> float:
    return moment.replace(tzinfo=UTC).timestamp()
