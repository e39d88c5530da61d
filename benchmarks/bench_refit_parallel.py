"""Benchmark: parallel efficiency of the refit engine, MLP on 300 Adult records (configs/adult-nn.yaml).

The same leave-one-out (one MLP refit per record, Long et al. 5.2 network) at ``--jobs 1``
and ``--jobs 2``; prints the speed-up in wall time and the CPU seconds of each (with the
workers'). BLAS is limited to one thread per process so the
two runs use one and two cores. Goal: speed-up >= 1.7 on 2 cores. The machine's load
average is printed: other processes competing for the cores lower the speed-up.

Usage: python benchmarks/bench_refit_parallel.py [--records 300]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: this process and loky workers
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from _common import cpu_since, cpu_tree  # noqa: E402 - benchmarks/_common.py: CPU with the workers

from mptool.inputs.bundled import ADULT_CSV, config  # noqa: E402
from mptool.inputs.prepare import fit_checked, prepare  # noqa: E402
from mptool.inputs.spec import load_spec  # noqa: E402
from mptool.loo import LooRequest, RefitEngine  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=300)
    args = ap.parse_args()
    spec = load_spec(config("adult-nn.yaml"), {"data.train_size": args.records})
    prep = prepare(ADULT_CSV, spec)
    full = fit_checked(prep.template, prep.train)
    times, cpus, results = {}, {}, {}
    for jobs in (1, 2):
        req = LooRequest(spec, prep.template, prep.train, full, prep.classes, np.arange(prep.train.n), jobs)
        load0 = os.getloadavg()[0]
        before = cpu_tree()
        t0 = time.perf_counter()
        results[jobs] = RefitEngine().run(req, lambda n: None).p_loo
        times[jobs] = time.perf_counter() - t0
        cpus[jobs] = cpu_since(before)[0]  # this process and its live loky workers (their start included)
        print(f"# jobs {jobs}: {times[jobs]:.1f} s wall, {cpus[jobs]:.1f} CPU s (load average before {load0:.1f})")
    same = np.array_equal(results[1], results[2])
    print(
        f"refit_parallel_speedup_mlp: {times[1] / times[2]:.2f}x in wall for {prep.train.n} records "
        f"(jobs 1 {times[1]:.1f} s, {cpus[1]:.1f} CPU s; jobs 2 {times[2]:.1f} s, {cpus[2]:.1f} CPU s with its "
        f"workers: {cpus[2] / cpus[1]:.2f}x the CPU); results identical: {same}; "
        f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )


if __name__ == "__main__":
    main()
