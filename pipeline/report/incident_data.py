"""The incident report as data: one OOM decoded, classified, put in its hours, and matched to a snapshot.

JSON-able like the weekly document; the HTML layer draws only from it.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any

import duckdb
import polars as pl

from ..analyses.fleet.allocator_series import allocator_series, instance_moments
from ..analyses.fleet.allocator_settings import instance_settings
from ..analyses.fleet.classify import classify_ooms
from ..errors import OomlabError
from ..findings.prompt_threshold import card_cap
from ..findings.wording import title
from ..load.sql import sql_text
from ..units import file_name
from .downsample import downsample
from .formatting import moment, size
from .incident_snapshot import snapshot_view
from .next_steps import headline, next_steps
from .weekly_data import report_window

# The classification runs up to the event itself: [since, until) ends just after it.
_JUST_AFTER = timedelta(microseconds=1)
# The hours around an OOM that its timeline shows.
CONTEXT = timedelta(hours=3)
SIMILAR = 10
# OOMs drawn around the incident: the nearest ones when a storm has more (the page stays small).
MAX_NEARBY_OOMS = 500
# The decoded message, in the order a reader checks it; (label, column, kind).
MESSAGE_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("tried to allocate", "requested_bytes", "size"),
    ("device total capacity", "device_total_bytes", "size"),
    ("free on the device", "free_bytes", "size"),
    ("per-process cap (allowed)", "cap_bytes", "size"),
    ("this process in use (incl. non-PyTorch)", "process_in_use_bytes", "size"),
    ("allocated by PyTorch", "allocated_bytes", "size"),
    ("reserved by PyTorch", "reserved_bytes", "size"),
    ("reserved but unallocated", "reserved_unallocated_bytes", "size"),
    ("non-PyTorch memory of this process", "non_pytorch_bytes", "size"),
    ("other processes", "other_bytes", "size"),
    ("other process ids", "other_pids", "text"),
    ("batch size", "batch_size", "number"),
    ("input tokens", "input_sequence_length", "number"),
    ("output tokens", "output_sequence_length", "number"),
    ("batch x (input + output) tokens", "tokens", "number"),
    ("allocated before the request", "allocated_before", "size"),
)


def resolve_event(
    con: duckdb.DuckDBPyConnection, event_id: int | None, instance: str | None, at: datetime | None
) -> int:
    """The event id asked for: given (any of its sightings' ids), the OOM of `instance` nearest to `at`, or, with
    neither, the latest OOM."""
    if event_id is None and instance is None:
        latest = con.sql(sql_text("q_incident_latest")).fetchall()
        if not latest:
            raise OomlabError("no OOM in the database", hint="ingest logs with OOM messages, request logs or snapshots")
        event_id = int(latest[0][0])
    if event_id is not None:
        return int(con.sql(sql_text("q_incident_event_key"), params={"event_id": event_id}).fetchall()[0][0])
    rows = con.sql(sql_text("q_incident_nearest"), params={"instance": instance, "at": at}).fetchall()
    if not rows:
        raise OomlabError(
            f"no OOM with a time on instance {instance!r}",
            hint='list them with: oomlab query "SELECT DISTINCT instance FROM oom_events"',
        )
    return int(rows[0][0])


def incident_data(
    con: duckdb.DuckDBPyConnection, event_id: int | None = None, instance: str | None = None, at: datetime | None = None
) -> dict[str, Any]:
    """Everything the incident page shows about one OOM."""
    event = _event(con, resolve_event(con, event_id, instance, at))
    ts: datetime | None = event["ts"]
    classified = classify_ooms(con, None, ts + _JUST_AFTER if ts else None)
    verdict = _verdict(classified, event["event_id"])
    snapshot_id = None if event.get("snapshot_id") is None else int(event["snapshot_id"])
    snapshot = snapshot_view(con, snapshot_id, event["requested_bytes"], event.get("gpu_index"))
    return {
        "report": "incident",
        "event": {k: v for k, v in event.items() if k not in {"message"}},
        "message": event["message"],
        "decoded": decoded_fields(event),
        "summary": incident_summary(event),
        "verdict": verdict,
        "timeline": timeline(con, event) if ts else None,
        "snapshot": snapshot,
        "allocator": allocator_view(con, event["instance"]),
        "similar": similar_incidents(classified, event),
        "next_steps": (
            steps := next_steps(
                verdict, event, snapshot, instance_settings(con, event["instance"], ts), week_cap(con, event, verdict)
            )
        ),
        "action": dict(zip(("headline", "detail"), headline(steps[0]), strict=True)),
    }


def incident_summary(event: dict[str, Any]) -> str:
    """One sentence of what happened: who asked for how much, against what was held and free."""
    parts = [f"{moment(event['ts'])}: {event['instance']}"]
    if event.get("model_version"):
        parts.append(f" ({event['model_version']})")
    parts.append(f" asked for {size(event['requested_bytes'])}" if event.get("requested_bytes") else " ran out")
    if event.get("tokens"):
        parts.append(f" serving {event['tokens']:,} batch x (input + output) tokens")
    held = [
        f"{size(event[key])} {words}"
        for key, words in (
            ("allocated_bytes", "allocated"),
            ("reserved_bytes", "reserved"),
            ("other_bytes", "held by other processes"),
        )
        if event.get(key)
    ]
    if held:
        parts.append(f" with {', '.join(held)}")
    if event.get("free_bytes") is not None and event.get("device_total_bytes"):
        parts.append(f"; {size(event['free_bytes'])} of the card's {size(event['device_total_bytes'])} was free")
    if event.get("cap_bytes"):
        parts.append(f", but the process was capped at {size(event['cap_bytes'])}")
    return "".join(parts) + "."


def week_cap(con: duckdb.DuckDBPyConnection, event: dict[str, Any], verdict: dict[str, Any]) -> dict[str, Any] | None:
    """For a request too large for its card: the cap that the weekly report of the event's week (the 7 days up
    to the midnight after it, as `report weekly` picks by default) sets for the card, in that finding's own
    words, so the incident and the week say one number; None without one."""
    ts, total = event["ts"], event.get("device_total_bytes")
    if verdict.get("cause") not in ("capacity", "transient_peak") or ts is None or total is None:
        return None
    week = report_window(con, None, datetime.combine(ts.date(), time()) + timedelta(days=1))
    finding = card_cap(con, week.since, week.until, int(total), event.get("model_version"))
    if finding is None:
        return None
    return {"title": title(finding), "cap": finding.metrics["cap"], "since": week.since, "until": week.until}


def allocator_view(con: duckdb.DuckDBPyConnection, instance: str | None) -> dict[str, Any] | None:
    """What the allocator said about itself on the instance (memory_summary / memory_stats printouts), and
    whether its moments show a leak or cache growth; None without printouts."""
    if instance is None:
        return None
    moments = instance_moments(con, instance)
    if moments.is_empty():
        return None
    series = allocator_series(con)
    verdicts = series.filter(pl.col("instance") == instance).to_dicts() if not series.is_empty() else []
    rows = [m | {"source_file": file_name(m["source_file"])} for m in moments.to_dicts()]
    return {"moments": rows, "verdicts": verdicts}


def _event(con: duckdb.DuckDBPyConnection, event_id: int) -> dict[str, Any]:
    rows = con.sql(sql_text("q_incident_event"), params={"event_id": event_id}).pl()
    if rows.is_empty():
        raise OomlabError(
            f"no OOM event {event_id}",
            hint='see: oomlab query "SELECT event_id, ts, instance FROM oom_events ORDER BY ts"',
        )
    event = rows.row(0, named=True)
    event["source_file"] = file_name(event.pop("source_path"))
    return event


def decoded_fields(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The message and request fields that are known, each with its label and how to show it."""
    out = []
    for label, column, kind in MESSAGE_FIELDS:
        value = event.get(column)
        if value is not None and value != []:
            out.append({"label": label, "field": column, "value": value, "kind": kind})
    return out


