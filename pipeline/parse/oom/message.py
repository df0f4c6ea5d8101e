"""Parse one GPU out-of-memory message, whatever framework (or PyTorch generation) printed it."""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from ...errors import ParseError
from ...records import OomMessage
from .clean import clean_message_text, strip_ansi, strip_prefix
from .patterns import extract_fields
from .signatures import EXCEPTION_HEAD, MESSAGE_HEADS, SIGNATURES

# Literal byte strings that find candidate OOM messages fast in a large log. Every supported format
# contains at least one; most contain two, so a line wrap inside one marker is caught by another
# (a wrapped "out of me|mory" still has "Tried to allocate" or "OutOfMemoryError"). They are chosen
# so that the Rust regex engine polars uses can search for all of them at once at several GB/s:
# long, specific phrases, none frequent in ordinary log lines ("KV cache usage" lines are).
OOM_MARKERS: tuple[bytes, ...] = (
    b"ut of memory",  # out of memory, Out of memory (JAX, Paddle), ran out of memory (TF, XLA)
    b"ut of the memory",  # hand-typed variant seen in issues
    b"OUT OF MEMORY",
    b"OUT_OF_MEMORY",  # CUDA_ERROR_OUT_OF_MEMORY
    b"OutOfMemory",  # torch.OutOfMemoryError, hipErrorOutOfMemory, TensorRT's OutOfMemory
    b"ErrorMemoryAllocation",  # cudaErrorMemoryAllocation
    b"OOM when allocating",  # TensorFlow
    b"_ALLOC_FAILED",  # CUBLAS_STATUS_ALLOC_FAILED, CUDNN_STATUS_ALLOC_FAILED
    b"RESOURCE_EXHAUSTED",  # JAX / XLA
    b"to allocate",  # Tried to (PyTorch), failed/unable to (llama.cpp, ONNX Runtime, XLA)
    b"No available memory",  # vLLM: No available memory for the cache blocks
    b"KV cache memory",  # vLLM: X GiB KV cache is needed, which is larger than the available KV cache memory
    b"KV cache (",  # vLLM: max seq len larger than the tokens that can be stored in KV cache (N)
    b"GPU memory utilization",  # vLLM: free memory on startup is less than desired GPU memory utilization
    b"Requested amount of",  # TensorRT: Requested amount of GPU memory (N bytes) could not be allocated
    b"Available memory of",  # ONNX Runtime BFC arena: Available memory of N is smaller than requested bytes
    b"Not enough memory to handle",  # TGI / LoRAX warmup: ... N prefill tokens
    b"out of resource: shared memory",  # Triton's OutOfResources
    b"Buffer overflow when allocating",  # FlashInfer's workspace
    b"ut of workspace memory",  # FlashInfer before 0.1.4
    b"in function 'aligned_alloc'",  # FlashInfer's error head, the message on the lines after it
    b"Requested:",  # DeepSpeed-Inference's Requested:/Free:/Total: printout
    b"Memory allocation failed",  # MXNet before 0.9 (its context says it is MXNet's)
    b"running low on memory",  # Ray's memory monitor killed a task
    b"context's memory pool",  # ggml: not enough space in the context's memory pool
    b"Tactic Device request",  # TensorRT's builder: Tactic Device request: 538MB Available: 166MB
    b"allocating <= available",  # Paddle 2018: enforce allocating <= available failed
    b"Allocation on device",  # cudaMallocAsync's, and ComfyUI's print of it without its figures
)


def _as_text(text: object) -> str:
    """`text` as str: bytes are decoded leniently, anything else is refused."""
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", errors="replace")
    raise ParseError(f"an OOM message must be text, not {type(text).__name__}")


class Reading(NamedTuple):
    """What `analyse_oom` makes of a text: the message, how far it got, where its anchor starts in the
    cleaned text, and the lines that would report the same failure right after it (its format's `follow`)."""

    oom: OomMessage | None
    state: str
    start: int
    follow: re.Pattern[str] | None = None


_NOTHING = Reading(None, "none", -1)


def analyse_oom(text: str) -> Reading:
    """The message in `text`, how far it got, and where in the cleaned text its anchor starts.

    The state is "none" (no message), "partial" (its end not seen yet), "complete" (a one-line
    format) or "ended" (its closing words seen); a log scanner reads on while it is "partial".
    """
    raw = _as_text(text)
    cleaned = clean_message_text(raw)
    for index, sig in enumerate(SIGNATURES):
        match = sig.find(cleaned, raw)
        if match is not None:
            message, state, start = _read(index, cleaned, match.start())
            return Reading(message, state, start, sig.follow)
    return _NOTHING


def analyse_oom_text(text: str) -> tuple[OomMessage | None, str, int]:
    """`analyse_oom` without the follow-up pattern: (message, state, anchor start)."""
    oom, state, start, _ = analyse_oom(text)
    return oom, state, start


def opens_message(line: str) -> str | None:
    """The framework whose message `line` opens, its out-of-memory words on the lines after it
    (`signatures.MESSAGE_HEADS`); None if it opens none."""
    content = strip_prefix(strip_ansi(line))
    return next((framework for framework, head in MESSAGE_HEADS if head.match(content)), None)


def heads_message(line: str, framework: str) -> bool:
    """Whether `line` is the head of the `framework` message after it: a line that opens one (`opens_message`)
    or an exception's name alone (`signatures.EXCEPTION_HEAD`)."""
    content = strip_prefix(strip_ansi(line))
    return EXCEPTION_HEAD.match(content) is not None or opens_message(content) == framework


@functools.lru_cache(maxsize=1 << 12)
def _read(index: int, cleaned: str, start: int) -> tuple[OomMessage, str, int]:
    """What signature `index` reads from the cleaned text where its anchor matched at `start`.

    The signature depends on the raw text (contexts are looked for in log prefixes), what it reads only on
    the cleaned text: an OOM storm repeats the same message under new timestamps, read once here. The
    message is frozen, so the one copy can be shared.
    """
    sig = SIGNATURES[index]
    try:
        fields, whole = extract_fields(sig, cleaned)
    except (ValueError, OverflowError) as exc:
        raise ParseError(f"{sig.framework} OOM message has a size that cannot be read: {exc}") from None
    message = OomMessage(framework=sig.framework, message=cleaned, **_storable(fields))
    return message, "ended" if whole else sig.state(cleaned, start), start


# No device holds 8 EiB: a larger amount is a counter that wrapped (`this process has 17179869184.00 GiB
# memory in use` is 2**64 bytes, an unsigned underflow in the driver's query), not a reading, and it does not
# fit the database's BIGINT. It is dropped; the message's other numbers stand.
_MAX_AMOUNT = (1 << 63) - 1


def _storable(fields: dict) -> dict:
    """`fields` without the amounts no device can hold."""
    kept = {k: v for k, v in fields.items() if not (isinstance(v, int) and abs(v) > _MAX_AMOUNT)}
    if "other_processes" in kept:
        kept["other_processes"] = tuple((pid, b) for pid, b in kept["other_processes"] if abs(b) <= _MAX_AMOUNT)
    return kept


def parse_oom_message(text: str) -> OomMessage | None:
    """The OOM message in `text` with every size it states in bytes; None if `text` holds none."""
    try:
        return analyse_oom_text(text)[0]
    except RecursionError:
        raise ParseError("OOM message is nested too deeply to read") from None
