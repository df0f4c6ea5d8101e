"""`oomlab estimate` and `oomlab alerts`: sizing before deployment and alert rules from the fleet's data."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from .options import DB_OPTION, WholeHelpGroup, size_option

if TYPE_CHECKING:
    from ..analyses.fleet.sizing import Card

# Kept here rather than imported: `oomlab --help` must not load the analyses (tests check they agree).
DTYPES = ("bf16", "fp16", "fp32", "fp8", "int8", "int4")
KV_DTYPES = ("bf16", "fp16", "fp32", "fp8", "int8")
_SHAPE_OPTIONS = ("layers", "kv_heads", "head_dim", "hidden", "intermediate", "vocab")


def _params(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    from .. import api

    try:
        return None if value is None else api.parameter_count(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _gpu(ctx: click.Context, param: click.Parameter, value: str | None) -> Card | None:
    from .. import api

    try:
        return None if value is None else api.gpu_card(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _db_given(ctx: click.Context) -> bool:
    """--db on the command line or in OOMLAB_DB: the default file is not read unasked."""
    return ctx.get_parameter_source("db_path") in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def _count(name: str, help_text: str) -> Callable[[Any], Any]:
    return click.option(name, type=click.IntRange(min=1), help=help_text)


@click.command()
@click.option(
    "--model",
    "model_path",
    type=click.Path(dir_okay=False),
    metavar="CONFIG.JSON",
    help="A Hugging Face config.json: shape, dtype and parameter count come from it.",
)
@click.option("--params", callback=_params, help="Parameter count, e.g. 7B or 500M (default: counted from --model).")
@click.option("--dtype", type=click.Choice(DTYPES), help="Weights' dtype (default: the config's).")
@_count("--layers", "Decoder layers.")
@_count("--kv-heads", "Key/value heads (the query heads without grouped-query attention).")
@_count("--head-dim", "Dimension of one head.")
@_count("--hidden", "Hidden size (default: derived from --params).")
@_count("--intermediate", "MLP width (default: 8/3 x hidden).")
@_count("--vocab", "Vocabulary size (default 32000).")
@click.option("--batch", type=click.IntRange(min=1), required=True, help="Sequences per batch.")
@click.option("--input-len", type=click.IntRange(min=0), required=True, help="Prompt tokens per sequence.")
@click.option("--output-len", type=click.IntRange(min=0), required=True, help="Generated tokens per sequence.")
@click.option("--kv-dtype", type=click.Choice(KV_DTYPES), help="KV cache dtype (default: 16-bit, or fp32).")
@click.option("--gpu", callback=_gpu, metavar="NAME", help="The card to check, e.g. A10, H200, 'A100 80GB'.")
@click.option("--context", metavar="SIZE", help="CUDA context and libraries per process [default: 1GiB].")
@DB_OPTION
@click.option("--model-version", help="Set the estimate beside this version's measured peaks (reads --db).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.pass_context
def estimate(
    ctx: click.Context,
    model_path: str | None,
    params: int | None,
    dtype: str | None,
    batch: int,
    input_len: int,
    output_len: int,
    kv_dtype: str | None,
    gpu: Card | None,
    context: str | None,
    db_path: str,
    model_version: str | None,
    as_json: bool,
    **shape: int | None,
) -> None:
    """Estimate the GPU memory a model needs: weights, KV cache, activations, context, the card that fits."""
    from .. import api
    from .render import print_json
    from .render_estimate import estimate_document, print_estimate

    _check_shape(model_path, params, dtype, shape)
    measured_from = db_path if model_version is not None or _db_given(ctx) else None
    request = api.EstimateRequest(
        batch,
        input_len,
        output_len,
        model_path,
        params,
        dtype,
        shape,
        kv_dtype,
        gpu,
        size_option(context),
        measured_from,
        model_version,
    )
    run = api.estimate(request)
    if as_json:
        print_json(estimate_document(run))
    else:
        print_estimate(run)


def _check_shape(model_path: str | None, params: int | None, dtype: str | None, shape: dict[str, int | None]) -> None:
    """The model comes from --model, or from --params, --dtype and the shape options: not both, not neither."""
    given = [f"--{k.replace('_', '-')}" for k in _SHAPE_OPTIONS if shape[k] is not None]
    if model_path is not None:
        if given:
            raise click.UsageError(f"{', '.join(given)} come from --model's config: give one or the other")
        return
    required = {
        "--params": params,
        "--dtype": dtype,
        "--layers": shape["layers"],
        "--kv-heads": shape["kv_heads"],
        "--head-dim": shape["head_dim"],
    }
    missing = [flag for flag, value in required.items() if value is None]
    if missing:
        raise click.UsageError(f"give --model CONFIG.JSON, or the shape: missing {', '.join(missing)}")


@click.group(cls=WholeHelpGroup)
def alerts() -> None:
    """Alerting rules derived from the fleet's data."""


@alerts.command("export")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["prometheus"]),
    default="prometheus",
    show_default=True,
    help="Rule file format.",
)
@DB_OPTION
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the rules to this file (default stdout).")
@click.pass_context
def alerts_export(ctx: click.Context, fmt: str, db_path: str, output: str | None) -> None:
    """Alerting rules on DCGM's memory metrics: 70/85/95 % levels, gradient, predictive; tuned per device
    from --db when given."""
    from .. import api
    from .render_estimate import write_rules

    write_rules(api.alert_rules(db_path if _db_given(ctx) else None), output)
