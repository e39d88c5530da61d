"""Leave-one-out engines behind one small interface (see ``base.Engine``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline

from mptool.inputs.data import Records
from mptool.inputs.neighbors import TieStableKNeighborsClassifier
from mptool.inputs.spec import Spec
from mptool.loo.base import Engine, LooRequest, LooResult
from mptool.loo.knn import KnnEngine
from mptool.loo.linear import NewtonLogisticEngine
from mptool.loo.naive_bayes import NaiveBayesEngine
from mptool.loo.refit import LooFitError, RefitEngine, loo_chunk, loo_fit_failed
from mptool.loo.replicates import ReplicateEngine
from mptool.runtime.errors import InputError

__all__ = ["Engine", "LooRequest", "LooResult", "RefitEngine", "select_engine", "engine_reasons", "EXACT_ENGINES",
           "ENGINE_CHOICES", "check_engine_choice", "min_records", "check_before_work", "no_exact_engine"]

#: Exact engines, tried in order by ``auto``; each refuses specs it cannot follow exactly.
#: Every one computes the exact leave-one-out (logistic regression: the exact optima, see loo/newton.py).
EXACT_ENGINES: list[Engine] = [NaiveBayesEngine(), KnnEngine(), NewtonLogisticEngine()]


#: The ``--engine`` choices (``replicates``: mptool pdtp and mptool attack only, :func:`select_engine`).
ENGINE_CHOICES = ("auto", "exact", "refit", "replicates")


def check_engine_choice(choice: str) -> None:
    """InputError unless ``choice`` is one of :data:`ENGINE_CHOICES`: checked before any work, also where
    the engine would never run (``attack --pdtp-iterations 0``), so a mistyped engine is never accepted."""
    if choice not in ENGINE_CHOICES:
        raise InputError(f"--engine must be auto, exact, refit or replicates (got '{choice}')")


def select_engine(choice: str, spec: Spec, template: Any, replicates: bool = False) -> Engine:
    """The engine for ``--engine auto|exact|refit|replicates``.

    auto: the first exact engine that accepts the spec, else refit. exact: that engine or
    InputError with the reasons of the engines written for this estimator (an engine that
    does not handle it says "<Estimator> is not ..."), or every reason if none is. refit:
    always the refit engine. replicates (only where ``replicates`` is True, i.e. ``pdtp``): the
    replicate engine (:mod:`mptool.loo.replicates`; auto switches to it when the audit detects
    training randomness, :mod:`mptool.api.randomized`).
    """
    check_engine_choice(choice)
    if choice == "refit":
        return RefitEngine()
    if choice == "replicates":
        if not replicates:
            raise InputError("--engine replicates is for mptool pdtp and mptool attack; use auto, exact or refit here")
        return ReplicateEngine()
    reasons, own = [], []
    est = template.steps[-1][1] if isinstance(template, Pipeline) else template
    for engine in EXACT_ENGINES:
        why = engine.refuses(spec, template)
        if why is None:
            return engine
        reasons.append(f"{engine.name}: {why}")
        if not why.startswith(f"{type(est).__name__} is not "):  # the engine for this estimator says why
            own.append(reasons[-1])
    if choice == "exact":
        detail = "; ".join(own or reasons) or "no exact engine is available"
        raise InputError(f"--engine exact: no exact engine accepts this spec ({detail}); use --engine refit")
    return RefitEngine()


def engine_reasons(spec: Spec, template: Any) -> list[tuple[str, str | None]]:
    """Each exact engine, in ``auto``'s order, with why it refuses the spec (None: it accepts it).

    What ``mptool check`` prints as "the engine and why": ``auto`` takes the first accepting
    engine, or refit when none accepts.
    """
    return [(engine.name, engine.refuses(spec, template)) for engine in EXACT_ENGINES]


def no_exact_engine(spec: Spec, estimator: Any) -> bool:
    """True when no exact engine is written for ``estimator``'s class, so ``auto`` surely refits.

    Decided from the bare estimator, before the data is read and the pipeline built: every exact
    engine answers "<Estimator> is not ..." (the convention :func:`select_engine` reads). An engine
    that answers anything else, or fails on a bare estimator, may accept the full pipeline: False.
    """
    prefix = f"{type(estimator).__name__} is not "
    for engine in EXACT_ENGINES:
        try:
            why = engine.refuses(spec, estimator)
        except Exception:  # noqa: BLE001 - cannot tell without the pipeline: maybe exact
            return False
        if why is None or not why.startswith(prefix):
            return False
    return True


def min_records(template: Any) -> int:
    """The fewest records T may have for a leave-one-out of ``template``: k-NN needs k + 1 (T minus one
    record must still hold its k neighbours), any other estimator 2."""
    est = template.steps[-1][1] if isinstance(template, Pipeline) else template
    if isinstance(est, TieStableKNeighborsClassifier) and est.unsupported() is None:
        return int(est.n_neighbors) + 1
    return 2


def check_before_work(engine: Engine, template: Any, T: Records, classes: np.ndarray, positions: np.ndarray) -> None:
    """Refuse (exit 2), before any work, what the leave-one-out would refuse after it.

    The one place ``pdtp`` (at its start) and ``check`` test it, so ``check`` says ok only where
    the run gets past its first refit:

    - k-NN with ``n_neighbors`` above |T| - 1: every A(T \\ {t}) has fewer records than neighbours
      (:func:`min_records`; the exact engine falls back to refits there);
    - the refit engine: one refit without an audited record (of ``positions``) of the rarest
      class among them (the lowest row of it), predicting on that record. A fit that fails there
      (one class left for an estimator that needs two, too few records per class for the
      parameters) fails for that record in the run too, after every refit before it; the error
      line is the run's.
    """
    need = min_records(template)
    if T.n < need:
        est = template.steps[-1][1] if isinstance(template, Pipeline) else template
        raise InputError(
            f"model.params.n_neighbors is {est.n_neighbors}, but the leave-one-out fits k-NN on |T| - 1 = "
            f"{T.n - 1} records: lower n_neighbors to at most {T.n - 1} or draw a larger T (data.train_size)"
        )
    if not isinstance(engine, RefitEngine) or T.n < 2 or len(positions) == 0:
        return
    audited = np.asarray(T.y, dtype=object)[positions].astype(str)
    labels, sizes = np.unique(np.asarray(T.y, dtype=object).astype(str), return_counts=True)
    counts = {str(c): int(n) for c, n in zip(labels, sizes, strict=True)}
    t = int(positions[min(range(len(positions)), key=lambda i: (counts[audited[i]], i))])
    try:
        loo_chunk(template, T.X, T.y, classes, np.array([t], dtype=np.int64))
    except LooFitError as exc:
        raise loo_fit_failed(T, exc) from None
