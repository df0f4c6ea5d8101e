"""The known OOM message formats as data, most specific first (the first signature that matches wins).

Patterns read as the messages do: a space stands for optional whitespace (see `patterns.rx`). Each format
says where its wording comes from: the framework's source file that prints it, or the public thread whose
real log showed it (tests/cases/realworld/oom/ holds the excerpts).
"""

from __future__ import annotations

import re

from .patterns import F, Signature, other_processes, rx, signature, tf_tensor_bytes, vllm_free_total, whole

# PyTorch's caching allocator, every generation (docs/domain.md "The OOM message, by version").
_TORCH_FIELDS = (
    F("requested_bytes", "Tried to allocate {SIZE}"),
    F("gpu_index", r"\( ?GPU (?P<gpu>\d+) ?;"),
    F("gpu_index", r"GPU (?P<gpu>\d+) has a total"),
    F("total_capacity_bytes", "{SIZE} total capacity"),
    F("total_capacity_bytes", "total capac(?:i)?ty of {SIZE}"),  # 2.1 prints "capacty"
    F("free_bytes", "{SIZE} free ;"),
    F("free_bytes", "of which {SIZE} is free"),
    F("already_allocated_bytes", "{SIZE} already allocated"),
    F("reserved_bytes", "{SIZE} reserved in total by PyTorch"),
    F("reserved_unallocated_bytes", "{SIZE} cached"),  # before 1.4, "cached" = held but unallocated
    F("reserved_unallocated_bytes", "{SIZE} is reserved by PyTorch but unallocated"),
    F("process_in_use_bytes", "this process has {SIZE} memory in use"),
    F("allowed_bytes", "{SIZE} allowed ;"),
    F("allocated_by_pytorch_bytes", "memory {SIZE} is allocated by PyTorch"),
    F("private_pool_bytes", "with {SIZE} allocated in private pools"),
)
# The two common layouts in one pattern each: the same fields as the specs above, a tenth of the cost.
_TORCH_2X = whole(
    r"Tried to allocate {SIZE:requested_bytes} \. ?GPU (?P<gpu_index>\d+) has a total capac(?:i)?ty of "
    r"{SIZE:total_capacity_bytes} of which {SIZE:free_bytes} is free \. (?P<procs>(?:(?:Including "
    r"non-PyTorch memory , this process|Process \d+) has [\d.]+ ?\w+ memory in use \. )*)"
    r"(?:{SIZE:allowed_bytes} allowed ; )?Of the allocated memory {SIZE:allocated_by_pytorch_bytes} is "
    r"allocated by PyTorch , (?:with {SIZE:private_pool_bytes} allocated in private pools \([^)]*\) , )?"
    r"and {SIZE:reserved_unallocated_bytes} is reserved by PyTorch but unallocated"
)
_TORCH_1X = whole(
    r"Tried to allocate {SIZE:requested_bytes} \( ?GPU (?P<gpu_index>\d+) ; {SIZE:total_capacity_bytes} "
    r"total capacity ; {SIZE:already_allocated_bytes} already allocated ; (?:{SIZE:free_bytes} free ; )?"
    r"(?:{SIZE:allowed_bytes} allowed ; )?(?:{SIZE:reserved_bytes} reserved in total by PyTorch"
    r"|{SIZE:reserved_unallocated_bytes} cached)"
)
_TORCH = {
    "fields": _TORCH_FIELDS,
    "tail": rx(r"unallocated|reserved in total by PyTorch|cached"),
    "extras": (other_processes,),
    "wholes": (_TORCH_2X, _TORCH_1X),
}

# PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync reports in a multi-line table instead
# (c10/cuda/CUDAMallocAsyncAllocator.cpp). `Currently allocated` is the allocator's pytorch_used_bytes, what
# tensors hold: the caching allocator's `already allocated`.
_TORCH_ASYNC = {
    "tail": rx(r"memory fraction\) : {SIZE}"),
    "fields": (
        F("gpu_index", r"Allocation on device (?P<gpu>\d+)"),
        F("already_allocated_bytes", "Currently allocated : {SIZE}"),
        F("requested_bytes", "Requested : {SIZE}"),
        F("total_capacity_bytes", "Device limit : {SIZE}"),
        F("free_bytes", r"Free \(according to CUDA\) : {SIZE}"),
        F("allowed_bytes", r"memory fraction\) : {SIZE}"),
    ),
}

# torch_npu (Ascend) keeps the 1.x layout with a `current active` figure oomlab has no column for
# (torch_npu/csrc/core/npu/NPUCachingAllocator.cpp: `(NPU 0; 61.27 GiB total capacity; 56.05 GiB already
# allocated; 56.05 GiB current active; 5.04 MiB free; 58.39 GiB reserved in total by PyTorch)`).
_TORCH_NPU = {
    "fields": (F("gpu_index", r"\( ?NPU (?P<gpu>\d+) ?;"), *_TORCH_FIELDS),
    "tail": _TORCH["tail"],
}

_MPS = {
    "tail": rx("Tried to allocate {SIZE}"),
    "fields": (
        F("allocated_by_pytorch_bytes", "MPS allocated : {SIZE}"),
        F("allowed_bytes", "max allowed : {SIZE}"),
        F("requested_bytes", "Tried to allocate {SIZE}"),
    ),
}

_PADDLE = {
    "tail": rx("available memory is (?:only )?{SIZE}"),
    "fields": (
        F("gpu_index", r"error on GPU (?P<gpu>\d+)"),
        F("requested_bytes", "Cannot allocate {SIZE}"),
        F("already_allocated_bytes", "{SIZE} memory has been allocated"),
        F("free_bytes", "available memory is (?:only )?{SIZE}"),
    ),
}

# Fluid in 2018 (paddle/fluid/platform/gpu_info.cc, PADDLE_ENFORCE_LE(allocating, available)): plain byte
# counts, `enforce allocating <= available failed, 10513462067 > 1369702144`
# (https://github.com/PaddlePaddle/Paddle/issues/8992).
_PADDLE_ENFORCE = {
    "fields": (
        F("requested_bytes", r"allocating <= available failed , {BYTES}"),
        F("free_bytes", r"allocating <= available failed , \d+ > {BYTES}"),
    ),
}

_TF_GPU = (
    F("gpu_index", r"device : ?GPU : ?(?P<gpu>\d+)"),
    F("gpu_index", r"GPU_(?P<gpu>\d+)_bfc"),
    F("gpu_index", r"/gpu : ?(?P<gpu>\d+)"),
)
_BFC_ANCHOR = r"Allocator \( ?\w+ ?\) ran out of memory trying to allocate {SIZE}"
# TensorFlow 1.0's bfc_allocator.cc: `Ran out of memory trying to allocate 24.38MiB.  See logs for memory
# state.`, and on the next line the op that asked fails with `OOM when allocating tensor with shape[...]`:
# one allocation, one event (https://github.com/tensorflow/models/issues/848).
_TF1_BFC = {
    "fields": (F("requested_bytes", "trying to allocate {SIZE}"), *_TF_GPU),
    "follow": rx(r"OOM when allocating tensor"),
}
# stream_executor's raw CUDA driver error, as TensorFlow and jaxlib (which vendors it) log it.
_STREAM_EXECUTOR = {
    "fields": (
        F("requested_bytes", r"\( ?{BYTES} bytes ?\)"),
        F("requested_bytes", "failed to alloc(?:ate)? {BYTES} bytes"),
    ),
}

