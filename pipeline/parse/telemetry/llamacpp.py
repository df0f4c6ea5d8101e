"""The start-up memory lines of llama.cpp and of ollama (which runs llama.cpp, or its own ggml engine).

- llama.cpp `src/llama-model.cpp` `load_tensors`: `%12s model buffer size = %8.2f MiB` per backend buffer
  (older `llm_load_tensors: %10s buffer size = ...`): the weights on that device; `src/llama-kv-cache.cpp`:
  `%10s KV buffer size = %8.2f MiB` per device and `size = %7.2f MiB (%6u cells, %3d layers, ...)` in all
  (older `llama_new_context_with_model: KV self size  = %7.2f MiB, K (f16): ...`). Sizes are bytes / 1024.0 /
  1024.0. Host buffers (`CPU`, `CPU_Mapped`, `CUDA_Host`) are not on a card and are not read.
- ollama (Go `log/slog` logfmt, sizes by `format.HumanBytes2`, binary units): `discover/gpu.go` `updating cuda
  memory data` (`gpu=<id> ... now.total="24.0 GiB" now.free="22.5 GiB"`); `llm/server.go` `gpu memory`
  (`id=<id> available=... free="14.7 GiB"`); `llm/memory.go` `offload to cuda` (`memory.available="[22.5 GiB]"
  memory.required.kv="8.0 GiB" memory.weights.total="11.9 GiB"`, its plan before loading); `ml/backend/ggml/
  ggml.go` `model weights` (`buffer=CUDA0 size="11.5 GiB"`).
"""

from __future__ import annotations

import re

from .wording import AMOUNT, DEVICE, Wording

_Q_AMOUNT = rf'"{AMOUNT}"'  # slog quotes a value with a space in it


def _llama(marker: str, pattern: str, fields: tuple[str, ...], opens: bool = False) -> Wording:
    return Wording("llama.cpp", marker, re.compile(pattern), fields, opens=opens)


def _ollama(marker: str, pattern: str, fields: tuple[str, ...], variant: str = "", opens: bool = False) -> Wording:
    return Wording("ollama", marker, re.compile(pattern), fields, variant, opens)


LLAMA_CPP: tuple[Wording, ...] = (
    # a model's weights, device by device: a load after the device's KV cache was sized begins the next start-up
    _llama(
        "buffer size =",
        rf"load_tensors:\s+{DEVICE} (?:model )?buffer size\s*=\s*{AMOUNT}",
        ("device", "weights_bytes"),
        opens=True,
    ),
    _llama("KV buffer size =", rf"\s{DEVICE} KV buffer size\s*=\s*{AMOUNT}", ("device", "kv_cache_bytes")),
    _llama(" cells, ", rf"\bsize\s*=\s*{AMOUNT}\s*\(\s*(\d+) cells,", ("kv_cache_bytes", "kv_cache_tokens")),
    _llama("KV self size", rf"KV self size\s*=\s*{AMOUNT}", ("kv_cache_bytes",)),
    _llama("kv self size", rf"kv self size\s*=\s*{AMOUNT}", ("kv_cache_bytes",)),  # 2023 builds
)

OLLAMA: tuple[Wording, ...] = (
    _ollama(
        'memory data" gpu=',
        rf'msg="updating \w+ memory data" gpu=(\S+) .*?now\.total={_Q_AMOUNT} now\.free={_Q_AMOUNT}',
        ("device", "device_total_bytes", "device_free_bytes"),
    ),
    _ollama('msg="gpu memory"', rf'msg="gpu memory" id=(\S+) .*?\bfree={_Q_AMOUNT}', ("device", "device_free_bytes")),
    # the plan for the whole model (all its GPUs), read only where it names one GPU's free memory
    _ollama(
        'msg="offload to ',
        rf'msg="offload to \w+".*? memory\.available="\[{AMOUNT}\]"',
        ("device_free_bytes",),
        "estimate",
    ),
    _ollama(
        'msg="offload to ',
        rf'msg="offload to \w+".*? memory\.required\.kv={_Q_AMOUNT}',
        ("kv_cache_bytes",),
        "estimate",
    ),
    _ollama(
        'msg="offload to ',
        rf'msg="offload to \w+".*? memory\.weights\.total={_Q_AMOUNT}',
        ("weights_bytes",),
        "estimate",
    ),
    _ollama(
        'msg="model weights"',
        rf'msg="model weights" (?:buffer|device)={DEVICE} size={_Q_AMOUNT}',
        ("device", "weights_bytes"),
        opens=True,
    ),
)

WORDINGS: tuple[Wording, ...] = (*LLAMA_CPP, *OLLAMA)
# A host engine that runs a guest's code logs the guest's lines as its own: llama.cpp's lines in an ollama log
# (its service's tag or its own lines seen before) are ollama's.
EMBEDDED = {"ollama": "llama.cpp"}
