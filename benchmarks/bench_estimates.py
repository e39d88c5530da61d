"""Benchmark: do the time estimates hold? (issue 30 item 3: within 2x of the measured time)

For each case, ``mptool check`` (or ``mptool mitigate``'s plan line) gives an estimate, then the
command itself runs as its own process and its wall time is measured (start-up included, as a
user times it). Each line prints the estimate, the measured wall and CPU time (user + system of
the child and its workers), the ratio measured / estimate (a range where the estimate is one:
replicates stop early when records are decided), and the load average when ``check`` started, when
the run started and when it ended: the estimates are of this machine as loaded when ``check`` ran,
so a load that changes between the two moves the ratio (rerun such a case rather than judge it).
For ``pdtp`` it also prints, from pdtp.json, the workers the run used and, for the replicate
engine, the fits it made and the replicates each record got.

Cases: the bundled configs on the bundled Adult data (T = 1,000; ``--sample`` where the engine
refits per record), logistic regression on scikit-learn's breast_cancer, wine and digits written
to CSV, k-NN on wine, an MLP (replicate engine) on breast_cancer, logistic regression on a
30,000-record T of Adult (census-like) with ``--sample 100``, and ``mitigate`` on adult-lr
(release and regularise families) and on breast_cancer with T = 200 (every family, removal too).

Usage: python benchmarks/bench_estimates.py [--quick] [--only TEXT[,TEXT...]]
(--quick: the first 7 cases, a few minutes idle; --only: the cases whose name holds one of the TEXTs)
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mptool.inputs.bundled import ADULT_CSV, CONFIG_DIR

UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0}
LR = "model:\n  estimator: logistic_regression\n  params: {C: 1.0, max_iter: 1000}\n"
KNN = "model:\n  estimator: knn\n  params: {n_neighbors: 5}\n"
MLP = ("model:\n  estimator: mlp\n  params: {hidden_layer_sizes: [16], max_iter: 200}\n")


def seconds(text: str) -> float:
    value, unit = text.split()
    return float(value) * UNITS[unit]


def estimate(line: str) -> tuple[float, float]:
    """(low, high) seconds of an 'about X' or 'about X to Y' phrase."""
    m = re.search(r"about ([0-9.]+ (?:s|min|h))(?: to ([0-9.]+ (?:s|min|h)))?", line)
    if m is None:
        raise ValueError(f"no estimate in: {line}")
    lo = seconds(m.group(1))
    return lo, seconds(m.group(2)) if m.group(2) else lo


def timed(args: list[str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (the child and its workers) and stderr of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(args)}: exit {proc.returncode}: {proc.stderr[-800:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc.stdout + proc.stderr


def sklearn_csv(d: Path, name: str) -> Path:
    from sklearn import datasets

    frame = getattr(datasets, f"load_{name}")(as_frame=True).frame.rename(columns={"target": "label"})
    path = d / f"{name}.csv"
    frame.to_csv(path, index=False)
    return path


def spec(d: Path, name: str, model: str, label: str = "label", extra: str = "") -> Path:
    path = d / f"{name}.yaml"
    path.write_text(f"data:\n  label: {label}\n{extra}{model}seed: 0\n")
    return path


def cases(d: Path, quick: bool) -> list[tuple[str, str, list[str]]]:
    """(name, command, arguments after the command) per case."""
    adult = str(ADULT_CSV)
    bc, wine, digits = (str(sklearn_csv(d, n)) for n in ("breast_cancer", "wine", "digits"))
    out = [
        ("adult-lr", "pdtp", [adult, "--model", str(CONFIG_DIR / "adult-lr.yaml")]),
        ("breast_cancer-lr", "pdtp", [bc, "--model", str(spec(d, "bc-lr", LR))]),
        ("wine-knn", "pdtp", [wine, "--model", str(spec(d, "wine-knn", KNN))]),
        ("digits-lr --sample 100", "pdtp", [digits, "--model", str(spec(d, "digits-lr", LR)), "--sample", "100"]),
        ("adult-dt --sample 100", "pdtp", [adult, "--model", str(CONFIG_DIR / "adult-dt.yaml"), "--sample", "100"]),
        ("breast_cancer-mlp --sample 10", "pdtp", [bc, "--model", str(spec(d, "bc-mlp", MLP)), "--sample", "10"]),
        ("mitigate adult-lr --sample 100 (release, regularise)", "mitigate",
         [adult, "--model", str(CONFIG_DIR / "adult-lr.yaml"), "--sample", "100", "--defences", "release,regularise"]),
    ]
    if quick:
        return out
    return out + [
        ("adult-nb", "pdtp", [adult, "--model", str(CONFIG_DIR / "adult-nb.yaml")]),
        ("adult-knn", "pdtp", [adult, "--model", str(CONFIG_DIR / "adult-knn.yaml")]),
        ("adult-gnb", "pdtp", [adult, "--model", str(CONFIG_DIR / "adult-gnb.yaml")]),
        ("adult-rf --sample 20", "pdtp", [adult, "--model", str(CONFIG_DIR / "adult-rf.yaml"), "--sample", "20"]),
        ("adult-nn --sample 10", "pdtp", [adult, "--model", str(CONFIG_DIR / "adult-nn.yaml"), "--sample", "10"]),
        ("wine-lr", "pdtp", [wine, "--model", str(spec(d, "wine-lr", LR))]),
        ("digits-lr", "pdtp", [digits, "--model", str(spec(d, "digits-lr", LR))]),
        ("census-like lr T=30000 --sample 100", "pdtp",
         [adult, "--model", str(CONFIG_DIR / "adult-lr.yaml"), "--train-size", "30000", "--sample", "100"]),
        ("mitigate breast_cancer-lr T=200 (every family)", "mitigate",
         [bc, "--model", str(spec(d, "bc-lr-m", LR, extra="  train_size: 200\n"))]),
        ("mitigate breast_cancer-mlp T=300 --sample 5 (release, regularise; randomized)", "mitigate",
         [bc, "--model", str(spec(d, "bc-mlp-m", MLP, extra="  train_size: 300\n")), "--sample", "5",
          "--defences", "release,regularise"]),
    ]


def run_facts(out: Path, line: str, lo: float, hi: float, wall: float) -> str:
    """Workers and, for the replicate engine, the fits it made, the replicates per record (pdtp.json) and the
    ratio to the estimate at those fits: the range's ends are every record decided at the first look and
    every record at the last; in between, the estimate grows linearly with the replicate fits."""
    path = out / "pdtp.json"
    if not path.exists():
        return ""
    s = json.loads(path.read_text())
    s = s.get("summary", s)
    w = s.get("workers", {}).get("workers")
    rep = s.get("replicates")
    m = re.search(r"replicates \((\d+) to (\d+) per record\) ([0-9,]+) fit", line)
    if not rep or m is None:
        return f"  [workers {w}]"
    f_lo = int(m.group(3).replace(",", ""))
    f_hi = f_lo * int(m.group(2)) // int(m.group(1))
    at = lo + (hi - lo) * (rep["fits"] - f_lo) / max(f_hi - f_lo, 1)
    return (f"  [workers {w}, replicate fits {rep['fits']} of {f_lo} to {f_hi}, replicates used "
            f"{rep['replicates_used']}; estimate at those fits {at:.1f} s, measured/that {wall / at:.2f}]")


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv[:-1] else []
    py = [sys.executable, "-m", "mptool"]
    print(f"cores {os.cpu_count()}; load {os.getloadavg()[0]:.1f} at the start")
    worst = 1.0
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for name, command, args in cases(d, quick and not only):
            if only and not any(text in name for text in only):
                continue
            out = d / re.sub(r"[^a-z0-9]+", "-", name)
            load_check = os.getloadavg()[0]
            if command == "pdtp":
                _, _, text = timed([*py, "check", *args])
                line = next(ln for ln in text.splitlines() if ln.strip().startswith("pdtp "))
                lo, hi = estimate(line)
                load_run = os.getloadavg()[0]
                wall, cpu, _ = timed([*py, "pdtp", *args, "--out", str(out), "--force", "--quiet"])
            else:  # mitigate: its plan line comes first, then the run, in one process
                load_run = load_check
                wall, cpu, text = timed([*py, "mitigate", *args, "--out", str(out), "--force"])
                line = next(ln for ln in text.splitlines() if ln.startswith("plan:"))
                lo, hi = estimate(line)
            load_end = os.getloadavg()[0]
            ratio_lo, ratio_hi = wall / hi, wall / lo
            off = ratio_lo if ratio_lo > 1 else 1 / ratio_hi if ratio_hi < 1 else 1.0  # outside the range: how far
            worst = max(worst, off)
            span = f"{lo:.1f} s" if lo == hi else f"{lo:.1f} to {hi:.1f} s"
            ratios = f"{ratio_lo:.2f}" if lo == hi else f"{ratio_lo:.2f} to {ratio_hi:.2f}"
            within = "yes" if ratio_lo <= 2.0 and ratio_hi >= 0.5 else "NO"
            print(f"{name:<38} estimate {span:>16}  measured {wall:6.1f} s wall, {cpu:6.1f} s CPU  "
                  f"measured/estimate {ratios:>13}  within 2x: {within}  load at check {load_check:.1f}, "
                  f"run {load_run:.1f} -> {load_end:.1f}{run_facts(out, line, lo, hi, wall)}", flush=True)
    print(f"worst factor off: {worst:.2f}")


if __name__ == "__main__":
    main()
