"""The generic leave-one-out engine: refit the whole pipeline on T \\ {t} for every t.

Works for any spec. Both fits use the same ``random_state`` (the spec's seed), so training
noise is paired and not counted as the record's influence (PDTP as in Long et al. 4.2).
Records are processed in chunks across joblib workers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from mptool.loo.base import LooRequest, LooResult
from mptool.models import fit, proba_in
from mptool.parallel import chunk_positions, run_tasks
from mptool.spec import Spec

#: Checkpoint stage name of the leave-one-out chunks (``mptool.checkpoint``).
CHECKPOINT_STAGE = "loo"


def loo_chunk(template: Any, X: pd.DataFrame, y: np.ndarray, classes: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """p_{A(T\\{t})}(.|x_t) for each position t in ``positions`` (one refit each)."""
    out = np.empty((len(positions), len(classes)))
    keep = np.ones(len(y), dtype=bool)
    for i, t in enumerate(positions):
        keep[t] = False
        model = fit(template, X.iloc[keep], y[keep])
        out[i] = proba_in(model, X.iloc[[t]], classes)[0]
        keep[t] = True
    return out


class RefitEngine:
    """Refit per record; the reference every faster engine is checked against."""

    name = "refit"

    def refuses(self, spec: Spec, template: Any) -> str | None:
        return None

    def run(self, request: LooRequest, advance: Callable[[int], None]) -> LooResult:
        """Refit per record in chunks; with ``request.checkpoint``, reuse saved chunks and save new ones."""
        T = request.train
        k = len(request.classes)
        p_full = proba_in(request.full_model, T.X.iloc[request.positions], request.classes)
        ckpt = request.checkpoint
        saved = ckpt.load(CHECKPOINT_STAGE) if ckpt is not None else {}
        rows = {
            t: saved[t]["p_loo"]
            for t in request.positions.tolist()
            if t in saved and saved[t].get("p_loo", np.empty(0)).shape == (k,)
        }
        if rows:
            advance(len(rows))
        todo = np.array([t for t in request.positions.tolist() if t not in rows], dtype=np.int64)
        chunks = chunk_positions(todo, request.jobs)

        def done(i: int, part: np.ndarray) -> None:
            if ckpt is not None:
                ckpt.save(CHECKPOINT_STAGE, chunks[i], p_loo=part)
            advance(len(part))

        parts = run_tasks(
            loo_chunk,
            ((request.template, T.X, T.y, request.classes, c) for c in chunks),
            jobs=request.jobs,
            backend=request.backend,
            shared=(request.template, T.X, T.y, request.classes),
            on_done=done,
        )
        for c, part in zip(chunks, parts, strict=True):
            rows.update({int(t): part[j] for j, t in enumerate(c)})
        p_loo = np.array([rows[t] for t in request.positions.tolist()], dtype=float).reshape(-1, k)
        return LooResult(p_full=p_full, p_loo=p_loo, engine=self.name)
