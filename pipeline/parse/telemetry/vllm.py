"""vLLM's start-up memory lines (and vllm-ascend's): how the engine split the card at start.

The wordings, by version (vllm-project/vllm):
- v0.3 `vllm/worker/model_runner.py`: `Loading model weights took 244.61 MB` (bytes / 2**20) and
  `llm_engine.py`'s `# GPU blocks: 76240, # CPU blocks: 7281` (later `executor_base.py`'s `# CUDA blocks: ...`).
- v0 `vllm/worker/worker.py` `determine_num_available_blocks` (0.6.5 to 0.8), one message over three lines,
  each usually prefixed by the logger: `Memory profiling takes 1.73 seconds` / `the current vLLM instance can
  use total_gpu_memory (47.50GiB) x gpu_memory_utilization (0.78) = 37.18GiB` / `model weights take
  0.52GiB; non_torch_memory takes 0.08GiB; PyTorch activation peak memory takes 1.78GiB; the rest of the
  memory reserved for KV Cache is 34.81GiB.`; a development build of it (PR 10511) printed one quantity a
  line after `Memory profiling results:` (`total_gpu_memory     79.22GiB`, ...).
- v0 before that (0.6.x): `Memory profiling results: duration=..., total_gpu_memory=..GiB, ...,
  non_torch_memory=..GiB, kv_cache_size=..GiB, gpu_memory_utilization=0.90.`, and when the cache is too small
  `... larger than the maximum number of tokens that can be stored in KV cache (23648).`
- v1 `vllm/v1/worker/gpu_worker.py` `determine_available_memory`: `Available KV cache memory: 54.62 GiB`,
  after the model runner's `Model loading took 14.9888 GiB and 13.2 seconds` (later `... GiB memory and
  ...`; older `Loading model weights took 8.5107 GB`) and before `kv_cache_utils.py`'s `GPU KV cache size:
  447,088 tokens`, whose `check_enough_kv_cache_memory` says `(10.12 GiB KV cache is needed, which is larger
  than the available KV cache memory (5.59 GiB)`.
- v1 since 0.10.2, `gpu_worker.py` `compile_or_warm_up_model`: `Free memory on device (78.66/79.19 GiB) on
  startup. Desired GPU memory utilization is (0.9, 71.27 GiB). Actual usage is 14.08 GiB for weight, 1.97
  GiB for peak activation, 0.07 GiB for non-torch memory, and 0.67 GiB for CUDAGraph memory. ... Current kv
  cache memory in use is 59212694937 bytes.`, later `Actual usage is 15.26 GiB for consumed memory (weights
  + non-torch), 1.44 GiB for peak activation, and 0.23 GiB for CUDAGraph memory. ... Current kv cache
  memory in use is 19.54 GiB.`
- vllm-ascend `vllm_ascend/worker/worker_v1.py` `determine_available_memory`, in plain bytes: `Available
  memory: 23106324992, total memory: 65452113920`.

GB and MB in these lines mean GiB and MiB: vLLM divides by 2**30 and 2**20 (domain knowledge).
"""

from __future__ import annotations

import re

from .wording import AMOUNT, NUM, Wording

_N = r"-?\d+(?:\.\d+)?"  # a number that states no field
_UNIT = r"(GiB|GB)"


def _vllm(marker: str, pattern: str, fields: tuple[str, ...], variant: str = "", opens: bool = False) -> Wording:
    return Wording("vllm", marker, re.compile(pattern), fields, variant, opens)


def _profiling_line(name: str, field: str) -> Wording:
    """One quantity of the development build's multi-line `Memory profiling results:` (`name   value`)."""
    value = NUM if field == "gpu_memory_utilization" else AMOUNT
    return _vllm(name, rf"(?:^|\s){re.escape(name)}\s+{value}\s*$", (field,), "v0_results")


