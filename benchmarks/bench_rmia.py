"""RMIA (Zarifzadeh et al., ICML 2024) against LiRA (Carlini et al., S&P 2022), online and
offline, at 4, 8 and 16 reference models on the same runs (issue 19, item 3).

For each config one pool of max(--budgets) shadow models is trained with mptool's seeds; the
first K models of it are exactly the pool of ``mptool attack --shadow-pool K`` (model k is
seeded by (seed, pool tag, k)). Every budget and every attack is scored on the same target
models, targets and attempts: the targets that have at least one in- and one out-model among
the first min(--budgets) models (the tool itself refuses a pool that leaves a target
uncovered; a larger budget covers every target a smaller one does). The attacks are mptool's
own code (``attack_lira`` and ``attack_rmia`` of mptool.attacks.protocol), so RMIA's offline a
is tuned on the K models as in a run.

Per (config, K, attack): AUC and TPR at 1% and 0.1% FPR with mptool's 95% bootstrap
intervals over targets (mptool.attacks.intervals, as in attack.json), and per K the paired
difference RMIA - LiRA (online with online, offline with offline) of AUC and TPR at 1% FPR:
the same resampled targets for both attacks, so the interval is of the difference itself.
The seconds each attack's arithmetic took are printed beside (the fits are shared).

Run: ``python benchmarks/bench_rmia.py [--configs adult-nb,adult-lr --targets 2000
--iterations 4 --budgets 4,8,16,64 --jobs 2]``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np

from mptool.attacks.intervals import Attempts, bootstrap_intervals, resample_stats
from mptool.attacks.metrics import binary_metrics
from mptool.attacks.protocol import AttackOptions
from mptool.attacks.protocol.adapters import attack_lira, attack_rmia
from mptool.attacks.protocol.draw import Draw, draw_candidates
from mptool.attacks.protocol.evidence import Evidence
from mptool.attacks.protocol.state import Run
from mptool.attacks.protocol.targets import TargetOutputs, train_targets
from mptool.attacks.shadows import ShadowPool, rng_for, train_pool
from mptool.inputs.bundled import ADULT_CSV
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import load_spec

CONFIGS = Path(__file__).resolve().parents[1] / "mptool" / "configs"
PAIRS = (("rmia", "lira"), ("rmia_offline", "lira_offline"))


@contextlib.contextmanager
def _quiet(total: int, label: str):
    yield lambda n: None


def covered(pool: ShadowPool, tpos: np.ndarray, k: int) -> np.ndarray:
    """Targets with at least one in- and one out-model among the first ``k`` pool models."""
    inside = pool.members[:k, tpos]
    return inside.any(axis=0) & (~inside).any(axis=0)


def restrict(draw: Draw, targets: TargetOutputs, keep: np.ndarray) -> tuple[Draw, TargetOutputs]:
    """The draw and the target models' outputs on the targets ``keep`` only (p_all stays: all of D)."""
    d = dataclasses.replace(draw, tpos=draw.tpos[keep])
    t = dataclasses.replace(targets, q=targets.q[:, :, keep], member=targets.member[:, :, keep])
    return d, t


def attack_budget(run: Run, draw: Draw, targets: TargetOutputs, pool: ShadowPool, k: int) -> tuple[dict, dict]:
    """LiRA and RMIA (online, offline) with the first ``k`` pool models: scores and seconds per attack."""
    shadows = ShadowPool(pool.members[:k], pool.preds[:k], None if pool.raw is None else pool.raw[:k])
    ev = Evidence(shadows, shadows, None, draw.tpos)
    t0 = time.perf_counter()
    lira_on, lira_off, _ = attack_lira(draw, targets, ev, run.bin_size)
    t1 = time.perf_counter()
    rmia_on, rmia_off, extra = attack_rmia(run, draw, targets, ev)
    t2 = time.perf_counter()
    results = {"lira": lira_on, "lira_offline": lira_off, "rmia": rmia_on, "rmia_offline": rmia_off}
    return results, {"lira_s": t1 - t0, "rmia_s": t2 - t1, "offline_a": extra["offline_a"]}


def paired_difference(member: np.ndarray, a: tuple, b: tuple, seed: int) -> dict[str, tuple[float, float, float]]:
    """a - b of AUC and TPR at 1% FPR: point and 95% percentile interval over the same resampled targets."""
    att_a, att_b = Attempts(member, a[1], a[0]), Attempts(member, b[1], b[0])
    t = member.shape[-1]
    rng = rng_for(seed, 919)
    weights = rng.multinomial(t, np.full(t, 1.0 / t), size=1000)
    out = {}
    for key in ("auc", "tpr_at_1pct_fpr"):
        diffs = np.concatenate([
            resample_stats(att_a, weights[s : s + 50])[key] - resample_stats(att_b, weights[s : s + 50])[key]
            for s in range(0, 1000, 50)
        ])
        point = binary_metrics(member, a[1], a[0])[key] - binary_metrics(member, b[1], b[0])[key]
        lo, hi = np.quantile(diffs[np.isfinite(diffs)], [0.025, 0.975])
        out[key] = (float(point), float(lo), float(hi))
    return out


