"""Snapshots through `oomlab ingest` and `oomlab snapshot`: real captures, hostile pickles."""

from __future__ import annotations

import gzip
import json
import pickle

import pytest

from conftest import H200

GIB = 1 << 30
SNAPSHOTS = sorted(H200.glob("*/snapshot_*.pickle.gz"))


def test_every_fixture_snapshot_ingests_and_totals_agree(db, run_cli, sql):
    assert len(SNAPSHOTS) == 11
    result = run_cli("ingest", *SNAPSHOTS, "--db", db)
    assert result.exit_code == 0, result.stderr
    assert sql("SELECT count(*) FROM snapshots") == [(11,)]
    # PyTorch's own accounting: the active blocks add up to what the snapshot calls allocated
    mismatches = sql(
        "SELECT s.snapshot_id FROM snapshots s JOIN (SELECT snapshot_id, sum(size) AS active "
        "FROM blocks WHERE state LIKE 'active%' GROUP BY 1) b USING (snapshot_id) "
        "WHERE b.active <> s.active_bytes"
    )
    assert mismatches == []
    assert sql("SELECT kind, count(*) FROM sources GROUP BY 1") == [("snapshot", 11)]


def test_snapshot_oom_entries_become_oom_events(db, run_cli, sql):
    path = H200 / "fragmentation" / "snapshot_fragmented_oom.pickle.gz"
    assert run_cli("ingest", path, "--db", db, "--instance", "gpu-f").exit_code == 0
    rows = sql(
        "SELECT origin, instance, requested_bytes, free_bytes, snapshot_id IS NOT NULL, "
        "ts > TIMESTAMP '2026-01-01' FROM oom_events"
    )
    assert rows and all(r == ("snapshot", "gpu-f", GIB, rows[0][3], True, True) for r in rows)
    assert round(rows[0][3] / GIB, 2) == 135.85  # "of which 135.85 GiB is free" in the same run's message


def test_replacing_a_snapshot_removes_its_detail_rows(tmp_path, db, run_cli, sql):
    path = tmp_path / "snap.pickle.gz"
    path.write_bytes((H200 / "cache_bloat" / "snapshot_end.pickle.gz").read_bytes())
    run_cli("ingest", path, "--db", db)
    assert sql("SELECT sum(size) FROM blocks") == [(sql("SELECT reserved_bytes FROM snapshots")[0][0],)]
    path.write_bytes((H200 / "fragmentation" / "snapshot_after_empty_cache.pickle.gz").read_bytes())
    run_cli("ingest", path, "--db", db)
    assert sql("SELECT count(*) FROM snapshots") == [(1,)]
    # blocks tile their segments: only the new snapshot's blocks are left
    assert sql("SELECT sum(size) FROM blocks") == [(sql("SELECT reserved_bytes FROM snapshots")[0][0],)]
    assert sql("SELECT count(*) FROM blocks WHERE snapshot_id NOT IN (SELECT snapshot_id FROM snapshots)") == [(0,)]


def _calls(global_name: str, argument: str) -> bytes:
    """A protocol-2 pickle that calls `global_name(argument)` when loaded: what an attacker would ship."""
    module, name = global_name.split(".")
    arg = argument.encode()
    return b"\x80\x02c" + f"{module}\n{name}\n".encode() + b"X" + len(arg).to_bytes(4, "little") + arg + b"\x85R."


@pytest.mark.parametrize("global_name", ["os.system", "builtins.eval", "posix.system"])
def test_malicious_pickles_are_refused_and_the_rest_ingests(tmp_path, db, run_cli, sql, global_name):
    sentinel = tmp_path / "pwned"
    command = f"touch {sentinel}" if global_name.endswith("system") else f"open({str(sentinel)!r}, 'w')"
    evil = tmp_path / "evil.pickle"
    evil.write_bytes(gzip.compress(_calls(global_name, command)))
    good = H200 / "cache_bloat" / "snapshot_end.pickle.gz"
    result = run_cli("ingest", evil, good, "--db", db)
    assert result.exit_code == 1
    assert not sentinel.exists()
    error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1
    assert error[0].startswith(f"error: {evil}: refusing to load: the pickle names the global {global_name} (")
    assert sql("SELECT count(*) FROM snapshots") == [(1,)]


