"""The training algorithm A: estimator registry, import allow-list and pipeline factory.

A is the whole pipeline, preprocessing included. Encoders take their categories from the
schema (the CSV's domain), so they never depend on which records are in T; scalers and
imputers are fitted on T like the estimator.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import sys
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin, clone, is_classifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, StandardScaler

from mptool.inputs.data import Schema
from mptool.inputs.dp_nb import DPCategoricalNB
from mptool.inputs.memo import category_codes, factorized
from mptool.inputs.neighbors import OrderFreeStandardScaler, TieStableKNeighborsClassifier
from mptool.inputs.spec import ModelSpec, Spec
from mptool.runtime import signals, ui
from mptool.runtime.errors import InputError

#: Short names → (dotted class path, default parameters). Users' params override defaults.
SHORT_NAMES: dict[str, tuple[str, dict[str, Any]]] = {
    "categorical_nb": ("sklearn.naive_bayes.CategoricalNB", {}),
    "gaussian_nb": ("sklearn.naive_bayes.GaussianNB", {}),
    "bernoulli_nb": ("sklearn.naive_bayes.BernoulliNB", {}),
    "multinomial_nb": ("sklearn.naive_bayes.MultinomialNB", {}),
    "logistic_regression": ("sklearn.linear_model.LogisticRegression", {"max_iter": 1000}),
    # Long et al. 5.2: one hidden layer of 64 tanh units, learning rate 0.01, 100 epochs.
    "mlp": (
        "sklearn.neural_network.MLPClassifier",
        {"hidden_layer_sizes": [64], "activation": "tanh", "learning_rate_init": 0.01, "max_iter": 100},
    ),
    # scikit-learn's k-NN with a deterministic tie rule (distance, then training row): mptool.inputs.neighbors
    "knn": ("mptool.inputs.neighbors.TieStableKNeighborsClassifier", {}),
    "decision_tree": ("sklearn.tree.DecisionTreeClassifier", {}),
    "random_forest": ("sklearn.ensemble.RandomForestClassifier", {"n_estimators": 100, "n_jobs": 1}),
    # epsilon-DP training (diffprivlib, optional: pip install 'mptool[dp]'): mptool.inputs.dpmodels
    "dp_gaussian_nb": ("mptool.inputs.dpmodels.DPGaussianNB", {}),
    "dp_logistic_regression": ("mptool.inputs.dpmodels.DPLogisticRegression", {}),
    # mptool's own epsilon-DP categorical naive Bayes (Laplace noise on the counts): mptool.inputs.dp_nb
    "dp_categorical_nb": ("mptool.inputs.dp_nb.DPCategoricalNB", {}),
}

#: Module prefixes a dotted estimator path may import from without --allow-import.
DEFAULT_ALLOWED = ("sklearn",)



def _column_transformer() -> type:
    """scikit-learn's ``ColumnTransformer``, without running ``sklearn/compose/__init__.py`` when it can.

    That package file also imports ``TransformedTargetRegressor``, hence ``sklearn.linear_model``,
    ``model_selection`` and ``metrics``: about 0.1-0.2 CPU s of a naive Bayes demo that uses none
    of them (issue 28). The submodule itself only imports from ``sklearn.base``, ``pipeline``,
    ``preprocessing`` and ``utils``, so it is loaded by its own file under its own name: the same
    class (``sklearn.compose`` imported later reuses this module from ``sys.modules``, and pickles
    name it as before). Falls back to the plain import if the file is not where it was.
    """
    name = "sklearn.compose._column_transformer"
    if (loaded := sys.modules.get(name)) is None and "sklearn.compose" not in sys.modules:
        import importlib.util
        from pathlib import Path

        import sklearn

        path = Path(sklearn.__file__).parent / "compose" / "_column_transformer.py"
        spec = importlib.util.spec_from_file_location(name, path) if path.is_file() else None
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(name, None)
                raise
            loaded = module
    if loaded is None:
        from sklearn.compose import ColumnTransformer as loaded_class

        return loaded_class
    return loaded.ColumnTransformer


ColumnTransformer = _column_transformer()

@dataclass(frozen=True)
class EstimatorChoice:
    """A resolved estimator: its class, the final parameters and the name the user gave."""

    cls: type
    params: dict[str, Any]
    name: str

    def make(self) -> BaseEstimator:
        return self.cls(**self.params)


def _allowed(path: str, allow_imports: tuple[str, ...]) -> bool:
    return any(path == m or path.startswith(m + ".") for m in (*DEFAULT_ALLOWED, *allow_imports))


def _defined_in_allowed(path: str, cls: Any, allow_imports: tuple[str, ...]) -> bool:
    """Whether the class ``cls``, imported as ``path``, is defined in the allowed package that ``path`` names.

    ``lightgbm.LGBMClassifier`` (defined in ``lightgbm.sklearn``) passes under ``--allow-import
    lightgbm``; a name the allowed module imports from elsewhere (``lightgbm.basic.getsize`` is
    ``os.path.getsize``, a class of another package re-exported there) does not: ``--allow-import M``
    trusts M's own code, not everything M can reach.
    """
    owner = getattr(cls, "__module__", None)
    if not isinstance(owner, str):
        return False
    return any((path == m or path.startswith(m + ".")) and (owner == m or owner.startswith(m + "."))
               for m in (*DEFAULT_ALLOWED, *allow_imports))


def resolve_estimator(model: ModelSpec, seed: int, allow_imports: tuple[str, ...] = ()) -> EstimatorChoice:
    """Resolve ``model.estimator`` to a classifier class with predict_proba and checked params.

    A dotted path may import only from sklearn unless its module is named in
    ``allow_imports`` (the CLI's --allow-import): a spec file must not run arbitrary code.
    ``random_state`` is set to the spec's seed when the estimator takes one. k-NN
    (``knn`` or sklearn's KNeighborsClassifier) becomes :class:`TieStableKNeighborsClassifier`,
    whose ties do not depend on threads or on which record was removed; parameters it cannot
    make deterministic are refused here, before any data is read.
    """
    name = model.estimator
    if name in SHORT_NAMES:
        path, defaults = SHORT_NAMES[name]
    elif "." in name:
        path, defaults = name, {}
        if not _allowed(path, allow_imports):
            top = path.rsplit(".", 1)[0]
            raise InputError(
                f"model.estimator '{name}' imports outside sklearn; if you trust it, "
                f"pass --allow-import {top}"
            )
    else:
        close = difflib.get_close_matches(name, list(SHORT_NAMES), n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(SHORT_NAMES)}"
        raise InputError(f"model.estimator '{name}' is not a known short name ({hint}) or a dotted path")
    module_name, _, attr = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError):
        raise InputError(f"model.estimator '{name}': cannot import '{path}'; check the spelling") from None
    if not isinstance(cls, type) or not issubclass(cls, BaseEstimator):
        raise InputError(f"model.estimator '{name}' is not a scikit-learn estimator class")
    if path == name and not _defined_in_allowed(path, cls, allow_imports):
        raise InputError(
            f"model.estimator '{name}' is a class that module imports from elsewhere, not one defined in it; "
            "name the class where it is defined (--allow-import trusts a module's own classes only)"
        )
    if cls is getattr(sys.modules.get("sklearn.neighbors"), "KNeighborsClassifier", None):  # imported if it is cls
        # same parameters; ties broken by (distance, row), not by sklearn's search
        cls = TieStableKNeighborsClassifier
    params = {**defaults, **model.params}
    try:
        valid = cls().get_params(deep=False)
    except TypeError:
        raise InputError(f"model.estimator '{name}' cannot be built without arguments") from None
    lightgbm = _is_lightgbm(cls)
    for key in model.params:
        if lightgbm and key in LIGHTGBM_VERBOSITY:
            level = model.params[key]
            if isinstance(level, bool) or not isinstance(level, int):
                raise InputError(f"model.params.{key}: LightGBM's log level must be a whole number "
                                 "(-1: fatal errors only)")
            continue
        if key not in valid:
            close = difflib.get_close_matches(key, list(valid), n=1)
            hint = f"did you mean '{close[0]}'?" if close else "see the estimator's documentation"
            raise InputError(f"model.params: {cls.__name__} has no parameter '{key}' ({hint})")
    if "hidden_layer_sizes" in params and isinstance(params["hidden_layer_sizes"], list):
        params["hidden_layer_sizes"] = tuple(params["hidden_layer_sizes"])
    if "random_state" in valid and "random_state" not in model.params:
        params["random_state"] = seed
    if lightgbm and not set(LIGHTGBM_VERBOSITY) & set(model.params):
        params["verbose"] = -1  # its C library's log lines only: the same trees (docs/spec.md)
    est = cls(**params)
    if isinstance(est, TieStableKNeighborsClassifier) and (why := est.unsupported()) is not None:
        raise InputError(f"model.params: {name}: {why}")
    if not is_classifier(est):
        raise InputError(f"model.estimator '{name}' is not a classifier")
    if not hasattr(est, "predict_proba"):
        raise InputError(
            f"model.estimator '{name}' has no predict_proba; PDTP needs class probabilities: "
            "choose a probabilistic classifier (or enable its probability option)"
        )
    if not callable(getattr(est, "predict", None)):
        raise InputError(
            f"model.estimator '{name}' has no predict method; mptool needs scikit-learn's classifier interface "
            "(fit, predict, predict_proba and classes_)"
        )
    _check_params(est, name)
    return EstimatorChoice(cls=cls, params=params, name=name)


#: LightGBM's names of its logging level, keywords it passes to its C library (not in ``get_params()`` of a default
#: instance, so otherwise refused as unknown). Its scikit-learn classes log every fit to stdout from that library
#: ("[LightGBM] [Info] Number of positive ...", "[Warning] No further splits with positive gain": 627 lines in a
#: 30-record pdtp); mptool passes ``verbose=-1`` (fatal errors only) unless the spec sets one of these. The level
#: selects which messages are printed and nothing else: the trees and probabilities are the same.
LIGHTGBM_VERBOSITY = ("verbose", "verbosity")


def _is_lightgbm(cls: type) -> bool:
    """Whether ``cls`` is one of LightGBM's scikit-learn estimators (a subclass of ``lightgbm.LGBMModel``)."""
    base = getattr(sys.modules.get("lightgbm.sklearn"), "LGBMModel", None)  # imported if cls is one
    return base is not None and issubclass(cls, base)


def _check_params(est: BaseEstimator, name: str) -> None:
    """The estimator's own parameter checks (types and ranges), run before any data is read.

    scikit-learn estimators declare their parameters' constraints and check them at fit;
    running that check here turns e.g. ``alpha: abc`` into exit 2 before work starts, where
    an engine reading the parameter first would otherwise crash (exit 3).
    """
    validate = getattr(est, "_validate_params", None)
    if validate is None or not hasattr(est, "_parameter_constraints"):
        return
    try:
        validate()
    except (ValueError, TypeError) as exc:
        detail = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
        detail = detail if len(detail) <= 300 else detail[:300] + "..."
        raise InputError(f"model.params of '{name}': {detail}") from None


class DomainEncoder(TransformerMixin, BaseEstimator):
    """Stateless ordinal encoder over fixed domains: categories, bin edges or numeric values.

    ``domains`` holds one ``(kind, values, has_missing)`` triple per input column:
    ``("categories", values)`` maps a value to its index in ``values``; ``("edges", e)``
    maps a number to ``searchsorted(e, x, side="right")`` (bin 0 is below the first edge);
    an empty cell gets the code after the last. Fitting learns nothing, so removing a
    record from T never changes the encoding.
    """

    def __init__(self, domains: tuple = ()) -> None:
        self.domains = domains

    def fit(self, X: Any, y: Any = None) -> DomainEncoder:
        self.n_features_in_ = len(self.domains)
        return self

    def n_codes(self) -> list[int]:
        """How many codes each column can take."""
        out = []
        for kind, values, has_missing in self.domains:
            n = len(values) + 1 if kind == "edges" else len(values)
            out.append(n + int(has_missing))
        return out

    def transform(self, X: Any) -> np.ndarray:
        frame = X if isinstance(X, pd.DataFrame) else pd.DataFrame(X)
        out = np.empty((len(frame), len(self.domains)), dtype=np.int64)
        batched = _numeric_category_codes(frame, self.domains)
        for j, (kind, values, _has_missing) in enumerate(self.domains):
            if j in batched:
                codes, missing = batched[j]
            elif kind == "edges":
                x = frame.iloc[:, j].to_numpy(dtype=float)
                codes = np.searchsorted(np.asarray(values, dtype=float), x, side="right")
                missing = np.isnan(x)
            else:
                codes, missing = _category_codes(frame.iloc[:, j], values)
            if kind != "edges":
                unknown = (codes < 0) & ~missing
                if unknown.any():
                    bad = frame.iloc[:, j][unknown].iloc[0]
                    raise InputError(
                        f"column '{frame.columns[j]}': value {ui.quoted(bad)} is not in the column's domain "
                        "(the values of the input CSV)"
                    )
            if missing.any():
                codes = np.where(missing, len(values) + (kind == "edges"), codes)
            out[:, j] = codes
        return out


def _numeric_category_codes(frame: pd.DataFrame, domains: tuple) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Codes and missing masks of the category columns held as plain NumPy numbers (:func:`_category_codes`).

    Columns of one NumPy dtype whose categories are equal are looked up together, in one call: a wide
    data set (thousands of 0/1 columns) otherwise pays pandas' per-call overhead per column per transform
    (issue 25). Same lookup, same codes: only the number of calls differs.
    """
    groups: dict[tuple, tuple[pd.Index, list[int]]] = {}  # the Index held here, so its id stays its own
    for j, ((kind, values, _), dtype) in enumerate(zip(domains, frame.dtypes, strict=False)):
        if kind == "categories" and isinstance(dtype, np.dtype) and dtype.kind in "biuf":
            index = _category_index(tuple(values))
            groups.setdefault((id(index), dtype), (index, []))[1].append(j)
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for index, js in groups.values():
        block = frame.iloc[:, js].to_numpy()
        codes = index.get_indexer_for(block.ravel(order="F")).astype(np.int64).reshape(block.shape, order="F")
        missing = pd.isna(block)
        for k, j in enumerate(js):
            out[j] = codes[:, k], missing[:, k]
    return out


def _category_codes(col: pd.Series, categories: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(``pd.Categorical(col, categories).codes``, ``col.isna()``) as numpy arrays.

    Numbers, booleans and dates: the lookup pandas does (``Categorical`` validates the categories into an
    Index and calls its ``get_indexer_for``), with that Index built once per domain (:func:`_category_index`)
    instead of once per column per transform (issue 25: a 2,600-column categorical NB spent most of its time
    there). Text: each distinct value is looked up once (``pd.factorize``, pandas' own equality), and the
    codes of a column that cannot change are kept while it lives (:func:`mptool.inputs.memo.category_codes`):
    a naive Bayes audit encodes T six times, the 1.41 M military records' text once (issue 28).
    """
    if col.dtype.kind in "biufcmM":  # numbers, booleans, dates: pandas' lookup is fast already
        return _category_index(tuple(categories)).get_indexer_for(col).astype(np.int64), col.isna().to_numpy()
    return category_codes(col, categories)


def _category_index(categories: tuple) -> pd.Index:
    """The categories as ``pd.Categorical`` validates them (``CategoricalDtype(...).categories``), cached.

    The cache key holds each category's type beside its value, so that equal values of other types
    (``1``, ``1.0``, ``True``) never share an Index.
    """
    try:
        return _cached_category_index((categories, tuple(map(type, categories))))
    except TypeError:  # an unhashable category: no cache
        return pd.CategoricalDtype(list(categories)).categories


def category_positions(values: Any, categories: Any) -> np.ndarray:
    """``pd.Categorical(values, categories=categories).codes`` as int64, -1 for a value outside the categories.

    The lookup ``Categorical`` does, without its path for values outside the categories (deprecated in
    pandas 3, an error in pandas 4): here they are simply -1, which every caller checks.
    """
    return _category_index(tuple(categories)).get_indexer_for(values).astype(np.int64)


@functools.lru_cache(maxsize=8192)
def _cached_category_index(key: tuple) -> pd.Index:
    return pd.CategoricalDtype(list(key[0])).categories


def _categorical_domains(spec: Spec, schema: Schema) -> tuple:
    domains = []
    for c in schema.columns:
        if c.kind == "categorical":
            domains.append(("categories", tuple(c.categories or ()), False))
        elif c.name in spec.model.bins:
            domains.append(("edges", tuple(spec.model.bins[c.name]), c.has_missing))
        else:
            if c.name in spec.data.numeric:
                raise InputError(
                    f"data.numeric lists column '{c.name}', but categorical_nb needs categories: give it "
                    "model.bins edges, move it to data.categorical, or choose gaussian_nb"
                )
            if c.values is None:
                raise InputError(
                    f"column '{c.name}' is numeric with more than 1000 distinct values; categorical_nb "
                    "treats each value as a category: give it bin edges under model.bins or drop it"
                )
            domains.append(("categories", c.values, c.has_missing))
    return tuple(domains)


def column_uses(spec: Spec, schema: Schema, choice: EstimatorChoice) -> list[tuple[str, str, str]]:
    """How A uses each feature column: (name, use, why), the table ``mptool check`` prints.

    ``use`` is ``categories``, ``binned`` (``model.bins``), ``numbers`` or, for categorical
    naive Bayes under ``preprocess: auto``, ``value categories``: a numeric column none of
    ``model.bins``, ``data.categorical`` or ``data.numeric`` names, each distinct value a
    category (see :func:`kind_notes`).
    """
    from sklearn.naive_bayes import CategoricalNB

    cat_nb = issubclass(choice.cls, (CategoricalNB, DPCategoricalNB)) and spec.model.preprocess == "auto"
    out = []
    for c in schema.columns:
        if c.kind == "categorical":
            out.append((c.name, "categories", f"{c.why}, {len(c.categories or ())} values"))
        elif c.name in spec.model.bins:
            out.append((c.name, "binned", f"{c.why}, model.bins: {len(spec.model.bins[c.name]) + 1} bins"))
        elif cat_nb:
            n = "more than 1000" if c.values is None else str(len(c.values))
            out.append((c.name, "value categories", f"{c.why}, categorical_nb: each of its {n} values a category"))
        else:
            out.append((c.name, "numbers", c.why if spec.model.preprocess == "none" else f"{c.why}, scaled on T"))
    return out


#: scikit-learn 1.9 and 1.10 deprecate SVC's and NuSVC's ``probability`` (removed in 1.11) and warn with this
#: FutureWarning on every fit where it is set at all; the spec's own ``probability: true`` is the only way those
#: releases give such a model predict_proba. :func:`fit` mutes exactly this message (each fit inside
#: ``warnings.catch_warnings`` re-armed Python's once-per-place rule: two lines per refit, hundreds per audit)
#: and :func:`kind_notes` says it once instead.
SVC_PROBABILITY_DEPRECATION = r"The `probability` parameter was deprecated"


def _deprecated_probability(choice: EstimatorChoice) -> bool:
    """Whether the spec sets ``probability`` of a class whose default is scikit-learn's "deprecated" marker."""
    if "probability" not in choice.params:
        return False
    try:
        return choice.cls().get_params(deep=False).get("probability") == "deprecated"
    except TypeError:  # resolve_estimator refuses classes that cannot be built without arguments
        return False


def kind_notes(spec: Spec, schema: Schema, choice: EstimatorChoice) -> list[str]:
    """Notes on A where it is not plain (never silent): numeric columns categorical naive Bayes uses as categories
    of their values; a ``probability`` parameter scikit-learn deprecates (:data:`SVC_PROBABILITY_DEPRECATION`)."""
    out = []
    if _deprecated_probability(choice):
        out.append(
            f"model.params.probability of {choice.cls.__name__} is deprecated in scikit-learn 1.9 and removed in "
            f"1.11, where {choice.cls.__name__} has no predict_proba and mptool refuses it; scikit-learn's "
            "warning is not repeated on each fit"
        )
    silent = [name for name, use, why in column_uses(spec, schema, choice) if use == "value categories"]
    if silent:
        out.append(
            f"categorical_nb uses numeric column(s) {ui.listing(silent, 5)} as categories of their values; "
            "list them in data.categorical to confirm, or give model.bins edges"
        )
    return out


def build_pipeline(spec: Spec, schema: Schema, choice: EstimatorChoice) -> Pipeline:
    """Build the unfitted pipeline A for ``spec``: preprocessing (per ``model.preprocess``) + estimator.

    - ``none``: columns used as they are (numeric), a median imputer where cells are empty.
    - ``auto`` with CategoricalNB: every column ordinal-encoded over its fixed domain
      (categories, ``model.bins`` edges, or a numeric column's distinct values), and
      ``min_categories`` set to the domain sizes so Laplace smoothing counts every value.
    - ``auto`` otherwise: categoricals and binned numerics one-hot over their fixed
      domains; other numerics median-imputed where needed and standardised (min-max scaled
      into [0, 1] for MultinomialNB, which needs non-negative inputs; for k-NN by
      :class:`~mptool.inputs.neighbors.OrderFreeStandardScaler`, independent of T's row order).
    """
    from sklearn.naive_bayes import CategoricalNB, MultinomialNB

    est = choice.make()
    names = schema.names
    if isinstance(est, DPCategoricalNB):
        return _dp_categorical_pipeline(spec, schema, est)
    if spec.model.preprocess == "none":
        if isinstance(est, CategoricalNB) and "min_categories" not in spec.model.params:
            # Codes are the column values themselves: count every value up to the CSV's maximum,
            # so T \ {t} lacking the largest value neither shrinks the smoothing nor breaks predict.
            est.set_params(min_categories=np.asarray([int(max(c.maximum or 0, 0)) + 1 for c in schema.columns]))
        steps: list[Any] = []
        if any(c.has_missing for c in schema.columns):
            steps.append(_median_imputer())
        return make_pipeline(*steps, est)
    if isinstance(est, CategoricalNB):
        enc = DomainEncoder(_categorical_domains(spec, schema))
        if "min_categories" not in spec.model.params:
            est.set_params(min_categories=np.asarray(enc.n_codes()))
        pre = ColumnTransformer([("domain", enc, names)])
        return Pipeline([("pre", pre), ("clf", est)])
    parts: list[tuple[str, Any, list[str]]] = []
    cats = [c for c in schema.columns if c.kind == "categorical"]
    if cats:
        onehot = OneHotEncoder(
            categories=[list(c.categories or ()) for c in cats], handle_unknown="ignore", sparse_output=False
        )
        parts.append(("onehot", onehot, [c.name for c in cats]))
    binned = [c for c in schema.columns if c.kind == "numeric" and c.name in spec.model.bins]
    if binned:
        enc = DomainEncoder(tuple(("edges", tuple(spec.model.bins[c.name]), c.has_missing) for c in binned))
        onehot = OneHotEncoder(
            categories=[list(range(n)) for n in enc.n_codes()], handle_unknown="ignore", sparse_output=False
        )
        parts.append(("bins", make_pipeline(enc, onehot), [c.name for c in binned]))
    nums = [c for c in schema.columns if c.kind == "numeric" and c.name not in spec.model.bins]
    if nums:
        # k-NN: a scaler fitted in a canonical row order, so identical records' T \\ {t} scale alike (its ties
        # are exact comparisons of distances; mptool.inputs.neighbors)
        scaler = (MinMaxScaler(clip=True) if isinstance(est, MultinomialNB) else OrderFreeStandardScaler()
                  if isinstance(est, TieStableKNeighborsClassifier) else StandardScaler())
        steps = [_median_imputer()] if any(c.has_missing for c in nums) else []
        parts.append(("numeric", make_pipeline(*steps, scaler), [c.name for c in nums]))
    return Pipeline([("pre", ColumnTransformer(parts, sparse_threshold=0.0)), ("clf", est)])


def _dp_categorical_pipeline(spec: Spec, schema: Schema, est: DPCategoricalNB) -> Pipeline:
    """DP categorical naive Bayes with its public domain from the schema, never from T (mptool.inputs.dp_nb).

    ``preprocess: auto``: the fixed-domain encoder of categorical naive Bayes, its code counts
    as ``n_categories``; ``none``: codes are the column values, 0 up to the CSV's maximum (an
    empty cell is refused: the domain has no code for it). ``classes`` is the label's values in
    the CSV. Parameters the spec gives itself are kept.
    """
    given = spec.model.params
    if "classes" not in given:
        est.set_params(classes=tuple(schema.classes))
    if spec.model.preprocess == "none":
        _dp_domain(est, given, [int(max(c.maximum or 0, 0)) + 1 for c in schema.columns])
        return make_pipeline(est)
    enc = DomainEncoder(_categorical_domains(spec, schema))
    _dp_domain(est, given, enc.n_codes())
    return Pipeline([("pre", ColumnTransformer([("domain", enc, schema.names)])), ("clf", est)])


def _dp_domain(est: DPCategoricalNB, given: dict[str, Any], sizes: list[int]) -> None:
    """Set ``n_categories`` to the schema's domain sizes; a spec's own must cover them (InputError if not)."""
    if "n_categories" not in given:
        est.set_params(n_categories=tuple(sizes))
        return
    own = list(np.asarray(given["n_categories"], dtype=object).ravel())
    if len(own) != len(sizes) or any(int(a) < b for a, b in zip(own, sizes, strict=False)):
        raise InputError(
            f"model.params.n_categories must give one size per feature column ({len(sizes)}), each at least "
            f"the column's domain ({', '.join(map(str, sizes))}); leave it out to use the domain"
        )


def _median_imputer() -> Any:
    """scikit-learn's median imputer (imported here: sklearn.impute pulls in k-NN and more, issue 28)."""
    from sklearn.impute import SimpleImputer

    return SimpleImputer(strategy="median")


def dp_domain_problem(spec: Spec, schema: Schema) -> str | None:
    """Why ``dp_categorical_nb``'s domain under ``spec`` is not public (None: every part is declared in the spec).

    DTP <= epsilon (Long et al. Def. 4.1 via the Laplace mechanism, :mod:`mptool.inputs.dp_nb`)
    holds for a domain fixed without looking at T. Declared: ``model.params.classes`` (the class
    set) and, per feature, ``model.params.n_categories`` under ``preprocess: none`` (codes are the
    values) or ``model.bins`` edges under ``auto``. Anything else -- a column's categories or
    distinct values, the label's values -- is read from the data file, which with
    ``train_size: null`` is T itself, and a category only t has then changes the model's shape.
    Bin edges are taken as declared: edges computed from the data (``mptool init``'s quantiles)
    are not public either, which mptool cannot see.
    """
    params = spec.model.params
    read = "T itself (train_size null)" if spec.data.train_size is None else "the data file, which holds T"
    if "classes" not in params:
        return f"the class set is read from {read}; declare model.params.classes"
    if spec.model.preprocess == "none":
        return None if "n_categories" in params else (
            f"the category codes are read from {read}; declare model.params.n_categories")
    undeclared = [c.name for c in schema.columns if c.kind != "numeric" or c.name not in spec.model.bins]
    if undeclared:
        return (f"the categories of {ui.listing(undeclared, 3)} are read from {read}; declare the domain "
                "(preprocess: none with model.params.n_categories, or model.bins edges)")
    return None


def classes_t_lacks(template: Any, classes: np.ndarray) -> int:
    """How many classes of a DP estimator's public class set are not among T's ``classes`` (0 otherwise).

    mptool's outputs are columns of T's classes; ``dp_categorical_nb`` outputs a probability for
    every label value of the CSV (its public class set), so a class T lacks has no column.
    """
    est = template.steps[-1][1] if isinstance(template, Pipeline) else template
    if not isinstance(est, DPCategoricalNB) or est.classes is None:
        return 0
    return len(set(list(est.classes)) - set(np.asarray(classes).tolist()))


def check_public_classes(template: Any, classes: np.ndarray) -> None:
    """Refuse (exit 2) a DP estimator whose public class set has a class T lacks (:func:`classes_t_lacks`)."""
    if (k := classes_t_lacks(template, classes)) > 0:
        raise InputError(
            f"dp_categorical_nb: {k} class(es) of its public class set (model.params.classes, else every label "
            "value of the data file) are not in T, and mptool reports T's classes: draw a larger T "
            "(data.train_size), drop those rows or leave them out of model.params.classes"
        )


def model_numerics() -> np.errstate:
    """The floating-point error state of a user's model at work (``with model_numerics(): model.fit(...)``).

    numpy's divide/overflow/invalid RuntimeWarnings inside an estimator's fit or predict (GaussianNB on a
    feature constant in T divides by a zero variance) print two lines each per call, hundreds in a refit
    loop, before mptool's own line naming the cause ("non-finite probabilities for CSV row ..."). Muted here
    only, with :class:`numpy.errstate` (per thread, restored on exit; nothing process-wide), so the warnings
    of a user's own code around the API still show (red2-18; docs/spec.md).
    """
    return np.errstate(all="ignore")


def _fit_filters() -> None:
    """Install the warning filters every fit runs under (held by ``signals.fit_filters``)."""
    warnings.simplefilter("ignore", ConvergenceWarning)
    warnings.simplefilter("ignore", UserWarning)
    warnings.filterwarnings("ignore", message=SVC_PROBABILITY_DEPRECATION, category=FutureWarning)


# Held once per process while any fit runs, in any thread (signals.fit_filters, entered by guard_fit), and by the
# dispatching thread for a whole threading or in-process Dask dispatch (runtime.parallel).
signals.FIT_FILTERS.append(_fit_filters)


def fit(template: Pipeline | ClassifierMixin, X: pd.DataFrame, y: np.ndarray) -> Any:
    """Fit a fresh clone of ``template`` (never the template itself); convergence warnings are muted, numpy's
    floating-point ones (:func:`model_numerics`) and SVC's deprecated ``probability`` (noted once instead).

    A fit cut short by an interrupt raises ``signals.Interrupted`` rather than returning a
    half-trained model (``signals.guard_fit``: scikit-learn's MLP swallows KeyboardInterrupt).
    """
    model = clone(template)
    est = model.steps[-1][1] if isinstance(model, Pipeline) else model
    coded = _label_codes(y) if type(est).__name__ in _CLASSES_ONLY and type(est).__module__ == "sklearn.naive_bayes" \
        else None
    with model_numerics(), signals.guard_fit():  # the fit filters, held while any fit in any thread runs
        if coded is None:
            model.fit(X, labels_for_fit(y))
        else:
            model.fit(X, coded[0])
            est.classes_ = coded[1]
    return model


#: scikit-learn's naive Bayes classifiers keep nothing of the labels but ``classes_`` (their order fixes every
#: other fitted array), so a fit on each label's index in the sorted classes is the same model once ``classes_``
#: is set back to the labels (tests/test_mil_fast.py compares every fitted attribute).
_CLASSES_ONLY = frozenset({"CategoricalNB", "GaussianNB", "MultinomialNB", "BernoulliNB", "ComplementNB"})


def _label_codes(y: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(each label's index in the sorted classes, the sorted classes as scikit-learn lists them) for text labels.

    The classes are ``np.unique(labels_for_fit(y))`` -- the same text array, same order and type --
    computed over the distinct labels only; sorting 1.41 M text labels (three times per naive Bayes
    fit) cost 1 CPU s of the military audit (issue 28). None where :func:`labels_for_fit` would pass
    ``y`` unchanged (labels that are not all plain text).
    """
    arr = np.asarray(y)
    if arr.dtype != object or arr.ndim != 1 or len(arr) == 0:
        return None
    codes, uniques = factorized(arr)
    distinct = list(np.asarray(uniques, dtype=object).tolist())
    if (codes < 0).any() or not all(type(v) is str and not v.endswith("\x00") for v in distinct):
        return None
    text = np.asarray(distinct, dtype=str)
    order = np.argsort(text, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], text[order]


def labels_for_fit(y: np.ndarray) -> np.ndarray:
    """``y`` as handed to the estimator's ``fit``: text labels as a numpy text array, the same values in order.

    scikit-learn sorts the labels several times per fit (``np.unique`` in ``type_of_target``, the
    label binarizer); on an object array every comparison is a Python call (5 CPU s of the 1.41 M
    military labels' fit, issue 28), on a fixed-width text array a memory compare. Text sorts the
    same either way (by code point), so ``classes_`` lists the same labels in the same order. Only
    when every label is a ``str`` (not a subclass) without a trailing NUL (numpy's text type drops
    those); anything else is passed unchanged.
    """
    arr = np.asarray(y)
    if arr.dtype != object or arr.ndim != 1:
        return y
    codes, uniques = pd.factorize(arr, use_na_sentinel=True)
    distinct = list(np.asarray(uniques, dtype=object).tolist())
    if (codes < 0).any() or not all(type(v) is str and not v.endswith("\x00") for v in distinct):
        return y
    return np.asarray(distinct, dtype=str)[codes] if distinct else y


def proba_in(model: Any, X: pd.DataFrame, classes: np.ndarray) -> np.ndarray:
    """``predict_proba`` with columns in the order of ``classes``; a class the model never saw gets 0.

    ValueError (a refit's failure, exit 2) when the model's ``classes_`` is missing, names a class
    outside ``classes`` or does not match the width of ``predict_proba``'s output.
    """
    with model_numerics():
        p = np.asarray(model.predict_proba(X), dtype=float)
    seen = list(getattr(model, "classes_", None) if getattr(model, "classes_", None) is not None else ())
    if p.ndim != 2 or p.shape != (len(X), len(seen)):
        raise ValueError(f"predict_proba gave shape {p.shape} for {len(X)} row(s) and {len(seen)} classes_")
    if len(seen) == len(classes) and all(a == b for a, b in zip(seen, classes, strict=True)):
        return p
    pos = {c: i for i, c in enumerate(classes)}
    if any(c not in pos for c in seen) or len(set(seen)) != len(seen):
        raise ValueError("the fitted model's classes_ are not among the training labels")
    out = np.zeros((p.shape[0], len(classes)))
    for j, c in enumerate(seen):
        out[:, pos[c]] = p[:, j]
    return out


def check_interface(model: Any, X: pd.DataFrame, y: np.ndarray) -> str | None:
    """What a model fitted on (X, y) lacks of the classifier interface mptool uses, or None.

    Checked once, on A(T), before any refit: ``classes_`` listing every class of ``y`` once,
    ``predict_proba`` giving one row per record (non-finite values are refused where they are
    met, naming the record) and one column per class of ``classes_``,
    and ``predict`` giving one of those classes per record. Only the first record is asked.
    """
    est = model.steps[-1][1] if isinstance(model, Pipeline) else model
    name = type(est).__name__
    classes = getattr(est, "classes_", None)
    if classes is None:
        return f"{name} fitted on T has no classes_"
    labels = set(np.asarray(y, dtype=object).tolist())
    try:
        listed = list(np.asarray(classes, dtype=object).ravel().tolist())
        if len(set(listed)) != len(listed) or not labels <= set(listed):
            return f"{name}'s classes_ ({len(listed)}) do not list each of the {len(labels)} classes it was fitted on"
    except TypeError:
        return f"{name}'s classes_ is not a list of classes"
    for method in ("predict_proba", "predict"):
        if not callable(getattr(model, method, None)):
            return f"{name} fitted on T has no {method} method"
    try:
        with model_numerics():
            p = np.asarray(model.predict_proba(X.iloc[:1]), dtype=float)
            pred = np.asarray(model.predict(X.iloc[:1]), dtype=object).ravel()
    except (AttributeError, ValueError, TypeError, IndexError, KeyError) as exc:
        return f"{name} fitted on T fails to predict: {exc.__class__.__name__}"
    if p.shape != (1, len(listed)):  # non-finite values have their own refusal, naming the record (fit_checked)
        return f"{name}.predict_proba gives shape {p.shape} for 1 record and {len(listed)} classes_"
    if pred.shape != (1,) or pred[0] not in labels:
        return f"{name}.predict does not give one class of classes_ per record"
    return None
