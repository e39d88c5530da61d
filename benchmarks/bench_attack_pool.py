"""Shared shadow pool vs the paper's per-target shadow pairs: model fits, wall time, AUC.

Same run (Adult, categorical NB, same candidates, targets, iterations and target models);
the targeted attacks and LiRA draw their in/out models either from fresh per-target pairs
(2 * M fits per target per iteration, Long et al. 5.3) or from one pool of K models on
random halves of D (``--shadow-pool K``). Prints ``name: value unit (ratio vs baseline)``
lines with the per-target protocol as the baseline.
Run: ``python benchmarks/bench_attack_pool.py [--candidates 1000 --targets 50 ...]``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

from mptool.attacks.protocol import AttackOptions, run_attack
from mptool.inputs.bundled import ADULT_CSV
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import load_spec

CONFIGS = Path(__file__).resolve().parents[1] / "mptool" / "configs"


@contextlib.contextmanager
def _quiet(total: int, label: str):
    yield lambda n: None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", default="adult-nb")
    ap.add_argument("--candidates", type=int, default=1000)
    ap.add_argument("--targets", type=int, default=50)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--pool", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    prep = prepare(ADULT_CSV, load_spec(CONFIGS / f"{args.config}.yaml"))
    common = dict(attacks=("distance", "frequency", "lira"), candidates=args.candidates, targets=args.targets,
                  iterations=args.iterations, pdtp_iterations=0, jobs=args.jobs)
    runs = {}
    for label, extra in (("per-target", {"pairs": args.pairs}), ("pool", {"shadow_pool": args.pool})):
        t0 = time.perf_counter()
        out = run_attack(prep, AttackOptions(**common, **extra), _quiet)
        runs[label] = (out, time.perf_counter() - t0)
    base, base_s = runs["per-target"]
    for label, (out, secs) in runs.items():
        fits = out.summary["fits"]["total"]
        print(f"{label} model_fits: {fits} fits ({fits / base.summary['fits']['total']:.3f}x)")
        print(f"{label} wall_time: {secs:.1f} s ({secs / base_s:.3f}x)")
        for name, m in out.attacks.items():
            b = base.attacks[name]
            print(f"{label} {name}_auc: {m['auc']:.4f} ({m['auc'] / b['auc']:.3f}x); "
                  f"accuracy {m['accuracy']:.4f}; TPR@1%FPR {m['tpr_at_1pct_fpr']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
