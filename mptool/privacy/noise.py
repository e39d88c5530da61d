"""Noise floor of PDTP: how much A(T) and A(T\\{t}) differ when the record has no influence at all.

PDTP (Long et al. 4.2) compares A(T) with A(T\\{t}) trained with the same seed. The paired
seed removes training noise only when the fit depends on T as a *set*. Removing t also moves
every later row up one place and shortens T by one, so an algorithm whose result depends on
row positions -- minibatch shuffling (a permutation of positions drawn from the seed),
online updates in row order, bootstrap samples of positions -- changes for reasons that have
nothing to do with t's information, and that change is counted as t's influence.

The floor measures it: for a seeded sample of records t, fit A on T' = T with t's row moved to
the end (the same records, the same seed: t's true influence is zero) and take the PDTP of
A(T) against A(T') on x_t. Estimators whose fit depends on T only as a set (up to the order
of floating-point sums) are *exactly paired* and get no floor by default
(:func:`order_dependence`); the others get ``DEFAULT_RECORDS`` records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.pipeline import Pipeline

from mptool.inputs.models import fit, proba_in
from mptool.privacy.dtp import pdtp_of
from mptool.privacy.release import measured
from mptool.runtime import signals
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import chunk_positions, one_thread, run_tasks

#: Records in the floor's sample when the estimator's fit depends on row order and no
#: ``--noise-floor K`` is given.
DEFAULT_RECORDS = 20

#: Estimators (class names) whose fit depends on T only as a set of rows, given the seed:
#: sums over rows (counts, means, gradients of a full-batch objective), sorting, distances
#: with a tie rule on the relative order of the rows (unchanged by removing t). Float sums in
#: another order can differ in the last bits; nothing else does.
_SET_FUNCTIONS = {
    "CategoricalNB": "counts per class and value",
    "DPCategoricalNB": "counts per class and value, plus Laplace noise drawn from the seed in a fixed cell order",
    "BernoulliNB": "counts per class and feature",
    "MultinomialNB": "sums per class and feature",
    "ComplementNB": "sums per class and feature",
    "GaussianNB": "means and variances per class",
    "TieStableKNeighborsClassifier": ("distances; ties by record content, then relative row order (removing or "
                                      "moving t keeps both); numerics scaled in a canonical row order"),
    "DecisionTreeClassifier": "splits from sorted values and class counts",
    "LinearDiscriminantAnalysis": "means and covariances",
    "QuadraticDiscriminantAnalysis": "means and covariances",
}


@dataclass(frozen=True)
class OrderDependence:
    """Whether an estimator's fit depends on the order of T's rows, and why (see the module docstring)."""

    dependent: bool | None  # None: unknown (treated as dependent: the floor is measured)
    reason: str


def _final(template: Any) -> Any:
    return template.steps[-1][1] if isinstance(template, Pipeline) else template


def order_dependence(template: Any) -> OrderDependence:
    """Classify the final estimator of ``template``: exactly paired, order-dependent, or unknown.

    Order-dependent: stochastic or online solvers (MLP ``sgd``/``adam``, SGD-type linear
    models, logistic regression ``sag``/``saga`` and ``liblinear`` with ``dual``), bootstrap
    or row subsampling (random forest, bagging, gradient boosting with ``subsample`` < 1) and
    a random validation split (``early_stopping``). Exactly paired: the estimators of
    ``_SET_FUNCTIONS``, logistic regression's full-batch solvers (``lbfgs``, Newton; convex),
    forests without bootstrap, gradient boosting without subsampling. The MLP's full-batch
    ``lbfgs`` counts as order-dependent: row order changes only the last bits of its sums, but
    a non-convex fit cut off at ``max_iter`` carries them into the probabilities.
    """
    est = _final(template)
    name = type(est).__name__
    params = est.get_params(deep=False)
    if name in _SET_FUNCTIONS:
        return OrderDependence(False, f"{name}: a function of T as a set ({_SET_FUNCTIONS[name]})")
    if params.get("early_stopping") is True or (name.startswith("HistGradient") and params.get("early_stopping")):
        return OrderDependence(True, f"{name}: early stopping holds out a random split of the row positions")
    if name == "MLPClassifier":
        if params.get("solver") in ("sgd", "adam"):
            return OrderDependence(True, f"MLPClassifier solver {params.get('solver')}: minibatches of shuffled rows")
        # Full batch, but a non-convex fit stopped after max_iter amplifies the last-bit differences
        # of sums taken in another row order (measured on Adult: raw floor ~1e-3, binned 0).
        return OrderDependence(True, "MLPClassifier solver lbfgs: full-batch, but float sums in another row order "
                               "move a non-convex fit slightly")
    if name in ("SGDClassifier", "Perceptron", "PassiveAggressiveClassifier"):
        return OrderDependence(True, f"{name}: one update per row, in (shuffled) row order")
    if name == "LogisticRegression":
        solver = params.get("solver")
        if solver in ("sag", "saga") or (solver == "liblinear" and params.get("dual")):
            return OrderDependence(True, f"LogisticRegression solver {solver}: rows sampled in a random order")
        return OrderDependence(False, f"LogisticRegression solver {solver}: full-batch optimisation")
    if "bootstrap" in params:
        if params["bootstrap"]:
            return OrderDependence(True, f"{name}: bootstrap samples of row positions")
        if name in ("RandomForestClassifier", "ExtraTreesClassifier"):
            return OrderDependence(False, f"{name} without bootstrap: every tree sees every row")
    if "subsample" in params and name.startswith("GradientBoosting"):
        if params["subsample"] < 1.0:
            return OrderDependence(True, f"{name}: subsample {params['subsample']:g} draws row positions")
        return OrderDependence(False, f"{name} without subsampling: full-batch boosting")
    return OrderDependence(None, f"{name}: not known to be independent of the row order")


def floor_positions(positions: np.ndarray, k: int, seed: int) -> np.ndarray:
    """A seeded sample of ``k`` of the audited positions (all of them when k >= their number), sorted."""
    positions = np.asarray(positions, dtype=np.int64)
    if k >= len(positions):
        return positions.copy()
    rng = np.random.default_rng([seed, 0x6E6F6973])  # a stream of its own: not --sample's draw
    return np.sort(rng.choice(positions, size=k, replace=False))


def moved_chunk(
    template: Any, X: pd.DataFrame, y: np.ndarray, classes: np.ndarray, positions: np.ndarray
) -> np.ndarray:
    """p_{A(T')}(.|x_t) for each position t, T' = T with row t moved to the end (one fit each)."""
    out = np.empty((len(positions), len(classes)))
    n = len(y)
    with one_thread("blas"):  # as the refit engine's fits
        for i, t in enumerate(positions):
            signals.check()
            order = np.r_[np.arange(t), np.arange(t + 1, n), t]
            try:
                model = fit(template, X.iloc[order], y[order])
                out[i] = proba_in(model, X.iloc[[t]], classes)[0]
            except (ValueError, TypeError) as exc:
                first = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
                raise InputError(f"model: the noise-floor refit (row moved to the end of T) failed: {first}") from None
    return out


@dataclass(frozen=True)
class NoiseFloor:
    """PDTP of A(T) vs A(T with t moved to the end) for the sampled positions, binned and raw."""

    positions: np.ndarray
    pdtp: np.ndarray
    pdtp_raw: np.ndarray


def measure_floor(
    template: Any,
    full_model: Any,
    X: pd.DataFrame,
    y: np.ndarray,
    classes: np.ndarray,
    positions: np.ndarray,
    bin_size: float,
    jobs: int,
    backend: str,
    advance: Callable[[int], None],
    release: Any = None,
) -> NoiseFloor:
    """The noise floor at ``positions`` (one refit each, in parallel; the result does not depend on ``jobs``).

    ``release`` (a spec's ``output.release``) is applied to both outputs, as for PDTP.
    """
    p_full = measured(proba_in(full_model, X.iloc[positions], classes), release)
    chunks = chunk_positions(positions, jobs)
    parts = run_tasks(
        moved_chunk,
        ((template, X, y, classes, c) for c in chunks),
        jobs=jobs,
        backend=backend,
        on_result=lambda r: advance(len(r)),
        shared=(template, X, y, classes),  # a Dask cluster gets T once per call, not with every chunk
    )
    p_moved = measured(np.concatenate(parts) if parts else np.empty((0, len(classes))), release)
    return NoiseFloor(
        positions, pdtp_of(p_full, p_moved, bin_size).pdtp, pdtp_of(p_full, p_moved, 0.0).pdtp
    )


def _stats(v: np.ndarray, threshold: float) -> dict[str, float]:
    return {
        "mean": float(v.mean()),
        "p95": float(np.quantile(v, 0.95)),
        "max": float(v.max()),
        "fraction_above_threshold": float(np.mean(v > threshold)),
    }


def floor_summary(
    floor: NoiseFloor | None, dependence: OrderDependence, rows: np.ndarray, gated: np.ndarray,
    gate: str, threshold: float,
) -> tuple[dict[str, Any], np.ndarray | None]:
    """The ``noise_floor`` block of the JSON summary and the per-record ``above_noise_floor`` column.

    ``gated`` is each audited record's PDTP on the gate's scale (binned or raw); a record is
    above the floor when it exceeds the floor's 95th percentile on the same scale. ``rows``
    maps positions of T to CSV rows. Without a measured floor the column is None.
    """
    block: dict[str, Any] = {
        "order_dependent": dependence.dependent,
        "why": dependence.reason,
        "method": "PDTP of A(T) vs A(T with t's row moved to the end), same seed: t's true influence is zero",
        "records": 0 if floor is None else int(len(floor.positions)),
    }
    if floor is None or len(floor.positions) == 0:
        block["note"] = (
            "not measured: A(T) and A(T minus t) are exactly paired (--noise-floor K measures it anyway)"
            if dependence.dependent is False else "not measured (--noise-floor 0)"
        )
        return block, None
    scale = floor.pdtp if gate == "binned" else floor.pdtp_raw
    block.update({"scale": gate, **_stats(scale, threshold)})
    block["binned"] = _stats(floor.pdtp, threshold)
    block["raw"] = _stats(floor.pdtp_raw, threshold)
    above = gated > block["p95"]
    block["records_above_p95"] = int(above.sum())
    block["fraction_above_p95"] = float(above.mean()) if len(above) else 0.0
    block["per_record"] = [
        {"row": int(rows[p]), "pdtp": float(b), "pdtp_raw": float(r)}
        for p, b, r in zip(floor.positions, floor.pdtp, floor.pdtp_raw, strict=True)
    ]
    return block, above
