"""Every serving engine's start-up memory lines, read into engine_memory reports: lines copied from the public
threads of the real-world corpus (tests/cases/realworld/engine/, each test names its source), with the values
those lines state.

Units as the engines' sources compute them: SGLang, vllm.rs and vLLM `GB` are 2**30; llama.cpp, MLC LLM and
vLLM `MB`/`MiB` are 2**20; ollama prints binary units; TensorRT-LLM and vllm-ascend plain bytes.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oomlab.parse.telemetry.startup import FINDER, StartupMemory, StartupMerger, StartupScanner, line_time, read_line
from oomlab.parse.text import textscan
from oomlab.parse.text.logline import LineClock
from oomlab.parse.text.ripgrep import RIPGREP_ENV
from oomlab.parse.text.textlog import scan_text_log

GIB, MIB = 1 << 30, 1 << 20


def _reports(text: str) -> list[StartupMemory]:
    merger = StartupMerger()
    out = [r for n, line in enumerate(text.strip("\n").splitlines(), 1) for r in merger.add(n, None, line)]
    return out + merger.close()


def _time(line: str) -> datetime | None:
    reading = read_line(line)
    assert reading is not None
    return line_time(LineClock(), line, reading.at)


def test_sglang_kv_pools_and_what_is_left() -> None:
    """https://github.com/vllm-project/vllm/issues/21348 and https://github.com/noonghunna/club-3090/issues/1261:
    K and V sizes are summed; each pool's `Memory pool end` line joins it, the draft pool starts the next row."""
    (single,) = _reports("KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB")
    assert (single.framework, single.kv_cache_tokens, single.kv_cache_bytes) == ("sglang", 367_404, 17_673_790_424)
    target, draft = _reports(
        """
[2026-09-12 00:22:48 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 454112, K size: 3.46 GB, V size: 3.46 GB
[2026-09-12 00:22:48 TP0] Memory pool end. avail mem=8.40 GB
[2026-09-12 00:22:48 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 454112, K size: 1.08 GB, V size: 1.08 GB
[2026-09-12 00:22:48 TP0] Memory pool end. avail mem=6.23 GB
"""  # noqa: E501
    )
    assert (target.line, target.kv_cache_bytes, target.device_free_bytes) == (
        1,
        2 * round(3.46 * GIB),
        round(8.40 * GIB),
    )
    assert (draft.line, draft.kv_cache_bytes, draft.device_free_bytes) == (3, 2 * round(1.08 * GIB), round(6.23 * GIB))


def test_sglang_free_memory_at_start_stands_and_ranks_that_repeat_it_merge() -> None:
    """https://github.com/sgl-project/sglang/pull/11716: TP ranks' `Load weight begin` lines merge while they state
    the same free memory; the free memory after the pool (club-3090 #1261's line) does not replace it."""
    reports = _reports(
        """
[2025-10-16 09:06:10 TP5] Load weight begin. avail mem=137.29 GB
[2025-10-16 09:06:10 TP4] Load weight begin. avail mem=137.29 GB
[2025-10-16 09:06:10 TP0] Load weight begin. avail mem=137.34 GB
[2026-09-12 00:22:48 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 454112, K size: 3.46 GB, V size: 3.46 GB
[2026-09-12 00:22:48 TP0] Memory pool end. avail mem=8.40 GB
"""  # noqa: E501
    )
    assert [(r.line, r.device_free_bytes) for r in reports] == [(1, 147_414_015_017), (3, 147_467_702_108)]
    assert reports[1].kv_cache_bytes == 2 * round(3.46 * GIB)


