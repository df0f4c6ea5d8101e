"""The start-up memory lines of SGLang, TGI, TensorRT-LLM, MLC LLM and vllm.rs, as their sources print them.

- SGLang `python/sglang/srt/model_executor/model_runner.py`: `Load weight begin. avail mem=137.29 GB` (free on
  the card before the weights), `Load weight end. type=..., avail mem=..., mem usage=14.99 GB.` (the
  weights), `Capture cuda graph end. Time elapsed: 8.04 s. mem usage=0.80 GB. avail mem=...`;
  `python/sglang/srt/mem_cache/memory_pool.py`: `KV Cache is allocated. [dtype: torch.bfloat16, ]#tokens:
  367404, K size: 8.23 GB, V size: 8.23 GB` (MLA pools: `KV size: 19.36 GB`) and `Memory pool end. avail
  mem=8.40 GB`. SGLang's GB is 2**30: memory_pool.py `GB = 1024 * 1024 * 1024`, and `get_available_gpu_memory`
  divides by 1 << 30.
- TGI `router/src/main.rs` (later `router/src/server.rs`): `Setting max batch total tokens to 16000` (the tokens
  the KV cache holds, found by the warm-up); the shard's `server/text_generation_server/models/
  flash_causal_lm.py`: `KV-cache blocks: 2304, size: 16`.
- TensorRT-LLM `cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp`: `Allocate 69524783104 bytes for k/v cache.`
  and `Using 132608 [total ]tokens in paged KV cache.` (0.8), later `Number of blocks in KV cache primary pool:
  8219` and `[MemUsageChange] Allocated 16.05 GiB for max tokens in paged KV cache (263008).` (bytes / 2**30).
- MLC LLM `python/mlc_llm/serve/engine_base.py` (and `cpp/serve/config.cc`): `Estimated KVCacheConfig
  "max_total_sequence_length": 21275.` and `Estimated total single GPU memory usage: 14361.14 MB (Parameters:
  3615.13 MB. KVCache: 10689.56 MB. Temporary buffer: 56.44 MB)`, MB being bytes / 1024 / 1024; the C++ engine's
  `So max batch size is 1, max KV cache token capacity is 131230, ...`. Its labels may be coloured (ANSI).
- vllm.rs `src/utils/kvcache_allocator.rs`: `KVCache Allocation: 8192 GPU blocks (48.00 GB[ x 2]), max usable
  kvcache tokens 524288 ...` (later `max KV-cache tokens`), GB being `SIZE_IN_GB = 1024.0 * 1024.0 * 1024.0`.
"""

from __future__ import annotations

import re

from .wording import AMOUNT, Wording

_ANSI = r"(?:\x1b\[[\d;]*m)?"  # MLC colours its labels green


def _wording(
    framework: str, marker: str, pattern: str, fields: tuple[str, ...], variant: str = "", **flags: bool
) -> Wording:
    return Wording(framework, marker, re.compile(pattern), fields, variant, **flags)


SGLANG: tuple[Wording, ...] = (
    _wording(
        "sglang",
        "Load weight begin. avail mem=",
        rf"Load weight begin\. avail mem={AMOUNT}",
        ("device_free_bytes",),
        opens=True,
    ),
    _wording("sglang", "Load weight end.", rf"Load weight end\..*?mem usage={AMOUNT}", ("weights_bytes",)),
    _wording(
        "sglang",
        "KV Cache is allocated.",
        rf"KV Cache is allocated\. (?:dtype: \S+, )?#tokens: (\d+), K size: {AMOUNT}, V size: {AMOUNT}",
        ("kv_cache_tokens", "kv_cache_bytes", "kv_cache_bytes"),
    ),
    _wording(
        "sglang",
        "KV Cache is allocated.",
        rf"KV Cache is allocated\. (?:dtype: \S+, )?#tokens: (\d+), KV size: {AMOUNT}",
        ("kv_cache_tokens", "kv_cache_bytes"),
    ),
    _wording(
        "sglang",
        "Memory pool end. avail mem=",
        rf"Memory pool end\. avail mem={AMOUNT}",
        ("device_free_bytes",),
        soft=True,
    ),
    _wording(
        "sglang", " graph end. Time elapsed:", rf"Capture \w+ graph end\..*?mem usage={AMOUNT}", ("cuda_graph_bytes",)
    ),
)

TGI: tuple[Wording, ...] = (
    _wording(
        "tgi", "Setting max batch total tokens to", r"Setting max batch total tokens to (\d+)", ("kv_cache_tokens",)
    ),
    _wording("tgi", "KV-cache blocks: ", r"KV-cache blocks: (\d+), size: \d+", ("kv_cache_blocks_gpu",)),
)

TENSORRT_LLM: tuple[Wording, ...] = (
    _wording("tensorrt-llm", "bytes for k/v cache", r"Allocate (\d+)() bytes for k/v cache", ("kv_cache_bytes",)),
    _wording(
        "tensorrt-llm",
        "tokens in paged KV cache",
        r"Using (\d+) (?:total )?tokens in paged KV cache",
        ("kv_cache_tokens",),
    ),
    # kvCacheManager.cpp prints the device's total and free memory (cudaMemGetInfo) before sizing the pool
    _wording(
        "tensorrt-llm",
        "Memory usage when calculating max tokens in paged kv cache:",
        rf"Memory usage when calculating max tokens in paged kv cache: total: {AMOUNT}, available: {AMOUNT}",
        ("device_total_bytes", "device_free_bytes"),
    ),
    _wording(
        "tensorrt-llm",
        "blocks in KV cache primary pool:",
        r"Number of blocks in KV cache primary pool: (\d+)",
        ("kv_cache_blocks_gpu",),
    ),
    _wording(
        "tensorrt-llm",
        "for max tokens in paged KV cache (",
        rf"Allocated {AMOUNT} for max tokens in paged KV cache \((\d+)\)",
        ("kv_cache_bytes", "kv_cache_tokens"),
    ),
)

# MLC's numbers are its plan, before it allocates: the variant says so
MLC_LLM: tuple[Wording, ...] = (
    _wording(
        "mlc-llm",
        'Estimated KVCacheConfig "max_total_sequence_length"',
        rf'Estimated KVCacheConfig "max_total_sequence_length"{_ANSI}: (\d+)',
        ("kv_cache_tokens",),
        "estimate",
    ),
    _wording(
        "mlc-llm",
        "Estimated total single GPU memory usage",
        rf"Estimated total single GPU memory usage{_ANSI}: [\d.]+ MB \(Parameters: {AMOUNT}\. KVCache: {AMOUNT}\.",
        ("weights_bytes", "kv_cache_bytes"),
        "estimate",
    ),
    _wording(
        "mlc-llm",
        "max KV cache token capacity is",
        r"So max batch size is \d+, max KV cache token capacity "
        r"is (\d+)",
        ("kv_cache_tokens",),
        "estimate",
    ),
)

VLLM_RS: tuple[Wording, ...] = (
    _wording(
        "vllm.rs",
        "KVCache Allocation: ",
        rf"KVCache Allocation: (\d+) GPU blocks \({AMOUNT}(?: x \d+)?\), max (?:usable kvcache|KV-cache) tokens (\d+)",
        ("kv_cache_blocks_gpu", "kv_cache_bytes", "kv_cache_tokens"),
    ),
)

WORDINGS: tuple[Wording, ...] = (*SGLANG, *TGI, *TENSORRT_LLM, *MLC_LLM, *VLLM_RS)
