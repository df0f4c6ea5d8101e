"""vLLM's start-up memory report, read from text logs into engine_memory.

The wordings come from vllm-project/vllm: v0 `vllm/worker/worker.py` `determine_num_available_blocks`
(`Memory profiling takes %.2f seconds\\nthe current vLLM instance can use total_gpu_memory (%.2fGiB) x
gpu_memory_utilization (%.2f) = %.2fGiB\\nmodel weights take %.2fGiB; non_torch_memory takes %.2fGiB; PyTorch
activation peak memory takes %.2fGiB; the rest of the memory reserved for KV Cache is %.2fGiB.`, and before it
`Memory profiling results: duration=..., total_gpu_memory=..., ...`); v1 `vllm/v1/worker/gpu_worker.py`
(`Available KV cache memory: %.2f GiB` in `determine_available_memory`, and the `Free memory on device ... on
startup. Desired GPU memory utilization is ... Actual usage is ...` summary after warm-up). The lines below are
shaped as vLLM's logger prints them (`INFO MM-DD HH:MM:SS [file.py:line]`, each line of a multi-line message
prefixed), with numbers from start-up logs published in public issues and write-ups.
"""

from __future__ import annotations

import gzip
from datetime import UTC, datetime

import pytest

from oomlab.parse.telemetry.startup import StartupMerger, StartupScanner, read_line
from oomlab.parse.text.logline import LineClock
from oomlab.parse.text.textlog import scan_text_log

GIB = 1 << 30

V0 = """INFO 08-12 22:32:09 [model_runner.py:1115] Model loading took 0.5151 GiB and 3.479114 seconds
INFO 08-12 22:32:11 [worker.py:295] Memory profiling takes 1.73 seconds
INFO 08-12 22:32:11 [worker.py:295] the current vLLM instance can use total_gpu_memory (47.50GiB) x gpu_memory_utilization (0.78) = 37.18GiB
INFO 08-12 22:32:11 [worker.py:295] model weights take 0.52GiB; non_torch_memory takes 0.08GiB; PyTorch activation peak memory takes 1.78GiB; the rest of the memory reserved for KV Cache is 34.81GiB.
INFO 08-12 22:32:11 [executor_base.py:113] # cuda blocks: 190100, # CPU blocks: 0
"""  # noqa: E501
V1 = """(EngineCore pid=326) INFO 10-06 17:00:11 [model_runner.py:407] Model loading took 15.0 GiB memory and 5.420225 seconds
(EngineCore pid=326) INFO 10-06 17:00:33 [gpu_worker.py:692] Available KV cache memory: 56.21 GiB
(EngineCore pid=326) INFO 10-06 17:00:33 [kv_cache_utils.py:2464] GPU KV cache size: 460,496 tokens, Maximum concurrency for 131,072 tokens per request: 3.51x
(EngineCore pid=326) INFO 10-06 17:00:41 [gpu_worker.py:955] Free memory on device (78.84/79.25 GiB) on startup. Desired GPU memory utilization is (0.92, 72.91 GiB). Actual usage is 15.26 GiB for consumed memory (weights + non-torch), 1.44 GiB for peak activation, and 0.23 GiB for CUDAGraph memory. Current kv cache memory in use is 56.21 GiB.
"""  # noqa: E501
OOM = (
    "2026-11-30T01:50:03.302Z ERROR torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 398.00 MiB. "
    "GPU 0 has a total capacity of 139.80 GiB of which 281.56 MiB is free.\n"
)


def _merged(text: str) -> list:
    merger = StartupMerger()
    out = [r for n, line in enumerate(text.splitlines(), 1) for r in merger.add(n, None, line)]
    return out + list(merger.close())


def test_v0_profiling_lines() -> None:
    (report,) = _merged(V0)
    assert report.variant == "v0_profiling" and report.line == 1
    assert report.weights_bytes == round(0.52 * GIB) and report.loaded_weights_bytes == round(0.5151 * GIB)
    assert report.non_torch_bytes == round(0.08 * GIB)
    assert report.activation_peak_bytes == round(1.78 * GIB)
    assert report.kv_cache_bytes == round(34.81 * GIB)
    assert report.consumed_bytes == round(0.52 * GIB) + round(0.08 * GIB)
    assert report.device_total_bytes == round(47.50 * GIB) and report.gpu_memory_utilization == 0.78
    assert report.budget_bytes == round(37.18 * GIB)  # as printed, not recomputed
    assert report.kv_cache_blocks_gpu == 190_100  # `# cuda blocks`: the platform names the device
    assert report.framework == "vllm" and report.device is None
    assert report.message.count("\n") == 3  # the four lines that said something