_JAX_ANCHORS = (
    "Out of memory while trying to allocate",
    "Out of memory allocating {BYTES} bytes",
    # PjRt's stream executor client; older jaxlib spelled the status `Resource exhausted`
    # (https://github.com/kingoflolz/mesh-transformer-jax/issues/90).
    "(?:RESOURCE_EXHAUSTED|Resource exhausted) : Failed to allocate request for",
    r"Attempting to allocate {SIZE} \. That was not",
    "Ran out of memory in memory space",
    r"RESOURCE_EXHAUSTED :[^\n]{0,200}?(?i:out of memory)",
)
_JAX = {
    "open_ended": True,
    "fields": (
        F("requested_bytes", "trying to allocate {BYTES} bytes"),
        F("requested_bytes", "Out of memory allocating {BYTES} bytes"),
        F("requested_bytes", r"request for [^()]{0,40}\( ?{BYTES} ?B ?\)"),
        F("requested_bytes", "request for {SIZE}"),
        F("requested_bytes", "Attempting to allocate {SIZE}"),
        F("requested_bytes", r"Used {SIZE} of"),
        F("free_bytes", "There are {SIZE} free"),
        F("total_capacity_bytes", r"Used \S+ of {SIZE}"),
        F("gpu_index", r"device ordinal (?P<gpu>\d+)"),
        # XLA's cudaMallocAsync allocator (xla/stream_executor/gpu/gpu_cudamallocasync_allocator.cc):
        # `gpu_async_1 cuMemAllocAsync failed to allocate N bytes: ... Free memory/Total memory: F/T`
        F("requested_bytes", "cuMemAllocAsync failed to allocate {BYTES} bytes"),
        F("free_bytes", "Free memory / ?Total memory : {BYTES} ?/"),
        F("total_capacity_bytes", r"Free memory / ?Total memory : \d+ ?/ ?{BYTES}"),
        F("gpu_index", r"gpu_async_(?P<gpu>\d+)"),
    ),
}

_VLLM_ANCHORS = (
    "No available memory for the cache blocks",
    r"max seq len \( ?\d+ ?\) is larger than the maximum number of tokens that can be stored in KV cache",
    "KV cache is needed , which is larger",
    "on startup is less than desired GPU memory utilization",
)
_VLLM = {
    "extras": (vllm_free_total,),
    "fields": (
        F("requested_bytes", "{SIZE} KV cache is needed"),
        F("free_bytes", r"available KV cache memory \( ?{SIZE} ?\)"),
        F("requested_bytes", r"memory utilization \( ?[\d.]+ ?, ?{SIZE} ?\)"),
    ),
}

# NCCL's debug prefix is `host:pid:tid [cudaDev]` (src/debug.cc), so the device is the bracketed number.
_NCCL = {
    "fields": (
        F("requested_bytes", r"Failed to CUDA (?:calloc|malloc|host alloc) {BYTES} bytes"),
        F("gpu_index", r"[\w.-]:\d+:\d+ \[(?P<gpu>\d+)\]"),
    )
}

_TENSORRT_ANCHORS = (
    r"Error Code \d+ : OutOfMemory",
    r"Error Code \d+ : Cuda Runtime \( ?out of memory",
    r"Requested amount of (?:GPU )?memory \( ?{BYTES} bytes ?\) could not be allocated",
    "OutOfMemory Error in",
)
_TENSORRT = {"fields": (F("requested_bytes", r"Requested amount of (?:GPU )?memory \( ?{BYTES}"),)}
# The builder skipping a tactic for want of memory, as it logs it on a Jetson: `Tactic Device request:
# 538MB Available: 166MB. Device memory is insufficient to use tactic.` (MB = size >> 20;
# https://github.com/ultralytics/ultralytics/issues/14751).
_TENSORRT_TACTIC = {
    "fields": (
        F("requested_bytes", "Tactic Device request : {SIZE}"),
        F("free_bytes", r"Tactic Device request : [\d.]+ ?\w* Available : {SIZE}"),
    )
}
_TENSORRT_CONTEXT = rx(r"TensorRT|\[TRT\]|rtSafe|nvinfer|trtexec|tensorrt")

