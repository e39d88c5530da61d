"""Benchmark: PDTP of all 45,222 complete Adult records, categorical naive Bayes (configs/adult-nb.yaml).

The exact naive Bayes engine (counts minus the record, vectorised over every record) against
the refit engine, whose time is measured on a seeded 500-record sample (``--sample 500``,
same T) and extrapolated linearly to 45,222 records. Both at ``--jobs 2``. Goal: exact
under 3 s and at least 1000x faster than refit. Times are of ``run_pdtp`` (full fit,
leave-one-out, table), not of reading the CSV or importing.

Prints wall and CPU seconds of each (CPU: user + system of this process and of its loky
workers, :func:`_common.cpu_tree`), the load average before and after, and the ratio of the
two engines by wall and by CPU, measured in the same run.

Usage: python benchmarks/bench_nb_adult.py [--refit-sample 500]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time

import yaml
from _common import cpu_since, cpu_tree  # benchmarks/_common.py

from mptool.api.pdtp import PdtpOptions, run_pdtp
from mptool.inputs.bundled import ADULT_CSV, config
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import parse_spec


def quiet(total: int, label: str) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext(lambda n: None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refit-sample", type=int, default=500, help="records the refit engine is timed on")
    args = ap.parse_args()
    raw = yaml.safe_load(config("adult-nb.yaml").read_text())
    raw["data"]["train_size"] = None  # every complete row
    spec = parse_spec(raw)
    prep = prepare(ADULT_CSV, spec)
    n, k = prep.train.n, args.refit_sample
    load0 = os.getloadavg()[0]
    before, t0 = cpu_tree(), time.perf_counter()
    exact = run_pdtp(prep, PdtpOptions(jobs=2, engine="exact"), quiet)
    t_exact = time.perf_counter() - t0
    c_exact, _ = cpu_since(before)
    before, t0 = cpu_tree(), time.perf_counter()
    refit = run_pdtp(prep, PdtpOptions(jobs=2, engine="refit", sample=k), quiet)
    t_refit, c_refit = (time.perf_counter() - t0) * n / k, cpu_since(before)[0] * n / k
    load1 = os.getloadavg()[0]
    same = exact.table.set_index("row").loc[refit.table["row"], "pdtp"].to_numpy()
    diff = float(abs(same - refit.table["pdtp"].to_numpy()).max())
    print(
        f"nb_adult_exact_pdtp: {t_exact:.2f} s wall, {c_exact:.2f} CPU s for {n} records (engine "
        f"{exact.summary['engine']}); refit extrapolated from {k} records: {t_refit:.0f} s wall, {c_refit:.0f} CPU s "
        f"(this process and its workers); ratio {t_refit / t_exact:.0f}x by wall, {c_refit / c_exact:.0f}x by CPU; "
        f"max |exact - refit| PDTP on the {k} = {diff:.1e}; load {load0:.1f} before, {load1:.1f} after "
        f"({os.cpu_count()} CPUs)"
    )


if __name__ == "__main__":
    main()
