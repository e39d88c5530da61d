"""Attack strength against the shadow budget on Adult: MLP and LR, binned and unbinned (issue 21).

For each config one pool of max(--budgets) shadow models is trained with mptool's seeds. The
first K models of that pool are exactly the pool of ``mptool attack --shadow-pool K`` (model k
is seeded by (seed, pool tag, k)), so every budget is attacked on the same target models and
attempts, and the difference between budgets is the budget alone. Binned (the config's 0.01)
and unbinned (``--bin-size 0``) releases come from the same fits: the pool keeps unbinned
outputs and bins them afterwards, as the tool does.

For every attack (mptool's own code: ``run_attacks`` of mptool.attacks.protocol) and for the
LiRA that mptool used before issue 21 (``lira_legacy``: density at the bin centre, std floor
0.05, pooled variances below 16 models per side, per-record above) it prints AUC and TPR at
1% and 0.1% FPR, each with a 95% bootstrap interval over targets (all attempts of a resampled
target go together), and writes a PNG of TPR at 1% FPR against the budget.

A budget of K models leaves some targets with no in- or no out-model when K is small (the
tool refuses such pools); those budgets are scored on the targets that have both, and the
line says how many. Goals (issue 21): with default binning, LiRA at the largest budget is at
least as strong at 1% FPR as with 16 models and as the distance attack (each within 0.01).

Run: ``python benchmarks/bench_attack_strength.py [--configs adult-nn,adult-lr --candidates 2000
--targets 2000 --iterations 2 --budgets 4,8,16,32,64 --jobs 2 --out mptool-out/bench]``.
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
from sklearn.metrics import roc_auc_score, roc_curve

from mptool.attacks import lira as lira_mod
from mptool.attacks.metrics import tpr_at_fpr
from mptool.attacks.protocol import AttackOptions, parse_attacks
from mptool.attacks.protocol.adapters import run_attacks
from mptool.attacks.protocol.draw import Draw, draw_candidates
from mptool.attacks.protocol.evidence import Evidence
from mptool.attacks.protocol.state import Run
from mptool.attacks.protocol.targets import TargetOutputs, train_targets
from mptool.attacks.shadows import ShadowPool, train_pool
from mptool.inputs.bundled import ADULT_CSV
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import load_spec
from mptool.privacy.calibration import bin_probabilities

CONFIGS = Path(__file__).resolve().parents[1] / "mptool" / "configs"


@contextlib.contextmanager
def _quiet(total: int, label: str):
    yield lambda n: None


def legacy_lira(draw: Draw, targets: TargetOutputs, evidence: Evidence) -> tuple[np.ndarray, np.ndarray]:
    """mptool's LiRA before issue 21: Gaussian density at the bin centre's logit, std floor 0.05,
    one pooled std per side unless every record has >= 16 models per side."""
    ty = draw.target_y
    phis = [tuple(lira_mod.logit_confidence(e, int(ty[t])) for e in evidence.for_target(0, t)) for t in range(len(ty))]
    per_record = min(min(len(a), len(b)) for a, b in phis) >= 16
    s_in = None if per_record else lira_mod.pooled_std([p[0] for p in phis])
    s_out = None if per_record else lira_mod.pooled_std([p[1] for p in phis])
    shape = targets.member.shape
    score, decision = np.empty(shape), np.zeros(shape, dtype=bool)
    for i in range(shape[0]):
        for t in range(shape[2]):
            obs = lira_mod.logit_confidence(targets.q[i, :, t], int(ty[t]))
            score[i, :, t], decision[i, :, t] = lira_mod.lira_online(obs, *phis[t], s_in, s_out)
    return score, decision


def bootstrap(member: np.ndarray, score: np.ndarray, n_boot: int, seed: int) -> dict[str, tuple[float, float, float]]:
    """AUC, TPR at 1% and 0.1% FPR with 95% intervals; targets (last axis) are resampled with their attempts."""

    def stats(m: np.ndarray, s: np.ndarray) -> tuple[float, float, float]:
        m, s = m.reshape(-1), s.reshape(-1)
        fpr, tpr, _ = roc_curve(m, s)
        return float(roc_auc_score(m, s)), tpr_at_fpr(fpr, tpr, 0.01), tpr_at_fpr(fpr, tpr, 0.001)

    point = stats(member, score)
    rng = np.random.default_rng(seed)
    n = member.shape[-1]
    draws = np.array([stats(member[..., idx], score[..., idx]) for idx in rng.integers(0, n, size=(n_boot, n))])
    lo, hi = np.percentile(draws, [2.5, 97.5], axis=0)
    keys = ("auc", "tpr_1pct", "tpr_0.1pct")
    return {k: (point[j], float(lo[j]), float(hi[j])) for j, k in enumerate(keys)}


def subset(draw: Draw, targets: TargetOutputs, keep: np.ndarray) -> tuple[Draw, TargetOutputs]:
    """The draw and target outputs restricted to the targets ``keep`` (bool over targets)."""
    d = dataclasses.replace(draw, tpos=draw.tpos[keep])
    t = dataclasses.replace(targets, q=targets.q[:, :, keep], member=targets.member[:, :, keep])
    return d, t


def attack_budget(
    run: Run, draw: Draw, targets: TargetOutputs, pool: ShadowPool, k: int
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], TargetOutputs, float]:
    """Every attack with the first ``k`` pool models (= ``--shadow-pool k``), on the targets that have
    at least one in- and one out-model; returns the scores, the targets' outputs used, and seconds."""
    assert pool.raw is not None
    members, raw = pool.members[:k], pool.raw[:k]
    shadows = ShadowPool(members, bin_probabilities(raw, run.bin_size), raw)
    inside = members[:, draw.tpos]
    keep = (inside.sum(axis=0) > 0) & ((~inside).sum(axis=0) > 0)
    d, t = subset(draw, targets, keep)
    ev = Evidence(shadows, shadows, None, d.tpos)
    options = dataclasses.replace(run.options, targets=int(keep.sum()), shadow_pool=k)
    t0 = time.perf_counter()
    results = dict(run_attacks(dataclasses.replace(run, options=options, fits={}, timings={}), d, t, ev).results)
    if "lira" in options.attacks:
        results["lira_legacy"] = legacy_lira(d, t, ev)
    return results, t, time.perf_counter() - t0


