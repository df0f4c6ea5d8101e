"""Capture's files: size rotation, a full disk reported once and skipped, the background writer, and OOM
snapshots (bounded, rate-limited, named so that `oomlab ingest` labels them)."""

from __future__ import annotations

import errno
import io
import json
import logging
import time
from pathlib import Path

import duckdb
import pytest

from oomlab import api
from oomlab.capture import Capture, FakeMemory, FakeOutOfMemoryError, SnapshotPolicy
from oomlab.config import IngestOptions
from oomlab.parse.snapshot.safe_pickle import load_plain_pickle

from conftest import H200

MIXED = H200 / "serve_mixed"
MESSAGE = "CUDA out of memory. Tried to allocate 398.00 MiB."


def lines_of(paths: list[Path]) -> list[dict]:
    return [json.loads(line) for path in paths for line in path.read_text().splitlines()]


def lines_written(folder: Path, wait_s: float = 20) -> list[dict]:
    """The lines in the folder's files once there are any whole ones: the writer thread is woken at once,
    but it creates a file before it writes to it, and a slow machine gets time."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            found = lines_of(list(folder.glob("*.jsonl")))
        except json.JSONDecodeError:  # a line half written
            found = []
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.01)


def fail_once_oom(cap: Capture, fake: FakeMemory, request_id: str) -> None:
    with pytest.raises(FakeOutOfMemoryError), cap.request(request_id):
        fake.out_of_memory(417333248, MESSAGE)


class FullDisk(io.RawIOBase):
    """A file on a full disk: every write fails with ENOSPC."""

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_files_rotate_by_size_and_the_oldest_are_deleted(tmp_path: Path):
    logs = tmp_path / "logs"
    with Capture(logs, instance="gpu-r", memory=FakeMemory(), max_file_bytes=2000, max_files=3) as cap:
        for i in range(40):
            with cap.request(f"r{i:03d}", batch_size=i):
                pass
            if i % 7 == 0:
                cap.flush()
    files = sorted(logs.glob("gpu-r.requests.*.jsonl"))
    assert len(files) == 3
    assert all(0 < f.stat().st_size <= 2000 for f in files)
    kept = [line["request_id"] for line in lines_of(files)]
    assert kept == [f"r{i:03d}" for i in range(40 - len(kept), 40)]  # the newest, in order, none lost inside
    assert len(kept) > 2000 // len(json.dumps(lines_of(files)[0]))  # more than one file's worth
    report = api.ingest(tmp_path / "db.duckdb", [str(logs)], IngestOptions())
    assert [(r.kind, r.rejects) for r in report.results] == [("jsonl", 0)] * 3
    assert sum(r.rows for r in report.results) == len(kept)


def test_a_full_disk_is_reported_once_and_its_lines_skipped(tmp_path: Path, caplog):
    room = {"free": False}

    def opener(path: Path):
        return open(path, "ab") if room["free"] else FullDisk()

    caplog.set_level(logging.WARNING, logger="oomlab.capture")
    with Capture(tmp_path, instance="gpu-f", memory=FakeMemory(), opener=opener) as cap:
        for i in range(3):
            with cap.request(f"lost{i}"):
                pass
            cap.flush()  # each flush meets the full disk again
        assert cap.writer.dropped == 3
        [record] = caplog.records
        assert record.getMessage().startswith(f"oomlab capture: cannot write {tmp_path}/gpu-f.requests.")
        assert record.getMessage().endswith(": No space left on device; request lines are dropped until it can")
        room["free"] = True
        with cap.request("kept"):
            pass
    assert [line["request_id"] for line in lines_of(sorted(tmp_path.glob("*.jsonl")))] == ["kept"]
    assert "writing to" in caplog.records[-1].getMessage() and "3 lines were dropped" in caplog.text


def test_a_failing_disk_never_reaches_the_handler(tmp_path: Path):
    with Capture(tmp_path, instance="gpu-f", memory=FakeMemory(), opener=lambda p: FullDisk()) as cap:
        with cap.request("a") as req:
            req.output_sequence_length = 3
        assert cap.handler(lambda batch_size: batch_size + 1)(2) == 3
        cap.flush()
    assert list(tmp_path.glob("*.jsonl")) == []


def test_an_oom_line_is_written_without_waiting_for_the_interval(tmp_path: Path):
    fake = FakeMemory()
    with Capture(tmp_path, instance="gpu-w", memory=fake, flush_interval_s=3600) as cap:
        fail_once_oom(cap, fake, "urgent")
        assert [line["status"] for line in lines_written(tmp_path)] == ["oom"]


def test_a_backlog_drops_new_lines_and_says_so_once(tmp_path: Path, caplog):
    with Capture(tmp_path, instance="gpu-b", memory=None, flush_interval_s=3600) as cap:
        cap.writer.max_pending = 2
        for i in range(5):
            with cap.request(f"q{i}"):
                pass
        assert cap.writer.dropped == 3
    assert [line["request_id"] for line in lines_of(list(tmp_path.glob("*.jsonl")))] == ["q0", "q1"]
    assert caplog.text.count("new lines are dropped") == 1


@pytest.fixture(scope="module")
def real_snapshot() -> object:
    """The state and history PyTorch 2.11 returned right after the first OOM of serve_mixed."""
    return load_plain_pickle(MIXED / "snapshot_first_oom.pickle.gz")


def test_an_oom_snapshot_is_ingested_with_the_instance_from_its_name(tmp_path: Path, real_snapshot):
    fake = FakeMemory(snapshot_data=real_snapshot)
    with Capture(tmp_path / "logs", instance="gpu-b-1", memory=fake, snapshots=SnapshotPolicy(max_entries=5000)) as cap:
        assert fake.history == (5000, "python")
        fail_once_oom(cap, fake, "gpu-b-1-00031")
    [dumped] = (tmp_path / "logs").glob("*.pickle.gz")
    assert dumped.name.startswith("gpu-b-1.oom-snapshot.gpu0.") and dumped.name.endswith("Z.pickle.gz")

    query = (
        "SELECT s.instance, s.block_count, s.trace_event_count, count(o.event_id), sum(o.requested_bytes) "
        "FROM snapshots s LEFT JOIN oom_events o ON o.snapshot_id = s.snapshot_id GROUP BY ALL"
    )
    with_label = IngestOptions(instance="gpu-b-1")
    api.ingest(tmp_path / "original.duckdb", [str(MIXED / "snapshot_first_oom.pickle.gz")], with_label)
    api.ingest(tmp_path / "captured.duckdb", [str(tmp_path / "logs")], IngestOptions())  # labels from names
    got = []
    for name in ("original", "captured"):
        with duckdb.connect(str(tmp_path / f"{name}.duckdb"), read_only=True) as con:
            got.append(con.execute(query).fetchall())
            if name == "captured":
                assert con.execute("SELECT instance, status FROM requests").fetchall() == [("gpu-b-1", "oom")]
    assert got[1] == got[0]
    assert got[0][0][3] >= 1  # the snapshot's trace holds the OOM


def test_snapshots_are_rate_limited_and_pruned(tmp_path: Path):
    fake = FakeMemory()
    with Capture(tmp_path, instance="gpu-s", memory=fake, snapshots=True) as cap:
        for i in range(3):
            fail_once_oom(cap, fake, f"o{i}")
    assert fake.snapshots_taken == 1  # the default interval allows one in ten minutes
    assert len(list(tmp_path.glob("*.pickle.gz"))) == 1

    fake = FakeMemory()
    policy = SnapshotPolicy(min_interval_s=0, keep=2)
    with Capture(tmp_path / "every", instance="gpu-s", memory=fake, snapshots=policy) as cap:
        for i in range(4):
            fail_once_oom(cap, fake, f"o{i}")
            time.sleep(0.002)  # distinct names: they carry the time to the microsecond
    assert fake.snapshots_taken == 4
    assert len(list((tmp_path / "every").glob("*.pickle.gz"))) == 2


def test_a_snapshot_over_the_size_limit_is_abandoned_and_reported(tmp_path: Path, real_snapshot, caplog):
    fake = FakeMemory(snapshot_data=real_snapshot)
    policy = SnapshotPolicy(max_bytes=64 << 10, min_interval_s=0)
    with Capture(tmp_path, instance="gpu-z", memory=fake, snapshots=policy) as cap:
        fail_once_oom(cap, fake, "z1")
        fail_once_oom(cap, fake, "z2")
    assert fake.snapshots_taken == 2
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".jsonl")) == []  # no .part left
    assert caplog.text.count("OOM snapshot abandoned, over 65536 bytes") == 1
    assert [line["status"] for line in lines_of(list(tmp_path.glob("*.jsonl")))] == ["oom", "oom"]


def test_without_an_observer_the_snapshot_is_taken_when_the_oom_leaves_the_handler(tmp_path: Path):
    fake = FakeMemory(observer=False)
    with Capture(tmp_path, instance="gpu-n", memory=fake, snapshots=True) as cap:
        fail_once_oom(cap, fake, "n1")
    assert fake.snapshots_taken == 1 and len(list(tmp_path.glob("gpu-n.oom-snapshot.gpu0.*.pickle.gz"))) == 1


def test_no_history_means_no_snapshots(tmp_path: Path):
    fake = FakeMemory(history=False)
    with Capture(tmp_path, instance="gpu-h", memory=fake, snapshots=True) as cap:
        assert cap.snapshots is None
        fail_once_oom(cap, fake, "h1")
    assert fake.snapshots_taken == 0


def test_a_forked_worker_writes_its_own_file(tmp_path: Path):
    with Capture(tmp_path, instance="gpu-k", memory=None) as cap:
        with cap.request("parent"):
            pass
        cap.flush()
        parent_file = cap.writer.path
        cap.writer.after_fork()  # what os.register_at_fork runs in a child process
        with cap.request("child"):
            pass
        cap.flush()
        assert cap.writer.path != parent_file
    assert [line["request_id"] for line in lines_of(sorted(tmp_path.glob("*.jsonl")))] == ["parent", "child"]
