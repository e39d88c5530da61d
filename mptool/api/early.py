"""Which runs start their workers before the heavy imports: decided from the spec's estimator name alone.

``mptool pdtp`` and ``reduce-dtp`` spend one to three CPU seconds importing pandas, SciPy,
scikit-learn and mptool's engines before they read the data. Where the run surely refits on
``--jobs N > 1`` local workers, :func:`start_early` starts them first
(:mod:`mptool.runtime.prestart`), so that their imports overlap this process's own. It imports
neither scikit-learn nor pandas: the estimator is judged by its name. A name it cannot judge
(a short name it does not list, a class an exact engine is written for) starts nothing here;
:func:`mptool.api.operations.prestart_refits` decides again, with the estimator resolved,
before the data is read.
"""

from __future__ import annotations

from typing import Any

from mptool.runtime import prestart

#: What every refit task needs in a worker, beside the estimator's own module.
WARM_MODULES = ("pandas", "sklearn.pipeline", "sklearn.compose", "sklearn.preprocessing", "mptool.inputs.models",
                "mptool.loo")

#: Short names (``mptool.inputs.models.SHORT_NAMES``) no exact engine is written for, with their module.
REFIT_SHORT_NAMES = {
    "mlp": "sklearn.neural_network",
    "decision_tree": "sklearn.tree",
    "random_forest": "sklearn.ensemble",
}

#: Class names an exact engine is written for, or may be (:data:`mptool.loo.EXACT_ENGINES`; the DP ones too).
EXACT_CLASS_NAMES = frozenset({
    "CategoricalNB", "GaussianNB", "BernoulliNB", "MultinomialNB", "LogisticRegression", "KNeighborsClassifier",
    "TieStableKNeighborsClassifier", "DPCategoricalNB", "DPGaussianNB", "DPLogisticRegression",
})


def surely_refits(estimator: str, engine: str) -> tuple[bool, str | None]:
    """Whether a run of ``estimator`` (the spec's ``model.estimator``) under ``--engine engine`` surely refits,
    judged by the name only; and the estimator's module where a worker may import it already (scikit-learn's)."""
    dotted = "." in estimator
    module = estimator.rsplit(".", 1)[0] if dotted else REFIT_SHORT_NAMES.get(estimator)
    if module is not None and module != "sklearn" and not module.startswith("sklearn."):
        module = None  # a module outside scikit-learn is imported after --allow-import is checked, not here
    if engine in ("refit", "replicates"):
        return True, module
    if engine != "auto":
        return False, None
    if dotted:
        return estimator.rsplit(".", 1)[1] not in EXACT_CLASS_NAMES, module
    return estimator in REFIT_SHORT_NAMES, module


def start_early(spec: Any, engine: str, jobs: int | None, backend: str, fail_fast: bool = False) -> bool:
    """Start ``jobs`` loky workers now when the run surely refits on them (:func:`surely_refits`); True if started.

    Not for ``--jobs 0`` or 1, another backend, or ``--fail-fast`` (see
    :func:`mptool.api.operations.prestart_refits`, which applies the same rules with the estimator resolved).
    """
    if backend != "loky" or jobs is None or jobs <= 1 or fail_fast or not prestart.enabled():
        return False
    refits, module = surely_refits(str(spec.model.estimator), engine)
    if not refits:
        return False
    return prestart.start(jobs, backend, (*WARM_MODULES, *([module] if module else [])))
