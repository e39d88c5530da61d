"""Exact leave-one-out for k-nearest neighbours from one ordered neighbour query per record.

A(T) and A(T\\{t}) are :class:`mptool.inputs.neighbors.TieStableKNeighborsClassifier`: neighbours are
ordered by (distance, record content key, training-row position), and a pair's distance depends
only on the two rows. Removing t keeps the order of every other row, so the k neighbours of x_t in T\\{t} are
the first k+1 neighbours of x_t in T with t dropped (the first k when t is not among them:
more than k records at distance 0 sit before t). Ties and duplicates need no refit. One search
of every training row (``TieStableKNeighborsClassifier.training_order``, kept on the fitted
A(T)) serves p_{A(T)} (its first k), leave-one-out and the training accuracy. The class
probabilities come from the same vote function the classifier uses, over the same neighbours
in the same order, so every record's p_{A(T\\{t})} is bit-for-bit the refit engine's.

Refuses pipelines whose feature space moves when t leaves: a StandardScaler or imputer
fitted on T rescales every distance. k-NN is not training stable (Long et al. 6.3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline

from mptool.inputs.models import proba_in
from mptool.inputs.neighbors import TieStableKNeighborsClassifier
from mptool.inputs.spec import Spec
from mptool.loo.base import LooRequest, LooResult
from mptool.loo.design import class_index, design_parts
from mptool.loo.refit import loo_chunk


class KnnEngine:
    """Leave-one-out k-NN from a (k+1)-neighbour query per record in tie-rule order; never refits."""

    name = "exact-knn"

    def refuses(self, spec: Spec, template: Any) -> str | None:
        est = template.steps[-1][1] if isinstance(template, Pipeline) else template
        if type(est) is not TieStableKNeighborsClassifier:
            return f"{type(est).__name__} is not mptool's tie-stable k-NN"
        why = est.unsupported()
        if why is not None:
            return why
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
        """p_{A(T)}(.|x_t) by predict_proba; p_{A(T\\{t})}(.|x_t) from x_t's neighbours in T without t."""
        T = request.train
        model = request.full_model
        knn: TieStableKNeighborsClassifier = model.steps[-1][1] if isinstance(model, Pipeline) else model
        pos = np.asarray(request.positions, dtype=np.int64)
        k = knn.n_neighbors
        if k + 1 > T.n:  # the refit on n-1 records fails the same way it would
            p_full = proba_in(model, T.X.iloc[pos], request.classes)
            p_loo = loo_chunk(request.template, T.X, T.y, request.classes, pos)
            advance(len(pos))
            return LooResult(p_full, p_loo, self.name)
        # One (k+1)-neighbour search of every training row, kept on A(T): p_full, p_loo and the
        # training accuracy (run_facts' predict on T) all read it (module docstring).
        X = T.X.iloc[pos]
        Z = np.asarray(model[:-1].transform(X) if isinstance(model, Pipeline) and len(model.steps) > 1 else X,
                       dtype=np.float64)
        if not np.array_equal(Z, knn._fit_X[pos]):  # T's rows are not A(T)'s training rows as fitted: search them
            model_full, model_loo = knn.predict_proba(Z), knn.predict_proba_excluding(Z, pos)
        else:
            model_full, model_loo = knn.predict_proba_loo(pos)
        cols = class_index(knn.classes_, request.classes)
        p_full, p_loo = np.zeros((2, len(pos), len(request.classes)))
        p_full[:, cols] = model_full
        p_loo[:, cols] = model_loo  # a class T lacks stays 0
        advance(len(pos))
        return LooResult(p_full, p_loo, self.name)