def test_tgi_max_batch_total_tokens_behind_a_wrapper_prefix() -> None:
    """https://github.com/IlyasMoutawwakil/py-txi (README) and TGI issue 1763: TGI's own time after a Python
    wrapper's `INFO:tgi-server:` prefix, or inside ANSI codes pasted as `#033[..m`; a duplicated line merges."""
    line = (
        "INFO:tgi-server:         2024-01-15T08:47:27.545255Z  INFO text_generation_router: router/src/main.rs:266: "
        "Setting max batch total tokens to 16000"
    )
    (report,) = _reports(line)
    assert (report.framework, report.kv_cache_tokens) == ("tgi", 16_000)
    assert _time(line) == datetime(2024, 1, 15, 8, 47, 27, 545255)
    console = (
        "#033[2m2024-04-18T22:45:31.006827Z#033[0m #033[32m INFO#033[0m #033[2mtext_generation_router#033[0m"
        "#033[2m:#033[0m #033[2mrouter/src/[main.rs#033[0m#033[2m:#033[0m#033[2m328:#033[0m](http://main.rs/#033[0m"
        "%23033[2m:%23033[0m%23033[2m328:%23033[0m) Setting max batch total tokens to 32768"
    )
    assert [r.kv_cache_tokens for r in _reports(f"{console}\n\nCopy\n{console}")] == [32_768]
    assert _time(console) == datetime(2024, 4, 18, 22, 45, 31, 6827)


def test_tensorrt_llm_kv_cache_in_bytes_and_tokens() -> None:
    """https://github.com/NVIDIA/TensorRT-LLM/issues/1400 (0.8): the two lines are one report."""
    lines = [
        "[TensorRT-LLM][INFO] [MemUsageChange] TensorRT-managed allocation in IExecutionContext creation: CPU +0, "
        "GPU +0, now: CPU 0, GPU 6683 (MiB)",
        "[TensorRT-LLM][INFO] Allocate 69524783104 bytes for k/v cache. ",  # the trailing space as printed
        "[TensorRT-LLM][INFO] Using 132608 tokens in paged KV cache.",
    ]
    (report,) = _reports("\n".join(lines))
    assert (report.framework, report.line) == ("tensorrt-llm", 2)
    assert (report.kv_cache_bytes, report.kv_cache_tokens) == (69_524_783_104, 132_608)


def test_mlc_llm_estimate() -> None:
    """https://github.com/mlc-ai/mlc-llm/issues/2026: MLC's plan in MB (bytes / 1024 / 1024)."""
    (report,) = _reports(
        """
[2024-03-25 15:35:00] INFO engine.py:238: Estimated KVCacheConfig "max_total_sequence_length": 21275.
[2024-03-25 15:35:00] INFO engine.py:243: Estimated total single GPU memory usage: 14361.14 MB (Parameters: 3615.13 MB. KVCache: 10689.56 MB. Temporary buffer: 56.44 MB)
"""  # noqa: E501
    )
    assert (report.framework, report.variant, report.kv_cache_tokens) == ("mlc-llm", "estimate", 21_275)
    assert (report.weights_bytes, report.kv_cache_bytes) == (round(3615.13 * MIB), round(10689.56 * MIB))


def test_vllm_rs_allocation_under_docker_compose() -> None:
    """https://github.com/guoqingbao/xinfer/issues/195: the time follows compose's `name  | ` prefix."""
    line = (
        "vllm-rs-med1  | 2026-01-21T03:54:36.475112Z  WARN vllm_rs::utils::kvcache_allocator: KVCache Allocation: "
        "8192 GPU blocks (48.00 GB), max usable kvcache tokens 524288, scheduling limits [2 seqs x 262144 tokens]"
    )
    (report,) = _reports(line)
    assert (report.framework, report.kv_cache_blocks_gpu, report.kv_cache_tokens) == ("vllm.rs", 8192, 524_288)
    assert report.kv_cache_bytes == 48 * GIB
    assert _time(line) == datetime(2026, 1, 21, 3, 54, 36, 475112)


