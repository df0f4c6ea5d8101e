"""One event per real OOM (issue 35): each real H200 capture folder ingested whole, as a user would, gives as many
OOM events as tests/data/h200/README.md states, whichever order its files come in, and `oomlab findings` names
the cause the README states.

The folders hold each OOM up to four times: the request-log row (or steps.jsonl), the verbatim message in
oom_messages.txt (no time of its own: it is linked by its numbers, in its file's order), and the `oom` entry of
every snapshot whose trace still holds it.
"""

from __future__ import annotations

import gzip
import json

import duckdb
import pytest

from oomlab import api
from oomlab.config import IngestOptions
from oomlab.load import oom_links

from conftest import CASES, H200, read_jsonl_gz

# folder -> (real OOMs, the instance the events are on, the cause findings must name) from the README
FOLDERS = {
    "serve_leak": (3, "gpu-a-0", "leak"),
    "serve_mixed": (4, "gpu-b-1", "external_pressure"),
    "fragmentation": (2, "steps", "fragmentation"),
    "fragmentation_expandable": (2, "steps", "fragmentation"),
}


def _ingest(run_cli, db, paths) -> None:
    result = run_cli("ingest", *map(str, paths), "--db", str(db), "--quiet")
    assert result.exit_code == 0, result.output


def _events(db) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT ts, instance, requested_bytes, sightings, origins FROM stg_oom_events ORDER BY ts"
        ).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_capture_folder_has_one_event_per_real_oom(tmp_path, run_cli, folder):
    ooms, instance, cause = FOLDERS[folder]
    db = tmp_path / "whole.duckdb"
    _ingest(run_cli, db, [H200 / folder])
    events = _events(db)
    assert len(events) == ooms
    assert {e[1] for e in events} == {instance}
    # every event was seen by the log and the message file at least
    assert all(e[3] >= 2 and {"message"} < set(e[4]) for e in events)
    findings = run_cli("findings", "--db", str(db), "--json", str(tmp_path / "f.json"))
    assert findings.exit_code == 0, findings.output
    top = json.loads((tmp_path / "f.json").read_text())["findings"][0]
    assert (top["kind"], top["impact"]) == (cause, ooms)


@pytest.mark.parametrize("folder", ["serve_leak", "fragmentation"])
def test_the_order_of_ingest_never_changes_the_events(tmp_path, run_cli, folder):
    files = sorted((H200 / folder).iterdir())
    forward, backward = tmp_path / "forward.duckdb", tmp_path / "backward.duckdb"
    for path in files:
        _ingest(run_cli, forward, [path])
    for path in reversed(files):
        _ingest(run_cli, backward, [path])
    assert _events(forward) == _events(backward)


def test_two_equal_messages_and_one_logged_oom_are_two_ooms():
    """fragmentation/oom_messages.txt holds two equal messages and sample_logs/h200/fragmentation only one
    snapshot OOM beside them: whichever message is that OOM brings it the same facts, so the first joins it."""
    logged = _sighting(1, "snapshot", ts=True)
    first, second = _sighting(2, "message", source=2, line=2), _sighting(3, "message", source=2, line=4)
    events = oom_links.link([logged, first, second])
    assert sorted((len(e.sightings), e.sightings[-1].line) for e in events) == [(1, 4), (2, 2)]


def test_two_different_messages_for_one_logged_oom_stay_apart():
    """Both agree with the logged OOM within the allocator's rounding but print different sizes: joining either
    could give it the other's facts, and nothing says which, so neither joins."""
    logged = _sighting(1, "structured", ts=True)
    first = _sighting(2, "message", source=2, line=2)
    second = _sighting(3, "message", source=2, line=4, requested=(1 << 30) + (1 << 20))
    events = oom_links.link([logged, first, second])
    assert sorted(len(e.sightings) for e in events) == [1, 1, 1]


def test_a_snapshot_size_matches_the_message_through_the_allocators_rounding():
    """serve_mixed's first OOM: the snapshot records 416,587,776 B asked, the message 398.00 MiB allocated."""
    message = _sighting(1, "structured", ts=True, requested=417333248)
    snapshot = _sighting(2, "snapshot", source=2, ts=True, requested=416587776)
    (event,) = oom_links.link([message, snapshot])
    assert [s.origin for s in event.sightings] == ["structured", "snapshot"]
    assert oom_links.allocation_size(416587776) == 417333248


def test_placed_sightings_on_two_hosts_are_two_events():
    a = _sighting(1, "structured", ts=True, instance="host-a", placed=True)
    b = _sighting(2, "message", source=2, ts=True, instance="host-b", placed=True)
    assert len(oom_links.link([a, b])) == 2