def test_v1_lines_of_one_start_up_make_one_report() -> None:
    (report,) = _merged(V1)
    assert report.variant == "v1_available"
    assert report.kv_cache_bytes == round(56.21 * GIB) and report.kv_cache_tokens == 460_496
    assert report.consumed_bytes == round(15.26 * GIB) and report.weights_bytes is None  # weights + non-torch only
    assert report.loaded_weights_bytes == 15 * GIB
    assert report.activation_peak_bytes == round(1.44 * GIB) and report.cuda_graph_bytes == round(0.23 * GIB)
    assert (report.device_free_bytes, report.device_total_bytes) == (round(78.84 * GIB), round(79.25 * GIB))
    assert report.gpu_memory_utilization == 0.92 and report.budget_bytes == round(72.91 * GIB)


def test_other_wordings() -> None:
    older = read_line(
        "INFO 11-02 08:01:02 worker.py:232] Memory profiling results: duration=2.71 seconds, "
        "total_gpu_memory=79.15GiB, initial_memory_usage=15.43GiB, peak_torch_memory=16.61GiB, "
        "memory_usage_post_profile=15.58GiB, non_torch_memory=0.42GiB, kv_cache_size=54.21GiB, "
        "gpu_memory_utilization=0.90."
    )
    assert older is not None and (older.framework, older.variant) == ("vllm", "v0_results")
    assert older.amounts == {
        "device_total_bytes": round(79.15 * GIB),
        "non_torch_bytes": round(0.42 * GIB),
        "kv_cache_bytes": round(54.21 * GIB),
        "gpu_memory_utilization": 0.90,
    }
    split = read_line(
        "(EngineCore_DP0 pid=3021) INFO 09-23 18:12:39 [gpu_worker.py:391] Free memory on device "
        "(78.66/79.19 GiB) on startup. Desired GPU memory utilization is (0.9, 71.27 GiB). Actual "
        "usage is 14.08 GiB for weight, 1.97 GiB for peak activation, 0.07 GiB for non-torch memory, "
        "and 0.67 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with "
        "`--kv-cache-memory=58333988249` to fit into requested memory. Current kv cache memory in "
        "use is 59212694937 bytes."
    )
    assert split is not None and split.amounts["kv_cache_bytes"] == 59_212_694_937
    assert split.amounts["weights_bytes"] == round(14.08 * GIB) and split.amounts["non_torch_bytes"] == round(
        0.07 * GIB
    )
    assert (split.amounts["device_free_bytes"], split.amounts["device_total_bytes"]) == (
        round(78.66 * GIB),
        round(79.19 * GIB),
    )
    negative = read_line(
        "INFO [worker.py:295] model weights take 6.59GiB; non_torch_memory takes 8.29GiB; PyTorch "
        "activation peak memory takes 4.93GiB; the rest of the memory reserved for KV Cache is "
        "-7.83GiB."
    )
    assert negative is not None and negative.amounts["kv_cache_bytes"] == -round(7.83 * GIB)  # no room: it failed
    load = read_line("Loading model weights took 8.5107 GB")
    assert load is not None and load.amounts == {"loaded_weights_bytes": round(8.5107 * GIB)} and load.opens
    assert read_line("INFO GPU KV cache usage: 12.5%, CPU KV cache usage: 0.0%") is None


def test_tensor_parallel_workers_repeat_one_report_and_a_reload_starts_the_next() -> None:
    workers = V1.replace("(EngineCore pid=326)", "(Worker_TP0 pid=1)") + V1.replace(
        "(EngineCore pid=326)", "(Worker_TP1 pid=2)"
    )
    first, second = _merged(workers)  # the second worker's model load comes after the first sized its cache
    assert first.kv_cache_bytes == second.kv_cache_bytes == round(56.21 * GIB)
    restarted = _merged(V1 + V1.replace("56.21", "40.00"))
    assert [r.kv_cache_bytes for r in restarted] == [round(56.21 * GIB), round(40.00 * GIB)]