def test_llama_cpp_one_row_per_device_and_host_buffers_left_out() -> None:
    """https://github.com/Thireus/GGUF-Tool-Suite/issues/30 and https://github.com/ggml-org/llama.cpp/pull/6122:
    weights and KV buffers per CUDA device; the CPU buffer is host memory; `KV self size` is the total."""
    weights = _reports(
        """
llm_load_tensors:        CPU buffer size =  1190.00 MiB
llm_load_tensors:      CUDA0 buffer size = 18870.27 MiB
llm_load_tensors:      CUDA1 buffer size = 14712.18 MiB
"""
    )
    assert [(r.device, r.weights_bytes) for r in weights] == [
        ("CUDA0", round(18870.27 * MIB)),
        ("CUDA1", round(14712.18 * MIB)),
    ]
    kv = _reports(
        """
llama_kv_cache_init:      CUDA0 KV buffer size =  1536.00 MiB
llama_kv_cache_init:      CUDA1 KV buffer size =  3584.00 MiB
llama_new_context_with_model: KV self size  = 5120.00 MiB, K (f16): 2560.00 MiB, V (f16): 2560.00 MiB
llama_new_context_with_model:  CUDA_Host  output buffer size =     1.95 MiB
"""
    )
    assert [(r.framework, r.device, r.kv_cache_bytes) for r in kv] == [
        ("llama.cpp", "CUDA0", 1536 * MIB),
        ("llama.cpp", "CUDA1", 3584 * MIB),
        ("llama.cpp", None, 5120 * MIB),
    ]


def test_ollama_probe_and_plan() -> None:
    """https://github.com/ollama/ollama/issues/8923: the GPU's probe and the plan for the model make two rows."""
    probe, plan = _reports(
        """
time=2025-02-07T09:39:05.074Z level=DEBUG source=gpu.go:456 msg="updating cuda memory data" gpu=GPU-2ef77503-2f4c-3683-b2c4-50548cd200d8 name="NVIDIA GeForce RTX 4090 D" overhead="0 B" before.total="24.0 GiB" before.free="22.5 GiB" now.total="24.0 GiB" now.free="22.5 GiB" now.used="1.5 GiB"
releasing cuda driver library
time=2025-02-07T09:39:05.074Z level=INFO source=memory.go:356 msg="offload to cuda" layers.requested=-1 layers.model=33 layers.offload=33 layers.split="" memory.available="[22.5 GiB]" memory.gpu_overhead="0 B" memory.required.full="17.3 GiB" memory.required.partial="17.3 GiB" memory.required.kv="8.0 GiB" memory.required.allocations="[17.3 GiB]" memory.weights.total="11.9 GiB" memory.weights.repeating="11.5 GiB" memory.weights.nonrepeating="411.0 MiB" memory.graph.full="4.2 GiB" memory.graph.partial="4.4 GiB"
"""  # noqa: E501
    )
    assert (probe.framework, probe.device) == ("ollama", "GPU-2ef77503-2f4c-3683-b2c4-50548cd200d8")
    assert (probe.device_total_bytes, probe.device_free_bytes) == (24 * GIB, round(22.5 * GIB))
    assert (plan.device, plan.variant, plan.kv_cache_bytes, plan.weights_bytes) == (
        None,
        "estimate",
        8 * GIB,
        round(11.9 * GIB),
    )


def test_ollama_lines_of_llama_cpp_and_of_its_own_engine() -> None:
    """https://github.com/ollama/ollama/issues/9415 (journald: the service's tag names ollama) and
    https://github.com/ollama/ollama/pull/11090 (ollama's ggml engine: per buffer, CPU left out)."""
    (journald,) = _reports(
        """
Feb 28 12:44:32 ai-server ollama[854770]: load_tensors:   CPU_Mapped model buffer size =   717.77 MiB
Feb 28 12:44:32 ai-server ollama[854770]: load_tensors:        CUDA0 model buffer size =  5185.21 MiB
"""
    )
    assert (journald.framework, journald.device, journald.weights_bytes) == ("ollama", "CUDA0", round(5185.21 * MIB))
    own = _reports(
        """
time=2025-07-18T14:51:00.217Z level=INFO source=ggml.go:365 msg="model weights" buffer=CUDA1 size="11.9 GiB"
time=2025-07-18T14:51:00.217Z level=INFO source=ggml.go:365 msg="model weights" buffer=CPU size="680.0 MiB"
time=2025-07-18T14:51:00.217Z level=INFO source=ggml.go:365 msg="model weights" buffer=CUDA0 size="11.5 GiB"
"""
    )
    assert [(r.device, r.weights_bytes) for r in own] == [("CUDA1", round(11.9 * GIB)), ("CUDA0", round(11.5 * GIB))]


