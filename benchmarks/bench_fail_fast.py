"""Benchmark: --fail-fast in risk order vs row order, and the screen's recall (issue 13 item 2).

For the paper's network (``adult-nn.yaml``, Long et al. 5.2) and a random forest
(``adult-rf.yaml``) on ``--records`` Adult records, all at ``--jobs 2`` in one run:

1. the full refit in row order (every record: the baseline, and the truth for 2);
2. the screening scores (loss, margin, confidence, and the family's own: gradient norm and
   output-layer influence for the MLP, the trees' spread for the forest): recall of the true top-10 PDTP
   records among the screen's first 10 (a record tied with the 10th counts) and among its
   first 10% of records, the Spearman correlation, and where each order meets the first violator;
3. ``mptool pdtp --fail-fast`` in risk order and in row order: refits and seconds to the
   verdict (whole runs, each in its own process);
4. the network at the paper's size (``--paper-records``, 1,000 as in Long et al. 5.1):
   refits and seconds to the first violator in risk vs row order over ``--seeds`` seeds
   (each draws another T; no full refit at this size).

Prints ratios vs the row-order baseline measured in the same run. No assertions on time.

Usage: python benchmarks/bench_fail_fast.py [--records 300] [--models nn,rf]
       [--paper-records 1000] [--seeds 3]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: this process and loky workers
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from _common import run_timed  # noqa: E402 - benchmarks/_common.py: wall and CPU of a child process
from scipy.stats import spearmanr  # noqa: E402

from mptool.inputs.bundled import ADULT_CSV, config  # noqa: E402
from mptool.inputs.models import proba_in  # noqa: E402
from mptool.inputs.prepare import fit_checked, prepare  # noqa: E402
from mptool.inputs.spec import load_spec  # noqa: E402
from mptool.loo import screen  # noqa: E402
from mptool.loo.design import class_index  # noqa: E402

JOBS = 2
CONFIGS = {"nn": "adult-nn.yaml", "rf": "adult-rf.yaml"}
#: CPU seconds of each whole run (the process and its workers), by output folder name.
CPU: dict[str, float] = {}


def candidate_scores(model, T, classes, floor: float) -> dict[str, np.ndarray]:
    """Every screen measured: the generic ones and the family's own (when it applies)."""
    p = proba_in(model, T.X, classes)
    y_idx = class_index(T.y, classes)
    out = {
        "loss": screen.loss_score(p, y_idx),
        "margin": screen.margin_score(p, y_idx),
        "confidence": screen.confidence_score(p, floor),
    }
    for name, got in (
        ("gradient", screen.mlp_gradient_score(model, T.X, T.y)),
        ("influence", screen.mlp_influence_score(model, T.X, T.y, floor)),
        ("spread", screen.forest_spread_score(model, T.X, floor)),
    ):
        if got is not None:
            out[name] = got
    return out


def first_violator(order: np.ndarray, violation: np.ndarray) -> int | None:
    """Refits until the first violator when refitting in ``order`` (1-based), None if there is none."""
    hits = np.flatnonzero(violation[order])
    return int(hits[0]) + 1 if hits.size else None


