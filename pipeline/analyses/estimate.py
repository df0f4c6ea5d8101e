"""GPU memory a model needs before it is deployed: weights, KV cache, activations and CUDA context.

Formulas (docs/domain.md): weights = parameters x bytes per value; KV cache = 2 x layers x kv_heads x head_dim x
tokens x batch x bytes; the CUDA context is outside PyTorch's counters (0.5-1 GB per process; sizing's 1 GiB
unless told). Cards come from sizing's table and the 1.3-1.5 x safety factor from its rules, so a card
chosen here is the one `oomlab findings` would advise.

Activations (peak of a prefill through a Llama-style decoder, counted from transformers'
`LlamaModel.forward` / `LlamaDecoderLayer` / `LlamaMLP`): per prompt token, 3 x intermediate values live
together in the SwiGLU MLP (act(gate), up and their product) beside 4 x hidden (the embedding output the
model's forward keeps, the layer's input its loop keeps, the post-attention residual and its normed copy),
at the activation dtype; per sequence, the logits of the last position only (generate computes no others)
upcast to fp32: vocab x 4 bytes. On the real H200 capture this gives 57,856 bytes per token (KV 32,768 +
activations 25,088) against 58,004 measured (tests/test_estimate.py).
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..errors import InputError, OomlabError
from ..load.tables import fetch_dicts
from .fleet.sizing import CARDS, DEFAULT_CONTEXT_BYTES, SAFETY, Card, card_name, context_bytes, smallest_card

if TYPE_CHECKING:
    import duckdb

# Bytes per value. Weight-only quantisation (int8/int4/fp8) keeps activations in 16 bits.
DTYPE_BYTES: dict[str, float] = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
ACTIVATION_BYTES: dict[str, int] = {"fp32": 4}  # every other dtype computes in 16 bits
LOGIT_BYTES = 4  # generate upcasts the last position's logits to fp32
MLP_LIVE = 3  # act(gate), up, act(gate) * up
HIDDEN_LIVE = 4  # embedding output, layer input, post-attention residual, its normed copy
DEFAULT_VOCAB = 32_000  # Llama's and Mistral's, when neither a config nor --vocab gives one
_PARAMS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmbt]?)\s*$", re.IGNORECASE)
_SCALE = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}


@dataclass(frozen=True)
class ModelShape:
    """What the memory depends on; `derived` names the fields estimated rather than given."""

    params: int
    layers: int
    kv_heads: int
    head_dim: int
    hidden: int
    intermediate: int
    vocab: int
    dtype: str
    derived: tuple[str, ...] = ()
    source: str | None = None  # the config file it came from


@dataclass(frozen=True)
class Workload:
    """One batch: sequences, prompt tokens and generated tokens each; the KV cache dtype if not the model's."""

    batch: int
    input_len: int
    output_len: int
    kv_dtype: str | None = None


@dataclass(frozen=True)
class Limits:
    """How far the workload stretches on one card at the lower safety factor."""

    card: str
    card_total_bytes: int
    max_batch: int  # at the workload's lengths
    max_input_len: int  # at the workload's batch and output length


@dataclass(frozen=True)
class MemoryEstimate:
    """The estimate's parts in bytes, the cards that hold it and the workload's limits."""

    weights_bytes: int
    kv_bytes: int
    activation_bytes: int
    context_bytes: int
    kv_bytes_per_token: float
    activation_bytes_per_token: float
    card: str | None  # smallest card holding 1.3 x the total
    card_comfortable: str | None  # smallest card holding 1.5 x the total
    gpu: str | None = None  # the card asked for with --gpu
    gpu_fits: bool | None = None
    limits: Limits | None = None  # on --gpu, else on `card`

    @property
    def total_bytes(self) -> int:
        """Weights, KV cache, activations and context."""
        return self.weights_bytes + self.kv_bytes + self.activation_bytes + self.context_bytes

    @property
    def need_low_bytes(self) -> int:
        """The least to provision: 1.3 x the total."""
        return math.ceil(SAFETY[0] * self.total_bytes)

    @property
    def need_high_bytes(self) -> int:
        """Comfortable: 1.5 x the total."""
        return math.ceil(SAFETY[1] * self.total_bytes)


