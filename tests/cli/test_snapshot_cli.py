"""`oomlab snapshot inspect` over several real snapshots of one process, the no-suspect line, and a truncated
snapshot's one-line error (the real serve_leak and serve_mixed captures, or cut copies of them)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

from conftest import H200

LEAK = H200 / "serve_leak"


def test_inspect_several_snapshots_shows_the_growth_and_the_sure_suspect(run_cli) -> None:
    shown = run_cli("snapshot", "inspect", LEAK / "snapshot_end.pickle.gz", LEAK / "snapshot_first_oom.pickle.gz")
    assert shown.exit_code == 0, shown.output
    assert f"snapshot {LEAK / 'snapshot_end.pickle.gz'}" in shown.stdout  # the newest, whatever the order
    assert "growth across 2 snapshots" in shown.stdout
    assert "  transformers/cache_utils.py:update:146  95 % sure, 2.12 GiB live" in shown.stdout
    assert "grew 126.64 MiB across 2 snapshots, at every step" in shown.stdout


def test_inspect_json_of_several_snapshots(run_cli) -> None:
    result = run_cli(
        "snapshot", "inspect", LEAK / "snapshot_first_oom.pickle.gz", LEAK / "snapshot_end.pickle.gz", "--json"
    )
    report = json.loads(result.stdout)
    assert report["leak_basis"] == {"trace": "wrapped", "snapshots": 2, "no_stack_bytes": 0}
    assert [s["growth_blocks"] for s in report["series"]["sites"][:2]] == [40, 40]
    top = report["leak_suspects"][0]
    assert (top["site"], top["confidence"], top["path"]) == ("transformers/cache_utils.py:update:146", 0.95, "request")


def test_a_healthy_capture_says_why_it_has_no_suspect(run_cli) -> None:
    shown = run_cli("snapshot", "inspect", H200 / "serve_mixed" / "snapshot_end.pickle.gz")
    assert (
        "leak suspects: none (no site holds memory of more requests than are in flight, or grew; judged from the "
        "final blocks and a trace that began after some of them)"
    ) in shown.stdout


def test_a_truncated_snapshot_is_a_one_line_error(tmp_path: Path, run_cli) -> None:
    """The real compressed serve_leak snapshot, cut inside its first kilobytes."""
    cut = tmp_path / "cut.pickle.gz"
    cut.write_bytes((LEAK / "snapshot_end.pickle.gz").read_bytes()[:50])
    result = run_cli("snapshot", "inspect", cut)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {cut}: truncated or corrupt gzip data: Compressed file ended")
    assert len(result.stderr.strip().splitlines()) == 1


def test_memory_without_call_stacks_is_named_in_the_tables(tmp_path: Path, run_cli) -> None:
    """The real serve_leak end snapshot with its trace and every block's frames dropped (history off)."""
    from snapshot_cases import cut_trace

    raw = cut_trace("serve_leak", "snapshot_end", 0.0)
    for segment in raw["segments"]:
        for block in segment["blocks"]:
            block["frames"] = []
    path = tmp_path / "no_stacks.pickle"
    path.write_bytes(pickle.dumps(raw, protocol=4))
    shown = run_cli("snapshot", "inspect", path)
    assert "leak suspects: none (" in shown.stdout and "judged from the final blocks alone" in shown.stdout
    assert "4.59 GiB of live memory has no call stack, so no leak judgement can place it" in shown.stdout


def test_a_frame_named_like_an_emoji_code_prints_as_written(run_cli) -> None:
    """Real snapshot snapshots/001 of the corpus: its leak suspect is called from trainers.py's function `train`,
    which rich would print as an emoji."""
    corpus = Path(__file__).resolve().parents[1] / "cases" / "realworld" / "snapshots"
    shown = run_cli("snapshot", "inspect", next(corpus.glob("001_*/artifact.pickle.gz")))
    assert shown.exit_code == 0, shown.output
    assert "src/train/trainers.py:train:444" in shown.stdout