WORDINGS: tuple[Wording, ...] = (
    _vllm(
        "model weights take",
        rf"model weights take {AMOUNT}; non_torch_memory takes {AMOUNT}; PyTorch activation peak "
        rf"memory takes {AMOUNT}; the rest of the memory reserved for KV Cache is {AMOUNT}",
        ("weights_bytes", "non_torch_bytes", "activation_peak_bytes", "kv_cache_bytes"),
        "v0_profiling",
    ),
    _vllm(
        "x gpu_memory_utilization (",
        rf"total_gpu_memory \({AMOUNT}\) x gpu_memory_utilization \({NUM}\) = {AMOUNT}",
        ("device_total_bytes", "gpu_memory_utilization", "budget_bytes"),
        "v0_profiling",
    ),
    _vllm(
        "Memory profiling results:",
        rf"Memory profiling results:.*?total_gpu_memory={AMOUNT}.*?non_torch_memory={AMOUNT}.*?"
        rf"kv_cache_size={AMOUNT}.*?gpu_memory_utilization={NUM}",
        ("device_total_bytes", "non_torch_bytes", "kv_cache_bytes", "gpu_memory_utilization"),
        "v0_results",
    ),
    # the development build's header, alone on its line: a new report begins
    _vllm("Memory profiling results:", r"Memory profiling results:\s*$", (), "v0_results", opens=True),
    _profiling_line("total_gpu_memory", "device_total_bytes"),
    _profiling_line("gpu_memory_utilization", "gpu_memory_utilization"),
    _profiling_line("the current vLLM instance can use", "budget_bytes"),
    _profiling_line("model weights take", "weights_bytes"),
    _profiling_line("non_torch_memory", "non_torch_bytes"),
    _profiling_line("PyTorch activation peak memory", "activation_peak_bytes"),
    _profiling_line("available_kv_cache_memory", "kv_cache_bytes"),
    # `# GPU blocks` (v0.3), `# CUDA blocks` / `# cuda blocks` (the platform's name); posters drop the `# `
    _vllm(", # CPU blocks:", r"(?:#\s*)?\w+ blocks: (\d+), # CPU blocks: \d+", ("kv_cache_blocks_gpu",)),
    _vllm(
        "tokens that can be stored in KV cache (",
        r"maximum number of tokens that can be stored in KV cache \((\d+)\)",
        ("kv_cache_tokens",),
    ),
    _vllm("Available KV cache memory:", rf"Available KV cache memory: {AMOUNT}", ("kv_cache_bytes",), "v1_available"),
    _vllm(
        "the available KV cache memory (",
        rf"larger than the available KV cache memory \({AMOUNT}\)",
        ("kv_cache_bytes",),
        "v1_available",
    ),
    # printed by every version around the report: they name no variant of their own; a model load opens one
    _vllm("Model loading took", rf"Model loading took {AMOUNT}", ("loaded_weights_bytes",), opens=True),
    _vllm("Loading model weights took", rf"Loading model weights took {AMOUNT}", ("loaded_weights_bytes",), opens=True),
    _vllm("GPU KV cache size:", r"GPU KV cache size: ([\d,]+) tokens", ("kv_cache_tokens",)),
    _vllm(
        "on startup. Desired GPU memory utilization",
        rf"Free memory on device \({NUM}/{_N} {_UNIT}\) on startup",
        ("device_free_bytes",),
        "v1_summary",
    ),
    _vllm(
        "on startup. Desired GPU memory utilization",
        rf"Free memory on device \({_N}/{NUM} {_UNIT}\) on startup",
        ("device_total_bytes",),
        "v1_summary",
    ),
    _vllm(
        "on startup. Desired GPU memory utilization",
        rf"Desired GPU memory utilization is \({NUM}, {AMOUNT}\)",
        ("gpu_memory_utilization", "budget_bytes"),
        "v1_summary",
    ),
    _vllm(
        "Actual usage is",
        rf"Actual usage is {AMOUNT} for weights?, {AMOUNT} for peak activation, {AMOUNT} for "
        rf"non-torch memory, and {AMOUNT} for CUDAGraph memory",
        ("weights_bytes", "activation_peak_bytes", "non_torch_bytes", "cuda_graph_bytes"),
        "v1_summary",
    ),
    _vllm(
        "Actual usage is",
        rf"Actual usage is {AMOUNT} for consumed memory \(weights \+ non-torch\), {AMOUNT} for peak "
        rf"activation, and {AMOUNT} for CUDAGraph memory",
        ("consumed_bytes", "activation_peak_bytes", "cuda_graph_bytes"),
        "v1_summary",
    ),
    _vllm(
        "Current kv cache memory in use is",
        rf"Current kv cache memory in use is {AMOUNT}",
        ("kv_cache_bytes",),
        "v1_summary",
    ),
    # vllm-ascend's NPU worker, in bytes (no unit): the KV cache's share and the card
    Wording(
        "vllm-ascend",
        "Available memory: ",
        re.compile(r"Available memory: (-?\d+)(), total memory: (\d+)()"),
        ("kv_cache_bytes", "device_total_bytes"),
        "v1_available",
    ),
)