def parse_params(text: str) -> int:
    """`7B`, `1.8b`, `500M`, `6738415616` as a parameter count; ValueError names the bad value."""
    match = _PARAMS.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a parameter count (write e.g. 7B, 500M or 6738415616)")
    count = round(float(match.group(1)) * _SCALE[match.group(2).lower()])
    if count <= 0:
        raise ValueError(f"{text!r} is not a parameter count (it must be above 0)")
    return count


def card_named(name: str) -> Card:
    """The card a user means by `H200`, `a100-80gb`, `A100 40 GB`, `V100`; ValueError lists the known ones."""
    wanted = _card_key(name)
    exact = [c for c in CARDS if _card_key(c.label) == wanted or _card_key(c.name) == wanted]
    by_family = [c for c in CARDS if _card_key(c.name.split()[0]) == wanted]
    found = exact or by_family
    if len(found) == 1:
        return found[0]
    known = ", ".join(c.label for c in CARDS)
    if found:
        raise ValueError(f"{name!r} could be {' or '.join(c.label for c in found)}: say which (known: {known})")
    raise ValueError(f"unknown GPU {name!r} (known: {known})")


def _card_key(text: str) -> str:
    """Lower case, letters and digits only, without a trailing GB/G: 'A100-80GB' and 'A100 80 GB' agree."""
    key = re.sub(r"[^a-z0-9]", "", text.lower())
    return re.sub(r"(\d)g(b)?$", r"\1", key)


def shape_from_params(
    params: int,
    dtype: str,
    layers: int,
    kv_heads: int,
    head_dim: int,
    *,
    hidden: int | None = None,
    intermediate: int | None = None,
    vocab: int | None = None,
) -> ModelShape:
    """A shape from the command line; what is not given is derived from the parameter count."""
    derived = []
    if hidden is None:
        # A decoder layer holds about 12 x hidden^2 parameters (4 h^2 attention, 8 h^2 MLP).
        hidden = max(1, round(math.sqrt(params / (12 * layers))))
        derived.append("hidden")
    if intermediate is None:
        intermediate = round(8 * hidden / 3)  # SwiGLU at 8 h^2 per layer: 3 x hidden x intermediate
        derived.append("intermediate")
    if vocab is None:
        vocab = DEFAULT_VOCAB
        derived.append("vocab")
    return ModelShape(params, layers, kv_heads, head_dim, hidden, intermediate, vocab, dtype, tuple(derived))


def kv_bytes_per_token(shape: ModelShape, kv_dtype: str | None = None) -> float:
    """2 (K and V) x layers x kv_heads x head_dim x bytes: the cache one token of one sequence holds."""
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * _kv_value_bytes(shape, kv_dtype)


def _kv_value_bytes(shape: ModelShape, kv_dtype: str | None) -> float:
    """The cache's dtype: given, else the activations' (quantised weights keep a 16-bit cache)."""
    return DTYPE_BYTES[kv_dtype] if kv_dtype else ACTIVATION_BYTES.get(shape.dtype, 2)


def activation_bytes_per_token(shape: ModelShape) -> float:
    """Live prefill temporaries per prompt token at the activation dtype (see the module docstring)."""
    return (MLP_LIVE * shape.intermediate + HIDDEN_LIVE * shape.hidden) * ACTIVATION_BYTES.get(shape.dtype, 2)


def weights_bytes(shape: ModelShape) -> int:
    """Parameters x bytes per value."""
    return math.ceil(shape.params * DTYPE_BYTES[shape.dtype])


def request_bytes(shape: ModelShape, work: Workload) -> int:
    """What a batch adds at its peak: KV cache of every token, prefill activations, last-position logits."""
    kv = kv_bytes_per_token(shape, work.kv_dtype) * work.batch * (work.input_len + work.output_len)
    return math.ceil(kv + _activation_bytes(shape, work))


def _activation_bytes(shape: ModelShape, work: Workload) -> float:
    per_token = activation_bytes_per_token(shape) * work.batch * work.input_len
    return per_token + work.batch * shape.vocab * LOGIT_BYTES


