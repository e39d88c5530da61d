"""Benchmark: per-task overhead of the parallel backends and the refit engine's efficiency at 2 workers.

1. No-op tasks through ``mptool.runtime.parallel.run_tasks`` at 2 workers, loky and Dask (a
   local cluster of 2 worker processes, as ``--backend dask`` starts), workers already
   started: tasks per second, against the same tasks run in this process (``--jobs 1``).
2. Tasks that carry the training set, as the refit engine's chunks do (Adult T, a pandas
   frame): per-task cost with the frame shipped in every task (loky) and scattered once
   (``shared=``, Dask).
3. The refit engine (``RefitEngine``, Long et al. 5.2 leave-one-out) on sub-second fits:
   a random forest of 10 trees and the paper's network cut to 20 epochs, ``--records``
   Adult records; ``--jobs 1`` against ``--jobs 2`` on loky (first call: workers start) and
   Dask; parallel efficiency = t(jobs 1) / (2 t(jobs 2)) by wall time, and by CPU time
   (CPU of jobs 1 / CPU of this process and its workers at jobs 2: the work parallel
   running adds, which a loaded machine does not distort); results must be identical.

4. The same refits as a command runs them (``mptool.api.operations.pdtp`` with ``--engine refit``:
   reading Adult, drawing T, fitting A(T), the refits), workers not yet started: ``--jobs 1``
   against ``--jobs 2`` with the workers started when the first batch is submitted (before:
   ``MPTOOL_PRESTART=0``) and started early, before the data is read (after:
   :mod:`mptool.runtime.prestart`); efficiency as in 3, the wait left for the workers at the
   first batch, and pdtp tables identical to ``--jobs 1``.

5. Dask dispatch, this tree against ``--base REV`` (default 7246d57, the tree before Dask tasks
   went to the client directly; it sent them through joblib's Dask backend, which polls every
   10 ms), each in its own child process: ``mptool.api.operations.pdtp`` of ``adult-nn.yaml`` with
   T = 100 Adult records, ``--dask-records`` (16) of them audited (``--sample``), refit engine
   (one refit per audited record), first at
   ``--jobs 1`` in the child (after a warm-up run), then on a local Dask cluster of 2 worker
   processes (one thread each) whose first run warms the workers, and ``--repeat`` (2) timed runs
   after it. CPU = the child and all its workers; pdtp tables must equal ``--jobs 1``'s.

BLAS is limited to one thread per process. Prints CPU (this process and its workers) and wall time, the
load average before each measurement, and every ratio against ``--jobs 1`` from the same run.

Usage: python benchmarks/bench_task_overhead.py [--tasks 2000] [--records 200] [--parts 1,3,4]
       python benchmarks/bench_task_overhead.py --parts 5 [--base 7246d57] [--dask-records 16] [--repeat 2]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: this process and its workers
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from _common import base_tree, cpu_since, cpu_tree  # noqa: E402 - benchmarks/_common.py
from joblib.externals.loky import get_reusable_executor  # noqa: E402

from mptool.api import operations  # noqa: E402
from mptool.inputs.bundled import ADULT_CSV, config  # noqa: E402
from mptool.inputs.prepare import fit_checked, prepare  # noqa: E402
from mptool.inputs.spec import load_spec  # noqa: E402
from mptool.loo import LooRequest, RefitEngine  # noqa: E402
from mptool.runtime import parallel, prestart  # noqa: E402


def noop(k: int) -> int:
    return k


def touch(X: Any, y: np.ndarray, k: int) -> int:
    """A task that receives T (as a refit chunk does) and does nothing with it."""
    return k + len(y)


def timed(label: str, fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Run ``fn``; print and return its wall time and the CPU time of this process and its workers."""
    load = os.getloadavg()[0]
    before, t0 = cpu_tree(), time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    cpu, main = cpu_since(before)
    print(f"# {label}: wall {wall:.3f} s, CPU {cpu:.3f} s of which this process {main:.3f} s (load before {load:.1f})")
    return wall, cpu, out