@pytest.mark.parametrize("cut", [2, 100, 5000, -10])
def test_truncated_snapshots_fail_with_one_line(tmp_path, db, run_cli, cut):
    data = gzip.decompress((H200 / "cache_bloat" / "snapshot_end.pickle.gz").read_bytes())
    path = tmp_path / "cut.pickle"
    path.write_bytes(data[:cut])
    result = run_cli("ingest", path, "--db", db)
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: ")
    assert "Traceback" not in result.output


def test_a_pickle_of_the_wrong_shape(tmp_path, db, run_cli):
    path = tmp_path / "wrong.pickle"
    path.write_bytes(pickle.dumps({"hello": [1, 2, 3]}, protocol=2))
    result = run_cli("ingest", path, "--db", db)
    assert result.exit_code == 1
    assert f"error: {path}: not a PyTorch memory snapshot" in result.stderr


def test_inspect_json_answers_the_fixture_truths(run_cli):
    frag = json.loads(
        run_cli(
            "snapshot",
            "inspect",
            H200 / "fragmentation" / "snapshot_fragmented_oom.pickle.gz",
            "--json",
            "--request",
            "1 GiB",
        ).stdout
    )
    assert round(frag["reserved_unallocated_bytes"] / GIB, 2) == 1.67
    assert frag["largest_free_block_bytes"] < GIB
    assert frag["fit"]["fits"] is False and frag["fit"]["cause"] == "fragmentation"
    assert [o["cause"] for o in frag["oom_events"]] == ["fragmentation"] * len(frag["oom_events"])
    expandable = json.loads(
        run_cli(
            "snapshot", "inspect", H200 / "fragmentation_expandable" / "snapshot_fragmented_oom.pickle.gz", "--json"
        ).stdout
    )
    assert expandable["expandable_segments"] is True
    assert round(expandable["reserved_unallocated_bytes"] / GIB, 2) == 1.72
    leak = json.loads(run_cli("snapshot", "inspect", H200 / "serve_leak" / "snapshot_end.pickle.gz", "--json").stdout)
    assert leak["leak_suspects"][0]["site"].startswith("transformers/cache_utils.py:update:14")
    assert not any("modeling_utils.py:to" in s["site"] for s in leak["leak_suspects"])
    stable = {
        "allocated_bytes",
        "reserved_bytes",
        "reserved_unallocated_bytes",
        "largest_free_block_bytes",
        "fragmentation",
        "segments",
        "trace_events",
        "top_sites",
        "leak_suspects",
        "oom_events",
    }
    assert stable <= set(leak)


def test_inspect_tables_and_diff(run_cli):
    shown = run_cli("snapshot", "inspect", H200 / "serve_leak" / "snapshot_end.pickle.gz")
    assert shown.exit_code == 0
    assert "transformers/cache_utils.py:update:146" in shown.stdout
    assert "4.59 GiB" in shown.stdout  # allocated, as memory_summary() reports it
    diff = json.loads(
        run_cli(
            "snapshot",
            "diff",
            H200 / "serve_leak" / "snapshot_first_oom.pickle.gz",
            H200 / "serve_leak" / "snapshot_end.pickle.gz",
            "--json",
        ).stdout
    )
    top = {s["site"]: s for s in diff["sites"][:2]}
    assert set(top) == {"transformers/cache_utils.py:update:146", "transformers/cache_utils.py:update:147"}
    assert all(s["delta_blocks"] == 40 for s in top.values())


def test_inspect_errors_are_one_line(tmp_path, run_cli):
    bad = tmp_path / "x.pickle"
    bad.write_bytes(b"\x80\x04junk")
    result = run_cli("snapshot", "inspect", bad)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {bad}: ") and len(result.stderr.strip().splitlines()) == 1
