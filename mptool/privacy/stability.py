"""DTP beyond PDTP (Long et al. section 6): upper bounds per estimator family, query-set lower bound.

PDTP looks at one query, x_t. DTP (Definition 4.2) is the largest log-ratio over *every*
query x in the feature domain and class y. Two ways past PDTP:

- **Upper bound** ``dtp_upper``: each estimator family that has one computes it next to its
  engine, per record and exactly from A(T) and A(T\\{t}) (the lemma is in
  ``mptool.loo.bounds``): naive Bayes in ``mptool.loo.naive_bayes`` (Props. 6.4/6.5 carried
  from the class scores to the normalised posterior), logistic regression in
  ``mptool.loo.linear`` (Theorem 6.9 made per block). k-NN is not training stable for any
  delta (section 6.3); other families have no bound. The bound is on the raw (unbinned)
  probabilities, like ``pdtp_raw``; ``dtp_upper_binned`` carries it to the binned outputs
  that ``pdtp`` measures (:func:`mptool.privacy.calibration.binned_bound`). A bound at or
  above the binning cap ln((1 - b/2)/(b/2)) says nothing the binning does not already
  guarantee: ``dtp_upper_vacuous``.
- **Query set**: max over queries q in Q and classes y of |ln p_T(y|q) - ln p_{T\\{t}}(y|q)|,
  an empirical lower bound of DTP(t) (Q = {x_t} is PDTP; Q = T is what IBM ART's PDTP
  maximises over).

This module holds only the generic parts: which family's bound applies (dispatch), the
columns and summary, and the query-set estimate.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.naive_bayes import BernoulliNB, CategoricalNB, GaussianNB, MultinomialNB
from sklearn.pipeline import Pipeline

from mptool.inputs.data import MISSING_CATEGORY, Records, read_csv
from mptool.inputs.models import DomainEncoder, fit, proba_in
from mptool.inputs.neighbors import TieStableKNeighborsClassifier
from mptool.loo.base import LooRequest, LooResult
from mptool.loo.design import class_index, design_parts, fixed_blocks
from mptool.loo.linear import linear_blocks, linear_dtp_upper, lipschitz_constant, logistic_regression
from mptool.loo.naive_bayes import CategoricalCounts, categorical_parts, nb_dtp_upper, paper_delta, smoothing_alpha
from mptool.privacy.calibration import binned_bound, max_log_ratio
from mptool.privacy.dtp import pdtp_of, raw_pdtp
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import chunk_positions, run_tasks

NAIVE_BAYES = (CategoricalNB, BernoulliNB, MultinomialNB, GaussianNB)


@dataclass(frozen=True)
class Bound:
    """Which ``dtp_upper`` applies to a spec: kind, why, and the paper's constant for reference.

    ``log_delta`` is ln delta of Props. 6.4/6.5/6.7 (naive Bayes); it bounds the class-score
    ratio, not the posterior, and ``dtp_upper`` does not use it.
    """

    kind: str  # "stability" (naive Bayes), "lipschitz" (logistic regression) or "none"
    reason: str
    log_delta: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


def _estimator(template: Any) -> Any:
    return template.steps[-1][1] if isinstance(template, Pipeline) else template


def stability_bound(template: Any, train: Records, classes: np.ndarray) -> Bound:
    """The DTP upper bound that applies to ``template`` on T (see the module docstring)."""
    est = _estimator(template)
    if type(est) in NAIVE_BAYES:
        log_delta, prop, details = _paper_constant(template, est, train, classes)
        why = (
            f"{type(est).__name__}: exact per-record bound on the posterior ratio over the whole domain "
            f"(class-score shifts of T vs T\\{{t}}, normalised; paper's delta, for reference: {prop})"
        )
        return Bound("stability", why, log_delta, details)
    knn = getattr(sys.modules.get("sklearn.neighbors"), "KNeighborsClassifier", None)  # imported if est is one
    if type(est) in (knn, TieStableKNeighborsClassifier):
        return Bound("none", "k-NN is not training stable (Long et al. 6.3): PDTP is only a lower bound of its DTP")
    if type(est) is logistic_regression():
        return Bound(
            "lipschitz",
            "logistic regression: exact per-block bound of the logit shifts over the domain, from the leave-one-out "
            "parameters (Theorem 6.9 made per block; needs an engine that returns them: exact-newton-logistic)",
        )
    return Bound(
        "none",
        f"{type(est).__name__}: training stability unknown (Long et al. Table 3) and no Lipschitz bound implemented",
    )


def _paper_constant(template: Any, est: Any, train: Records, classes: np.ndarray) -> tuple[float | None, str, dict]:
    """ln delta of Props. 6.4/6.5/6.7 for a naive Bayes spec (m features with at most v values)."""
    if isinstance(est, GaussianNB):
        return None, "none (Props. 6.4/6.5 cover discrete features estimated by counts)", {}
    counts = np.bincount(class_index(train.y, classes), minlength=len(classes))
    alpha = float(est.alpha) if np.isscalar(est.alpha) else None
    if isinstance(est, CategoricalNB):
        pre = template.steps[0][1] if isinstance(template, Pipeline) and len(template.steps) == 2 else None
        enc = pre.transformers[0][1] if pre is not None and len(pre.transformers) == 1 else None
        if not isinstance(enc, DomainEncoder):
            return None, "none (categorical naive Bayes without mptool's fixed-domain encoder)", {}
        m, v = len(enc.domains), int(max(enc.n_codes()))
    else:
        blocks = fixed_blocks(template, train)
        scaled = design_parts(template)
        if isinstance(blocks, str) or isinstance(scaled, str):
            return None, "none (features not fixed)", {}
        m, v = sum(S.shape[1] for _, S in blocks) + len(scaled[1]), 2
    log_delta, prop, details = paper_delta(alpha, train.n, int(counts.min()), m, v)
    return log_delta, prop, details


def dtp_upper(bound: Bound, request: LooRequest, result: LooResult) -> np.ndarray | str:
    """Per-record upper bound of DTP(t) (raw probabilities), or why there is none.

    Dispatches to the family's bound: :func:`mptool.loo.naive_bayes.nb_dtp_upper` or
    :func:`mptool.loo.linear.linear_dtp_upper` (the latter needs the leave-one-out
    parameters, ``param_delta``, from the engine).
    """
    if bound.kind == "stability":
        return nb_dtp_upper(request)
    if bound.kind == "lipschitz":
        delta = getattr(result, "param_delta", None)
        if delta is None:
            return f"{bound.reason}; not available from the '{result.engine}' engine"
        blocks = linear_blocks(request.template, request.train.schema)
        return blocks if isinstance(blocks, str) else linear_dtp_upper(blocks, delta)
    return bound.reason


# --------------------------------------------------------------------------- query set


def read_queries(path: str, train: Records, missing: tuple[str, ...] | list[str] = ("",)) -> pd.DataFrame:
    """Feature rows of a query CSV (same feature columns as the data; extra columns ignored).

    Cells are read as the data are (``missing`` = ``data.missing_values``). Refused: a
    column lacking, a numeric cell that is not a finite number, and a missing cell in a
    column where the data have none (the model has no way to take it).
    """
    df = read_csv(path, missing)
    absent = [c for c in train.schema.names if c not in df.columns]
    if absent:
        raise InputError(f"{path}: --queries file lacks feature column(s) {', '.join(absent)}")
    out = pd.DataFrame(index=range(len(df)))
    for col in train.schema.columns:
        s = df[col.name].reset_index(drop=True)
        if s.isna().any() and not col.has_missing:
            row = int(s.isna().to_numpy().nonzero()[0][0])
            raise InputError(
                f"{path}: --queries column '{col.name}' has a missing cell at row {row}, but the data have "
                "none in that column; fill it"
            )
        if col.kind == "numeric":
            try:
                vals = s.astype(float)
            except (TypeError, ValueError):
                raise InputError(f"{path}: --queries column '{col.name}' must be numeric") from None
            inf = np.isinf(vals.to_numpy())
            if inf.any():
                raise InputError(
                    f"{path}: --queries column '{col.name}' has an infinite value at row {int(inf.nonzero()[0][0])}; "
                    "replace it"
                )
            out[col.name] = vals
        else:
            out[col.name] = s.astype(object).where(s.notna(), MISSING_CATEGORY).astype(str)
    return out


def resolve_queries(choice: str, train: Records, missing: tuple[str, ...] | list[str] = ("",)) -> pd.DataFrame | None:
    """``self`` -> None (PDTP), ``train`` -> T's features, else a CSV path read with the data's ``missing`` markers."""
    if choice == "self":
        return None
    if choice == "train":
        return train.X
    return read_queries(choice, train, missing)


def _max_ratio(p_full_q: np.ndarray, p_loo_q: np.ndarray, bin_size: float) -> np.ndarray:
    """max over queries and classes of |ln p - ln p'| after binning (:func:`pdtp_of`); p_loo_q is (records, Q, C)."""
    r, q, c = p_loo_q.shape
    full = np.broadcast_to(p_full_q[None, :, :], (r, q, c)).reshape(r * q, c)
    return pdtp_of(full, p_loo_q.reshape(r * q, c), bin_size).pdtp.reshape(r, q).max(axis=1, initial=0.0)