def per_task(tasks: int, X: Any, y: np.ndarray) -> None:
    """Parts 1 and 2: tasks per second of no-op tasks and of tasks carrying T."""
    noops = [(k,) for k in range(tasks)]
    carry = [(X, y, k) for k in range(tasks // 10)]
    base, _, _ = timed(f"{tasks} no-op tasks, --jobs 1", lambda: parallel.run_tasks(noop, noops, jobs=1))
    rates = {"jobs 1": tasks / base}
    parallel.run_tasks(noop, noops[:50], jobs=2, backend="loky")  # workers start here, not in the timing
    wall, _, _ = timed(f"{tasks} no-op tasks, loky 2", lambda: parallel.run_tasks(noop, noops, jobs=2))
    rates["loky 2"] = tasks / wall
    wall, _, _ = timed(f"{len(carry)} tasks carrying T, loky 2",
                       lambda: parallel.run_tasks(touch, carry, jobs=2, shared=(X, y)))
    ship = {"loky 2": wall / len(carry)}
    with parallel.session("dask", None, 2):
        parallel.run_tasks(noop, noops[:50], jobs=2, backend="dask")
        wall, _, _ = timed(f"{tasks} no-op tasks, dask 2",
                           lambda: parallel.run_tasks(noop, noops, jobs=2, backend="dask"))
        rates["dask 2"] = tasks / wall
        wall, _, _ = timed(f"{len(carry)} tasks carrying T, dask 2 (shared)",
                           lambda: parallel.run_tasks(touch, carry, jobs=2, backend="dask", shared=(X, y)))
        ship["dask 2"] = wall / len(carry)
    print("task_rate: " + ", ".join(f"{k} {v:,.0f}/s" for k, v in rates.items())
          + f" (ratio loky/jobs1 {rates['loky 2'] / rates['jobs 1']:.4f}; load {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores)")
    print("task_with_T: " + ", ".join(f"{k} {1e3 * v:.2f} ms/task" for k, v in ship.items())
          + f" (T = {len(y)} records, {X.memory_usage(deep=True).sum() / 1e6:.1f} MB as a frame)")


def refit_efficiency(name: str, overrides: dict[str, Any], records: int) -> None:
    """Part 3: the refit engine at --jobs 1 and 2 (loky, dask); efficiency and identical results."""
    spec = load_spec(config("adult-nn.yaml"), {"data.train_size": records, **overrides})
    prep = prepare(ADULT_CSV, spec)
    full = fit_checked(prep.template, prep.train)

    def run(jobs: int, backend: str) -> np.ndarray:
        req = LooRequest(spec, prep.template, prep.train, full, prep.classes, np.arange(prep.train.n), jobs, backend)
        return RefitEngine().run(req, lambda n: None).p_loo

    t1, c1, p1 = timed(f"{name} refit, jobs 1", lambda: run(1, "loky"))
    times, cpus, same = {}, {}, {}
    for label, backend in (("loky 2 (workers start)", "loky"), ("loky 2 (warm)", "loky"), ("dask 2", "dask")):
        if backend == "dask":
            with parallel.session("dask", None, 2):
                run(2, "dask")  # workers start and import here
                times[label], cpus[label], p = timed(f"{name} refit, {label}", lambda: run(2, "dask"))
        else:
            if label.endswith("(workers start)"):
                get_reusable_executor().shutdown(wait=True)  # a cold start, as in a fresh CLI run
            times[label], cpus[label], p = timed(f"{name} refit, {label}", lambda b=backend: run(2, b))
        same[label] = np.array_equal(p, p1, equal_nan=True)
    eff = ", ".join(f"{k} {t1 / (2 * v):.0%} (CPU {c1 / cpus[k]:.0%})" for k, v in times.items())
    print(f"refit_efficiency_{name}: {eff} at 2 workers ({prep.train.n} refits of {t1 / prep.train.n * 1e3:.0f} ms; "
          f"jobs 1 {t1:.1f} s; identical to jobs 1: {all(same.values())}; load {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores)")


def command_efficiency(name: str, overrides: dict[str, Any], records: int) -> None:
    """Part 4: the whole refit audit (read, fit A(T), refits) cold at --jobs 2, workers started late or early."""
    spec = load_spec(config("adult-nn.yaml"), {"data.train_size": records, **overrides})

    def run(jobs: int) -> tuple[str, Any]:
        result = operations.pdtp(ADULT_CSV, spec, jobs=jobs, engine="refit", noise_floor=0)
        return result.table.to_csv(index=False), result.summary["workers"]["prestart"].get("wait_s")

    t1, c1, (p1, _) = timed(f"{name} command, jobs 1", lambda: run(1))
    times, cpus, same, waits = {}, {}, {}, {}
    for label, on in (("late start (before)", "0"), ("pre-started (after)", "1")):
        get_reusable_executor().shutdown(wait=True)  # a cold start, as in a fresh CLI run
        os.environ[prestart.ENV] = on
        try:
            times[label], cpus[label], (p, waits[label]) = timed(f"{name} command, jobs 2, {label}", lambda: run(2))
        finally:
            os.environ.pop(prestart.ENV, None)
        same[label] = p == p1
    eff = ", ".join(f"{k} {t1 / (2 * v):.0%} (CPU {c1 / cpus[k]:.0%}; wall {v:.1f} s)" for k, v in times.items())
    wait = waits["pre-started (after)"]
    print(f"command_efficiency_{name}: {eff} at 2 workers (jobs 1 {t1:.1f} s; after/before wall "
          f"{times['pre-started (after)'] / times['late start (before)']:.3f}; wait for pre-started workers at the "
          f"first batch {'n/a' if wait is None else f'{wait:.2f} s'}; identical to jobs 1: {all(same.values())}; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


#: Part 5's child: run with PYTHONPATH set to the tree being measured; prints one JSON line.
DASK_CHILD = """
import json, logging, os, sys, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, {bench!r})
from _common import cpu_since, cpu_tree
from mptool.api import operations
from mptool.inputs.bundled import ADULT_CSV, config
from mptool.inputs.spec import load_spec
from mptool.runtime import parallel
logging.getLogger("distributed").setLevel(logging.ERROR)
spec = load_spec(config("adult-nn.yaml"), {{"data.train_size": 100}})

def run(jobs, backend):
    before, t0 = cpu_tree(), time.perf_counter()
    table = operations.pdtp(ADULT_CSV, spec, sample={records}, jobs=jobs, engine="refit", noise_floor=0,
                            backend=backend).table
    wall = time.perf_counter() - t0
    return cpu_since(before)[0], wall, table.to_csv(index=False)

run(1, "loky")
one = run(1, "loky")
with parallel.session("dask", None, 2):
    run(2, "dask")
    dask = [run(2, "dask") for _ in range({repeat})]
print(json.dumps({{"jobs1": one[:2], "dask": [d[:2] for d in dask], "same": all(d[2] == one[2] for d in dask)}}))
"""


def dask_dispatch(base: str, records: int, repeat: int) -> None:
    """Part 5: CPU and wall of a small refit audit on a local Dask cluster, this tree against ``base``."""
    bench = str(Path(__file__).resolve().parent)
    code = DASK_CHILD.format(bench=bench, records=records, repeat=repeat)
    results, loads = {}, {}
    with tempfile.TemporaryDirectory(prefix="bench-dask-") as tmp, base_tree(base, Path(tmp) / "base") as old:
        for name, tree in (("this tree", Path(bench).parent), (f"base {base}", old)):
            loads[name] = os.getloadavg()[0]
            env = {**os.environ, "PYTHONPATH": str(tree)}
            done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp)
            if done.returncode:
                raise SystemExit(f"{name} failed: {done.stderr[-800:]}")
            results[name] = json.loads(done.stdout.strip().splitlines()[-1])
            r = results[name]
            print(f"# {name}: --jobs 1 {r['jobs1'][0]:.2f} CPU s ({r['jobs1'][1]:.1f} s wall); dask 2 "
                  + ", ".join(f"{c:.2f} CPU s ({w:.1f} s wall)" for c, w in r["dask"])
                  + f"; tables equal to --jobs 1: {r['same']} (load before {loads[name]:.1f})")
    new, old_r = results["this tree"], results[f"base {base}"]
    lo_new, hi_new = min(c for c, _ in new["dask"]), max(c for c, _ in new["dask"])
    lo_old, hi_old = min(c for c, _ in old_r["dask"]), max(c for c, _ in old_r["dask"])
    print(f"dask_dispatch: MLP refit audit of {records} of 100 records on a local 2-worker Dask cluster, CPU of the "
          f"process and "
          f"its workers: this tree {lo_new:.2f}-{hi_new:.2f} s, base {base} {lo_old:.2f}-{hi_old:.2f} s "
          f"({lo_old / lo_new:.2f}x by the minimum); --jobs 1 {new['jobs1'][0]:.2f} / {old_r['jobs1'][0]:.2f} s; "
          f"identical to --jobs 1: {new['same'] and old_r['same']}; load {min(loads.values()):.1f}-"
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--records", type=int, default=200)
    ap.add_argument("--parts", default="1,3,4", help="parts to run (2 runs with 1; 5 only when named)")
    ap.add_argument("--base", default="7246d57", help="part 5: the revision to compare with")
    ap.add_argument("--dask-records", type=int, default=16, help="part 5: records audited (of T's 100)")
    ap.add_argument("--repeat", type=int, default=2, help="part 5: timed runs on the cluster")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    logging.getLogger("distributed").setLevel(logging.ERROR)
    forest = {"model.estimator": "random_forest", "model.params": {"n_estimators": 10}}
    mlp = {"model.params": {"max_iter": 20}}
    if "4" in parts:  # first: no worker of this process has started yet
        command_efficiency("forest10", forest, args.records)
        command_efficiency("mlp20", mlp, args.records)
    if "1" in parts:
        spec = load_spec(config("adult-nn.yaml"), {"data.train_size": 1000})
        prep = prepare(ADULT_CSV, spec)
        per_task(args.tasks, prep.train.X, prep.train.y)
    if "3" in parts:
        refit_efficiency("forest10", forest, args.records)
        refit_efficiency("mlp20", mlp, args.records)
    if "5" in parts:
        dask_dispatch(args.base, args.dask_records, args.repeat)


if __name__ == "__main__":
    main()