def evaluate(config: str, args: argparse.Namespace) -> list[dict]:
    """Every (bin size, budget, attack) of one config: metrics with intervals."""
    path = CONFIGS / f"{config}.yaml"
    budgets = sorted(int(k) for k in args.budgets.split(","))
    attacks = parse_attacks(args.attacks)
    options = AttackOptions(
        attacks=attacks,
        candidates=args.candidates,
        iterations=args.iterations,
        targets=args.targets,
        shadow_pool=max(budgets),
        pdtp_iterations=0,
        jobs=args.jobs,
    )
    rows = []
    pool = None
    for bin_size in (float(b) for b in args.bins.split(",")):
        prep = prepare(ADULT_CSV, load_spec(path, {"output.bin_size": bin_size}))
        run = Run(prep, options, _quiet, args.jobs, "population", 0.0)
        draw = draw_candidates(run)
        t0 = time.perf_counter()
        targets = train_targets(run, draw)
        if pool is None:
            pool = train_pool(
                prep.template,
                draw.D.X,
                draw.D.y,
                draw.classes,
                max(budgets),
                draw.n_half,
                prep.spec.seed,
                bin_size,
                args.jobs,
            )
        fit_s = time.perf_counter() - t0
        for k in budgets:
            results, t, secs = attack_budget(run, draw, targets, pool, k)
            for name, (score, _) in results.items():
                m = bootstrap(t.member, score, args.bootstrap, args.seed)
                rows.append(
                    {
                        "config": config,
                        "bin": bin_size,
                        "budget": k,
                        "attack": name,
                        "targets": int(t.member.shape[2]),
                        "seconds": secs,
                        "fit_seconds": fit_s,
                        **m,
                    }
                )
    return rows


