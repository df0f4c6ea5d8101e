"""The instance a file names when nothing in it names one: its name up to the first dot, an IPv4 address whole."""

from __future__ import annotations

import pytest

from oomlab.config import instance_from_filename


@pytest.mark.parametrize(
    "name, instance",
    [
        ("gpu-a-0.log.gz", "gpu-a-0"),
        ("gpu-a-0.snapshot_end.pickle.gz", "gpu-a-0"),  # <instance>.<what>.<extension>
        ("node1.cluster.local.log", "node1"),
        ("10.0.3.17.log", "10.0.3.17"),  # per-node logs named for the node's address
        ("10.0.3.18.log.gz", "10.0.3.18"),
        ("10.0.3.17-gpu0.jsonl", "10.0.3.17-gpu0"),
        ("10.0.3.1234.log", "10"),  # no address: a fourth part of four digits
    ],
)
def test_the_name_a_file_gives(name: str, instance: str) -> None:
    assert instance_from_filename(f"/logs/{name}") == instance