def _refit_queries_chunk(template: Any, X: pd.DataFrame, y: np.ndarray, classes: np.ndarray, Xq: pd.DataFrame,
                         p_full_q: np.ndarray, bin_size: float, positions: np.ndarray) -> np.ndarray:
    out = np.empty(len(positions))
    keep = np.ones(len(y), dtype=bool)
    for i, t in enumerate(positions):
        keep[t] = False
        model = fit(template, X.iloc[keep], y[keep])
        out[i] = _max_ratio(p_full_q, proba_in(model, Xq, classes)[None], bin_size)[0]
        keep[t] = True
    return out


def query_dtp(request: LooRequest, Xq: pd.DataFrame, bin_size: float, advance: Callable[[int], None]) -> np.ndarray:
    """Per record t: max over q in Xq and classes y of |ln p_T(y|q) - ln p_{T\\{t}}(y|q)| (binned).

    Exact and vectorised for categorical naive Bayes; otherwise one refit per record,
    predicting every query (what IBM ART does).
    """
    T = request.train
    pos = np.asarray(request.positions, dtype=np.int64)
    p_full_q = proba_in(request.full_model, Xq, request.classes)
    parts = categorical_parts(request.template) if type(_estimator(request.template)) is CategoricalNB else "no"
    if not isinstance(parts, str):
        enc, est = parts
        cols = list(request.template.steps[0][1].transformers[0][2])
        codes, qcodes = enc.transform(T.X[cols]), enc.transform(Xq[cols])
        y_idx = class_index(T.y, request.classes)
        counts = CategoricalCounts.from_codes(
            codes, y_idx, len(request.classes), np.asarray(est.min_categories), smoothing_alpha(est), est.fit_prior
        )
        block = max(1, 2_000_000 // max(1, len(qcodes) * len(request.classes)))
        out = np.empty(len(pos))
        for s in range(0, len(pos), block):
            p = pos[s : s + block]
            out[s : s + len(p)] = _max_ratio(p_full_q, counts.loo_proba_at(codes[p], y_idx[p], qcodes), bin_size)
            advance(len(p))
        return out
    chunks = chunk_positions(pos, request.jobs)
    parts_out = run_tasks(
        _refit_queries_chunk,
        ((request.template, T.X, T.y, request.classes, Xq, p_full_q, bin_size, c) for c in chunks),
        jobs=request.jobs,
        backend=request.backend,
        on_result=lambda r: advance(len(r)),
    )
    return np.concatenate(parts_out) if parts_out else np.empty(0)


def beyond_pdtp(
    request: LooRequest,
    result: LooResult,
    queries: pd.DataFrame | None,
    query_label: str,
    bin_size: float,
    progress: Callable[[int, str], Any],
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Per-record ``dtp_upper`` (+ binned, + vacuous flag; and ``dtp_queries`` with a query set) and their summary.

    The bound columns are empty (NaN) where no bound applies; the summary says which bound
    applies and why.
    """
    bound = stability_bound(request.template, request.train, request.classes)
    got = dtp_upper(bound, request, result)
    upper = None if isinstance(got, str) else np.asarray(got, dtype=float)
    if upper is not None:  # a probability that underflowed to 0: the computed raw ratio is infinite, so is the bound
        groups = result.groups if result.groups is not None and len(result.groups[1]) == len(result.p_full) else None
        upper = np.where(np.isinf(raw_pdtp(result.p_full, result.p_loo, groups)), np.inf, upper)
    n = len(result.p_full)
    cap = max_log_ratio(bin_size)
    vacuous = np.full(n, None, dtype=object)
    if upper is not None:
        vacuous[:] = upper >= cap
    columns: dict[str, np.ndarray] = {
        "dtp_upper": upper if upper is not None else np.full(n, np.nan),
        "dtp_upper_binned": binned_bound(upper, bin_size) if upper is not None else np.full(n, np.nan),
        "dtp_upper_vacuous": vacuous,
    }
    summary: dict[str, Any] = {"upper_bound": _bound_summary(bound, got, upper, cap, request)}
    if queries is not None:
        with progress(n, f"query-set DTP ({query_label}, {len(queries)} queries)") as advance:
            q = query_dtp(request, queries, bin_size, advance)
        columns["dtp_queries"] = q
        summary["queries"] = {
            "set": query_label,
            "n_queries": len(queries),
            "max": float(q.max()) if n else 0.0,
            "mean": float(q.mean()) if n else 0.0,
            "note": "empirical DTP lower bound: max over the query points and classes, binned probabilities",
        }
    return columns, summary


def _bound_summary(bound: Bound, got: Any, upper: np.ndarray | None, cap: float, request: LooRequest) -> dict:
    """The ``upper_bound`` block of the JSON summary."""
    lip = None
    if bound.kind == "lipschitz" and not isinstance(design_parts(request.template), str):
        lip = lipschitz_constant(request.template, request.train.schema, len(request.classes))
    has = upper is not None and len(upper) > 0
    return {
        "kind": bound.kind if upper is not None else "none",
        "why": bound.reason if upper is not None else str(got),
        "max": float(np.max(upper)) if has else None,
        "median": float(np.median(upper)) if has else None,
        "min": float(np.min(upper)) if has else None,
        "n_vacuous": int(np.sum(upper >= cap)) if upper is not None else None,
        "vacuous_at": cap,
        "ln_delta": bound.log_delta,
        "lipschitz_L": lip,
        "details": bound.details,
        "note": (
            "dtp_upper bounds the DTP of the raw (unbinned) probabilities, like pdtp_raw (pdtp_raw <= DTP <= "
            "dtp_upper); dtp_upper_binned bounds the binned DTP, like pdtp; dtp_upper_vacuous: the bound is at "
            "or above the largest binned log-ratio (vacuous_at), so it says nothing binning does not. ln_delta "
            "(naive Bayes, Long et al. 6.3) and lipschitz_L (Theorem 6.9) are the paper's constants, for reference"
        ),
    }
