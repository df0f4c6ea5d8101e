"""The fleet's memory model, derived from the real H200 `serve_mixed` capture and scaled to the fleet model.

Every constant measured on the H200 is named here with where it comes from; `tests/test_sample_fleet.py`
re-derives them from `tests/data/h200/serve_mixed/` so the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

GIB = 1 << 30
MIB = 1 << 20
SEGMENT = 2 * MIB  # large allocations are rounded up to 2 MiB (PyTorch's large pool)
BLOCK = 512  # every allocation is a multiple of 512 bytes


# --- measured on the H200 (tests/data/h200/serve_mixed, PyTorch 2.11) -------------------------------
H200_DEVICE_TOTAL = 150_109_880_320  # device_total of every request (139.80 GiB)
H200_BASELINE_ALLOCATED = 379_620_352  # allocated_after of every request: weights + buffers, 0.354 GiB
H200_BYTES_PER_TOKEN = 58_004  # least-squares slope of peak - allocated_before against b x (in + out), ok rows
H200_OTHER_PROCESS = round(135.29 * GIB)  # "Process 1030 has 135.29 GiB memory in use"
H200_NON_PYTORCH = round(0.72 * GIB)  # "this process has" minus (allocated + reserved-unallocated): 0.69-0.74 GiB
H200_LARGEST_OK_TOKENS = 47_256  # b x (in + out) of the largest success (8 x (5891 + 16)); b x in = 47,128
H200_SMALLEST_OOM_TOKENS = 54_016  # b x (in + out) of the smallest failure (8 x (6736 + 16)); b x in = 53,888
H200_LARGEST_OK_PEAK_DELTA = 2_741_256_192  # its peak_allocated - allocated_before
H200_REQUESTED_PER_PREFILL_TOKEN = 5_632  # requested_size = ceil(b x in x 5632 / 2 MiB) x 2 MiB, all 4 OOMs


@dataclass(frozen=True)
class Architecture:
    """A Llama-style decoder: what the per-token and weight bytes scale with."""

    layers: int
    hidden: int
    intermediate: int
    vocab: int

    @property
    def params(self) -> int:
        """Embedding + untied head + per layer attention (4 h^2) and gated MLP (3 h i)."""
        return 2 * self.vocab * self.hidden + self.layers * (4 * self.hidden**2 + 3 * self.hidden * self.intermediate)

    @property
    def kv_bytes_per_token(self) -> int:
        """2 (K and V) x layers x hidden x 2 bytes (bf16); domain.md formula, kv_heads x head_dim = hidden."""
        return 2 * self.layers * self.hidden * 2


H200_MODEL = Architecture(layers=8, hidden=1024, intermediate=2816, vocab=32_000)  # the captured ~100M model
FLEET_MODEL = Architecture(layers=32, hidden=2048, intermediate=5632, vocab=32_000)  # the fleet's ~1.8B model


Size = TypeVar("Size", int, np.ndarray)


def round_up(value: Size, unit: int) -> Size:
    """`value` (a number or an integer array) rounded up to a multiple of `unit`."""
    return -(-value // unit) * unit


@dataclass(frozen=True)
class MemoryModel:
    """What one request of the fleet model costs, and when an allocation fails."""

    weights_factor: float  # fleet params / captured params
    width_factor: float  # fleet hidden / captured hidden: what activations scale with
    baseline_allocated: int  # allocated after a request on a healthy process
    bytes_per_token: int  # peak - allocated_before per b x (in + out) token
    requested_per_prefill_token: int  # the largest single allocation (MLP) per b x in token
    non_pytorch: int  # CUDA context and libraries, outside PyTorch's counters
    efficiency: float  # the share of the free budget a peak can reach before the allocator fails

    def budget(self, device_total: int, other: Any = 0) -> Any:
        """Bytes a request's peak (baseline included) may reach on a card with `other` bytes (a number or a
        numpy array) held by other processes."""
        return self.efficiency * (device_total - self.non_pytorch - other)

    def token_threshold(self, device_total: int, other: int = 0, baseline: int | None = None) -> int:
        """Largest b x (in + out) that still fits at `baseline` (the healthy one unless given)."""
        base = self.baseline_allocated if baseline is None else baseline
        return int((self.budget(device_total, other) - base) // self.bytes_per_token)


def h200_efficiency() -> tuple[float, float, float]:
    """(low, high, midpoint): peak / budget of serve_mixed's largest success and of its smallest failure."""
    budget = H200_DEVICE_TOTAL - H200_OTHER_PROCESS - H200_NON_PYTORCH
    low = (H200_BASELINE_ALLOCATED + H200_LARGEST_OK_PEAK_DELTA) / budget
    high = (H200_BASELINE_ALLOCATED + H200_BYTES_PER_TOKEN * H200_SMALLEST_OOM_TOKENS) / budget
    return low, high, (low + high) / 2


def fleet_memory_model() -> MemoryModel:
    """The H200 measurements scaled to FLEET_MODEL: weights by parameter count, KV by layers x hidden,
    the rest of the per-token bytes (activations, temporaries) by hidden width."""
    weights_factor = FLEET_MODEL.params / H200_MODEL.params
    width_factor = FLEET_MODEL.hidden / H200_MODEL.hidden
    activations = H200_BYTES_PER_TOKEN - H200_MODEL.kv_bytes_per_token
    return MemoryModel(
        weights_factor=weights_factor,
        width_factor=width_factor,
        baseline_allocated=round_up(int(H200_BASELINE_ALLOCATED * weights_factor), SEGMENT),
        bytes_per_token=FLEET_MODEL.kv_bytes_per_token + int(activations * width_factor),
        requested_per_prefill_token=FLEET_MODEL.intermediate * 2,
        non_pytorch=round_up(H200_NON_PYTORCH, SEGMENT),
        efficiency=round(h200_efficiency()[2], 3),
    )


def grounding_summary() -> dict[str, object]:
    """The derivation, as numbers for truths.json and FLEET.md."""
    model = fleet_memory_model()
    low, high, _ = h200_efficiency()
    return {
        "h200_bytes_per_token": H200_BYTES_PER_TOKEN,
        "h200_kv_bytes_per_token": H200_MODEL.kv_bytes_per_token,
        "h200_baseline_allocated": H200_BASELINE_ALLOCATED,
        "h200_params": H200_MODEL.params,
        "h200_largest_ok_tokens": H200_LARGEST_OK_TOKENS,
        "h200_smallest_oom_tokens": H200_SMALLEST_OOM_TOKENS,
        "h200_efficiency_bracket": [round(low, 3), round(high, 3)],
        "fleet_params": FLEET_MODEL.params,
        "weights_factor": round(model.weights_factor, 3),
        "kv_factor": FLEET_MODEL.kv_bytes_per_token / H200_MODEL.kv_bytes_per_token,
        "activation_factor": model.width_factor,
        "bytes_per_token_factor": round(model.bytes_per_token / H200_BYTES_PER_TOKEN, 3),
        "fleet_bytes_per_token": model.bytes_per_token,
        "fleet_baseline_allocated": model.baseline_allocated,
        "fleet_requested_per_prefill_token": model.requested_per_prefill_token,
        "non_pytorch": model.non_pytorch,
        "efficiency": model.efficiency,
    }
