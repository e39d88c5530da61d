"""mptool's label-only attacks beside IBM ART's, and what a label-only release buys (issue 29 item 3).

On the bundled Adult configs (NB, LR, NN), with the protocol of ``mptool attack`` (Long et al. 5.4,
run by mptool's own phase functions: ``draw_candidates``, ``train_targets``):

- mptool: ``threshold`` (Yeom's loss threshold, ``--shadows`` general shadows) and ``label_only``
  / ``label_free`` (Choquette-Choo et al. 2021, :mod:`mptool.attacks.label_only`), each run twice:
  with the full (binned) probability vector released, and with the spec's ``output.release:
  {label_only: true}`` (what ``mptool mitigate`` sweeps). The label-only attacks see only labels,
  so their rows are the same under both releases (checked here, bit for bit).
- ART 1.20 on the identical target models of the full release (refitted with mptool's ``fit``;
  :func:`bench_vs_art.target_classifiers` checks ART sees the same binned outputs):
  ``LabelOnlyGapAttack`` (member iff the label is right; a 0/1 score) and
  ``LabelOnlyDecisionBoundary`` (HopSkipJump's distance to the decision boundary; its threshold
  from ART's ``calibrate_distance_threshold_unsupervised``, seeded through numpy's global seed
  from the spec's seed; the score is the distance itself). The boundary attack needs a numeric
  input space: it runs on the pipeline's encoded features (one-hot and standardised columns) with
  the fitted pipeline's last step as the classifier, clip values the encoded space's range; the
  NB pipeline's inputs are category codes (a perturbed code is no input), so NB gets no row.
  HopSkipJump is cut to ``max_iter`` 2, ``max_eval`` 50, ``init_eval`` 10 to keep the run short.
- Metrics of every row from mptool's functions: AUC and TPR at 1% FPR over all attempts, 95%
  bootstrap intervals over targets (:mod:`mptool.attacks.intervals`, seeded from the spec's seed).
  Seconds: each attack's own time with the shadow models it needs; target models not counted.
  Single-threaded (BLAS one thread, ``--jobs 1``); the load average is printed.

Run: ``python benchmarks/bench_label_only.py [--configs adult-nb,adult-lr,adult-nn --candidates 400
--targets 60 --iterations 2 --shadows 8]`` (needs ``pip install '.[peers]'``; exits 2 without ART).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import warnings
from dataclasses import replace
from typing import Any

import numpy as np
from bench_vs_art import load_art, positions, target_classifiers
from threadpoolctl import threadpool_limits

from mptool.api.mitigate import with_changes
from mptool.attacks.intervals import TAG_BOOTSTRAP, bootstrap_intervals
from mptool.attacks.metrics import binary_metrics
from mptool.attacks.protocol import AttackOptions
from mptool.attacks.protocol.adapters import attack_label_only, attack_threshold
from mptool.attacks.protocol.draw import Draw, draw_candidates
from mptool.attacks.protocol.evidence import gather_evidence
from mptool.attacks.protocol.state import Run
from mptool.attacks.protocol.targets import TargetOutputs, train_targets
from mptool.attacks.shadows import rng_for
from mptool.inputs.bundled import ADULT_CSV, config
from mptool.inputs.models import fit
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import load_spec
from mptool.privacy.release import released_template

Scored = tuple[np.ndarray, np.ndarray]
#: ART's threshold when its unsupervised calibration finds no boundary (the AUC uses the distances alone).
CALIBRATION_FALLBACK = 1e-6
CALIBRATION_FAILED: list[str] = []
HSJ = {"max_iter": 2, "max_eval": 50, "init_eval": 10, "init_size": 50, "verbose": False}


@contextlib.contextmanager
def _quiet(total: int, label: str):
    yield lambda n: None


Rows = dict[str, tuple[Scored, float]]


def mptool_rows(spec: Any, args: argparse.Namespace) -> tuple[Run, Draw, TargetOutputs, Rows]:
    """threshold, label_only and label_free on one release, each with its seconds."""
    options = AttackOptions(attacks=("threshold", "label_only"), candidates=args.candidates, targets=args.targets,
                            iterations=args.iterations, shadows=args.shadows, shadow_pool=0, pdtp_iterations=0,
                            jobs=1)
    prep = prepare(ADULT_CSV, spec)
    prep = replace(prep, template=released_template(prep.template, spec.output.release))  # as mptool attack does
    run = Run(prep, options, _quiet, 1, "population", 0.0)
    draw = draw_candidates(run)
    targets = train_targets(run, draw)
    t0 = time.perf_counter()
    threshold = attack_threshold(run, draw, targets, gather_evidence(run, draw))[0]
    t1 = time.perf_counter()
    (lo, free), _ = attack_label_only(run, draw)
    t2 = time.perf_counter()
    return run, draw, targets, {"threshold": (threshold, t1 - t0), "label_only": (lo, t2 - t1),
                                "label_free": (free, t2 - t1)}


def art_boundary(run: Run, draw: Draw, targets: TargetOutputs, art: dict[str, Any], cls: Any) -> Scored:
    """ART's LabelOnlyDecisionBoundary on the encoded features of each target model (module docstring)."""
    D = draw.D
    score = np.empty(targets.member.shape)
    for i, first in enumerate(draw.in_first):
        for h, half in enumerate((first, ~first)):
            model = fit(run.prep.template, D.X.iloc[np.flatnonzero(half)], D.y[half])
            Z = np.asarray(model[:-1].transform(D.X), dtype=np.float32)
            clf = art["Classifier"](model=model[-1], clip_values=(float(Z.min()), float(Z.max())))
            attack = cls(clf)
            np.random.seed(int(rng_for(run.seed, 301, i, h).integers(2**31 - 1)))  # ART draws from numpy's global
            try:
                attack.calibrate_distance_threshold_unsupervised(top_t=50, num_samples=50, **HSJ)
            except RuntimeWarning:  # no random sample crossed the boundary: ART sets no threshold
                attack.distance_threshold_tau = CALIBRATION_FALLBACK
                CALIBRATION_FAILED.append(f"{i}/{h}")
            y = np.eye(len(draw.classes))[draw.target_y]
            p = attack.infer(Z[draw.tpos], y, probabilities=True, **HSJ)[:, 1]
            score[i, h] = p  # a sigmoid of (distance - tau): the distance's order
    return score, score > 0.5