def estimate(
    shape: ModelShape, work: Workload, gpu: Card | None = None, context_bytes: int = DEFAULT_CONTEXT_BYTES
) -> MemoryEstimate:
    """The estimate, the smallest cards holding 1.3 and 1.5 x it, and the limits on `gpu` (else that card)."""
    kv_tok = kv_bytes_per_token(shape, work.kv_dtype)
    parts = MemoryEstimate(
        weights_bytes=weights_bytes(shape),
        kv_bytes=math.ceil(kv_tok * work.batch * (work.input_len + work.output_len)),
        activation_bytes=math.ceil(_activation_bytes(shape, work)),
        context_bytes=context_bytes,
        kv_bytes_per_token=kv_tok,
        activation_bytes_per_token=activation_bytes_per_token(shape),
        card=None,
        card_comfortable=None,
    )
    low, high = smallest_card(parts.need_low_bytes), smallest_card(parts.need_high_bytes)
    target = gpu or low
    return replace(
        parts,
        card=low.label if low else None,
        card_comfortable=high.label if high else None,
        gpu=gpu.label if gpu else None,
        gpu_fits=None if gpu is None else gpu.total_bytes >= parts.need_low_bytes,
        limits=None if target is None else limits(shape, work, target, context_bytes),
    )


def limits(shape: ModelShape, work: Workload, card: Card, context_bytes: int = DEFAULT_CONTEXT_BYTES) -> Limits:
    """The largest batch at the workload's lengths, and the longest prompt at its batch, that keep
    1.3 x the estimate within the card."""
    budget = card.total_bytes / SAFETY[0] - weights_bytes(shape) - context_bytes
    kv_tok = kv_bytes_per_token(shape, work.kv_dtype)
    act_tok = activation_bytes_per_token(shape)
    per_sequence = kv_tok * (work.input_len + work.output_len) + act_tok * work.input_len + shape.vocab * LOGIT_BYTES
    fixed = work.batch * (kv_tok * work.output_len + shape.vocab * LOGIT_BYTES)
    per_prompt_token = work.batch * (kv_tok + act_tok)
    return Limits(
        card=card.label,
        card_total_bytes=card.total_bytes,
        max_batch=max(0, math.floor(budget / per_sequence)),
        max_input_len=max(0, math.floor((budget - fixed) / per_prompt_token)),
    )


# Hugging Face `torch_dtype` (transformers 5 writes `dtype`) to ours.
_HF_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8", "int8": "int8"}
_MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")