_ORT_ANCHORS = (
    "Failed to allocate memory for requested buffer",
    "Available memory of {BYTES} is smaller than requested bytes",
    r"CUDA failure \d+ : out of memory ;[^\n]{0,300}?; file =",  # CNTK's layout, plus the source file
)
# ONNX Runtime's CUDA_CALL layout (`... ; GPU=0 ; hostname=...`) comes from CNTK, hence shared fields.
_ORT = {
    "fields": (
        F("requested_bytes", "requested buffer of size {BYTES}"),
        F("requested_bytes", "requested bytes of {BYTES}"),
        F("free_bytes", "Available memory of {BYTES}"),
        F("gpu_index", r"GPU ?= ?(?P<gpu>\d+)"),
    ),
}
_ORT_CONTEXT = rx(r"onnxruntime|ONNXRuntime|onnx runtime|BFCArena")

_LLAMA_ANCHORS = (
    r"allocating {SIZE} on device \d+ : \w+ failed : out of memory",
    r"(?:failed|unable) to allocate \w+ buffer of size {BYTES}",
)
_LLAMA = {
    "fields": (
        F("requested_bytes", "allocating {SIZE} on device"),
        F("requested_bytes", "buffer of size {BYTES}"),
        F("requested_bytes", "failed to allocate buffer , size = {SIZE}"),
        F("gpu_index", r"on device (?P<gpu>\d+)"),
        F("gpu_index", r"current device : (?P<gpu>\d+)"),
        F("gpu_index", r"(?:failed|unable) to allocate (?:CUDA|ROCm|SYCL|Vulkan)(?P<gpu>\d+)"),
    ),
}
_LLAMA_CONTEXT = rx(r"ggml|llama_(?:model|kv|new|context|init)|llama\.cpp|llama runner|ollama|gguf")
_LLAMA_BUFFER = (
    "(?:failed|unable) to allocate (?:CUDA|ROCm|SYCL|Vulkan|Metal)",
    "failed to allocate buffer , size = {SIZE}",
    "failed to allocate (?:buffer for kv cache|compute buffers)",
)

_CUDA_ANCHORS = (
    "CUDA error : out of memory",
    "cudaErrorMemoryAllocation",
    "CUDA_ERROR_OUT_OF_MEMORY",
    "ErrorOutOfMemory",  # ManagedCuda's name for it (hipErrorOutOfMemory is matched earlier)
    r"cuda runtime err(?:or)? \( ?2 ?\) : out of memory",
    "error ?= ?2 : out of memory",  # THCudaCheck FAIL ... error=2
    "CUDA driver error : out of memory",
    r"cudaMalloc\w* (?:retry )?failed : out of memory",
    r"CUDA error 2\b[^\n]{0,200}?out of memory",
    "cuda failed with error 2 out of memory",
)

# --- frameworks whose wording names the framework itself -----------------------------------------------

# TGI's warmup (server/text_generation_server/models/flash_causal_lm.py): `Not enough memory to handle 4096
# prefill tokens. You need to decrease --max-batch-prefill-tokens`; LoRAX, a fork, prints the same words.
_TGI_ANCHOR = r"Not enough memory to handle \d+ prefill tokens"

# CuPy's OutOfMemoryError (cupy/cuda/memory.pyx): `Out of memory allocating 25,600,000 bytes (allocated so
# far: 3,635,267,072 bytes).` with `{:,}` separators, `limit set to` when a pool limit is set; older releases
# `out of memory to allocate N bytes (total M bytes)`, where total is the request plus the pool's total, not
# the device's capacity, so it is not read (https://github.com/cupy/cupy/issues/1912).
_CUPY = {
    "fields": (
        F("requested_bytes", "Out of memory allocating {COUNT} bytes"),
        F("requested_bytes", "out of memory to allocate {BYTES} bytes"),
        F("already_allocated_bytes", "allocated so far : {COUNT} bytes"),
        F("allowed_bytes", "limit set to : {COUNT} bytes"),
    ),
}
_CUPY_ANCHORS = (
    r"Out of memory allocating {COUNT} bytes \( ?allocated so far",
    r"out of memory to allocate \d+ bytes \( ?total \d+ bytes",
)

