"""A snapshot of a process that used several GPUs: the incident page shows the device that failed. The real
snapshot of corpus case snapshots/001 (https://github.com/Constructor-Sun/code_location, memory_snapshot.pickle:
a training run on cuda:0, 1 and 2 with expandable segments, dumped at an OOM on cuda:1). The expected bytes were
read from the pickle with a restricted unpickler of our own, not with oomlab's reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomlab import api
from oomlab.config import IngestOptions

CASE = Path(__file__).resolve().parent.parent / "cases" / "realworld" / "snapshots"
SNAPSHOT = CASE / "001_code-location-expandable-3gpu-oom" / "artifact.pickle.gz"
# cuda:1 when dumped: 8 segments, their total_size and the active_allocated blocks' sizes
GPU1_SEGMENTS, GPU1_RESERVED, GPU1_ALLOCATED = 8, 84_202_749_952, 403_507_712
# its trace's one `oom` entry: size and device_free
REQUESTED, DEVICE_FREE = 5_308_694_528, 95_682_560


@pytest.fixture(scope="module")
def snapshot_doc(tmp_path_factory: pytest.TempPathFactory) -> dict:
    db = tmp_path_factory.mktemp("three_gpus") / "s.duckdb"
    api.ingest(db, [str(SNAPSHOT)], IngestOptions())
    return api.incident_report(db, event_id=1).doc


def test_the_failure_is_placed_on_its_gpu(snapshot_doc: dict) -> None:
    event = snapshot_doc["event"]
    assert (event["gpu_index"], event["requested_bytes"], event["free_bytes"]) == (1, REQUESTED, DEVICE_FREE)


def test_the_state_fit_and_replay_are_the_failed_gpus(snapshot_doc: dict) -> None:
    snapshot = snapshot_doc["snapshot"]
    assert snapshot["device"] == 1
    state = snapshot["state"]
    assert (state["segment_count"], state["reserved_bytes"], state["allocated_bytes"]) == (
        GPU1_SEGMENTS,
        GPU1_RESERVED,
        GPU1_ALLOCATED,
    )
    assert state["expandable_segments"] is True
    # the memory freed after the failure left a block on cuda:1 that holds the request now
    assert snapshot["fit"]["fits"] and snapshot["fit"]["largest_free_block_bytes"] <= GPU1_RESERVED
    assert [(m["device"], m["requested_bytes"]) for m in snapshot["ooms"]] == [(1, REQUESTED)]
    assert len(snapshot["timeline"]["oom_times"]) == 1
