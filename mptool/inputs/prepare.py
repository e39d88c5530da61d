"""Shared set-up of every subcommand: data + spec -> population, T, and the pipeline A.

Data flows one way: CSV + YAML -> Spec -> Records -> pipeline template -> engine or attack.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mptool.inputs.data import Records, draw_training_set, load_records
from mptool.inputs.models import (
    EstimatorChoice,
    build_pipeline,
    check_interface,
    check_public_classes,
    fit,
    kind_notes,
    resolve_estimator,
)
from mptool.inputs.spec import Spec
from mptool.runtime.errors import InputError


@dataclass(frozen=True)
class Prepared:
    """Everything a subcommand needs before its own work starts."""

    spec: Spec
    population: Records  # every usable CSV row
    train: Records  # T
    choice: EstimatorChoice
    template: Any  # unfitted pipeline A
    classes: np.ndarray  # classes of T, in label order: the output columns
    kind_notes: tuple[str, ...] = ()  # how A uses the columns, where it is not plain (models.kind_notes)
    trained: dict[str, Any] | None = None  # --trained: the artefact checked to be A(T) (inputs.trained.compare_to_spec)
    randomness: Any = None  # pdtp: loo.randomness.Randomness, when detected before the audit (api.randomized)

    @property
    def notes(self) -> tuple[str, ...]:
        return (*self.train.notes, *self.kind_notes)


def prepare(data_path: str | Path | pd.DataFrame, spec: Spec, allow_imports: tuple[str, ...] = ()) -> Prepared:
    """Resolve the estimator (before reading data, so a bad spec fails fast), read the CSV, draw T."""
    choice = resolve_estimator(spec.model, spec.seed, allow_imports)
    population = load_records(data_path, spec)
    train = draw_training_set(population, spec.data.train_size, spec.seed)
    template = build_pipeline(spec, train.schema, choice)
    classes = np.array(sorted(set(train.y.tolist()), key=lambda v: (str(type(v)), v)), dtype=object)
    check_public_classes(template, classes)
    notes = tuple(kind_notes(spec, train.schema, choice))
    return Prepared(spec, population, train, choice, template, classes, notes)


def fit_checked(template: Any, records: Records) -> Any:
    """Fit A on ``records``; a failure the data or params cause becomes an InputError (exit 2).

    The fitted model's classifier interface is checked here, before any refit
    (:func:`mptool.inputs.models.check_interface`): an estimator without ``predict``, or whose
    ``classes_`` disagree with T's, stops with one line instead of crashing after the work.
    """
    try:
        model = fit(template, records.X, records.y)
    except InputError:
        raise
    except (ValueError, TypeError, *_library_fit_errors()) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        raise InputError(f"model: fitting the pipeline on the training set failed: {first}") from None
    if (missing := check_interface(model, records.X, records.y)) is not None:
        raise InputError(f"model: {missing}; mptool needs scikit-learn's classifier interface "
                         "(fit, predict, predict_proba and classes_ of T's classes)")
    return model


def _library_fit_errors() -> tuple[type[Exception], ...]:
    """Errors an estimator library raises for parameters it checks only at fit, beside ValueError and TypeError:
    LightGBM's ``LightGBMError`` (``num_leaves: 1``, ``boosting_type: rf`` without bagging, ``objective:
    multiclass`` on two classes) was an internal error, exit 3 (red3-9). Looked up only where the library is
    imported (a spec naming it has imported it)."""
    lightgbm = sys.modules.get("lightgbm.basic")
    error = getattr(lightgbm, "LightGBMError", None)
    return (error,) if isinstance(error, type) and issubclass(error, Exception) else ()


def respecified(prep: Prepared, spec: Spec, allow_imports: tuple[str, ...] = ()) -> Prepared:
    """``prep`` for another model or output section of the same data (``mptool mitigate``'s settings).

    T, the population and the classes are kept: ``spec`` must have the same ``data`` section
    and seed (T is drawn from them), so no data is read again.
    """
    if spec.data != prep.spec.data or spec.seed != prep.spec.seed:
        raise ValueError("respecified: the data section and seed must be unchanged")
    choice = resolve_estimator(spec.model, spec.seed, allow_imports)
    template = build_pipeline(spec, prep.train.schema, choice)
    check_public_classes(template, prep.classes)
    return replace(prep, spec=spec, choice=choice, template=template,
                   kind_notes=tuple(kind_notes(spec, prep.train.schema, choice)), trained=None)