def evaluate(name: str, args: argparse.Namespace, art: dict[str, Any]) -> list[dict[str, Any]]:
    """One config: mptool on both releases, ART on the full release."""
    spec = load_spec(config(f"{name}.yaml"))
    results: dict[tuple[str, str], tuple[Scored, float]] = {}
    run, draw, targets, full = mptool_rows(spec, args)
    _, _, targets_l, labels = mptool_rows(with_changes(spec, release={"label_only": True}), args)
    for variant in ("label_only", "label_free"):  # the attacks see labels only: the same under both releases
        assert all(np.array_equal(a, b) for a, b in zip(full[variant][0], labels[variant][0], strict=True))
    for attack, r in full.items():
        results[("mptool", f"{attack}, full release")] = r
    results[("mptool", "threshold, label-only release")] = labels["threshold"]
    from art.attacks.inference.membership_inference import LabelOnlyDecisionBoundary, LabelOnlyGapAttack

    classifiers = target_classifiers(run, draw, targets, {**art, "Classifier": art["Classifier"]})
    t0 = time.perf_counter()
    x_t, y_t = positions(draw.tpos), draw.target_y
    gap = np.array([[LabelOnlyGapAttack(clf).infer(x_t, y_t) for clf in pair] for pair in classifiers]).astype(bool)
    results[(f"ART {art['version']}", "LabelOnlyGapAttack")] = ((gap.astype(float), gap), time.perf_counter() - t0)
    if spec.model.estimator != "categorical_nb":
        t0 = time.perf_counter()
        boundary = art_boundary(run, draw, targets, art, LabelOnlyDecisionBoundary)
        results[(f"ART {art['version']}", "LabelOnlyDecisionBoundary")] = (boundary, time.perf_counter() - t0)
    rows = []
    for j, ((tool, attack), ((score, decision), secs)) in enumerate(results.items()):
        member = targets_l.member if "label-only release" in attack else targets.member
        m = binary_metrics(member, decision, score)
        ci = bootstrap_intervals(member, decision, score, rng_for(run.seed, TAG_BOOTSTRAP, 50 + j))
        span = {k: (ci[k]["low"], ci[k]["high"]) if ci[k]["low"] is not None else (np.nan, np.nan)
                for k in ("auc", "tpr_at_1pct_fpr")}
        rows.append({"config": name, "tool": tool, "attack": attack, "auc": m["auc"], "auc_ci": span["auc"],
                     "tpr1": m["tpr_at_1pct_fpr"], "tpr_ci": span["tpr_at_1pct_fpr"], "seconds": secs})
    print(f"bench_label_only {name}: done", flush=True)
    return rows


def table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """One Markdown table over the configs."""
    lines = [f"{args.candidates} candidates, {args.targets} targets, {args.iterations} iterations "
             f"({2 * args.iterations * args.targets} attempts per attack), {args.shadows} shadow models\n",
             "| config | tool | attack | AUC [95% CI] | TPR at 1% FPR [95% CI] | seconds |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['config']} | {r['tool']} | {r['attack']} | {r['auc']:.3f} [{r['auc_ci'][0]:.3f}, "
                     f"{r['auc_ci'][1]:.3f}] | {r['tpr1']:.3f} [{r['tpr_ci'][0]:.3f}, {r['tpr_ci'][1]:.3f}] "
                     f"| {r['seconds']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="adult-nb,adult-lr,adult-nn")
    ap.add_argument("--candidates", type=int, default=400)
    ap.add_argument("--targets", type=int, default=60)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--shadows", type=int, default=8)
    args = ap.parse_args(argv)
    art = load_art()
    if art is None:
        print("bench_label_only: needs IBM ART (adversarial-robustness-toolbox>=1.20): pip install '.[peers]'",
              file=sys.stderr)
        return 2
    t0, c0 = time.perf_counter(), time.process_time()
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = [r for name in args.configs.split(",") for r in evaluate(name.strip(), args, art)]
    print(table(rows, args))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nbench_label_only: {time.perf_counter() - t0:.1f} s wall, {time.process_time() - c0:.1f} s CPU; "
          f"ART {art['version']}; load {load:.1f}")
    if CALIBRATION_FAILED:
        print(f"ART's unsupervised calibration found no boundary for {len(CALIBRATION_FAILED)} target model(s): "
              f"threshold {CALIBRATION_FALLBACK} there")
    return 0


if __name__ == "__main__":
    sys.exit(main())