def _sighting(
    event_id: int,
    origin: str,
    *,
    source: int = 1,
    line: int = 1,
    ts: bool = False,
    requested: int = 1 << 30,
    instance: str = "file",
    placed: bool = False,
) -> oom_links.Sighting:
    from datetime import datetime, timedelta

    return oom_links.Sighting(
        event_id=event_id,
        source_id=source,
        path=f"/logs/{source}.log",
        line=line,
        origin=origin,
        ts=datetime(2026, 11, 30, 1, 44, 57) if ts else None,
        instance=instance,
        placed=placed,
        gpu_index=0,
        requested=requested,
        free=145867826790,
        total=150109880320,
        latency=timedelta(0),
    )


DEVICES_SEEN = """
SELECT DISTINCT instance FROM (
    SELECT instance FROM stg_requests UNION ALL SELECT instance FROM stg_oom_events
    UNION ALL SELECT instance FROM stg_allocator_stats UNION ALL SELECT instance FROM stg_snapshots
) ORDER BY 1
"""


@pytest.mark.parametrize(
    "folder, device",
    [("serve_leak", "gpu-a-0"), ("serve_mixed", "gpu-b-1"), ("cache_bloat", "gpu-c-2"), ("fragmentation", "steps")],
)
def test_a_capture_folder_is_one_device(tmp_path, run_cli, folder, device):
    """Its request log names the device (or, in fragmentation, nothing does and its OOMs tie the files into one
    process); the snapshots and memory printouts beside it, which name none, are on it too."""
    db = tmp_path / "whole.duckdb"
    _ingest(run_cli, db, [H200 / folder])
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert [r[0] for r in con.execute(DEVICES_SEEN).fetchall()] == [device]
    finally:
        con.close()


def test_a_folder_of_two_hosts_places_no_unnamed_file(tmp_path, run_cli):
    """Two real request logs naming two hosts (gpu-a-0, gpu-b-1) and a printout in one folder: the printout's
    folder names two devices, so it stays on its own."""
    import shutil

    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(H200 / "serve_leak/requests.jsonl.gz", folder / "a.jsonl.gz")
    shutil.copy(H200 / "serve_mixed/requests.jsonl.gz", folder / "b.jsonl.gz")
    shutil.copy(H200 / "serve_leak/memory_stats_end.json.gz", folder / "memory_stats_end.json.gz")
    db = tmp_path / "two.duckdb"
    _ingest(run_cli, db, [folder])
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert [r[0] for r in con.execute(DEVICES_SEEN).fetchall()] == ["gpu-a-0", "gpu-b-1", "logs"]
    finally:
        con.close()


@pytest.mark.parametrize(
    "folder, kind, subject",
    [("cache_bloat", "cache_growth", "gpu-c-2"), ("model_swap", "leak", "model swaps on swaps")],
)
def test_a_capture_folder_without_ooms_gets_its_cause_named(tmp_path, run_cli, folder, kind, subject):
    """The README's truth for the two folders with no OOM: cache_bloat's reserved memory grows from 2.21 to
    4.80 GiB over a flat 2.00 GiB allocated (cache growth, not a leak); model_swap's unclean swaps climb from 0.35
    to 1.13 GiB and the clean ones do not (a leak across swaps, given back by the clean unload)."""
    db = tmp_path / "whole.duckdb"
    _ingest(run_cli, db, [H200 / folder])
    assert _events(db) == []
    findings = run_cli("findings", "--db", str(db), "--json", str(tmp_path / "f.json"))
    assert findings.exit_code == 0, findings.output
    (top,) = json.loads((tmp_path / "f.json").read_text())["findings"]
    assert (top["kind"], top["subject"], top["impact"]) == (kind, subject, 0.0)
    m = top["metrics"]
    if folder == "cache_bloat":
        assert (m["allocated_start_bytes"], m["allocated_end_bytes"]) == (2 << 30, 2 << 30)
        assert (round(m["reserved_low_bytes"] / 2**30, 2), round(m["reserved_end_bytes"] / 2**30, 2)) == (2.21, 4.80)
    else:
        assert (m["first_level_bytes"], m["last_level_bytes"], m["clean_returns_after"]) == (379636736, 1211756544, 2)