def shape_from_config(path: str, dtype: str | None = None, params: int | None = None) -> ModelShape:
    """A shape from a Hugging Face `config.json` (Llama-style decoder); parameters are counted from it unless
    given. InputError names the file and what is wrong with it."""
    config = _read_config(path)
    config = config.get("text_config", config) if "num_hidden_layers" not in config else config
    if any(config.get(key) for key in _MOE_KEYS):
        raise InputError(path, "mixture-of-experts configs are not modelled", hint="pass --params and the shape")
    hidden = _field(path, config, "hidden_size")
    heads = _field(path, config, "num_attention_heads")
    kv_heads = config.get("num_key_value_heads")
    shape = ModelShape(
        params=0,
        layers=_field(path, config, "num_hidden_layers"),
        kv_heads=int(kv_heads or heads),
        head_dim=int(config.get("head_dim") or hidden // heads),
        hidden=hidden,
        intermediate=_field(path, config, "intermediate_size"),
        vocab=_field(path, config, "vocab_size"),
        dtype=dtype or _config_dtype(path, config),
        source=path,
    )
    # without num_key_value_heads there is no grouped-query attention: every head keeps its K and V
    derived = (*(() if kv_heads else ("kv_heads",)), *(("params",) if params is None else ()))
    return replace(shape, params=params or config_params(config, shape), derived=derived)


def _read_config(path: str) -> dict:
    """The JSON object in `path`."""
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    except OSError as exc:
        raise InputError(path, f"cannot read the config: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not a JSON text file: {exc.reason}") from None
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not JSON: {exc.msg}", line=exc.lineno) from None
    if not isinstance(config, dict):
        raise InputError(path, "not a Hugging Face config: the JSON is not an object")
    return config


def _field(path: str, config: dict, key: str) -> int:
    """A positive integer field of the config."""
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        reason = f"no {key} in the config" if value is None else f"{key} is {value!r}, not a positive integer"
        raise InputError(path, reason, hint="is it a decoder model's config.json?")
    return value


def _config_dtype(path: str, config: dict) -> str:
    """The weights' dtype the config names (bf16 when it names none, as most checkpoints are)."""
    name = config.get("torch_dtype") or config.get("dtype") or "bfloat16"
    dtype = _HF_DTYPES.get(str(name).removeprefix("torch."))
    if dtype is None:
        raise InputError(path, f"unknown torch_dtype {name!r}", hint="pass --dtype")
    return dtype


def config_params(config: dict, shape: ModelShape) -> int:
    """Parameters of a Llama-style decoder: embeddings (and an untied output head), per layer Q, K, V, O
    (with biases when `attention_bias`), a gated MLP and two RMSNorm weights, and the final norm."""
    h, heads = shape.hidden, int(config["num_attention_heads"])
    q_out, kv_out = heads * shape.head_dim, shape.kv_heads * shape.head_dim
    attention = h * q_out + 2 * h * kv_out + q_out * h
    if config.get("attention_bias"):
        attention += q_out + 2 * kv_out
    mlp = 3 * h * shape.intermediate + (2 * shape.intermediate + h if config.get("mlp_bias") else 0)
    # transformers' LlamaConfig unties the head by default; a config that ties it says so
    heads_out = 1 if config.get("tie_word_embeddings", False) else 2
    return heads_out * shape.vocab * h + shape.layers * (attention + mlp + 2 * h) + h


@dataclass(frozen=True)
class MeasuredPeak:
    """One model version's measured memory on one card size, beside the estimate for the same requests.
    Both peaks are PyTorch's allocated memory: no CUDA context, which is measured apart when OOM messages
    tell it."""

    model_version: str
    card: str
    devices: tuple[str, ...]
    requests: int
    peak_allocated_bytes: int
    peak_request: Workload  # the request that reached it
    estimated_peak_bytes: int  # weights + that request's KV cache and activations
    at_rest_bytes: int
    estimated_weights_bytes: int
    bytes_per_token: float | None
    estimated_bytes_per_token: float  # KV + activations per token
    context_bytes: int | None  # median over the devices, from their OOM messages


def measured_peaks(con: duckdb.DuckDBPyConnection, model_version: str | None, shape: ModelShape) -> list[MeasuredPeak]:
    """Per card size the version ran on: its measured peaks beside the estimate of the same requests."""
    rows = [] if model_version is None else fetch_dicts(con, "q_estimate_measured", {"model_version": model_version})
    if not rows:
        versions = [str(r["model_version"]) for r in fetch_dicts(con, "q_estimate_versions", {})]
        listed = ", ".join(versions[:12]) or "none: ingest request logs first"
        reason = (
            "which model version to compare with?"
            if model_version is None
            else f"no successful requests of model version {model_version!r} in the database"
        )
        raise OomlabError(reason, hint=f"pass --model-version; versions with requests: {listed}")
    context = {(r["instance"], r["gpu_index"]): r["context_bytes"] for r in context_bytes(con).iter_rows(named=True)}
    return [_measured(model_version, row, shape, context) for row in rows]  # type: ignore[arg-type]


def _measured(version: str, row: dict, shape: ModelShape, context: dict[tuple[str, int], int]) -> MeasuredPeak:
    """One card size's row."""
    devices = sorted((d["instance"], d["gpu_index"]) for d in row["devices"])
    peak = Workload(**row["peak_request"])
    held = [context[d] for d in devices if d in context]
    return MeasuredPeak(
        model_version=version,
        card=card_name(row["device_total"]),
        devices=tuple(i if g == 0 else f"{i} GPU {g}" for i, g in devices),
        requests=row["requests"],
        peak_allocated_bytes=row["peak_allocated_bytes"],
        peak_request=peak,
        estimated_peak_bytes=weights_bytes(shape) + request_bytes(shape, peak),
        at_rest_bytes=row["at_rest_bytes"],
        estimated_weights_bytes=weights_bytes(shape),
        bytes_per_token=row["bytes_per_token"],
        estimated_bytes_per_token=kv_bytes_per_token(shape) + activation_bytes_per_token(shape),
        context_bytes=round(statistics.median(held)) if held else None,
    )