def evaluate(config: str, args: argparse.Namespace) -> list[dict]:
    """Every (budget, attack) of one config, and the paired differences per budget."""
    budgets = sorted(int(k) for k in args.budgets.split(","))
    options = AttackOptions(attacks=("lira", "rmia"), candidates=args.candidates, iterations=args.iterations,
                            targets=args.targets, shadow_pool=max(budgets), pdtp_iterations=0, jobs=args.jobs)
    prep = prepare(ADULT_CSV, load_spec(CONFIGS / f"{config}.yaml"))
    run = Run(prep, options, _quiet, args.jobs, "population", 0.0)
    draw = draw_candidates(run)
    t0 = time.perf_counter()
    targets = train_targets(run, draw)
    pool = train_pool(prep.template, draw.D.X, draw.D.y, draw.classes, max(budgets), draw.n_half,
                      prep.spec.seed, run.bin_size, args.jobs)
    fit_s = time.perf_counter() - t0
    keep = covered(pool, draw.tpos, budgets[0])
    d, t = restrict(draw, targets, keep)
    rows = []
    for k in budgets:
        results, secs = attack_budget(run, d, t, pool, k)
        for j, (name, (score, decision)) in enumerate(results.items()):
            m = binary_metrics(t.member, decision, score)
            iv = bootstrap_intervals(t.member, decision, score, rng_for(args.seed, 201, j))
            rows.append({"config": config, "budget": k, "attack": name, "targets": int(keep.sum()),
                         "of": len(keep), "fit_s": fit_s, "seconds": secs["rmia_s" if "rmia" in name else "lira_s"],
                         "offline_a": secs["offline_a"],
                         **{key: (m[key], iv[key]["low"], iv[key]["high"])
                            for key in ("auc", "tpr_at_1pct_fpr", "tpr_at_0.1pct_fpr")}})
        for a, b in PAIRS:
            diff = paired_difference(t.member, results[a], results[b], args.seed)
            rows.append({"config": config, "budget": k, "attack": f"{a} - {b}", "diff": diff})
    return rows


def fmt(v: tuple) -> str:
    low = "n/e" if v[1] is None else f"{v[1]:.3f}"
    high = "n/e" if v[2] is None else f"{v[2]:.3f}"
    return f"{v[0]:.3f} [{low}, {high}]"


def report(rows: list[dict]) -> None:
    """One line per (config, K, attack), then the paired differences; and a Markdown table."""
    for r in rows:
        head = f"bench_rmia {r['config']} K {r['budget']:>2} {r['attack']:<22}"
        if "diff" in r:
            dd = r["diff"]
            print(f"{head}: difference AUC {dd['auc'][0]:+.3f} [{dd['auc'][1]:+.3f}, {dd['auc'][2]:+.3f}]; "
                  f"TPR@1% {dd['tpr_at_1pct_fpr'][0]:+.3f} [{dd['tpr_at_1pct_fpr'][1]:+.3f}, "
                  f"{dd['tpr_at_1pct_fpr'][2]:+.3f}]")
            continue
        extra = f"; a {r['offline_a']:g}" if r["attack"].startswith("rmia") else ""
        print(f"{head}: AUC {fmt(r['auc'])}; TPR@1% {fmt(r['tpr_at_1pct_fpr'])}; "
              f"TPR@0.1% {fmt(r['tpr_at_0.1pct_fpr'])}; {r['seconds']:.2f} s{extra}; "
              f"{r['targets']}/{r['of']} targets; fits {r['fit_s']:.1f} s")
    print("\n| config | K | attack | AUC [95%] | TPR@1% FPR [95%] | TPR@0.1% FPR [95%] |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if "diff" not in r:
            print(f"| {r['config']} | {r['budget']} | {r['attack']} | {fmt(r['auc'])} | "
                  f"{fmt(r['tpr_at_1pct_fpr'])} | {fmt(r['tpr_at_0.1pct_fpr'])} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="adult-nb,adult-lr")
    ap.add_argument("--candidates", type=int, default=2000)
    ap.add_argument("--targets", type=int, default=2000)
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--budgets", default="4,8,16,64")
    ap.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = [r for config in args.configs.split(",") for r in evaluate(config.strip(), args)]
    report(rows)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"bench_rmia: {time.perf_counter() - t0:.1f} s total; load {load:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
