"""Leave-one-out engines behind one small interface (see ``base.Engine``)."""

from __future__ import annotations

from typing import Any

from sklearn.pipeline import Pipeline

from mptool.inputs.spec import Spec
from mptool.loo.base import Engine, LooRequest, LooResult
from mptool.loo.knn import KnnEngine
from mptool.loo.linear import NewtonLogisticEngine
from mptool.loo.naive_bayes import NaiveBayesEngine
from mptool.loo.refit import RefitEngine
from mptool.loo.replicates import ReplicateEngine
from mptool.runtime.errors import InputError

__all__ = ["Engine", "LooRequest", "LooResult", "RefitEngine", "select_engine", "engine_reasons", "EXACT_ENGINES"]

#: Exact engines, tried in order by ``auto``; each refuses specs it cannot follow exactly.
#: Every one computes the exact leave-one-out (logistic regression: the exact optima, see loo/newton.py).
EXACT_ENGINES: list[Engine] = [NaiveBayesEngine(), KnnEngine(), NewtonLogisticEngine()]


def select_engine(choice: str, spec: Spec, template: Any, replicates: bool = False) -> Engine:
    """The engine for ``--engine auto|exact|refit|replicates``.

    auto: the first exact engine that accepts the spec, else refit. exact: that engine or
    InputError with the reasons of the engines written for this estimator (an engine that
    does not handle it says "<Estimator> is not ..."), or every reason if none is. refit:
    always the refit engine. replicates (only where ``replicates`` is True, i.e. ``pdtp``): the
    replicate engine (:mod:`mptool.loo.replicates`; auto switches to it when the audit detects
    training randomness, :mod:`mptool.api.randomized`).
    """
    if choice not in ("auto", "exact", "refit", "replicates"):
        raise InputError(f"--engine must be auto, exact, refit or replicates (got '{choice}')")
    if choice == "refit":
        return RefitEngine()
    if choice == "replicates":
        if not replicates:
            raise InputError("--engine replicates is for mptool pdtp only; use auto, exact or refit here")
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
