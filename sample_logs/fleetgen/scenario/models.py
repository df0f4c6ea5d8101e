"""Cards (16 to 141 GB, as PyTorch and nvidia-smi report them) and model architectures from 0.3 to 70 GB of
weights, in bf16 or int8, with the memory model of grounding.py scaled to each."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..grounding import H200_BYTES_PER_TOKEN, H200_MODEL, MIB, SEGMENT, MemoryModel, round_up
from ..plan import A10, A100, Card

# Device totals are what torch.cuda.mem_get_info() gives for each card; the names what nvidia-smi prints.
CARDS: tuple[Card, ...] = (
    Card("t4", "Tesla T4", 15_360, 15_102 * MIB, 10.0, 70.0),  # 14.75 GiB
    Card("a10", A10.smi_name, A10.smi_total_mib, A10.device_total, A10.idle_w, A10.max_w),  # 21.96 GiB
    Card("a100s", "NVIDIA A100-SXM4-40GB", 40_960, 40_335 * MIB, 50.0, 400.0),  # 39.39 GiB
    Card("l20", "NVIDIA L20", 46_068, 45_466 * MIB, 35.0, 275.0),  # 44.40 GiB
    Card("a100", A100.smi_name, A100.smi_total_mib, A100.device_total, A100.idle_w, A100.max_w),  # 79.14 GiB
    Card("h100nvl", "NVIDIA H100 NVL", 95_830, 95_334 * MIB, 60.0, 400.0),  # 93.10 GiB
    Card("h200", "NVIDIA H200", 143_771, 150_109_880_320, 75.0, 700.0),  # 139.80 GiB (the real capture)
)
# Cards the widened scenarios (not --classic) also draw. Totals as PyTorch prints them in real messages or as
# torch.cuda.get_device_properties() reports them in public issue threads:
#   L40S: "GPU has a total capacity of 44.42 GiB" (stepfun-ai/Step-Video-T2V#8, an 8 x L40S run); nvidia-smi
#     prints 46068 MiB for an L40S.
#   H100 80GB HBM3: total_memory=81089MB / 81090MB in _CudaDeviceProperties printouts (79.19 GiB, the total
#     PyTorch's messages print); nvidia-smi prints 81559 MiB (huggingface/text-embeddings-inference#350).
#   MI300X: total_memory=196592MB (ROCm/ROCm#4203), "HIP out of memory. ... GPU 0 has a total capacity of
#     191.98 GiB" in ROCm PyTorch messages, which name no process at all (no NVML on ROCm); no nvidia-smi.
WIDE_CARDS: tuple[Card, ...] = (
    Card("l40s", "NVIDIA L40S", 46_068, 45_488 * MIB, 35.0, 350.0),  # 44.42 GiB
    Card("h100", "NVIDIA H100 80GB HBM3", 81_559, 81_089 * MIB, 70.0, 700.0),  # 79.19 GiB
    Card("mi300x", "AMD Instinct MI300X", 196_592, 196_592 * MIB, 140.0, 750.0),  # 191.98 GiB
)
AMD = frozenset({"mi300x"})  # ROCm cards: HIP messages without process lines, no nvidia-smi samples
# How fast each card serves (requests it is sent, relative to an A10).
SPEED = {
    "t4": 0.6,
    "a10": 1.0,
    "a100s": 1.5,
    "l20": 1.2,
    "a100": 1.7,
    "h100nvl": 2.2,
    "h200": 2.6,
    "l40s": 1.4,
    "h100": 2.1,
    "mi300x": 2.4,
}
BYTES_PER_PARAM = {"bf16": 2, "int8": 1}
# Activation and temporary bytes per token per unit of hidden width, measured on the H200 (grounding.py).
ACT_PER_HIDDEN = (H200_BYTES_PER_TOKEN - H200_MODEL.kv_bytes_per_token) / H200_MODEL.hidden
HIDDENS = (512, 768, 1024, 1536, 2048, 2560, 3072, 4096, 5120, 6144, 8192)
VOCAB = 32_000
GB = 1_000_000_000


@dataclass(frozen=True)
class Model:
    """A Llama-style decoder served with `dtype` weights; `act_factor` > 1 for a build with heavier activations
    (an eager attention fallback): the same weights, more bytes per token."""

    dtype: str
    params: int
    hidden: int
    layers: int
    kv_dim: int
    intermediate: int
    act_factor: float = 1.0

    @property
    def weights_bytes(self) -> int:
        return self.params * BYTES_PER_PARAM[self.dtype]

    @property
    def bytes_per_token(self) -> int:
        """KV cache (bf16 whatever the weights) plus activations, per batch x (input + output) token."""
        return 2 * self.layers * self.kv_dim * 2 + int(ACT_PER_HIDDEN * self.hidden * self.act_factor)

    @property
    def size_label(self) -> str:
        """`7b`, `350m`: the parameter count as model names write it."""
        return f"{self.params / 1e9:.0f}b" if self.params >= 1.5e9 else f"{self.params / 1e6:.0f}m"

    def memory(self, non_pytorch: int, efficiency: float) -> MemoryModel:
        """The memory model of one process serving it (baseline: weights plus 2 % buffers)."""
        return MemoryModel(
            weights_factor=self.params / H200_MODEL.params,
            width_factor=self.hidden / H200_MODEL.hidden,
            baseline_allocated=round_up(int(self.weights_bytes * 1.02) + 64 * MIB, SEGMENT),
            bytes_per_token=self.bytes_per_token,
            requested_per_prefill_token=self.intermediate * 2,
            non_pytorch=non_pytorch,
            efficiency=efficiency,
        )


def architecture(weights_gb: float, dtype: str) -> Model:
    """A plausible shape for `weights_gb` GB of `dtype` weights: the hidden width whose layer count is
    nearest to what models of that size have (about 24 at 1B, 32 at 7B, 40 at 70B)."""
    params = int(weights_gb * GB / BYTES_PER_PARAM[dtype])
    target = 24 + 8 * math.log10(params / 1e9)

    def layers(hidden: int) -> float:
        intermediate = 2.7 * hidden
        return (params - 2 * VOCAB * hidden) / (4 * hidden**2 + 3 * hidden * intermediate)

    hidden = min((h for h in HIDDENS if layers(h) >= 4), key=lambda h: abs(layers(h) - target))
    kv_dim = hidden if hidden < 2048 else hidden // 4 if hidden < 6144 else hidden // 8  # grouped-query attention
    return Model(dtype, params, hidden, max(4, round(layers(hidden))), kv_dim, round(2.7 * hidden / 128) * 128)


def card_gib(card: Card) -> str:
    """The total as PyTorch's messages print it: `21.96 GiB`."""
    return f"{card.device_total / (1 << 30):.2f} GiB"
