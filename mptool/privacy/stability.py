"""DTP beyond PDTP (Long et al. section 6): stability and Lipschitz upper bounds, query-set lower bound.

PDTP looks at one query, x_t. DTP (Definition 4.2) is the largest log-ratio over *every*
query x and class y. Three ways past PDTP:

- **Training stability** (Definition 6.1, Theorem 6.2): if A is delta-training stable on T,
  DTP(t) <= max(PDTP(t), ln delta). Naive Bayes is (Prop. 6.4)
  delta = (n_ymin / (n_ymin - 1))^(m-1) * n / (n - 1), and with Laplace smoothing
  (Prop. 6.5) delta = ((n_ymin + v) / n_ymin)^(m-1) * n / (n - 1), where n = |T|, m the
  number of features, n_ymin the size of the least supported class and v the largest
  number of values a feature takes. Bayes inference is 4/3-stable (Prop. 6.3), and an LSQ
  classifier with log coefficients (naive Bayes without smoothing among them) is
  (4/3)^|X|-stable (Prop. 6.7, |X| = m + 1 for naive Bayes); where both apply we use the
  smaller delta. k-NN is not training stable for any delta (section 6.3).
- **Lipschitz** (Theorem 6.9): DTP(t) <= L * ||u_T - u_{T\\{t}}||_inf for a model whose log
  probabilities are L-Lipschitz in its parameters u (logistic regression; L derived in
  ``mptool.loo.linear``).
- **Query set**: max over queries q in Q and classes y of |ln p_T(y|q) - ln p_{T\\{t}}(y|q)|,
  an empirical lower bound of DTP(t) (Q = {x_t} is PDTP; Q = T is what IBM ART's PDTP
  maximises over).

Caveats, stated in the summary: the bounds hold for the classifier's raw probabilities,
so ``dtp_upper`` uses the unbinned PDTP (binning is post-processing and can move a ratio
across a bin edge); the paper's proofs of Props. 6.4/6.5 bound the class scores
p(x|y)p(y) and treat them as the posterior; Definition 6.1 needs p_{T\\{t}}(y_t|x_t) > 0,
so a record whose class disappears with it gets an infinite bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import BernoulliNB, CategoricalNB, GaussianNB, MultinomialNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline

from mptool.inputs.data import MISSING_CATEGORY, Records, read_csv
from mptool.inputs.models import DomainEncoder, fit, proba_in
from mptool.inputs.neighbors import TieStableKNeighborsClassifier
from mptool.loo.base import LooRequest, LooResult
from mptool.loo.design import class_index, design_parts
from mptool.loo.naive_bayes import CategoricalCounts, _alpha, categorical_parts
from mptool.privacy.calibration import bin_probabilities
from mptool.privacy.dtp import pdtp
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import chunk_positions, run_tasks


def log_nb_delta(n: int, n_ymin: int, m: int, v: int | None = None) -> float:
    """ln delta of Prop. 6.4 (``v`` None: no smoothing) or Prop. 6.5 (Laplace, ``v`` values per feature).

    Computed as a sum of logarithms: delta itself overflows a float for a few thousand
    features (m), while its logarithm (the DTP bound) stays finite.
    """
    if n < 2 or n_ymin < 1 or m < 1:
        return math.inf
    size = math.log(n / (n - 1))
    if v is None:
        if n_ymin == 1:
            return math.inf
        return (m - 1) * math.log(n_ymin / (n_ymin - 1)) + size
    return (m - 1) * math.log((n_ymin + v) / n_ymin) + size


def log_lsq_delta(m: int) -> float:
    """ln delta = (m + 1) ln(4/3) of Prop. 6.7 for naive Bayes with m features (|X| = m + 1)."""
    return (m + 1) * math.log(4.0 / 3.0)


def _exp(x: float) -> float:
    return math.exp(x) if x < 700 else math.inf


def nb_delta(n: int, n_ymin: int, m: int, v: int | None = None) -> float:
    """delta of Prop. 6.4 / 6.5 (inf where it exceeds a float); see :func:`log_nb_delta`."""
    return _exp(log_nb_delta(n, n_ymin, m, v))


def lsq_delta(m: int) -> float:
    """delta = (4/3)^(m+1) of Prop. 6.7 (inf where it exceeds a float); see :func:`log_lsq_delta`."""
    return _exp(log_lsq_delta(m))


@dataclass(frozen=True)
class Bound:
    """How ``dtp_upper`` is obtained for a spec: kind, ln delta (stability) and why."""

    kind: str  # "stability", "lipschitz" or "none"
    reason: str
    log_delta: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


def _estimator(template: Any) -> Any:
    return template.steps[-1][1] if isinstance(template, Pipeline) else template


def stability_bound(template: Any, train: Records, classes: np.ndarray) -> Bound:
    """The DTP upper bound that applies to ``template`` on T (see the module docstring)."""
    est = _estimator(template)
    n = train.n
    counts = np.bincount(class_index(train.y, classes), minlength=len(classes))
    n_ymin = int(counts.min())
    if type(est) is CategoricalNB:
        pre = template.steps[0][1] if isinstance(template, Pipeline) and len(template.steps) == 2 else None
        enc = pre.transformers[0][1] if pre is not None and len(pre.transformers) == 1 else None
        if not isinstance(enc, DomainEncoder):
            return Bound("none", "categorical naive Bayes without mptool's fixed-domain encoder (preprocess: none)")
        m, v = len(enc.domains), int(max(enc.n_codes()))
        return _nb_bound(_scalar_alpha(est), n, n_ymin, m, v, "categorical naive Bayes")
    if type(est) is BernoulliNB:
        parts = design_parts(template)
        if isinstance(parts, str) or parts[1]:
            why = "Bernoulli naive Bayes over features scaled on T: Props. 6.4/6.5 assume fixed features"
            return Bound("none", why)
        width = sum(_width(tr, cols, train) for tr, cols in parts[0]) if len(template.steps) > 1 else train.X.shape[1]
        return _nb_bound(_scalar_alpha(est), n, n_ymin, int(width), 2, "Bernoulli naive Bayes (binary features, v = 2)")
    if type(est) in (GaussianNB, MultinomialNB):
        return Bound(
            "none",
            f"{type(est).__name__}: Props. 6.4/6.5 cover naive Bayes over discrete features estimated by counts, "
            "not Gaussian or multinomial likelihoods",
        )
    if type(est) in (KNeighborsClassifier, TieStableKNeighborsClassifier):
        return Bound("none", "k-NN is not training stable (Long et al. 6.3): PDTP is only a lower bound of its DTP")
    if type(est) is LogisticRegression:
        return Bound(
            "lipschitz",
            "logistic regression: Lipschitz bound of Theorem 6.9, L * max|u_T - u_T\\t| (needs the "
            "warm-start-logistic engine, which returns the leave-one-out parameters)",
        )
    return Bound(
        "none",
        f"{type(est).__name__}: training stability unknown (Long et al. Table 3) and no Lipschitz bound implemented",
    )


def _scalar_alpha(est: Any) -> float | None:
    return float(est.alpha) if np.isscalar(est.alpha) else None


def _width(tr: Any, cols: list[str], train: Records) -> int:
    from sklearn.base import clone

    return int(np.asarray(clone(tr).fit(train.X[cols].iloc[:1]).transform(train.X[cols].iloc[:1])).shape[1])


def _nb_bound(alpha: float | None, n: int, n_ymin: int, m: int, v: int, what: str) -> Bound:
    details = {"n": n, "n_ymin": n_ymin, "m": m, "v": v, "alpha": alpha, "lsq_delta_prop_6_7": lsq_delta(m)}
    if alpha is not None and math.isclose(alpha, 1.0):
        return Bound("stability", f"{what} with Laplace smoothing: Prop. 6.5", log_nb_delta(n, n_ymin, m, v), details)
    if alpha is not None and 0 <= alpha <= 1e-10:
        log_delta = min(log_nb_delta(n, n_ymin, m), log_lsq_delta(m))
        return Bound("stability", f"{what} without smoothing: Props. 6.4 and 6.7 (the smaller delta)",
                     log_delta, details)
    return Bound("none", f"{what} with alpha = {alpha}: Props. 6.4/6.5 cover alpha = 0 and alpha = 1 only", None,
                 details)


def dtp_upper(bound: Bound, result: LooResult, lipschitz: float | None) -> np.ndarray | None:
    """Per-record upper bound of DTP(t) (raw probabilities), or None where no bound applies."""
    if bound.kind == "stability" and bound.log_delta is not None:
        raw = pdtp(bin_probabilities(result.p_full, 0.0), bin_probabilities(result.p_loo, 0.0))
        own_gone = (result.p_loo <= 0).any(axis=1)  # Definition 6.1 needs p' > 0
        return np.where(own_gone, np.inf, np.maximum(raw.pdtp, bound.log_delta))
    shift = getattr(result, "param_shift", None)
    if bound.kind == "lipschitz" and shift is not None and lipschitz is not None:
        return lipschitz * np.asarray(shift, dtype=float)
    return None


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
    """max over queries and classes of |ln p - ln p'| after binning; p_loo_q is (records, Q, C)."""
    a = np.log(bin_probabilities(p_full_q, bin_size))
    b = np.log(bin_probabilities(p_loo_q, bin_size))
    return np.abs(b - a[None, :, :]).max(axis=(1, 2))


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
            codes, y_idx, len(request.classes), np.asarray(est.min_categories), _alpha(est), est.fit_prior
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
    """Per-record ``dtp_upper`` (and ``dtp_queries`` when a query set is given) and their summary.

    ``dtp_upper`` is empty (NaN) where no bound applies; the summary says which bound
    applies and why.
    """
    bound = stability_bound(request.template, request.train, request.classes)
    lip = None
    if bound.kind == "lipschitz":
        from mptool.loo.linear import lipschitz_constant

        parts = design_parts(request.template)
        lip = None if isinstance(parts, str) else lipschitz_constant(
            request.template, request.train.schema, len(request.classes)
        )
    upper = dtp_upper(bound, result, lip)
    n = len(result.p_full)
    columns: dict[str, np.ndarray] = {"dtp_upper": upper if upper is not None else np.full(n, np.nan)}
    reason = bound.reason
    if upper is None and bound.kind == "lipschitz":
        reason += f"; not available from the '{result.engine}' engine"
    summary: dict[str, Any] = {
        "upper_bound": {
            "kind": bound.kind if upper is not None else "none",
            "why": reason,
            "max": float(np.max(upper)) if upper is not None and n else None,
            "ln_delta": bound.log_delta,
            "lipschitz_L": lip,
            "details": bound.details,
            "note": "bounds the DTP of the raw (unbinned) probabilities; dtp_upper uses the unbinned PDTP",
        }
    }
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
