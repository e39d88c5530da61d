"""Benchmark: the MLP's noise floor on Adult (configs/adult-nn.yaml, |T| = 1000), issue 18 item 5.

For a seeded sample of N records of T (default 200), the PDTP of A(T) vs A(T\\{t}) and the
noise floor of the same records: PDTP of A(T) vs A(T with t's row moved to the end), same seed,
zero true influence (``mptool.privacy.noise``). Prints the floor (mean, p95, max, share above
DTP-1's threshold 1; binned and raw), the share of records whose PDTP exceeds the floor's p95,
and what the floor costs in time relative to the leave-one-out on the same records.

Usage: python benchmarks/bench_noise_floor.py [N] [--solver lbfgs]
"""

from __future__ import annotations

import argparse
import contextlib
import os

import numpy as np
import yaml

from mptool.api.pdtp import PdtpOptions, run_pdtp
from mptool.inputs.bundled import ADULT_CSV, config
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import parse_spec


def quiet(total: int, label: str) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext(lambda n: None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=200)
    ap.add_argument("--solver", default=None, help="override the MLP's solver (default adam)")
    args = ap.parse_args()
    raw = yaml.safe_load(config("adult-nn.yaml").read_text())
    if args.solver:
        raw["model"]["params"] = {**(raw["model"].get("params") or {}), "solver": args.solver}
    prep = prepare(ADULT_CSV, parse_spec(raw))
    out = run_pdtp(prep, PdtpOptions(jobs=2, sample=args.n, noise_floor=args.n), quiet)
    s, f, t, tm = out.summary, out.summary["noise_floor"], out.table, out.summary["timings"]
    b, r = f["binned"], f["raw"]
    floor_by_row = {p["row"]: p["pdtp"] for p in f["per_record"]}
    own = np.array([floor_by_row[row] for row in t["row"]])
    print(
        f"noise_floor {s['estimator']} (solver {prep.template.steps[-1][1].solver}), |T| = {s['n_train']}, "
        f"{s['n']} records, floor on the same {f['records']}:\n"
        f"  floor binned: mean {b['mean']:.4g}, p95 {b['p95']:.4g}, max {b['max']:.4g}, "
        f"{100 * b['fraction_above_threshold']:.1f}% above 1\n"
        f"  floor raw:    mean {r['mean']:.4g}, p95 {r['p95']:.4g}, max {r['max']:.4g}, "
        f"{100 * r['fraction_above_threshold']:.1f}% above 1\n"
        f"  PDTP binned:  mean {s['mean']:.4f}, p95 {s['p95']:.4f}, max {s['max']:.4f}, "
        f"{s['violations']} above 1 ({s['violations_bin_edge']} only a bin-edge step)\n"
        f"  records with PDTP above the floor's p95: {f['records_above_p95']} of {s['n']} "
        f"({100 * f['fraction_above_p95']:.1f}%); violations above the floor's p95: "
        f"{int(((t['pdtp'] > 1) & t['above_noise_floor']).sum())} of {s['violations']}; "
        f"PDTP above the record's own floor value: {int((t['pdtp'].to_numpy() > own).sum())}\n"
        f"  time: leave-one-out {tm['leave_one_out_s']:.1f} s, noise floor {tm['noise_floor_s']:.1f} s "
        f"(ratio {tm['noise_floor_s'] / tm['leave_one_out_s']:.2f}); "
        f"load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
