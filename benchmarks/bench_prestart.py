"""Benchmark: ``mptool pdtp --jobs 2`` as fresh processes, workers started late or early (issue 27 item 5).

Each run is a new ``python -m mptool pdtp`` process on the bundled Adult data (``--train-size
RECORDS``, ``--engine refit``, ``--noise-floor 0``), as a user runs it: the interpreter starts,
imports, reads the data, fits A(T), then refits every record of T. Three ways, alternated
``--repeats`` times so that a change of load hits all three alike:

- ``jobs 1``: the refits in this one process (the baseline);
- ``late``: ``--jobs 2`` with ``MPTOOL_PRESTART=0``: the two workers start when the first batch
  of refits is submitted, as before :mod:`mptool.runtime.prestart`;
- ``early``: ``--jobs 2``: the workers start right after the flags and the spec are checked,
  before this process's heavy imports, the reading and the fit (:mod:`mptool.api.early`).

Prints, per run, the wall time, the CPU time of the process and its workers (``RUSAGE_CHILDREN``),
pdtp.json's ``leave_one_out_s`` and ``workers.prestart.wait_s`` (what was left of the workers'
start at the first batch), and the load before it; then the medians, the ratio early/late, the
parallel efficiency t(jobs 1) / (2 t(jobs 2)) of the whole command, and whether every pdtp.csv is
identical to ``--jobs 1``'s. BLAS is limited to one thread per process.

Usage: python benchmarks/bench_prestart.py [--records 100] [--repeats 2] [--models mlp20,forest10]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mptool.inputs.bundled import ADULT_CSV, config


def spec_file(name: str, folder: Path) -> Path:
    """The bundled network spec, or with a 10-tree forest: written as YAML for the CLI."""
    import yaml

    doc = yaml.safe_load(Path(config("adult-nn.yaml")).read_text())
    if name == "forest10":
        doc["model"] = {**doc["model"], "estimator": "random_forest", "params": {"n_estimators": 10}}
    else:
        doc["model"]["params"] = {**doc["model"].get("params", {}), "max_iter": 20}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def one(spec: Path, records: int, jobs: int, early: bool, out: Path) -> dict[str, float | str]:
    """One fresh ``mptool pdtp`` process: wall, CPU (with its workers), timings from pdtp.json, pdtp.csv."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "MPTOOL_PRESTART": "1" if early else "0"}
    argv = [sys.executable, "-m", "mptool", "pdtp", str(ADULT_CSV), "-m", str(spec), "--train-size", str(records),
            "--engine", "refit", "--noise-floor", "0", "--jobs", str(jobs), "--out", str(out), "--force", "-q"]
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"mptool pdtp exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    summary = json.loads((out / "pdtp.json").read_text())["summary"]
    return {"wall": wall, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "loo": summary["timings"]["leave_one_out_s"], "wait": summary["workers"]["prestart"].get("wait_s") or 0.0,
            "load": load, "csv": (out / "pdtp.csv").read_text()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--models", default="mlp20,forest10")
    args = ap.parse_args()
    ways = {"jobs 1": (1, False), "late": (2, False), "early": (2, True)}
    print(f"# {os.cpu_count()} cores, python {sys.version.split()[0]}, load {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in args.models.split(","):
            spec = spec_file(name, folder)
            runs: dict[str, list[dict[str, float | str]]] = {w: [] for w in ways}
            for r in range(args.repeats):
                for way, (jobs, early) in ways.items():
                    got = one(spec, args.records, jobs, early, folder / f"{name}-{way.replace(' ', '')}-{r}")
                    runs[way].append(got)
                    print(f"# {name} {way} #{r + 1}: wall {got['wall']:.2f} s, CPU {got['cpu']:.2f} s, leave-one-out "
                          f"{got['loo']:.2f} s, wait for pre-started workers {got['wait']:.2f} s (load before "
                          f"{got['load']:.1f})", flush=True)
            med = {w: {k: statistics.median(float(x[k]) for x in v) for k in ("wall", "cpu", "loo", "wait")}
                   for w, v in runs.items()}
            same = all(x["csv"] == runs["jobs 1"][0]["csv"] for v in runs.values() for x in v)
            t1 = med["jobs 1"]["wall"]
            print(f"prestart_{name}: median wall jobs 1 {t1:.2f} s, late {med['late']['wall']:.2f} s, early "
                  f"{med['early']['wall']:.2f} s (early/late {med['early']['wall'] / med['late']['wall']:.3f}); "
                  f"efficiency at 2 workers late {t1 / (2 * med['late']['wall']):.0%}, early "
                  f"{t1 / (2 * med['early']['wall']):.0%}; CPU jobs 1 {med['jobs 1']['cpu']:.2f} s, late "
                  f"{med['late']['cpu']:.2f} s, early {med['early']['cpu']:.2f} s; leave-one-out late "
                  f"{med['late']['loo']:.2f} s, early {med['early']['loo']:.2f} s (of which waiting for the workers "
                  f"{med['early']['wait']:.2f} s); identical pdtp.csv: {same}; {args.records} records, "
                  f"{args.repeats} repeats, load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)


if __name__ == "__main__":
    main()
