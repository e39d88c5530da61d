"""Benchmark: parallel efficiency of the refit engine from 1 to 16 workers on sub-second fits (issue 27 item 5).

The refit engine (``RefitEngine``, Long et al. 5.2 leave-one-out: one refit per record) on
``--records`` Adult records, for two sub-second fits: a random forest of 10 trees and the
paper's network (configs/adult-nn.yaml) cut to 20 epochs. For each worker count W in
``--workers`` (loky, the default backend) it measures:

- cold: the run as a fresh CLI sees it, the W worker processes started inside the timing;
- warm: the same run again with the W workers already started (loky reuses them).

Parallel efficiency at W workers = t(1) / (W * t(W)) by wall time, where t(1) is the same
refits in this process (``--jobs 1``). Beside it, the CPU efficiency c(1) / c(W), c being the
CPU seconds of this process and its workers: where it stays near 100 % while the wall-time
efficiency drops, the workers wait (dispatch, the last chunks); where it drops too, each fit
itself costs more CPU (clock speed under all-core load, shared caches and memory, or work added
by running in parallel). ``--prestart`` starts the cold run's workers early, as ``mptool pdtp
--jobs W`` does (:mod:`mptool.runtime.prestart`), then fits A(T) in this process (the work the
start overlaps) before the timed refits. The results at every W must equal ``--jobs 1``'s
bit for bit (printed). BLAS is limited to one thread per process. The machine, its core
count and the load average before each measurement are printed: efficiency is only
meaningful where the machine has at least W idle cores.

Usage: python benchmarks/bench_scaleout.py [--records 320] [--workers 1,2,4,8,16] [--models forest10,mlp20]
       [--prestart]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: this process and loky workers
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from _common import cpu_tree as cpu_all  # noqa: E402 - this process and its workers
from joblib.externals.loky import get_reusable_executor  # noqa: E402

from mptool.api.operations import WARM_MODULES  # noqa: E402
from mptool.inputs.bundled import ADULT_CSV, config  # noqa: E402
from mptool.inputs.prepare import fit_checked, prepare  # noqa: E402
from mptool.inputs.spec import load_spec  # noqa: E402
from mptool.loo import LooRequest, RefitEngine  # noqa: E402
from mptool.runtime import prestart  # noqa: E402

MODELS: dict[str, dict[str, Any]] = {
    "forest10": {"model.estimator": "random_forest", "model.params": {"n_estimators": 10}},
    "mlp20": {"model.params": {"max_iter": 20}},
}


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else platform.processor()."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def measure(name: str, records: int, workers: list[int], early: bool = False) -> list[str]:
    """Time the refit engine at each worker count, cold and warm; return the summary rows."""
    spec = load_spec(config("adult-nn.yaml"), {"data.train_size": records, **MODELS[name]})
    prep = prepare(ADULT_CSV, spec)
    full = fit_checked(prep.template, prep.train)

    def run(jobs: int, early: bool = False) -> tuple[float, np.ndarray, float, float]:
        fitted = full
        if early:  # as mptool pdtp --jobs W: the workers start, then this process fits A(T) (not timed)
            prestart.start(jobs, "loky", (*WARM_MODULES, prep.choice.cls.__module__))
            fitted = fit_checked(prep.template, prep.train)
        load = os.getloadavg()[0]
        before, t0 = cpu_all(), time.perf_counter()
        req = LooRequest(spec, prep.template, prep.train, fitted, prep.classes, np.arange(prep.train.n), jobs)
        p = RefitEngine().run(req, lambda n: None).p_loo
        wall, after = time.perf_counter() - t0, cpu_all()
        prestart.release()
        return wall, p, load, sum(v - before.get(pid, 0.0) for pid, v in after.items())

    t1, p1, load1, c1 = run(1)
    print(f"# {name}: jobs 1 {t1:.2f} s for {prep.train.n} refits ({1e3 * t1 / prep.train.n:.0f} ms each; "
          f"CPU {c1:.2f} s; load before {load1:.1f})", flush=True)
    rows = [f"| {name} | 1 | {t1:.2f} | {t1:.2f} | 100 % | 100 % | 100 % | yes | {load1:.1f} |"]
    for w in (w for w in workers if w > 1):
        get_reusable_executor().shutdown(wait=True)  # a cold start, as in a fresh CLI run
        cold, pc, load_c, _ = run(w, early)
        warm, pw, load_w, cw = run(w)
        same = all(np.array_equal(p, p1, equal_nan=True) for p in (pc, pw))
        print(f"# {name}: jobs {w} cold {cold:.2f} s, warm {warm:.2f} s; efficiency cold {t1 / (w * cold):.0%}, "
              f"warm {t1 / (w * warm):.0%}, warm CPU {c1 / cw:.0%}; identical to jobs 1: {same} "
              f"(load before {load_c:.1f}/{load_w:.1f})", flush=True)
        rows.append(f"| {name} | {w} | {cold:.2f} | {warm:.2f} | {t1 / (w * cold):.0%} | {t1 / (w * warm):.0%} | "
                    f"{c1 / cw:.0%} | {'yes' if same else 'NO'} | {max(load_c, load_w):.1f} |")
    get_reusable_executor().shutdown(wait=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=320)
    ap.add_argument("--workers", default="1,2,4,8,16")
    ap.add_argument("--models", default="forest10,mlp20")
    ap.add_argument("--prestart", action="store_true", help="cold runs start their workers early (mptool pdtp's way)")
    args = ap.parse_args()
    workers = sorted({int(w) for w in args.workers.split(",")} | {1})
    print(f"# machine: {os.cpu_count()} cores, {cpu_model()}; python {platform.python_version()}; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    rows = ["| model | workers | cold s | warm s | efficiency cold | efficiency warm | CPU efficiency warm | identical "
            "| load |", "|---|---|---|---|---|---|---|---|---|"]
    for name in args.models.split(","):
        rows += measure(name, args.records, workers, args.prestart)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