# Triton's OutOfResources (python/triton/runtime/errors.py; runtime/autotuner.py in older releases): `out of
# resource: shared memory, Required: 98304, Hardware limit: 65536. Reducing block sizes or `num_stages` may
# help.`, the per-block shared memory in bytes.
_TRITON = {
    "fields": (
        F("requested_bytes", "shared memory , Required : {BYTES}"),
        F("total_capacity_bytes", "Hardware limit : {BYTES}"),
    ),
}

# FlashInfer's workspace (include/flashinfer/allocator.h, AlignedAllocator::aligned_alloc): `Error in
# function 'aligned_alloc' at .../allocator.h:49:` then `Buffer overflow when allocating memory for
# batch_prefill_tmp_v with size 536346624 and alignment 16, but only 413138944 bytes available in
# AlignedAllocator.`; older releases `Out of workspace memory in AlignedAlloactor` (sic;
# https://github.com/flashinfer-ai/flashinfer/issues/362). The figures are of the workspace, not the device.
_FLASHINFER = {
    "tail": rx(r"bytes available in Aligned\w+|Out of workspace memory in Aligned\w+"),
    "fields": (
        F("requested_bytes", "with size {BYTES} and alignment"),
        F("free_bytes", "only {BYTES} bytes available in Aligned"),
    ),
}

# DeepSpeed-Inference's workspace (csrc/transformer/inference/includes/inference_context.h): it prints
# `Requested:\t%lu\nFree:\t%lu\nTotal:\t%lu` and throws `Workspace can't be allocated, no enough memory.`
_DEEPSPEED = {
    "fields": (
        F("requested_bytes", "Requested : {BYTES}"),
        F("free_bytes", r"Requested : \d+ Free : {BYTES}"),
        F("total_capacity_bytes", r"Free : \d+ Total : {BYTES}"),
    ),
}

# Theano's CudaNdarray allocator (theano/sandbox/cuda/cuda_ndarray.cu, device_malloc): `Error allocating
# 26214400 bytes of device memory (out of memory). Driver report 19365888 bytes free and 1073414144 bytes
# total`; its gpuarray backend raises libgpuarray's `GpuArrayException: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY`.
_THEANO = {
    "fields": (
        F("requested_bytes", "Error allocating {BYTES} bytes of device memory"),
        F("free_bytes", "Driver report {BYTES} bytes free"),
        F("total_capacity_bytes", r"bytes free and {BYTES} bytes total"),
    ),
}

# Ray's memory monitor kills a worker when the node's (host) memory runs low
# (raised as ray.exceptions.OutOfMemoryError; https://github.com/real-stanford/flingbot/issues/11). Its
# figures are of host memory in an unstated GB, so none is read.
_RAY_ANCHOR = r"killed due to the node running low on memory"

# SGLang's request-slot pool (python/sglang/srt/managers/schedule_batch.py): `alloc_req_slots runs out of
# memory. Please set a smaller number for --max-running-requests.` Its numbers count slots, not bytes.
_SGLANG_ANCHOR = r"alloc_req_slots runs out of memory"

# ggml's context pool (ggml.c, ggml_new_object): `not enough space in the context's memory pool (needed
# 827046512, available 805306368)`, host memory in bytes.
_GGML = {
    "fields": (
        F("requested_bytes", r"memory pool \( ?needed {BYTES}"),
        F("free_bytes", r"memory pool \( ?needed \d+ , available {BYTES}"),
    ),
}

# A CUDA_CHECK macro's `CUDA Error: out of memory at <file>:<line>`: vLLM's sleep mode allocator
# (csrc/cumem_allocator.cpp) when wake_up cannot map the memory back, and other C++ extensions.
_CUDA_ERROR_AT = r"CUDA Error : out of memory at \S+ : \d+"