def test_ollama_one_gpu_named_twice_is_one_row_with_its_offset_time() -> None:
    """https://github.com/ollama/ollama/issues/12431: `gpu memory` names the probed GPU again; +02:00 times."""
    first = (
        'time=2025-09-27T19:30:12.517+02:00 level=DEBUG source=gpu.go:460 msg="updating cuda memory data" '
        'gpu=GPU-d0f9ed85-a082-2e7e-f1ca-ec56c347fcb0 name="NVIDIA GeForce RTX 4060 Ti" overhead="0 B" '
        'before.total="16.0 GiB" before.free="14.7 GiB" now.total="16.0 GiB" now.free="14.7 GiB" now.used="1.3 GiB"'
    )
    second = (
        'time=2025-09-27T19:30:12.519+02:00 level=INFO source=server.go:686 msg="gpu memory" '
        'id=GPU-d0f9ed85-a082-2e7e-f1ca-ec56c347fcb0 available="14.2 GiB" free="14.7 GiB" minimum="457.0 MiB" '
        'overhead="0 B"'
    )
    (report,) = _reports(f"{first}\n{second}")
    assert (report.device_total_bytes, report.device_free_bytes) == (16 * GIB, round(14.7 * GIB))
    assert _time(first) == datetime(2025, 9, 27, 17, 30, 12, 517000)


def test_vllm_ascend_bytes_and_vllm_lines_in_its_log() -> None:
    """https://github.com/vllm-project/vllm-ascend/issues/5917: vLLM's own KV tokens line joins the plugin's
    report; the next instance's `Available memory: 0` is kept as zero."""
    first, second = _reports(
        """
[mineru] ^[[0;36m(EngineCore_DP0 pid=3052)^[[0;0m INFO 01-15 06:46:16 [worker_v1.py:270] Available memory: 23106324992, total memory: 65452113920
[mineru] ^[[0;36m(EngineCore_DP0 pid=3052)^[[0;0m INFO 01-15 06:46:16 [kv_cache_utils.py:1286] GPU KV cache size: 1,880,320 tokens
[mineru] ^[[0;36m(EngineCore_DP0 pid=4146)^[[0;0m INFO 01-15 06:47:41 [worker_v1.py:270] Available memory: 0, total memory: 65452113920
"""  # noqa: E501
    )
    assert (first.framework, first.kv_cache_bytes, first.kv_cache_tokens) == ("vllm-ascend", 23_106_324_992, 1_880_320)
    assert (second.line, second.kv_cache_bytes, second.device_total_bytes) == (3, 0, 65_452_113_920)


