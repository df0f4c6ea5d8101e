"""parse_oom_message on the wordings of frameworks beyond PyTorch, each from a real log excerpt
(tests/cases/realworld/oom/ holds them with their threads' URLs)."""

from __future__ import annotations

import pytest

from oomlab.parse.oom.clean import clean_message_text
from oomlab.parse.oom.message import OOM_MARKERS, parse_oom_message


def gib(x: float) -> int:
    return round(x * 2**30)


def mib(x: float) -> int:
    return round(x * 2**20)


# (URL, the excerpt as posted, framework, fields it must yield)
WORDINGS = [
    (
        "https://github.com/huggingface/text-generation-inference/issues/1067",
        "RuntimeError: Not enough memory to handle 4096 prefill tokens. You need to decrease "
        "`--max-batch-prefill-tokens`",
        "tgi",
        {"requested_bytes": None},
    ),
    (
        "https://github.com/sgl-project/sglang/issues/29838",
        "torch.OutOfMemoryError: NPU out of memory. Tried to allocate 72.00 MiB (NPU 0; 61.27 GiB total capacity; "
        "56.05 GiB already allocated; 56.05 GiB current active; 5.04 MiB free; 58.39 GiB reserved in total by "
        "PyTorch).If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.",
        "pytorch-npu",
        {
            "gpu_index": 0,
            "requested_bytes": mib(72),
            "total_capacity_bytes": gib(61.27),
            "already_allocated_bytes": gib(56.05),
            "free_bytes": mib(5.04),
            "reserved_bytes": gib(58.39),
        },
    ),
    (
        "https://github.com/cupy/cupy/issues/2537",
        "Exception in main training loop: Out of memory allocating 25,600,000 bytes (allocated so far: "
        "3,635,267,072 bytes).",
        "cupy",
        {"requested_bytes": 25_600_000, "already_allocated_bytes": 3_635_267_072, "total_capacity_bytes": None},
    ),
    (
        "https://github.com/cupy/cupy/issues/1912",
        '"cupy.cuda.memory.OutOfMemoryError: out of memory to allocate 1073741824 bytes (total 12373894656 bytes)"',
        "cupy",
        {"requested_bytes": 1073741824, "total_capacity_bytes": None},  # total is the pool's, not the device's
    ),
    (
        "https://github.com/sasha0552/pascal-pkgs-ci/issues/50",
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304, Hardware limit: "
        "49152. Reducing block sizes or `num_stages` may help.",
        "triton",
        {"requested_bytes": 98304, "total_capacity_bytes": 49152},
    ),
    (
        "https://github.com/vllm-project/vllm/issues/25342",
        "site-packages/flashinfer/data/include/flashinfer/allocator.h:49: Buffer overflow when allocating memory "
        "for batch_prefill_tmp_v with size 283115520 and alignment 16, but only 268435456 bytes available in "
        "AlignedAllocator. Increase the workspace buffer size.",
        "flashinfer",
        {"requested_bytes": 283115520, "free_bytes": 268435456},
    ),
    (
        "https://github.com/flashinfer-ai/flashinfer/issues/362",
        "RuntimeError: RuntimeError: Out of workspace memory in AlignedAlloactor",
        "flashinfer",
        {},
    ),
    (
        "https://github.com/daswer123/xtts-webui/issues/25",
        "Requested:      104873984\nFree:   49217536\nTotal:  4294443008",
        "deepspeed",
        {"requested_bytes": 104873984, "free_bytes": 49217536, "total_capacity_bytes": 4294443008},
    ),
    (
        "https://github.com/Theano/Theano/issues/1814",
        "Error allocating 26214400 bytes of device memory (out of memory). Driver report 19365888 bytes free and "
        "1073414144 bytes total ",
        "theano",
        {"requested_bytes": 26214400, "free_bytes": 19365888, "total_capacity_bytes": 1073414144},
    ),
    (
        "https://github.com/SenticNet/personality-detection/issues/8",
        "pygpu.gpuarray.GpuArrayException: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
        "theano",
        {},
    ),
    (
        "https://github.com/kingoflolz/mesh-transformer-jax/issues/90",
        "2021-08-12 10:19:56.549710: E external/org_tensorflow/tensorflow/compiler/xla/pjrt/"
        "pjrt_stream_executor_client.cc:1981] Execution of replica 0 failed: Resource exhausted: Failed to "
        "allocate request for 128.00MiB (134217728B) on device ordinal 0",
        "jax",
        {"requested_bytes": 134217728, "gpu_index": 0},
    ),
    (
        "https://github.com/faustomorales/keras-ocr/issues/195",
        "ResourceExhaustedError: failed to allocate memory [Op:AddV2]",
        "tensorflow",
        {},
    ),
    (
        "https://github.com/PaddlePaddle/Paddle/issues/8992",
        "paddle.fluid.core.EnforceNotMet: enforce allocating <= available failed, 10513462067 > 1369702144",
        "paddle",
        {"requested_bytes": 10513462067, "free_bytes": 1369702144},
    ),
    (
        "https://github.com/apache/mxnet/issues/2913",
        "[19:03:47] /home/deeper/mxnet/dmlc-core/include/dmlc/./logging.h:235: [19:03:47] "
        "src/storage/./pooled_storage_manager.h:62: Memory allocation failed.",
        "mxnet",
        {},
    ),
    (
        "https://github.com/real-stanford/flingbot/issues/11",
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        "ray",
        {},
    ),
    (
        "https://github.com/sgl-project/sglang/issues/10408",
        "`RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for "
        "`--max-running-requests`. self.req_to_token_pool.available_size()=1, num_reqs=2,",
        "sglang",
        {"requested_bytes": None},  # its numbers count request slots
    ),
    (
        "https://github.com/ymcui/Chinese-LLaMA-Alpaca/issues/270",
        "ggml_new_tensor_impl: not enough space in the context's memory pool (needed 827046512, available 805306368)",
        "llama.cpp",
        {"requested_bytes": 827046512, "free_bytes": 805306368},
    ),
    (
        "https://github.com/ultralytics/ultralytics/issues/14751",
        "[07/28/2024-14:47:29] [TRT] [W] Tactic Device request: 538MB Available: 166MB. Device memory is "
        "insufficient to use tactic.",
        "tensorrt",
        {"requested_bytes": mib(538), "free_bytes": mib(166)},
    ),
    (
        "https://github.com/vllm-project/vllm/issues/13941",
        "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
        "vllm",
        {},
    ),
    (
        "https://github.com/NVIDIA/nccl/issues/1485",
        "node2:24881:25568 [2] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
        "nccl",
        {"gpu_index": 2},
    ),
    (
        "https://github.com/pytorch/pytorch/issues/175666",
        "[2026-02-24T20:21:58Z] (EngineCore_DP0 pid=6940) ValueError: Free memory on device cuda:1 (19.77/22.05 "
        "GiB) on startup is less than desired GPU memory utilization (0.9, 19.84 GiB). Decrease GPU memory "
        "utilization or reduce GPU memory used by other processes.",
        "vllm",
        {"gpu_index": 1, "free_bytes": gib(19.77), "total_capacity_bytes": gib(22.05), "requested_bytes": gib(19.84)},
    ),
    (
        "https://github.com/vllm-project/recipes/pull/653",
        "ValueError: To serve at least one request with the model's max seq len (1048576), (44.25 GiB KV cache is "
        "needed, which is larger than the available KV cache memory (8.42 GiB). Based on the available memory, "
        "the estimated maximum model length is 199552.",
        "vllm",
        {"requested_bytes": gib(44.25), "free_bytes": gib(8.42)},
    ),
]


