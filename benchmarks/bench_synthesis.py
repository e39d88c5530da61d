"""Shadow data without population data (Shokri et al. V-C, Algorithm 1) against population shadow data.

Shokri et al. (section VI-E, Fig. 9) attack the purchase model with shadows trained on real
data, on marginal-based synthetic data and on model-based synthetic data (Algorithm 1) and
compare the attacks' precision. This script does the same with mptool's untargeted attack
(the shadow-model attack) under Long et al.'s protocol (5.4) on

- Adult with mptool/configs/adult-nb.yaml (|D| = 2,000, the target models train on 1,000), and
- the purchase-style stand-in (``mptool datasets make-purchase``: 600 binary features, 10
  k-means classes) with the paper's NN (mlp, 64 tanh units, 30 epochs), |D| = 1,000,

each with ``--shadow-data population``, ``marginals`` and ``synthesize`` (default budget:
1,000 queries per record). Every source gets the same targets, splits and shadow count (8,
as Shokri et al. used with model-based data). Prints per row the attack's AUC with its 95%
bootstrap interval over targets, accuracy, precision, recall, TPR at 1% FPR, the synthesis's
query cost and failures, and the AUC ratio against population shadow data (the baseline,
measured in the same run).

mptool's untargeted attack classifies f = (x, y, q) (Long et al., Algorithm 1); Shokri et al.'s
attack models see only the label and the prediction vector (y, q). With x in the features an
attack learnt on shadow data whose records look unlike the targets (synthetic ones) does not
transfer, so every row is run twice: with the record in the attack features ("x,y,q",
``--untargeted-features xyq``, Long et al.) and without it ("y,q", ``yq``, Shokri's features;
what ``auto`` takes for synthetic shadow data).

Run: ``python benchmarks/bench_synthesis.py`` (about 6 minutes on 2 busy cores).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from mptool.attacks.protocol import AttackOptions, run_attack
from mptool.inputs.bundled import ADULT_CSV
from mptool.inputs.prepare import prepare
from mptool.inputs.purchase import make_purchase
from mptool.inputs.spec import load_spec, parse_spec

CONFIGS = Path(__file__).resolve().parents[1] / "mptool" / "configs"
SOURCES = ("population", "marginals", "synthesize")


def null_progress(total: int, label: str) -> contextlib.AbstractContextManager:
    @contextlib.contextmanager
    def cm():
        yield lambda n: None

    return cm()


def run_one(data: Path, spec: Any, options: AttackOptions) -> dict[str, Any]:
    """One protocol run; the untargeted attack's metrics, intervals and the synthesis's cost."""
    t0 = time.perf_counter()
    out = run_attack(prepare(data, spec), options, null_progress)
    m, s = out.attacks["untargeted"], out.summary
    auc_iv = m["intervals"]["auc"]
    syn = s.get("synthesis") or {}
    return {
        "auc": m["auc"], "auc_low": auc_iv.get("low"), "auc_high": auc_iv.get("high"), "accuracy": m["accuracy"],
        "precision": m["precision"], "recall": m["recall"], "tpr1": m["tpr_at_1pct_fpr"],
        "train_acc": s["target_model"]["train_accuracy"], "test_acc": s["target_model"]["test_accuracy"],
        "queries": syn.get("queries"), "per_record": syn.get("queries_per_synthesized_record"),
        "made": syn.get("synthesized"), "failed": syn.get("failed"), "confidence": syn.get("mean_confidence"),
        "synthesis_s": s["timings"].get("synthesis_s", 0.0), "seconds": time.perf_counter() - t0,
    }  # fmt: skip


def show(name: str, source: str, r: dict[str, Any], base_auc: float | None) -> None:
    ratio = f"{r['auc'] / base_auc:.3f}x" if base_auc else "baseline"
    cost = ""
    if r["queries"]:
        cost = (f"; {r['queries']:,} queries ({r['per_record']} per record made), {r['made']} made, "
                f"{r['failed']} failed, mean confidence {r['confidence']}, synthesis {r['synthesis_s']:.0f} s")
    print(f"{name} {source}: AUC {r['auc']:.4f} [{r['auc_low']:.4f}, {r['auc_high']:.4f}] ({ratio} vs population); "
          f"accuracy {r['accuracy']:.4f}, precision {r['precision']:.4f}, recall {r['recall']:.4f}, "
          f"TPR@1% {r['tpr1']:.4f}; target train/test {r['train_acc']:.3f}/{r['test_acc']:.3f}{cost}; "
          f"{r['seconds']:.0f} s", flush=True)  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--targets", type=int, default=100)
    ap.add_argument("--shadows", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--purchase-candidates", type=int, default=1000)
    ap.add_argument("--rows", default="Adult-NB,Purchase-NN")
    ap.add_argument("--features", default="x,y,q;y,q", help="attack features, ';'-separated: x,y,q and/or y,q")
    args = ap.parse_args()
    start = time.perf_counter()
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    common = dict(attacks=("untargeted",), targets=args.targets, iterations=args.iterations, pdtp_iterations=0,
                  shadows=args.shadows, shadow_pool=0, jobs=args.jobs)  # fmt: skip
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        if "Adult-NB" in args.rows:
            cases.append(("Adult-NB", ADULT_CSV, load_spec(CONFIGS / "adult-nb.yaml"), 2000))
        if "Purchase-NN" in args.rows:
            path = Path(tmp) / "purchase.csv"
            make_purchase(rows=2 * args.purchase_candidates, features=600, classes=10, seed=0).to_csv(path, index=False)
            spec = parse_spec({"data": {"label": "class", "train_size": None},
                               "model": {"estimator": "mlp", "params": {"max_iter": 30}, "preprocess": "none"},
                               "seed": 0})  # fmt: skip
            cases.append(("Purchase-NN", path, spec, args.purchase_candidates))
        for (name, data, spec, n_cand), feats in ((c, f) for c in cases for f in args.features.split(";")):
            base = None
            for source in SOURCES:
                chosen = {"x,y,q": "xyq", "y,q": "yq"}[feats]  # --untargeted-features
                r = run_one(data, spec, AttackOptions(candidates=n_cand, shadow_data=source,
                                                      untargeted_features=chosen, **common))
                rows[(name, feats, source)] = r
                show(f"{name} [{feats}]", source, r, base)
                base = r["auc"] if source == "population" else base
    print()
    print(f"{'data':<12}{'features':<9}{'shadow data':<12}{'AUC [95% CI]':>26}{'acc':>8}{'prec':>8}{'recall':>8}"
          f"{'TPR@1%':>8}{'queries':>10}{'q/record':>10}{'failed':>8}")  # fmt: skip
    for (name, feats, source), r in rows.items():
        q = f"{r['queries']:,}" if r["queries"] else "-"
        print(f"{name:<12}{feats:<9}{source:<12}{r['auc']:>8.3f} [{r['auc_low']:.3f}, {r['auc_high']:.3f}]"
              f"{r['accuracy']:>8.3f}{r['precision']:>8.3f}{r['recall']:>8.3f}{r['tpr1']:>8.3f}{q:>10}"
              f"{r['per_record'] or '-':>10}{r['failed'] if r['failed'] is not None else '-':>8}")  # fmt: skip
    print(f"total: {time.perf_counter() - start:.0f} s; load average at end: {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