def test_vllm_development_build_lists_one_quantity_a_line() -> None:
    """https://github.com/vllm-project/vllm/pull/10511: each run's block is one report; the second header starts
    the next even though its first quantities repeat the first run's."""
    first, second = _reports(
        """
INFO 12-13 19:54:18 worker.py:243] Memory profiling results:
INFO 12-13 19:54:18 worker.py:243] duration     0.75 seconds
INFO 12-13 19:54:18 worker.py:243] total_gpu_memory     79.22GiB
INFO 12-13 19:54:18 worker.py:243] gpu_memory_utilization       0.90
INFO 12-13 19:54:18 worker.py:243] the current vLLM instance can use    71.29GiB
INFO 12-13 19:54:18 worker.py:243] model weights take   14.96GiB
INFO 12-13 19:54:18 worker.py:243] non_torch_memory     1.79GiB
INFO 12-13 19:54:18 worker.py:243] PyTorch activation peak memory       1.26GiB
INFO 12-13 19:54:18 worker.py:243] available_kv_cache_memory    53.29GiB
INFO 12-13 19:55:25 worker.py:243] Memory profiling results:
INFO 12-13 19:55:25 worker.py:243] total_gpu_memory     79.22GiB
INFO 12-13 19:55:25 worker.py:243] model weights take   7.48GiB
"""
    )
    assert (first.line, first.device_total_bytes, first.gpu_memory_utilization) == (3, round(79.22 * GIB), 0.90)
    assert (first.budget_bytes, first.weights_bytes) == (round(71.29 * GIB), round(14.96 * GIB))
    assert (first.non_torch_bytes, first.activation_peak_bytes) == (round(1.79 * GIB), round(1.26 * GIB))
    assert first.kv_cache_bytes == round(53.29 * GIB)
    assert (second.line, second.weights_bytes, second.kv_cache_bytes) == (11, round(7.48 * GIB), None)


def test_vllm_blocks_and_kv_capacity_errors() -> None:
    """https://github.com/vllm-project/vllm/issues/10517 (the poster dropped `# ` before `GPU blocks`) and
    https://github.com/vllm-project/vllm/issues/25350 (V1's ValueError states the available KV cache memory)."""
    (report,) = _reports(
        """
Loading model weights took 14.9888 GB
Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory=17.98GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB kv_cache_size=2.89GiB gpu_memory_utilization=0.90
# GPU blocks: 1478, # CPU blocks: 2048
The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.
"""  # noqa: E501
    )
    assert (report.weights_bytes, report.kv_cache_bytes) == (round(14.9888 * GIB), round(2.89 * GIB))
    assert (report.kv_cache_blocks_gpu, report.kv_cache_tokens) == (1478, 23_648)
    (blocks,) = _reports("GPU blocks: 1952, # CPU blocks: 2048")
    assert blocks.kv_cache_blocks_gpu == 1952
    (needed,) = _reports(
        "ValueError: To serve at least one request with the models's max seq len (221000), (10.12 GiB KV cache is "
        "needed, which is larger than the available KV cache memory (5.59 GiB). Based on the available memory, the "
        "estimated maximum model length is 122080."
    )
    assert (needed.variant, needed.kv_cache_bytes) == ("v1_available", round(5.59 * GIB))


def test_vllm_stamps_without_a_year() -> None:
    """https://github.com/vllm-project/vllm/pull/3120 (`02-29`: the last leap year), https://github.com/Ziems/arbor/
    issues/103 (a job runner's `HH:MM:SS [INFO]` before vLLM's stamp) and https://github.com/vllm-project/vllm-omni/
    issues/262 (a negative KV cache; a date later this year is last year's)."""
    leap = _time(">> INFO 02-29 19:21:45 model_runner.py:90] Loading model weights took 244.61 MB")
    assert leap is not None and (leap.month, leap.day) == (2, 29) and leap <= datetime.now(UTC).replace(tzinfo=None)
    (mb,) = _reports(">> INFO 02-29 19:21:45 model_runner.py:90] Loading model weights took 244.61 MB")
    assert mb.weights_bytes == round(244.61 * MIB)
    wrapped = _time(
        "07:29:02 [INFO] [inf-job] [INFERENCE LOG] (EngineCore_DP0 pid=497) INFO 10-03 07:29:02 "
        "[gpu_model_runner.py:2392] Model loading took 27.5185 GiB and 305.873276 seconds"
    )
    assert wrapped is not None and wrapped.strftime("%m-%d %H:%M:%S") == "10-03 07:29:02"
    negative = "(Worker_TP1 pid=104299) INFO 12-10 03:24:48 [gpu_worker.py:298] Available KV cache memory: -3.86 GiB"
    (report,) = _reports(negative)
    assert report.kv_cache_bytes == -round(3.86 * GIB)  # no room for a KV cache: kept negative
    moment = _time(negative)
    assert moment is not None and moment <= datetime.now(UTC).replace(tzinfo=None)


