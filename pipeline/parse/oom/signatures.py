"""The known OOM message formats as data, most specific first (the first signature that matches wins).

Patterns read as the messages do: a space stands for optional whitespace (see `patterns.rx`).
"""

from __future__ import annotations

from .patterns import F, Signature, other_processes, rx, signature, tf_tensor_bytes, vllm_free_total, whole

# PyTorch's caching allocator, every generation (domain.md "The OOM message, by version").
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

# PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync reports in a multi-line table instead.
_TORCH_ASYNC = {
    "tail": rx(r"memory fraction\) : {SIZE}"),
    "fields": (
        F("gpu_index", r"Allocation on device (?P<gpu>\d+)"),
        F("allocated_by_pytorch_bytes", "Currently allocated : {SIZE}"),
        F("requested_bytes", "Requested : {SIZE}"),
        F("total_capacity_bytes", "Device limit : {SIZE}"),
        F("free_bytes", r"Free \(according to CUDA\) : {SIZE}"),
        F("allowed_bytes", r"memory fraction\) : {SIZE}"),
    ),
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

_TF_GPU = (
    F("gpu_index", r"device : ?GPU : ?(?P<gpu>\d+)"),
    F("gpu_index", r"GPU_(?P<gpu>\d+)_bfc"),
    F("gpu_index", r"/gpu : ?(?P<gpu>\d+)"),
)
_BFC_ANCHOR = r"Allocator \( ?\w+ ?\) ran out of memory trying to allocate {SIZE}"
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
    "RESOURCE_EXHAUSTED : Failed to allocate request for",
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
        F("requested_bytes", r"memory utilization \( ?[\d.]+ ?, ?{SIZE} ?\)"),
    ),
}

_NCCL = {"fields": (F("requested_bytes", r"Failed to CUDA (?:calloc|malloc|host alloc) {BYTES} bytes"),)}

_TENSORRT_ANCHORS = (
    r"Error Code \d+ : OutOfMemory",
    r"Error Code \d+ : Cuda Runtime \( ?out of memory",
    r"Requested amount of (?:GPU )?memory \( ?{BYTES} bytes ?\) could not be allocated",
    "OutOfMemory Error in",
)
_TENSORRT = {"fields": (F("requested_bytes", r"Requested amount of (?:GPU )?memory \( ?{BYTES}"),)}
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

SIGNATURES: tuple[Signature, ...] = (
    signature("pytorch-mps", "MPS backend out of (?:the )?memory", **_MPS),
    signature("pytorch", "CUDA out of (?:the )?memory", **_TORCH),
    signature("pytorch-rocm", "HIP out of (?:the )?memory", **_TORCH),
    signature(
        "pytorch-xpu", "XPU out of (?:the )?memory", "can NOT allocate memory block with size larger than", **_TORCH
    ),
    # A pasted fragment without its head is still PyTorch's layout.
    signature("pytorch", r"Tried to allocate {SIZE} (?:\( ?GPU|\. ?GPU \d+ has a total)", **_TORCH),
    signature("pytorch", r"Allocation on device \d+ would exceed allowed memory", **_TORCH_ASYNC),
    signature("paddle", "Out of memory error on GPU", **_PADDLE),
    signature("tensorflow", "OOM when allocating tensor", fields=_TF_GPU, extras=(tf_tensor_bytes,), open_ended=True),
    signature("tensorflow", _BFC_ANCHOR, fields=(F("requested_bytes", "trying to allocate {SIZE}"), *_TF_GPU)),
    signature("jax", "CUDA_ERROR_OUT_OF_MEMORY", context=rx(r"org_tensorflow|jax|XlaRuntimeError"), **_STREAM_EXECUTOR),
    signature("tensorflow", "CUDA_ERROR_OUT_OF_MEMORY", context=rx(r"tensorflow|local_xla"), **_STREAM_EXECUTOR),
    signature("jax", *_JAX_ANCHORS, **_JAX),
    signature("vllm", *_VLLM_ANCHORS, **_VLLM),
    signature("nccl", r"Cuda failure (?:\d+ )?'out of memory'", r"NCCL WARN[^\n]{0,200}?out of memory", **_NCCL),
    signature("nccl", "ncclUnhandledCudaError", context=rx("out of memory"), **_NCCL),
    signature("tensorrt", *_TENSORRT_ANCHORS, **_TENSORRT),
    signature("tensorrt", "{OOM}", context=_TENSORRT_CONTEXT, **_TENSORRT),
    signature("onnxruntime", *_ORT_ANCHORS, **_ORT),
    signature("onnxruntime", "{OOM}", context=_ORT_CONTEXT, **_ORT),
    signature("cntk", r"CUDA failure \d+ : out of memory ; GPU ?=", **_ORT),
    signature("llama.cpp", *_LLAMA_ANCHORS, **_LLAMA),
    signature("llama.cpp", "{OOM}", *_LLAMA_BUFFER, context=_LLAMA_CONTEXT, **_LLAMA),
    signature("mxnet", "{OOM}", context=rx(r"MXNet|mxnet|pooled_storage_manager")),
    signature("spconv", "{OOM}", context=rx(r"tensorview|spconv")),
    signature("cublas", "CUBLAS_STATUS_ALLOC_FAILED"),
    signature("cudnn", "CUDNN_STATUS_ALLOC_FAILED"),
    signature("hip", "hipErrorOutOfMemory", "HIP error : out of memory"),
    signature("hip", "out of memory", context=rx(r"hip[A-Z]|Hip[A-Z]")),
    signature("cuda", *_CUDA_ANCHORS, **_STREAM_EXECUTOR),
)
