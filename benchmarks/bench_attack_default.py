"""The default ``mptool attack`` on Adult with naive Bayes: old defaults (per-target pairs) vs new (shadow pool).

Whole CLI runs (``python -m mptool attack adult.csv.gz --model adult-nb.yaml``, every default:
2 x data.train_size = 2,000 candidates, 10 iterations, 100 targets, --jobs 0 = every core), in one
session:

- new default: the shadow pool (``--shadow-pool`` not given: 64 models).
- old default: ``--shadow-pool 0`` (the paper's 5 in/out pairs per target per iteration; the
  other defaults are the old ones). It makes 10,000 pair fits; measured at ``--old-iterations``
  iterations (default 3) and extrapolated linearly in the iterations: the per-iteration phases
  (target models, PDTP, shadow pairs) x 10 / I, plus the rest of the run as measured. The plan
  line's own estimate of the full old run is printed beside it.

Accuracy: the first I iterations of both runs attack the same target models on the same targets,
so their attempts (attempts.csv) are compared pairwise: AUC and TPR at 1% FPR per attack, and a
bootstrap over targets of the AUC difference (new - old). The new default's figures over all 10
iterations follow. ``--pools 16,32,64,128`` adds whole runs at those pool sizes.

Prints ``name: value unit (ratio vs baseline; details; load)`` lines.
Run: ``python benchmarks/bench_attack_default.py [--old-iterations 3] [--pools 16,32,64,128]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from _common import run_timed  # benchmarks/_common.py: wall and CPU of a child process
from sklearn.metrics import roc_auc_score

from mptool.attacks.metrics import binary_metrics, finite_scores
from mptool.inputs.bundled import ADULT_CSV

CONFIG = Path(__file__).resolve().parents[1] / "mptool" / "configs" / "adult-nb.yaml"
GOAL_S = 60.0
FULL_ITERATIONS = 10
PER_ITERATION = ("target_models_s", "pdtp_s", "shadows_s")


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


#: CPU seconds of each whole run (the process and its workers), by output folder name.
CPU: dict[str, float] = {}


def run(out: Path, *extra: str) -> tuple[float, dict, pd.DataFrame, str]:
    """One whole CLI run: wall seconds, attack.json, attempts.csv, the plan line (its CPU s go to :data:`CPU`)."""
    cmd = [sys.executable, "-m", "mptool", "attack", str(ADULT_CSV), "--model", str(CONFIG), "--out", str(out), *extra]
    proc, wall, CPU[out.name] = run_timed(cmd, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"mptool attack failed ({proc.returncode}): {proc.stderr[-2000:]}")
    plan = next((ln for ln in proc.stderr.splitlines() if ln.startswith("plan: ")), "")
    doc = json.loads((out / "attack.json").read_text())
    return wall, doc, pd.read_csv(out / "attempts.csv"), plan


def metrics(att: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """AUC and TPR at 1% FPR per attack, from attempts.csv rows."""
    out = {}
    for name, g in att.groupby("attack", sort=False):
        m = binary_metrics(g["member"].to_numpy(dtype=bool), g["decision"].to_numpy(dtype=bool), g["score"].to_numpy())
        out[str(name)] = (m["auc"], m["tpr_at_1pct_fpr"])
    return out


def auc_difference(new: pd.DataFrame, old: pd.DataFrame, reps: int = 400, seed: int = 0) -> tuple[float, float]:
    """95% bootstrap interval (targets resampled) of AUC(new) - AUC(old) on the same attempts."""
    rows = new["row"].unique()
    rng = np.random.default_rng(seed)
    by_new = {r: g for r, g in new.groupby("row")}
    by_old = {r: g for r, g in old.groupby("row")}
    diffs = []
    for _ in range(reps):
        pick = rng.choice(rows, size=len(rows), replace=True)
        a = pd.concat([by_new[r] for r in pick])
        b = pd.concat([by_old[r] for r in pick])
        diffs.append(
            roc_auc_score(a["member"], finite_scores(a["score"].to_numpy()))
            - roc_auc_score(b["member"], finite_scores(b["score"].to_numpy()))
        )
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return float(lo), float(hi)


def extrapolate(doc: dict, wall: float, iterations: int) -> float:
    """Wall seconds of the same run at FULL_ITERATIONS: per-iteration phases scaled, the rest as measured."""
    t = doc["summary"]["timings"]
    per_iter = sum(t.get(k, 0.0) for k in PER_ITERATION)
    return wall - per_iter + per_iter * FULL_ITERATIONS / iterations


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--old-iterations", type=int, default=3)
    ap.add_argument("--pools", default="", help="extra pool sizes to run whole, e.g. 16,32,64,128")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-attack-default-"))
    i_old = args.old_iterations

    new_wall, new_doc, new_att, new_plan = run(work / "new")
    ns = new_doc["summary"]
    print(f"attack_default_new: {new_wall:.1f} s whole run, {CPU['new']:.1f} CPU s with its workers "
          f"({new_wall / GOAL_S:.2f}x the {GOAL_S:.0f} s goal; "
          f"shadow pool {ns['shadow_pool']}, {ns['fits']['total']} fits, protocol {ns['timings']['total_s']:.1f} s, "
          f"plan estimate {ns['plan']['estimated_s']:.1f} s; {load()})")
    print(f"  {new_plan}")

    old_wall, old_doc, old_att, old_plan = run(work / "old", "--shadow-pool", "0", "--iterations", str(i_old))
    os_ = old_doc["summary"]
    old_full = extrapolate(old_doc, old_wall, i_old)
    fits_old = os_["fits"]["total"]
    old_cpu = CPU["old"] * old_full / old_wall  # the same linear extrapolation as the wall time
    print(f"attack_default_old_measured: {old_wall:.1f} s, {CPU['old']:.1f} CPU s at {i_old} iterations "
          f"({fits_old} fits; {load()})")
    print(f"attack_default_old: {old_full:.0f} s, {old_cpu:.0f} CPU s extrapolated to {FULL_ITERATIONS} iterations "
          f"({old_full / new_wall:.1f}x the new default in wall, {old_cpu / CPU['new']:.1f}x in CPU; linear in the "
          f"iterations from the {i_old}-iteration run; {load()})")
    from mptool.attacks.protocol import AttackOptions, plan_attack
    from mptool.inputs.prepare import prepare
    from mptool.inputs.spec import load_spec

    planned = plan_attack(prepare(ADULT_CSV, load_spec(CONFIG)), AttackOptions(candidates=None, shadow_pool=0))
    print(f"attack_default_old_plan_estimate: {planned.plan['estimated_s']:.0f} s for "
          f"{sum(planned.plan['fits'].values())} fits (the plan line's estimate of the full old default; {load()})")

    common = new_att[new_att["iteration"] < i_old]
    m_new, m_old, m_all = metrics(common), metrics(old_att), metrics(new_att)
    for name, (auc_o, tpr_o) in m_old.items():
        auc_n, tpr_n = m_new[name]
        lo, hi = auc_difference(common[common["attack"] == name], old_att[old_att["attack"] == name])
        auc_a, tpr_a = m_all[name]
        print(f"attack_default_{name}: AUC {auc_n:.4f} new vs {auc_o:.4f} old on the same {i_old} iterations "
              f"(difference 95% CI [{lo:+.4f}, {hi:+.4f}]); TPR@1%FPR {tpr_n:.3f} vs {tpr_o:.3f}; "
              f"new over {FULL_ITERATIONS} iterations: AUC {auc_a:.4f}, TPR@1%FPR {tpr_a:.3f}")

    for k in [int(p) for p in args.pools.split(",") if p.strip()]:
        wall, doc, att, _ = run(work / f"pool{k}", "--shadow-pool", str(k))
        m = metrics(att)
        parts = "; ".join(f"{n} AUC {a:.4f} TPR {t:.3f}" for n, (a, t) in m.items())
        print(f"attack_pool_{k}: {wall:.1f} s, {CPU[f'pool{k}']:.1f} CPU s ({wall / new_wall:.2f}x the default; "
              f"{doc['summary']['fits']['total']} fits; {parts}; {load()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