# MXNet's pooled storage manager (src/storage/pooled_storage_manager.h): `cudaMalloc failed: out of memory`
# in 1.x, `Memory allocation failed.` in 0.7 (2016, https://github.com/apache/mxnet/issues/2913).
_MXNET_CONTEXT = rx(r"MXNet|mxnet|pooled_storage_manager")

SIGNATURES: tuple[Signature, ...] = (
    signature("pytorch-mps", "MPS backend out of (?:the )?memory", **_MPS),
    signature("pytorch", "CUDA out of (?:the )?memory", **_TORCH),
    signature("pytorch-rocm", "HIP out of (?:the )?memory", **_TORCH),
    signature(
        "pytorch-xpu", "XPU out of (?:the )?memory", "can NOT allocate memory block with size larger than", **_TORCH
    ),
    signature("pytorch-npu", "NPU out of (?:the )?memory", **_TORCH_NPU),
    # A pasted fragment without its head is still PyTorch's layout.
    signature("pytorch", r"Tried to allocate {SIZE} (?:\( ?GPU|\. ?GPU \d+ has a total)", **_TORCH),
    signature("pytorch", r"Allocation on device \d+ would exceed allowed memory", **_TORCH_ASYNC),
    # The same exception printed by ComfyUI with its figures on lines that were not kept: only the head is left
    # (`torch.OutOfMemoryError: Allocation on device `, `!!! Exception during processing !!! Allocation on
    # device `; tests/cases/realworld/pasted_text/021).
    signature(
        "pytorch", r"(?:OutOfMemoryError :|Exception during processing !!!) Allocation on device", **_TORCH_ASYNC
    ),
    signature("paddle", "Out of memory error on GPU", **_PADDLE),
    signature("paddle", r"enforce allocating <= available failed", **_PADDLE_ENFORCE),
    # Before the op's `OOM when allocating`, which its message is followed by.
    signature("tensorflow", r"Ran out of memory trying to allocate {SIZE} \. ?See logs for memory state", **_TF1_BFC),
    signature("tensorflow", "OOM when allocating tensor", fields=_TF_GPU, extras=(tf_tensor_bytes,), open_ended=True),
    # the BFC allocator prints the size rounded to its bin after the human one: `560.44MiB (rounded to 587661312)`
    # (tensorflow/core/common_runtime/bfc_allocator.cc); the exact bytes win over the two-decimal MiB
    signature(
        "tensorflow",
        _BFC_ANCHOR,
        fields=(
            F("requested_bytes", r"trying to allocate \S+ ?\( ?rounded to {BYTES} ?\)"),
            F("requested_bytes", "trying to allocate {SIZE}"),
            *_TF_GPU,
        ),
    ),
    # TF 2 eager ops: `ResourceExhaustedError: failed to allocate memory [Op:AddV2]`
    # (https://github.com/faustomorales/keras-ocr/issues/195).
    signature("tensorflow", r"failed to allocate memory \[ ?Op ?:", fields=_TF_GPU),
    signature("theano", r"Error allocating \d+ bytes of device memory", **_THEANO),
    signature("theano", "CUDA_ERROR_OUT_OF_MEMORY", context=rx(r"pygpu|gpuarray|[Tt]heano")),
    signature("jax", "CUDA_ERROR_OUT_OF_MEMORY", context=rx(r"org_tensorflow|jax|XlaRuntimeError"), **_STREAM_EXECUTOR),
    signature("tensorflow", "CUDA_ERROR_OUT_OF_MEMORY", context=rx(r"tensorflow|local_xla"), **_STREAM_EXECUTOR),
    # Before JAX's `Out of memory allocating N bytes`, which a CuPy message without separators also reads as.
    signature("cupy", *_CUPY_ANCHORS, **_CUPY),
    signature("jax", *_JAX_ANCHORS, **_JAX),
    signature("vllm", *_VLLM_ANCHORS, **_VLLM),
    signature("vllm", _CUDA_ERROR_AT, context=rx(r"cumem|wake_up")),
    signature("tgi", _TGI_ANCHOR),
    signature("sglang", _SGLANG_ANCHOR),
    signature("triton", r"out of resource : shared memory , Required : \d+ , Hardware limit : \d+", **_TRITON),
    signature(
        "flashinfer",
        r"Buffer overflow when allocating memory for",
        r"Out of workspace memory in Aligned\w+",
        **_FLASHINFER,
    ),
    signature(
        "deepspeed",
        r"Requested : \d+ Free : \d+ Total : \d+",
        r"Workspace can't be allocated , not? enough memory",
        **_DEEPSPEED,
    ),
    signature("ray", _RAY_ANCHOR),
    signature("nccl", r"Cuda failure (?:\d+ )?'out of memory'", r"NCCL WARN[^\n]{0,200}?out of memory", **_NCCL),
    signature("nccl", "ncclUnhandledCudaError", context=rx("out of memory"), **_NCCL),
    signature("tensorrt", r"Tactic Device request : [\d.]+ ?\w* Available : [\d.]+", **_TENSORRT_TACTIC),
    signature("tensorrt", *_TENSORRT_ANCHORS, **_TENSORRT),
    signature("tensorrt", "{OOM}", context=_TENSORRT_CONTEXT, **_TENSORRT),
    signature("onnxruntime", *_ORT_ANCHORS, **_ORT),
    signature("onnxruntime", "{OOM}", context=_ORT_CONTEXT, **_ORT),
    signature("cntk", r"CUDA failure \d+ : out of memory ; GPU ?=", **_ORT),
    signature("llama.cpp", *_LLAMA_ANCHORS, **_LLAMA),
    signature("llama.cpp", r"not enough space in the context's memory pool", **_GGML),
    signature("llama.cpp", "{OOM}", *_LLAMA_BUFFER, context=_LLAMA_CONTEXT, **_LLAMA),
    signature("mxnet", "{OOM}", "Memory allocation failed", context=_MXNET_CONTEXT),
    signature("spconv", "{OOM}", context=rx(r"tensorview|spconv")),
    # TVM's pooled allocator (MLC LLM's runtime) after freeing its pool and retrying once:
    # `Failed to allocate 99121664 bytes with alignment 16 bytes.` (tests/cases/realworld/pasted_text/016)
    signature(
        "tvm",
        r"Failed to allocate {BYTES} bytes with alignment \d+ bytes",
        fields=(F("requested_bytes", "Failed to allocate {BYTES} bytes with alignment"),),
    ),
    signature("cublas", "CUBLAS_STATUS_ALLOC_FAILED"),
    signature("cudnn", "CUDNN_STATUS_ALLOC_FAILED"),
    signature("hip", "hipErrorOutOfMemory", "HIP error : out of memory"),
    signature("hip", "out of memory", context=rx(r"hip[A-Z]|Hip[A-Z]")),
    signature("cuda", *_CUDA_ANCHORS, _CUDA_ERROR_AT, **_STREAM_EXECUTOR),
)

# Lines that open a framework's message whose out-of-memory words come on the lines after them, so a log
# scanner reads on from them: DeepSpeed's `Requested:` printout, FlashInfer's `Error in function
# 'aligned_alloc' at` (FLASHINFER_ERROR puts the function first).
MESSAGE_HEADS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("deepspeed", re.compile(r"\s*Requested:\s*\d+\s*$")),
    ("flashinfer", re.compile(r"[^\n]*Error in function 'aligned_alloc' at")),
)
# An exception's name alone on its line heads whatever message follows it, even after a blank line
# (PaddlePaddle's summary: `ResourceExhaustedError: `, a blank line, the message;
# https://github.com/PaddlePaddle/PaddleOCR/issues/645).
EXCEPTION_HEAD = re.compile(r"\s*[\w.]*(?:Error|Exception)\s*:?\s*$")
