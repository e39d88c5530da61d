"""``mptool estimators``: every short name with the engine and DTP upper bound it gets, found by the real code.

Each short name is resolved and its pipeline built on a tiny made-up table (one categorical
and one numeric column, preprocess auto, default parameters), then asked which exact
engine accepts it (:func:`mptool.loo.engine_reasons`) and which bound applies
(:func:`mptool.privacy.stability.stability_bound`): the table cannot drift from what runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from mptool.inputs.models import SHORT_NAMES
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import parse_spec
from mptool.loo import engine_reasons
from mptool.privacy.stability import stability_bound


@dataclass(frozen=True)
class EstimatorRow:
    """One line of the catalogue."""

    name: str
    path: str
    engine: str
    bound: str
    note: str


#: Bound kinds in words.
BOUND_WORDS = {
    "stability": "exact per-record bound over the domain (naive Bayes; Long et al. section 6)",
    "lipschitz": "per-block bound from the exact leave-one-out parameters (Long et al. Theorem 6.9)",
    "none": "none: PDTP is a lower bound of DTP only",
}


def _probe_frame() -> pd.DataFrame:
    return pd.DataFrame({
        "c": ["a", "b", "a", "b", "a", "b", "a", "b"],
        "x": [0.0, 1.0, 2.0, 1.0, 0.0, 2.0, 1.0, 0.0],
        "label": ["p", "q", "p", "q", "q", "p", "p", "q"],
    })


def catalogue() -> list[EstimatorRow]:
    """Every short name of :data:`mptool.inputs.models.SHORT_NAMES` with its engine and bound (auto)."""
    rows = []
    frame = _probe_frame()
    for name, (path, _defaults) in SHORT_NAMES.items():
        categorical = ["x"] if name in ("categorical_nb", "dp_categorical_nb") else []
        spec = parse_spec({"data": {"label": "label", "categorical": categorical},
                           "model": {"estimator": name}}, "probe")
        prep = prepare(frame, spec)
        reasons = engine_reasons(spec, prep.template)
        engine = next((e for e, why in reasons if why is None), "refit")
        bound = stability_bound(prep.template, prep.train, prep.classes)
        note = "" if engine != "refit" else "one refit per record"
        words = BOUND_WORDS.get(bound.kind, bound.kind)
        if name.startswith("dp_"):  # the guarantee is over the training noise, which paired seeds hold fixed
            words = ("epsilon-DP: DTP <= epsilon over the training noise for a domain declared in the spec (not read "
                     "from T); paired-seed PDTP measures one draw")
        if name == "decision_tree":  # scikit-learn draws a feature order per split from random_state
            note = ("one refit per record, or replicates when the randomness detection sees the seed matter: the tree "
                    "draws a random feature order at every split, so ties between equally good splits follow the seed")
        if name == "knn":
            note = "exact when numerics are binned or preprocess: none (standardising moves every distance)"
        rows.append(EstimatorRow(name, path, engine, words, note))
    return rows


#: What ``--allow-import`` opens, printed under the table.
ALLOW_IMPORT_TEXT = (
    "Dotted paths: any scikit-learn classifier with predict_proba runs as model.estimator (e.g. "
    "sklearn.ensemble.GradientBoostingClassifier with params {n_estimators: 50}), with the refit engine and no DTP "
    "bound. "
    "Classes outside sklearn need --allow-import MODULE, which runs that module's code: name only packages you trust. "
    "LightGBM (tested): model.estimator lightgbm.LGBMClassifier, --allow-import lightgbm, "
    "params {n_jobs: 1} (one thread: the same trees for any --jobs); random_state is set to the spec's seed. "
    "Only parameters of the class's get_params() are accepted, and LightGBM's verbose/verbosity (mptool sets "
    "verbose -1 unless the spec does: no log line per fit, the same trees); its other pass-through keywords "
    "(deterministic) are refused by name. XGBoost (not tested here: its wheel is large): xgboost.XGBClassifier, "
    "--allow-import xgboost, params {n_jobs: 1, tree_method: exact}; random_state is set to the seed."
)