def _verdict(classified: pl.DataFrame, event_id: int) -> dict[str, Any]:
    rows = classified.filter(pl.col("event_id") == event_id)
    if rows.is_empty():
        return {
            "cause": "unknown",
            "confidence": 0.0,
            "evidence": "the event could not be classified",
            "contributing": [],
            "rule": "none",
        }
    return rows.row(0, named=True)


def timeline(con: duckdb.DuckDBPyConnection, event: dict[str, Any]) -> dict[str, Any]:
    """Requests, memory, GPU telemetry, OOMs and scheduled jobs on the instance in the hours around the OOM."""
    params = {"instance": event["instance"], "since": event["ts"] - CONTEXT, "until": event["ts"] + CONTEXT}
    requests = con.sql(sql_text("q_incident_requests"), params=params).pl()
    requests = downsample(requests, "ts", "peak_allocated", keep="is_oom")
    ooms = con.sql(sql_text("q_incident_ooms"), params=params).pl()
    if ooms.height > MAX_NEARBY_OOMS:
        distance = (pl.col("ts") - event["ts"]).abs()
        ooms = ooms.sort(distance, "event_id").head(MAX_NEARBY_OOMS).sort("ts", "event_id")
    jobs = con.sql(sql_text("q_incident_jobs"), params=params).pl()
    telemetry = con.sql(sql_text("q_incident_telemetry"), params={**params, "gpu_index": event["gpu_index"]}).pl()
    telemetry = downsample(telemetry, "ts", "memory_used_bytes")
    return {
        "since": params["since"],
        "until": params["until"],
        "requests": requests.to_dict(as_series=False),
        "ooms": ooms.to_dict(as_series=False),
        "jobs": jobs.to_dicts(),
        "telemetry": telemetry.to_dict(as_series=False),
    }


def similar_incidents(classified: pl.DataFrame, event: dict[str, Any]) -> list[dict[str, Any]]:
    """Earlier OOMs with the same cause on the same instance or model version, newest first."""
    mine = classified.filter(pl.col("event_id") == event["event_id"])
    if mine.is_empty() or event["ts"] is None:
        return []
    cause = mine["cause"][0]
    same_place = pl.col("instance") == event["instance"]
    if event["model_version"] is not None:
        same_place = same_place | (pl.col("model_version") == event["model_version"])
    earlier = classified.filter((pl.col("cause") == cause) & same_place & (pl.col("ts") < event["ts"]))
    keep = ["event_id", "ts", "instance", "model_version", "cause", "requested_bytes", "tokens", "evidence"]
    return earlier.sort(["ts", "event_id"], descending=True).head(SIMILAR).select(keep).to_dicts()