def test_a_message_pasted_four_times_in_an_issue_is_one_event_but_a_log_repeating_it_is_four(tmp_path) -> None:
    """Real: ComfyUI issue 7440 (tests/cases/realworld/pasted_text/019) pastes one MPS OOM into four sections of
    the bug template. As a Markdown document it is one failure; the same lines in a log are four."""
    artifact = next((CASES / "realworld/pasted_text").glob("019_*/artifact.md"))
    as_log = tmp_path / "service.log"
    as_log.write_text(artifact.read_text(encoding="utf-8"), encoding="utf-8")
    for path, events in ((artifact, 1), (as_log, 4)):
        db = tmp_path / f"{path.stem}.duckdb"
        api.ingest(db, [str(path)], IngestOptions())
        con = duckdb.connect(str(db), read_only=True)
        try:
            assert con.execute("SELECT count(*) FROM stg_oom_events").fetchall() == [(events,)]
            assert con.execute("SELECT count(*) FROM oom_events").fetchall() == [(4,)]  # every sighting kept
            matched = sorted(r[0] for r in con.sql("SELECT matched_by FROM oom_event_links").fetchall())
        finally:
            con.close()
        if events == 1:
            assert matched == ["a copy pasted in its document"] * 3 + ["key"]


@pytest.mark.parametrize(
    "first, second",
    [
        ("014_cupy_old-wording-quoted-outofmemoryerror", "064_pytorch_rich-traceback-wrapped-120-cols"),
        ("024_jax_", "096_nccl_"),
    ],
)
def test_messages_of_two_allocators_are_two_failures(tmp_path, first: str, second: str) -> None:
    """Real corpus pairs ingested together under their names, as a user dumping unrelated logs in one folder: a
    CuPy OOM and a PyTorch one both asking 1 GiB, with no time and no host (oom/014 and 064), a JAX and an NCCL one
    (024 and 096). Their sizes agree, but one failure is one allocator's: they are two events."""
    oom = CASES / "realworld" / "oom"
    paths = []
    for prefix in (first, second):
        (artifact,) = next(oom.glob(f"{prefix}*")).glob("artifact.*")
        paths.append(tmp_path / f"{artifact.parent.name}{artifact.suffix}")
        paths[-1].write_bytes(artifact.read_bytes())
    db = tmp_path / "two.duckdb"
    api.ingest(db, [str(p) for p in paths], IngestOptions())
    con = duckdb.connect(str(db), read_only=True)
    try:
        sightings = con.execute("SELECT count(*), count(DISTINCT framework) FROM oom_events").fetchone()
        events = con.execute("SELECT count(*) FROM stg_oom_events").fetchone()
    finally:
        con.close()
    assert sightings == (2, 2) and events == (2,)


def test_a_file_named_like_its_siblings_is_on_the_device_its_name_says(tmp_path, run_cli):
    """A folder of one request log per host, each named after its host (fleet 109712 of bench/truth.py: a10-01's
    and three MI300X hosts' logs side by side). requests/gpu-b-1.jsonl.gz is the real serve_mixed log, tied to
    gpu-b-1 by its OOMs, which its messages (messages/oom_messages.txt.gz) saw too; requests/gpu-a-0.jsonl.gz is
    the real serve_leak log cut of its `instance` field, so only its name says where it ran. It is not put on
    gpu-b-1, the one device its folder's other file is on: that file's name is its device, so this one's is
    its. A capture folder's printouts are of another sort than its request log and are still placed by it
    (`test_a_capture_folder_is_one_device`)."""
    requests, messages = tmp_path / "requests", tmp_path / "messages"
    requests.mkdir()
    messages.mkdir()
    (requests / "gpu-b-1.jsonl.gz").write_bytes((H200 / "serve_mixed" / "requests.jsonl.gz").read_bytes())
    (messages / "oom_messages.txt.gz").write_bytes((H200 / "serve_mixed" / "oom_messages.txt.gz").read_bytes())
    rows = read_jsonl_gz(H200 / "serve_leak" / "requests.jsonl.gz")
    cut = "".join(json.dumps({k: v for k, v in r.items() if k != "instance"}) + "\n" for r in rows)
    (requests / "gpu-a-0.jsonl.gz").write_bytes(gzip.compress(cut.encode()))
    db = tmp_path / "hosts.duckdb"
    _ingest(run_cli, db, [requests, messages])
    con = duckdb.connect(str(db), read_only=True)
    try:
        placed = con.execute(
            "SELECT split_part(s.path, '/', -1), p.instance, p.placed_by FROM source_placements AS p "
            "JOIN sources AS s USING (source_id) ORDER BY 1"
        ).fetchall()
    finally:
        con.close()
    assert placed == [
        ("gpu-a-0.jsonl.gz", None, "its name"),
        ("gpu-b-1.jsonl.gz", "gpu-b-1", "its OOMs"),
        ("oom_messages.txt.gz", "gpu-b-1", "its OOMs"),
    ]