def screen_report(key: str, scores: dict[str, np.ndarray], pdtp: np.ndarray, threshold: float) -> str:
    """One line per model: each screen's recall@10, recall of the top-10 within its first 10%, rho, first hit,
    and refits until 10 violators are found."""
    tenth = np.sort(pdtp)[::-1][min(9, len(pdtp) - 1)]
    top = pdtp >= tenth
    tenth_pct = max(10, len(pdtp) // 10)
    parts = []
    for name, s in scores.items():
        order = screen.risk_order(s)
        rec = top[order[:10]].sum() / 10
        rec_pct = min(1.0, top[order[:tenth_pct]].sum() / 10)
        rho = spearmanr(s, pdtp).statistic
        first = first_violator(order, pdtp > threshold)
        found = np.cumsum((pdtp > threshold)[order])
        ten = int(np.searchsorted(found, 10)) + 1 if found[-1] >= 10 else None
        parts.append(f"{name} {rec:.2f}/{rec_pct:.2f} (rho {rho:+.2f}, first violator at {first}, 10 at {ten})")
    return (
        f"screen_recall_{key}: recall of the true top-10 in the first 10 / first {tenth_pct} refits: "
        + "; ".join(parts)
        + f" ({int(top.sum())} records at or above the 10th largest PDTP {tenth:.3f})"
    )


def rare_report(key: str, scores: dict[str, np.ndarray], pdtp: np.ndarray) -> str:
    """Where each order meets the first record above higher thresholds (rarer violators), from the full run."""
    parts = []
    for thr in (1.0, 2.0, 3.0, 4.0, 5.0):
        above = pdtp > thr
        if not above.any():
            continue
        row = first_violator(np.arange(len(pdtp)), above)
        each = ", ".join(f"{n} {first_violator(screen.risk_order(s), above)}" for n, s in scores.items())
        parts.append(f"> {thr:g} ({int(above.sum())} records): row {row}, {each}")
    return f"first_above_{key}: refits until the first record above a threshold; " + "; ".join(parts)


def cli_run(key: str, records: int, seed: int, out: Path, *flags: str) -> tuple[float, dict, pd.DataFrame]:
    """A whole ``mptool pdtp --engine refit --jobs 2`` in its own process: wall seconds, summary, table.
    Its CPU seconds (the process and its workers) are added to :data:`CPU`, keyed by ``out``'s name.

    Each run starts its own workers, as a user's run does (a fail-fast stop ends the workers
    of its process, so runs in one process would not pay the same start-up).
    """
    cmd = [sys.executable, "-m", "mptool", "pdtp", str(ADULT_CSV), "-m", str(config(CONFIGS[key])), "--engine",
           "refit", "--jobs", str(JOBS), "--train-size", str(records), "--seed", str(seed), "--out", str(out),
           "--force", "-q", *flags]
    proc, seconds, CPU[out.name] = run_timed(cmd, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"mptool failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    summary = json.loads((out / "pdtp.json").read_text())["summary"]
    return seconds, summary, pd.read_csv(out / "pdtp.csv")


def refits_to_verdict(summary: dict) -> int:
    """Records refitted (and reported) before the run could give its verdict."""
    return summary["stopped"]["after"] if "stopped" in summary else summary["n"]


def bench_recall(key: str, records: int, tmp: Path) -> None:
    """Full row-order refit (baseline and truth), every screen's recall, fail-fast in both orders (spec's seed)."""
    spec = load_spec(config(CONFIGS[key]), {"data.train_size": records})
    load0 = os.getloadavg()[0]
    t_full, full, table = cli_run(key, records, spec.seed, tmp / f"{key}-full", "--order", "row")
    t_risk, risk, _ = cli_run(key, records, spec.seed, tmp / f"{key}-risk", "--fail-fast")
    t_row, row, _ = cli_run(key, records, spec.seed, tmp / f"{key}-row", "--fail-fast", "--order", "row")
    prep = prepare(ADULT_CSV, spec)
    model = fit_checked(prep.template, prep.train)
    t1 = time.perf_counter()
    scores = candidate_scores(model, prep.train, prep.classes, spec.output.bin_size / 2)
    t_screen = time.perf_counter() - t1
    pdtp = table.set_index("row").loc[prep.train.rows, "pdtp"].to_numpy()
    print(
        f"# {key}: {records} records, {full['violations']} above DTP-1, max PDTP {full['max']:.3f}; "
        f"every screen together {t_screen:.2f} s (load {load0:.1f})"
    )
    print(screen_report(key, scores, pdtp, full["threshold"]))
    print(rare_report(key, scores, pdtp))
    print(
        f"fail_fast_{key}: {t_risk:.1f} s wall, {CPU[f'{key}-risk']:.1f} CPU s to the verdict with --fail-fast in "
        f"risk order ({risk.get('order')}; {refits_to_verdict(risk)} refits) vs {t_full:.1f} s wall, "
        f"{CPU[f'{key}-full']:.1f} CPU s for the full row-order refit ({t_full / t_risk:.1f}x in wall, "
        f"{CPU[f'{key}-full'] / CPU[f'{key}-risk']:.1f}x in CPU) and {t_row:.1f} s wall, {CPU[f'{key}-row']:.1f} CPU s "
        f"for --fail-fast in row order ({refits_to_verdict(row)} refits; {t_row / t_risk:.2f}x in wall); "
        f"{records} records, --jobs {JOBS}, whole runs incl. start-up (CPU of each process and its workers); "
        f"load {load0:.1f} before, {os.getloadavg()[0]:.1f} after"
    )


def bench_first_violator(key: str, records: int, seeds: int, tmp: Path) -> None:
    """Refits and seconds to the first violator, risk vs row order, over seeds (each draws another T)."""
    spec = load_spec(config(CONFIGS[key]), {"data.train_size": records})
    found = {"risk": [], "row": []}
    secs = {"risk": [], "row": []}
    for seed in range(spec.seed, spec.seed + seeds):
        for order in ("risk", "row"):
            t, summary, _ = cli_run(key, records, seed, tmp / f"{key}-{order}-{seed}", "--fail-fast", "--order", order)
            found[order].append(refits_to_verdict(summary))
            secs[order].append(t)
        print(f"# {key} {records} records seed {seed}: first violator after {found['risk'][-1]} refits in risk "
              f"order ({secs['risk'][-1]:.1f} s), {found['row'][-1]} in row order ({secs['row'][-1]:.1f} s)")
    risk, row = np.mean(found["risk"]), np.mean(found["row"])
    print(
        f"first_violator_{key}_{records}: mean {risk:.1f} refits in risk order vs {row:.1f} in row order "
        f"({row / risk:.2f}x); mean {np.mean(secs['risk']):.1f} s vs {np.mean(secs['row']):.1f} s "
        f"({np.mean(secs['row']) / np.mean(secs['risk']):.2f}x); seeds {spec.seed}..{spec.seed + seeds - 1}, "
        f"whole runs, --jobs {JOBS}; load {os.getloadavg()[0]:.1f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=300, help="T for the full refit and the screens' recall")
    ap.add_argument("--models", default="nn,rf")
    ap.add_argument("--paper-records", type=int, default=1000, help="T for first-violator runs (0 = skip)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds of the first-violator runs")
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # the MLP's ConvergenceWarning on A(T)
    with tempfile.TemporaryDirectory() as tmp:
        for key in args.models.split(","):
            bench_recall(key, args.records, Path(tmp))
        if args.paper_records and "nn" in args.models.split(","):
            bench_first_violator("nn", args.paper_records, args.seeds, Path(tmp))


if __name__ == "__main__":
    main()