def report(rows: list[dict]) -> None:
    """One line per (config, bin, budget, attack), then the goals of issue 21."""
    for r in rows:
        a, t1, t01 = r["auc"], r["tpr_1pct"], r["tpr_0.1pct"]
        print(
            f"attack_strength {r['config']} bin {r['bin']:g} K {r['budget']:>2} {r['attack']:<12}: "
            f"TPR@1% {t1[0]:.3f} [{t1[1]:.3f}, {t1[2]:.3f}]; TPR@0.1% {t01[0]:.3f} [{t01[1]:.3f}, {t01[2]:.3f}]; "
            f"AUC {a[0]:.3f} [{a[1]:.3f}, {a[2]:.3f}]; {r['targets']} targets"
        )
    by = {(r["config"], r["bin"], r["budget"], r["attack"]): r["tpr_1pct"][0] for r in rows}
    for config, bin_size in sorted({(r["config"], r["bin"]) for r in rows}):
        ks = sorted({r["budget"] for r in rows if r["config"] == config})
        top = ks[-1]
        if (config, bin_size, top, "lira") not in by:
            continue
        lira_top = by[(config, bin_size, top, "lira")]
        for ref_name, ref in (
            ("lira K 16", by.get((config, bin_size, 16, "lira"))),
            (f"distance K {top}", by.get((config, bin_size, top, "distance"))),
        ):
            if ref is None or ref_name == f"lira K {top}":
                continue
            ok = lira_top >= ref - 0.01
            print(
                f"goal {config} bin {bin_size:g}: lira K {top} TPR@1% {lira_top:.3f} >= {ref_name} {ref:.3f} - 0.01: "
                f"{'met' if ok else 'NOT met'}"
            )


def plot(rows: list[dict], out: Path) -> Path:
    """TPR at 1% FPR against the budget, one panel per (config, bin), one line per attack."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    panels = sorted({(r["config"], r["bin"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False, sharey=True)
    for ax, (config, bin_size) in zip(axes[0], panels, strict=True):
        for name in dict.fromkeys(r["attack"] for r in rows):
            sel = [r for r in rows if (r["config"], r["bin"], r["attack"]) == (config, bin_size, name)]
            ks = [r["budget"] for r in sel]
            y = np.array([r["tpr_1pct"] for r in sel])
            ax.errorbar(
                ks,
                y[:, 0],
                yerr=[y[:, 0] - y[:, 1], y[:, 2] - y[:, 0]],
                marker="o",
                capsize=2,
                label=name,
                linestyle="--" if name == "lira_legacy" else "-",
            )
        ax.set_xscale("log", base=2)
        ax.set_title(f"{config}, {'bin ' + format(bin_size, 'g') if bin_size else 'unbinned'}")
        ax.set_xlabel("shadow models")
    axes[0, 0].set_ylabel("TPR at 1% FPR")
    axes[0, -1].legend(fontsize=7, frameon=False)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    target = out / "attack_strength.png"
    fig.savefig(target, dpi=110)
    return target


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="adult-nn,adult-lr")
    ap.add_argument("--candidates", type=int, default=2000)
    ap.add_argument("--targets", type=int, default=2000)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--budgets", default="4,8,16,32,64")
    ap.add_argument("--bins", default="0.01,0")
    ap.add_argument("--attacks", default="distance,frequency,threshold,lira", help="as mptool attack --attacks")
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("mptool-out/bench"))
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = [r for config in args.configs.split(",") for r in evaluate(config.strip(), args)]
    report(rows)
    png = plot(rows, args.out)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"bench_attack_strength: {time.perf_counter() - t0:.1f} s total; plot {png}; load {load:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