@pytest.mark.parametrize(
    ("url", "text", "framework", "expect"), WORDINGS, ids=[w[2] + f"-{i}" for i, w in enumerate(WORDINGS)]
)
def test_real_wordings(url: str, text: str, framework: str, expect: dict[str, object]) -> None:
    """Each wording as its thread (`url`) shows it: found by a marker, read as its framework, its numbers."""
    assert any(marker in line.encode() for line in text.splitlines() for marker in OOM_MARKERS), url
    oom = parse_oom_message(text)
    assert oom is not None and oom.framework == framework, url
    for name, value in expect.items():
        assert getattr(oom, name) == value, (url, name)


def test_cuda_malloc_async_currently_allocated_is_already_allocated() -> None:
    """https://github.com/AIFSH/ComfyUI-ChatTTS/issues/9: the cudaMallocAsync table's `Currently allocated`
    is pytorch_used_bytes, what tensors hold; the 2**64 `PyTorch limit` (no limit set) cannot be stored."""
    text = (
        "torch.cuda.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)\n"
        "Currently allocated     : 6.89 GiB\nRequested               : 320.00 MiB\n"
        "Device limit            : 23.69 GiB\nFree (according to CUDA): 2.94 MiB\n"
        "PyTorch limit (set by user-supplied memory fraction)\n                        : 17179869184.00 GiB"
    )
    oom = parse_oom_message(text)
    assert oom is not None
    assert (oom.already_allocated_bytes, oom.requested_bytes, oom.free_bytes) == (gib(6.89), mib(320), mib(2.94))
    assert oom.allocated_by_pytorch_bytes is None and oom.allowed_bytes is None
    assert "(out of memory) Currently allocated" in oom.message  # the lines are sentences: a space between


def test_cached_era_cached_is_reserved_but_unallocated() -> None:
    """1.0-1.3 print amount_cached - amount_allocated as `cached` (c10/cuda/CUDACachingAllocator.cpp);
    https://github.com/daitao/SAN/issues/39 shows 160.79 MiB cached beside 9.94 GiB allocated."""
    oom = parse_oom_message(
        "RuntimeError: CUDA out of memory. Tried to allocate 9.80 GiB (GPU 0; 14.76 GiB total capacity; 9.94 GiB "
        "already allocated; 3.89 GiB free; 160.79 MiB cached)."
    )
    assert oom is not None and oom.reserved_unallocated_bytes == mib(160.79) and oom.reserved_bytes is None


@pytest.mark.parametrize(
    ("lines", "joined"),
    [
        # One sentence per line (https://github.com/vllm-project/vllm/issues/19445): a space where each broke.
        (["torch.OutOfMemoryError: CUDA out of memory.", "Tried to allocate 252.00 MiB."], "memory. Tried"),
        # A table's rows of one width: a size is never glued to the next row's label.
        (["Device limit            : 15.70 GiB", "Free (according to CUDA): 14.44 MiB"], "GiB Free"),
        # A mail client's 72-column wrap (https://github.com/bitsandbytes-foundation/bitsandbytes/issues/65).
        (["RuntimeError: CUDA out of memory. Tried to allocate 1024.00 MiB (GPU 0;", "14.76 GiB total"], "0; 14.76"),
        # A terminal's hard wrap inside a word: healed.
        (["x" * 30 + "Tried to allo", "cate 2.00 GiB (GPU 0; 7.80 GiB"], "allocate 2.00"),
        (["a" * 20, "b" * 20, "c" * 5], "a" * 20 + "b" * 20 + "c" * 5),
    ],
)
def test_continuation_lines_are_joined_with_a_space_unless_a_wrap_cut_a_word(lines: list[str], joined: str) -> None:
    assert joined in clean_message_text("\n".join(lines))