# Wordings the corpus has no excerpt of, as their sources' format strings print them (numbers from public logs).
FORMATTED = """
[2026-03-11 13:53:21 TP0] Load weight end. elapsed=23.18 s, type=Glm4MoeLiteForCausalLM, avail mem=32.02 GB, mem usage=28.79 GB.
[2026-03-11 13:53:23 TP0] KV Cache is allocated. #tokens: 383872, KV size: 19.36 GB
[2026-03-11 13:53:32 TP0] Capture npu graph end. Time elapsed: 8.04 s. mem usage=0.80 GB. avail mem=10.30 GB.
2024-09-03T04:40:12.110000Z  INFO text_generation_launcher: KV-cache blocks: 2304, size: 16
2024-09-03T04:40:19.370247Z  INFO text_generation_router::server: router/src/server.rs:1651: Setting max batch total tokens to 19056
[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: 8219
[TensorRT-LLM][INFO] [MemUsageChange] Allocated 16.05 GiB for max tokens in paged KV cache (263008).
[14:34:43] /root/mlc-llm/cpp/serve/config.cc:879: The actual engine mode is "interactive". So max batch size is 1, max KV cache token capacity is 43087, prefill chunk size is 8192.
llama_kv_cache: size =  354.75 MiB (  8448 cells,  43 layers,  1/1 seqs), K (f16):  354.75 MiB, V (f16):    0.00 MiB
"""  # noqa: E501


def test_wordings_as_their_sources_format_them() -> None:
    """SGLang `model_runner.py` / `memory_pool.py`, TGI `flash_causal_lm.py` and `server.rs`, TensorRT-LLM
    `kvCacheManager.cpp`, MLC `cpp/serve/config.cc`, llama.cpp `src/llama-kv-cache.cpp`."""
    sglang, tgi, trt, mlc, llama = _reports(FORMATTED)
    assert (sglang.framework, sglang.weights_bytes, sglang.kv_cache_tokens) == ("sglang", round(28.79 * GIB), 383_872)
    assert (sglang.kv_cache_bytes, sglang.cuda_graph_bytes) == (round(19.36 * GIB), round(0.80 * GIB))
    assert (tgi.framework, tgi.kv_cache_blocks_gpu, tgi.kv_cache_tokens) == ("tgi", 2304, 19_056)
    assert (trt.kv_cache_blocks_gpu, trt.kv_cache_bytes, trt.kv_cache_tokens) == (8219, round(16.05 * GIB), 263_008)
    assert (mlc.framework, mlc.kv_cache_tokens) == ("mlc-llm", 43_087)
    assert (llama.framework, llama.kv_cache_bytes, llama.kv_cache_tokens) == ("llama.cpp", round(354.75 * MIB), 8448)


@pytest.mark.parametrize("engine", ["ripgrep", "in-process"])
def test_the_shared_search_finds_every_engine(tmp_path, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The markers reach the log search (ripgrep's and polars' regex syntax alike): the scan finds what the
    line-by-line reader does."""
    if engine == "in-process":
        monkeypatch.setenv(RIPGREP_ENV, "off")
    monkeypatch.setattr(textscan, "SMALL_BYTES", 0)  # the polars search, whatever the log's size
    path = tmp_path / "engines.log"
    path.write_text("starting\n" + FORMATTED.strip("\n") + "\n")
    scanner = StartupScanner(LineClock())
    list(scan_text_log(path, on_window=scanner.window, also=[FINDER]))
    found = [(r.line - 1, r.framework, r.kv_cache_tokens) for r in scanner.reports()]
    assert found == [(r.line, r.framework, r.kv_cache_tokens) for r in _reports(FORMATTED)]
    assert scanner.reports()[1].ts == datetime(2024, 9, 3, 4, 40, 12, 110000)
