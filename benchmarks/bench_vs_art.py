"""mptool's membership attacks side by side with IBM ART's on identical target models (issue 21 item 3).

Both tools attack the same fitted target models, on the same members and non-members, and
see the same binned outputs:

- Protocol (Long et al. 5.4), run by mptool's own phase functions (mptool.attacks.protocol):
  ``draw_candidates`` draws the candidate set D (``--candidates`` Adult rows) and the targets;
  in each of ``--iterations`` iterations D is split into halves D1, D2 and ``train_targets``
  fits A(D1) and A(D2) with the spec's pipeline and seed. Every target is attacked under both
  models: a member of one, a non-member of the other.
- ART gets the identical fitted models: the benchmark refits A(D1), A(D2) with mptool's ``fit``
  and checks that their binned outputs on every target equal, bit for bit, the ones mptool
  attacks. Each model is wrapped as ART's ``ScikitlearnClassifier`` around a small scikit-learn
  estimator whose ``predict_proba`` returns mptool's BINNED probabilities (the release, 0.01
  bins). ART passes numeric arrays while mptool's pipeline reads the Adult DataFrame
  (categoricals), so the wrapper's single input column is the record's position in D; ART's
  black-box attacks use only the outputs and the labels, never x itself.
- Attacks. mptool: every attack of ``mptool attack --shadow-pool K`` (the untargeted,
  threshold, distance, frequency and LiRA attacks; K shadow models on random halves of D).
  ART 1.20: ``MembershipInferenceBlackBoxRuleBased`` (member iff the prediction is right);
  ``MembershipInferenceBlackBox(attack_model_type='rf')`` trained supervised on the target
  model itself (see below); and ``ShadowModels`` (K shadow models, each on a random half of
  the same D, ``member_ratio`` 0.5: the data and budget of mptool's pool) feeding the same
  black-box random-forest attack. ART's random forests are seeded from the spec's seed (only
  ``random_state`` is set on the forest ART builds); ShadowModels gets ``random_state`` = seed.
- What the supervised attack was given: ART's ``MembershipInferenceBlackBox.fit`` needs records
  labelled member / non-member OF THE ATTACKED MODEL. It gets the attacked model's binned
  outputs on half of the targets with their true membership, and scores the other half
  (two-fold cross-fitting over the targets, folds seeded; every target is scored by an attack
  that never saw its label). No mptool attack knows any target model's membership: they learn
  only from their own shadow models. The supervised row is therefore an attacker with more
  knowledge than the audit assumes; it is shown as ART offers it.
- Scores: ART's member probability (``infer(..., probabilities=True)``) for the two random-forest
  attacks; the rule-based attack returns a 0/1 decision, whose ROC has a single corner.
  Metrics of both tools come from the same function (mptool.attacks.metrics.binary_metrics):
  AUC and TPR at 1% / 0.1% FPR over every attempt, with a 95% bootstrap interval over targets
  on TPR at 1% FPR (mptool.attacks.intervals; mptool's rows drawn as ``mptool attack`` draws
  them for attack.json, ART's rows with tags of their own; all from the spec's seed).
- Seconds: each attack's own time, including the shadow models it needs (mptool's pool, shared
  by its attacks, is counted in each of them; ART's ShadowModels in its shadow attack); the
  target models are shared and not counted. Everything runs single-threaded (BLAS limited to
  one thread, ``--jobs`` processes for mptool's fits, default 1 so both tools fit sequentially).

ART is not an mptool dependency: ``pip install '.[peers]'`` (adversarial-robustness-toolbox,
no torch needed for these attacks). Without it the benchmark exits with code 2 and says so.

Run: ``python benchmarks/bench_vs_art.py [--configs adult-nn,adult-lr --candidates 2000
--targets 2000 --iterations 2 --shadows 16 --jobs 1]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin
from threadpoolctl import threadpool_limits

from mptool.attacks import ATTACK_CHOICES, RESULT_NAMES
from mptool.attacks.intervals import TAG_BOOTSTRAP, bootstrap_intervals
from mptool.attacks.metrics import binary_metrics
from mptool.attacks.protocol import AttackOptions
from mptool.attacks.protocol.adapters import attack_lira, attack_threshold, attack_untargeted, per_target_attack
from mptool.attacks.protocol.draw import Draw, draw_candidates
from mptool.attacks.protocol.evidence import Evidence, gather_evidence
from mptool.attacks.protocol.state import Run
from mptool.attacks.protocol.targets import TargetOutputs, train_targets
from mptool.attacks.shadows import rng_for
from mptool.attacks.targeted import distance, frequency
from mptool.inputs.bundled import ADULT_CSV, config
from mptool.inputs.models import fit, proba_in
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import load_spec
from mptool.privacy.calibration import bin_probabilities

#: Seed tags of this benchmark's own draws (the folds of ART's supervised attack, its forests).
TAG_FOLDS, TAG_FOREST = 201, 202

Scored = tuple[np.ndarray, np.ndarray]


@contextlib.contextmanager
def _quiet(total: int, label: str):
    yield lambda n: None


class RowsOfD(ClassifierMixin, BaseEstimator):
    """mptool's pipeline, addressed by row position in D, releasing binned probabilities.

    ART hands estimators numeric arrays; mptool's pipeline reads the data frame (categoricals,
    one-hot encoded inside). Column 0 of ``x`` is a position in ``frame``; ``fit`` fits a clone of
    ``template`` with mptool's ``fit`` on those rows (labels as class indices into ``classes``),
    ``predict_proba`` returns mptool's release: ``proba_in`` binned at ``bin_size``.
    """

    def __init__(
        self,
        template: Any = None,
        frame: pd.DataFrame | None = None,
        classes: np.ndarray | None = None,
        bin_size: float = 0.01,
    ) -> None:
        self.template = template
        self.frame = frame
        self.classes = classes
        self.bin_size = bin_size

    @property
    def n_classes_(self) -> int:
        """Known before fitting (ART's ScikitlearnClassifier reads it from an unfitted template)."""
        return 0 if self.classes is None else len(self.classes)

    def _rows(self, x: np.ndarray) -> pd.DataFrame:
        assert self.frame is not None
        return self.frame.iloc[np.asarray(x)[:, 0].astype(np.int64)]

    def fit(self, x: np.ndarray, y: np.ndarray) -> RowsOfD:
        assert self.classes is not None
        self.model_ = fit(self.template, self._rows(x), self.classes[np.asarray(y, dtype=np.int64)])
        self.classes_ = np.arange(len(self.classes))
        self.n_features_in_ = 1
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return bin_probabilities(proba_in(self.model_, self._rows(x), self.classes), self.bin_size)

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.predict_proba(x).argmax(axis=1)

    @classmethod
    def wrap(cls, model: Any, frame: pd.DataFrame, classes: np.ndarray, bin_size: float) -> RowsOfD:
        """An already fitted mptool model (the target model itself), not refitted."""
        out = cls(None, frame, classes, bin_size)
        out.model_, out.classes_, out.n_features_in_ = model, np.arange(len(classes)), 1
        return out


def load_art() -> dict[str, Any] | None:
    """ART's classes used here, or None when adversarial-robustness-toolbox is not installed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "PyTorch not found ..." from art.estimators.certification
            import art
            from art.attacks.inference.membership_inference import (
                MembershipInferenceBlackBox,
                MembershipInferenceBlackBoxRuleBased,
                ShadowModels,
            )
            from art.estimators.classification.scikitlearn import ScikitlearnClassifier
    except ImportError:
        return None
    return {
        "version": art.__version__,
        "BlackBox": MembershipInferenceBlackBox,
        "RuleBased": MembershipInferenceBlackBoxRuleBased,
        "ShadowModels": ShadowModels,
        "Classifier": ScikitlearnClassifier,
    }


# ---------------------------------------------------------------------------- mptool


def mptool_attacks(run: Run, draw: Draw, targets: TargetOutputs) -> dict[str, tuple[Scored, float]]:
    """Every mptool attack with its seconds (its own time plus the shared shadow pool's)."""
    t0 = time.perf_counter()
    evidence: Evidence = gather_evidence(run, draw)
    pool_s = time.perf_counter() - t0
    out: dict[str, tuple[Scored, float]] = {}
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("untargeted", lambda: attack_untargeted(run, draw, targets, evidence)[0]),
        ("threshold", lambda: attack_threshold(run, draw, targets, evidence)[0]),
        ("distance", lambda: per_target_attack(distance, targets, evidence)),
        ("frequency", lambda: per_target_attack(frequency, targets, evidence)),
        ("lira", lambda: attack_lira(draw, targets, evidence, run.bin_size)[:2]),
    ]
    for name, step in steps:
        t0 = time.perf_counter()
        result = step()
        secs = time.perf_counter() - t0 + pool_s
        if name == "lira":  # online and offline LiRA come from one fit of the Gaussians
            out["lira"], out["lira_offline"] = (result[0], secs), (result[1], secs)
        else:
            out[name] = (result, secs)
    return out


# ---------------------------------------------------------------------------- ART


def target_classifiers(run: Run, draw: Draw, targets: TargetOutputs, art: dict[str, Any]) -> list[list[Any]]:
    """A(D1), A(D2) of every iteration refitted as mptool fits them, wrapped for ART; refuses to go on
    unless ART's view of each model on the targets equals the binned outputs mptool attacked."""
    D, x_t = draw.D, positions(draw.tpos)
    out = []
    for i, first in enumerate(draw.in_first):
        pair = []
        for h, half in enumerate((first, ~first)):
            model = fit(run.prep.template, D.X.iloc[np.flatnonzero(half)], D.y[half])
            clf = art["Classifier"](model=RowsOfD.wrap(model, D.X, draw.classes, run.bin_size))
            if not np.array_equal(clf.predict(x_t), targets.q[i, h]):
                raise SystemExit(f"bench_vs_art: target model {i}/{h} differs from mptool's; not comparable")
            pair.append(clf)
        out.append(pair)
    return out


def positions(pos: np.ndarray) -> np.ndarray:
    """Rows of D as ART's input array: one column, the position."""
    return np.asarray(pos, dtype=np.float64).reshape(-1, 1)


def seeded_forest(attack: Any, seed: int, *keys: int) -> Any:
    """ART's own default random forest, with only its random_state set (reproducible runs)."""
    attack.attack_model.set_params(random_state=int(rng_for(seed, TAG_FOREST, *keys).integers(2**31 - 1)))
    return attack


def art_rule_based(classifiers: list[list[Any]], draw: Draw, art: dict[str, Any]) -> Scored:
    """ART's rule-based attack: member iff the target model predicts the record's label."""
    x_t, y_t = positions(draw.tpos), draw.target_y
    dec = np.array([[art["RuleBased"](clf).infer(x_t, y_t) for clf in pair] for pair in classifiers])
    dec = dec.reshape(len(classifiers), 2, -1).astype(bool)
    return dec.astype(float), dec


def art_supervised(classifiers: list[list[Any]], draw: Draw, targets: TargetOutputs, seed: int, art: dict) -> Scored:
    """ART's black-box attack (random forest) trained on the attacked model's outputs on one fold of
    the targets with their true membership, scoring the other fold (two-fold cross-fitting)."""
    n = len(draw.tpos)
    fold = np.zeros(n, dtype=bool)
    fold[rng_for(seed, TAG_FOLDS).permutation(n)[: n // 2]] = True
    x_t, y_t = positions(draw.tpos), draw.target_y
    score = np.empty(targets.member.shape)
    for i, pair in enumerate(classifiers):
        for h, clf in enumerate(pair):
            member = targets.member[i, h]
            for f, test in enumerate((fold, ~fold)):
                train = ~test
                attack = seeded_forest(art["BlackBox"](clf, attack_model_type="rf"), seed, i, h, f)
                m, nm = train & member, train & ~member
                attack.fit(x_t[m], y_t[m], x_t[nm], y_t[nm])
                score[i, h, test] = attack.infer(x_t[test], y_t[test], probabilities=True)[:, 0]
    return score, score > 0.5


def art_shadow(classifiers: list[list[Any]], run: Run, draw: Draw, n_shadows: int, art: dict[str, Any]) -> Scored:
    """ART's ShadowModels (n_shadows models, each on a random half of D) feeding its black-box
    random-forest attack, which then scores every target under every target model."""
    k = len(draw.classes)
    template = art["Classifier"](model=RowsOfD(run.prep.template, draw.D.X, draw.classes, run.bin_size))
    shadows = art["ShadowModels"](template, num_shadow_models=n_shadows, random_state=run.seed)
    x_d = positions(np.arange(len(draw.y_idx)))
    (_, y_in, p_in), (_, y_out, p_out) = shadows.generate_shadow_dataset(x_d, np.eye(k)[draw.y_idx], 0.5)
    attack = seeded_forest(art["BlackBox"](classifiers[0][0], attack_model_type="rf"), run.seed)
    attack.fit(y=y_in, test_y=y_out, pred=p_in, test_pred=p_out)
    x_t, y_t = positions(draw.tpos), draw.target_y
    score = np.array(
        [
            [attack.infer(x_t, y_t, pred=clf.predict(x_t), probabilities=True)[:, 0] for clf in pair]
            for pair in classifiers
        ]
    )
    return score, score > 0.5


def art_attacks(
    run: Run, draw: Draw, targets: TargetOutputs, n_shadows: int, art: dict[str, Any]
) -> dict[str, tuple[Scored, float]]:
    """ART's three attacks on the identical target models, each with its seconds."""
    classifiers = target_classifiers(run, draw, targets, art)
    out = {}
    for name, step in (
        ("rule-based", lambda: art_rule_based(classifiers, draw, art)),
        ("black-box rf, supervised", lambda: art_supervised(classifiers, draw, targets, run.seed, art)),
        (f"shadow models ({n_shadows}) + black-box rf", lambda: art_shadow(classifiers, run, draw, n_shadows, art)),
    ):
        t0 = time.perf_counter()
        result = step()
        out[name] = (result, time.perf_counter() - t0)
    return out


# ---------------------------------------------------------------------------- the table


def evaluate(name: str, args: argparse.Namespace, art: dict[str, Any]) -> list[dict[str, Any]]:
    """Both tools on one config: one row per (tool, attack)."""
    spec = load_spec(config(f"{name}.yaml"))
    options = AttackOptions(
        candidates=args.candidates,
        targets=args.targets,
        iterations=args.iterations,
        shadow_pool=args.shadows,
        pdtp_iterations=0,
        jobs=args.jobs,
    )
    run = Run(prepare(ADULT_CSV, spec), options, _quiet, args.jobs, "population", 0.0)
    draw = draw_candidates(run)
    t0 = time.perf_counter()
    targets = train_targets(run, draw)
    fit_s = time.perf_counter() - t0
    print(f"bench_vs_art {name}: {2 * args.iterations} target models in {fit_s:.1f} s", flush=True)
    results = {("mptool", a): r for a, r in mptool_attacks(run, draw, targets).items()}
    print(f"bench_vs_art {name}: mptool done", flush=True)
    results.update(
        {(f"ART {art['version']}", a): r for a, r in art_attacks(run, draw, targets, args.shadows, art).items()}
    )
    names = [r for a in ATTACK_CHOICES for r in RESULT_NAMES[a]]  # mptool attack's order: its bootstrap tags
    rows = []
    for j, ((tool, attack), ((score, decision), secs)) in enumerate(results.items()):
        m = binary_metrics(targets.member, decision, score)
        tag = names.index(attack) if tool == "mptool" else len(names) + j
        ci = bootstrap_intervals(targets.member, decision, score, rng_for(run.seed, TAG_BOOTSTRAP, tag))
        ci = ci["tpr_at_1pct_fpr"]
        rows.append(
            {
                "config": name,
                "tool": tool,
                "attack": attack,
                "auc": m["auc"],
                "tpr1": m["tpr_at_1pct_fpr"],
                "ci": (ci["low"], ci["high"]) if ci.get("estimable") else (float("nan"), float("nan")),
                "tpr01": m["tpr_at_0.1pct_fpr"],
                "accuracy": m["accuracy"],
                "seconds": secs,
            }
        )
    return rows


def table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """Both tools in one Markdown table per config."""
    lines = []
    for name in dict.fromkeys(r["config"] for r in rows):
        lines += [
            f"\n**{name}**, {args.candidates} candidates, {args.targets} targets, {args.iterations} iterations "
            f"({2 * args.iterations * args.targets} attempts per attack), {args.shadows} shadow models per tool\n",
            "| tool | attack | AUC | TPR at 1% FPR [95% CI] | TPR at 0.1% FPR | accuracy | seconds |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in (r for r in rows if r["config"] == name):
            lines.append(
                f"| {r['tool']} | {r['attack']} | {r['auc']:.3f} "
                f"| {r['tpr1']:.3f} [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}] "
                f"| {r['tpr01']:.3f} | {r['accuracy']:.3f} | {r['seconds']:.1f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="adult-nn,adult-lr", help="bundled configs (mptool/configs/NAME.yaml)")
    ap.add_argument("--candidates", type=int, default=2000)
    ap.add_argument("--targets", type=int, default=2000)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--shadows", type=int, default=16, help="mptool's --shadow-pool and ART's num_shadow_models")
    ap.add_argument("--jobs", type=int, default=1, help="mptool's worker processes for its fits")
    args = ap.parse_args(argv)
    art = load_art()
    if art is None:
        print(
            "bench_vs_art: needs IBM ART (adversarial-robustness-toolbox>=1.20), which is not installed; "
            "install it with: pip install '.[peers]'",
            file=sys.stderr,
        )
        return 2
    t0 = time.perf_counter()
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = [r for name in args.configs.split(",") for r in evaluate(name.strip(), args, art)]
    print(table(rows, args))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nbench_vs_art: {time.perf_counter() - t0:.1f} s total; ART {art['version']}; load {load:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
