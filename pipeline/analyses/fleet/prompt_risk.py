"""Prompt risk: a cross-validated scikit-learn model of OOM probability from the request's shape and the
card, and per card the thresholds that findings/prompt_threshold.py turns into where to cap batch x tokens.

The model is a logistic regression on clean requests (fct_prompt_requests: OOMs of a raised baseline, an
intermittent neighbour process or fragmentation are left out, as are the requests of a raised baseline) with
the log of batch, input, output, batch x input, batch x (input + output) and batch x tokens per GiB of usable
memory, the usable memory itself, and the model version one-hot. It is scored by stratified k-fold
cross-validation (AUC and log-loss, against the log-loss of predicting the OOM share for everyone).
The sentence's numbers come from the direct boundary (prompt_threshold), which needs no model to trust.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb
import numpy as np
import polars as pl
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_validate
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from ...load.sql import sql_text
from ...units import GIB
from ..window import window_params
from .prompt_threshold import size_counts, thresholds

CV_FOLDS = 5
SEED = 0
AGREE_WITHIN = 0.05  # versions whose thresholds on a card agree this closely get one finding
NUMERIC = (
    "batch_size",
    "input_sequence_length",
    "output_sequence_length",
    "batch_x_input",
    "batch_x_tokens",
    "tokens_per_gib",
)


@dataclass(frozen=True, eq=False)
class RiskModel:
    """The fitted model, the versions it one-hot encodes, and its cross-validated scores."""

    pipeline: Pipeline
    versions: tuple[str, ...]
    requests: int
    ooms: int
    folds: int
    cv_auc: float
    cv_log_loss: float
    base_log_loss: float  # predicting the OOM share for every request

    def predict(self, frame: pl.DataFrame) -> np.ndarray:
        """P(OOM) for requests with the columns of fct_prompt_requests."""
        return self.pipeline.predict_proba(features(frame, self.versions))[:, 1]


def features(frame: pl.DataFrame, versions: tuple[str, ...]) -> np.ndarray:
    """The model's design matrix: log sizes, usable GiB, and one column per known model version."""
    gib = frame["capacity_bytes"].to_numpy().astype(float) / GIB
    per_gib = pl.col("batch_x_tokens") / (pl.col("capacity_bytes") / GIB)
    sized = frame.with_columns(per_gib.alias("tokens_per_gib"))
    columns = [np.log1p(sized[c].to_numpy().astype(float)) for c in NUMERIC] + [gib]
    version = frame["model_version"].to_numpy()
    columns += [(version == v).astype(float) for v in versions]
    return np.column_stack(columns)


def model_rows(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """The clean requests the model learns from: all of them, or an even sample of PROMPT_MODEL_ROWS
    (sql/macros/oomlab_settings.sql) drawn by a hash of each request (agg_prompt_sample)."""
    return con.sql(sql_text("q_prompt_clean_requests"), params=window_params(since, until)).pl()


def fit_risk_model(
    con: duckdb.DuckDBPyConnection,
    since: datetime | None = None,
    until: datetime | None = None,
    folds: int = CV_FOLDS,
) -> RiskModel | None:
    """Fit on clean requests and cross-validate; None when there are too few OOMs for `folds` folds."""
    clean = model_rows(con, since, until)
    target = clean["is_oom"].to_numpy().astype(int)
    if target.sum() < folds or (1 - target).sum() < folds:
        return None
    versions = tuple(sorted(set(clean["model_version"].drop_nulls())))
    x = features(clean, versions)
    # Strong but finite regularisation: the boundary is sharp and a plain fit would diverge on it.
    regression = LogisticRegression(C=10.0, solver="newton-cholesky", max_iter=200)
    pipeline = make_pipeline(StandardScaler(), regression)
    scores = cross_validate(
        pipeline,
        x,
        target,
        scoring=("roc_auc", "neg_log_loss"),
        cv=StratifiedKFold(folds, shuffle=True, random_state=SEED),
    )
    share = target.mean()
    return RiskModel(
        pipeline=pipeline.fit(x, target),
        versions=versions,
        requests=len(target),
        ooms=int(target.sum()),
        folds=folds,
        cv_auc=float(scores["test_roc_auc"].mean()),
        cv_log_loss=float(-scores["test_neg_log_loss"].mean()),
        base_log_loss=float(-(share * np.log(share) + (1 - share) * np.log(1 - share))),
    )


def card_thresholds(
    con: duckdb.DuckDBPyConnection,
    since: datetime | None = None,
    until: datetime | None = None,
    counts: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The thresholds to report: one per card when its versions agree (within 5 %, same metric) with the
    card's pooled boundary, else one per version. `scope` says which."""
    counts = size_counts(con, since, until) if counts is None else counts
    per_version = thresholds(con, since, until, per_version=True, counts=counts)
    pooled = thresholds(con, since, until, per_version=False, counts=counts)
    if per_version.is_empty():
        return per_version
    out = []
    for key, versions in per_version.group_by("device_total", "capacity_bytes", maintain_order=True):
        card = pooled.filter((pl.col("device_total") == key[0]) & (pl.col("capacity_bytes") == key[1]))
        if card.height and _agree(versions, card.row(0, named=True)):
            out.append(card.with_columns(pl.lit("card").alias("scope")))
        else:
            out.append(versions.with_columns(pl.lit("version").alias("scope")))
    return pl.concat(out, how="diagonal_relaxed")


def _agree(versions: pl.DataFrame, card: dict) -> bool:
    """Every version's threshold in the card's metric, and within 5 % of the card's."""
    same_metric = (versions["metric"] == card["metric"]).all()
    spread = (versions["threshold"] / card["threshold"] - 1).abs().max()
    return bool(same_metric) and spread <= AGREE_WITHIN  # type: ignore[operator]
