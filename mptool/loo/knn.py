"""Exact leave-one-out for k-nearest neighbours from one neighbour query per record.

A(T\\{t}) answers x_t from the k nearest records of T other than t. One query of the k+2
nearest neighbours of x_t in T (t itself is normally among them, at distance 0) gives
both: drop t from the list and keep the first k. The class probabilities are then the
(uniform or 1/distance) weighted votes, as ``KNeighborsClassifier.predict_proba``
computes them (a zero distance takes all the weight).

Ties: which of several equidistant records sklearn keeps at the k-th place depends on its
search order, which a refit on T\\{t} may not share. A record whose k-th and (k+1)-th
candidates (with t removed) are at equal distance (within 1e-9 relative) is therefore
refitted, as the refit engine would, so the engine equals refit on every record.

Refuses pipelines whose feature space moves when t leaves: a StandardScaler or imputer
fitted on T rescales every distance. k-NN is not training stable (Long et al. 6.3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline

from mptool.inputs.models import proba_in
from mptool.inputs.spec import Spec
from mptool.loo.base import LooRequest, LooResult
from mptool.loo.design import class_index, design_parts
from mptool.loo.refit import loo_chunk

#: Relative distance difference under which two neighbours count as tied.
TIE_TOL = 1e-9


def vote(labels: np.ndarray, dist: np.ndarray, n_classes: int, weights: str) -> np.ndarray:
    """Class probabilities from neighbour class indices and distances (rows of k neighbours)."""
    r, k = labels.shape
    if weights == "distance":
        with np.errstate(divide="ignore"):
            w = 1.0 / dist
        inf = np.isinf(w)
        rows = inf.any(axis=1)
        w[rows] = inf[rows]
    else:
        w = np.ones((r, k))
    out = np.zeros((r, n_classes))
    np.add.at(out, (np.repeat(np.arange(r), k), labels.ravel()), w.ravel())
    total = out.sum(axis=1, keepdims=True)
    total[total == 0] = 1.0
    return out / total


class KnnEngine:
    """Leave-one-out k-NN from a (k+2)-neighbour query per record; refit only on distance ties."""

    name = "exact-knn"

    def refuses(self, spec: Spec, template: Any) -> str | None:
        est = template.steps[-1][1] if isinstance(template, Pipeline) else template
        if type(est) is not KNeighborsClassifier:
            return f"{type(est).__name__} is not KNeighborsClassifier"
        if est.weights not in ("uniform", "distance"):
            return "callable weights"
        if est.metric == "precomputed":
            return "precomputed distances"
        parts = design_parts(template)
        if isinstance(parts, str):
            return parts
        if parts[1]:
            return (
                "numerics standardised on T: the scale moves when t leaves, and with it every distance; "
                "give them model.bins edges or use preprocess: none"
            )
        return None

    def run(self, request: LooRequest, advance: Callable[[int], None]) -> LooResult:
        T = request.train
        model = request.full_model
        knn: KNeighborsClassifier = model.steps[-1][1] if isinstance(model, Pipeline) else model
        pos = np.asarray(request.positions, dtype=np.int64)
        C = len(request.classes)
        y_idx = class_index(T.y, request.classes)
        p_full = proba_in(model, T.X.iloc[pos], request.classes)
        k = knn.n_neighbors
        if k + 1 > T.n:  # the refit on n-1 records fails the same way it would
            p_loo = loo_chunk(request.template, T.X, T.y, request.classes, pos)
            advance(len(pos))
            return LooResult(p_full, p_loo, self.name)
        X = T.X.iloc[pos]
        Z = model[:-1].transform(X) if isinstance(model, Pipeline) and len(model.steps) > 1 else X
        m = min(k + 2, T.n)
        dist, ind = knn.kneighbors(Z, n_neighbors=m)
        keep = ind != pos[:, None]
        # rows where t is not among the m found (duplicates of x_t crowd it out): drop the last
        missing = keep.all(axis=1)
        keep[missing, -1] = False
        d_loo = dist[keep].reshape(len(pos), m - 1)
        i_loo = ind[keep].reshape(len(pos), m - 1)
        p_loo = vote(y_idx[i_loo[:, :k]], d_loo[:, :k], C, knn.weights)
        if m - 1 > k:
            tied = np.abs(d_loo[:, k] - d_loo[:, k - 1]) <= TIE_TOL * np.maximum(1.0, d_loo[:, k])
        else:
            tied = np.zeros(len(pos), dtype=bool)
        # t not found among its own m nearest: several records sit at x_t's distance-0 ball
        tied |= missing
        if tied.any():
            p_loo[tied] = loo_chunk(request.template, T.X, T.y, request.classes, pos[tied])
        advance(len(pos))
        return LooResult(p_full, p_loo, self.name)
