"""bench/derive_snapshot.py: a derived snapshot is the real one with its trace repeated, in torch's shape."""

from __future__ import annotations

import io
import pickle
import sys

from oomlab.parse.snapshot.safe_pickle import load_plain_pickle

from conftest import H200, ROOT

sys.path.insert(0, str(ROOT / "bench"))

import derive_snapshot


def test_copies_are_the_real_trace_shifted_with_the_sharing_torch_writes() -> None:
    """fragmentation_expandable's real capture, 3 copies: pickle.loads gives the source with each copy's times
    shifted one span past the last, a new frames list per source list per copy (shared by the same entries as
    in the source), everything else the source's own."""
    source = load_plain_pickle(H200 / "fragmentation_expandable" / "snapshot_after_empty_cache.pickle.gz")
    out = io.BytesIO()
    derive_snapshot.derive(source, out, 3)
    data = out.getvalue()
    assert data[:3] == b"\x80\x04\x95"  # PROTO 4, then the first frame: where sniffers look
    derived = pickle.loads(data)
    base = source["device_traces"][0]
    times = [e["time_us"] for e in base]
    span = max(times) - min(times) + 1
    assert derived["device_traces"][0] == [dict(e, time_us=e["time_us"] + k * span) for k in range(3) for e in base]
    assert {k: v for k, v in derived.items() if k != "device_traces"} == {
        k: v for k, v in source.items() if k != "device_traces"
    }
    lists_in_source = len({id(e["frames"]) for e in base if "frames" in e})
    for copy in range(3):
        part = derived["device_traces"][0][copy * len(base) : (copy + 1) * len(base)]
        assert len({id(e["frames"]) for e in part if "frames" in e}) == lists_in_source == 872
