"""The generic leave-one-out engine: refit the whole pipeline on T \\ {t} for every t.

Works for any spec. Both fits use the same ``random_state`` (the spec's seed). That pairs the
training noise only when the fit depends on T as a set; removing t also shifts every later
row, and a fit that depends on row positions (minibatch shuffling, bootstrap) changes for
that reason too. ``mptool.privacy.noise`` says which estimators are exactly paired and
measures the floor of the others. Records are processed in chunks across joblib workers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from mptool.inputs.data import Records
from mptool.inputs.models import fit, proba_in
from mptool.inputs.spec import Spec
from mptool.loo.base import LooRequest, LooResult
from mptool.runtime import signals
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import chunk_positions, run_tasks

#: Checkpoint stage name of the leave-one-out chunks (``mptool.runtime.checkpoint``).
CHECKPOINT_STAGE = "loo"


class LooFitError(InputError):
    """Fitting or predicting on T \\ {t} failed for a data/parameter reason (exit 2), at position ``t`` of T."""

    def __init__(self, detail: str, position: int) -> None:
        super().__init__(detail, position)  # both in args, so the error survives pickling from a worker
        self.detail, self.position = detail, position

    def __str__(self) -> str:
        return f"model: refitting without training record {self.position} failed: {self.detail}"


def loo_chunk(template: Any, X: pd.DataFrame, y: np.ndarray, classes: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """p_{A(T\\{t})}(.|x_t) for each position t in ``positions`` (one refit each).

    A ValueError/TypeError of the fit or prediction (e.g. k-NN with more neighbours than
    T \\ {t} has records) becomes :class:`LooFitError`, as the fit on T does in ``prepare``.
    An interrupt (SIGINT/SIGTERM) raises ``signals.Interrupted``; no fit cut short is returned.
    """
    out = np.empty((len(positions), len(classes)))
    keep = np.ones(len(y), dtype=bool)
    # One BLAS thread per fit: parallelism comes from the workers, and small fits are much
    # slower when BLAS threads compete with them for the same cores.
    with threadpool_limits(limits=1, user_api="blas"):
        for i, t in enumerate(positions):
            signals.check()  # threading workers see the main process's interrupt here and stop
            keep[t] = False
            try:
                model = fit(template, X.iloc[keep], y[keep])
                out[i] = proba_in(model, X.iloc[[t]], classes)[0]
            except (ValueError, TypeError) as exc:
                detail = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
                raise LooFitError(detail, int(t)) from None
            keep[t] = True
    return out


def loo_fit_failed(T: Records, exc: LooFitError) -> InputError:
    """The one-line error for a refit on T \\ {t} that failed (CSV row of t, the fit's reason, the fix)."""
    return InputError(
        f"model: refitting the pipeline without CSV row {T.rows[exc.position]} failed: {exc.detail}; "
        "T minus one record is too small or too uniform for these model.params "
        "(raise data.train_size or change the parameters)"
    )


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

        try:
            parts = run_tasks(
                loo_chunk,
                ((request.template, T.X, T.y, request.classes, c) for c in chunks),
                jobs=request.jobs,
                backend=request.backend,
                shared=(request.template, T.X, T.y, request.classes),
                on_done=done,
            )
        except LooFitError as exc:
            raise loo_fit_failed(T, exc) from None
        for c, part in zip(chunks, parts, strict=True):
            rows.update({int(t): part[j] for j, t in enumerate(c)})
        p_loo = np.array([rows[t] for t in request.positions.tolist()], dtype=float).reshape(-1, k)
        return LooResult(p_full=p_full, p_loo=p_loo, engine=self.name)