def test_one_line_under_two_versions_is_two_start_ups_and_one_version_repeated_is_one() -> None:
    """A poster lists vLLM's `# GPU blocks` line per release (tests/cases/realworld/pasted_text/032, from
    https://github.com/vllm-project/vllm/issues/2136): the same blocks under 0.2.3 and 0.2.4 are two start-ups.
    A tensor-parallel worker's repeat of its one version's line merges as before."""
    line = "`# GPU blocks: 1464, # CPU blocks: 1310`"
    last = line.replace("1464", "112")
    listed = _merged(f"- vLLM 0.2.3: {line}\n- vLLM 0.2.4: {line}\n- vLLM 0.2.5 and `main`: {last}")
    assert [(r.line, r.kv_cache_blocks_gpu) for r in listed] == [(1, 1464), (2, 1464), (3, 112)]
    (repeated,) = _merged(f"vllm-0.2.4  | (Worker_TP0) {line}\nvllm-0.2.4  | (Worker_TP1) {line}")
    assert repeated.kv_cache_blocks_gpu == 1464 and repeated.message.count("\n") == 1


def _latest_past(*month_to_second: int) -> datetime:
    """vLLM's own stamps carry no year: they are read in this year, or the last one if that is in the future."""
    now = datetime.now(UTC).replace(tzinfo=None)
    this_year = datetime(now.year, *month_to_second)
    return this_year if this_year <= now else this_year.replace(year=now.year - 1)


@pytest.mark.parametrize("compress", [False, True])
def test_text_log_ingest_keeps_the_ooms_and_adds_the_reports(tmp_path, db, run_cli, sql, compress) -> None:
    text = V0 + OOM + V1
    path = tmp_path / ("vllm-0.log.gz" if compress else "vllm-0.log")
    path.write_bytes(gzip.compress(text.encode()) if compress else text.encode())
    result = run_cli("ingest", path, "--db", db)
    assert result.exit_code == 0, result.output
    assert sql("SELECT line, framework FROM oom_events") == [(6, "pytorch")]
    assert sql("SELECT line, ts, instance, framework, variant, kv_cache_bytes FROM engine_memory ORDER BY line") == [
        (1, _latest_past(8, 12, 22, 32, 9), "vllm-0", "vllm", "v0_profiling", round(34.81 * GIB)),
        (7, _latest_past(10, 6, 17, 0, 11), "vllm-0", "vllm", "v1_available", round(56.21 * GIB)),
    ]
    assert sql("SELECT rows, rejects FROM sources") == [(3, 0)]  # one OOM, two start-up reports


def test_log_shipper_timestamps_and_time_zone(tmp_path, db, run_cli, sql) -> None:
    path = tmp_path / "node.log"
    path.write_text("2026-11-30 09:00:05 INFO Available KV cache memory: 12.00 GiB\n")
    assert run_cli("ingest", path, "--tz", "Asia/Shanghai", "--db", db).exit_code == 0
    assert sql("SELECT ts, kv_cache_bytes, variant FROM engine_memory") == [
        (datetime(2026, 11, 30, 1, 0, 5), 12 * GIB, "v1_available")
    ]


def test_the_reports_ride_on_the_oom_scan_across_window_boundaries(tmp_path) -> None:
    filler = "".join(f"INFO 08-12 22:33:{i % 60:02d} [engine.py:1] step {i}\n" for i in range(300))
    path = tmp_path / "long.log.gz"
    path.write_bytes(gzip.compress((filler + V0 + filler + OOM + filler + V1).encode()))
    scanner = StartupScanner(LineClock(year=2026))
    ooms = list(scan_text_log(path, chunk_size=4096, on_window=scanner.window))
    assert [o.line for o in ooms] == [300 + 5 + 300 + 1]
    reports = scanner.reports()
    assert [(r.line, r.ts, r.variant) for r in reports] == [
        (301, datetime(2026, 8, 12, 22, 32, 9), "v0_profiling"),
        (300 + 5 + 300 + 1 + 300 + 1, datetime(2026, 10, 6, 17, 0, 11), "v1_available"),
    ]
