"""Benchmark: the replicate engine against today's paired refit on Adult, with planted nulls (issue 27 items 3-4).

T = 1,000 Adult records built so that some answers are known:

- nulls: ``GROUPS`` records each present 12 times in T (one copy removed leaves 11: expected influence
  about 0); ``NULLS_PER_GROUP`` copies of each are audited;
- canaries: ``CANARIES`` records whose label is flipped (mislabelled outliers: the likeliest to be
  memorised; their true influence is not known, so their flag rate is reported, not called power);
- ``RANDOM`` other records of T drawn with the seed.

Each model (the paper's network configs/adult-nn.yaml, the forest configs/adult-rf.yaml, LightGBM with
bagging) is audited twice in one run on the same records: today's refit engine (``--engine refit``,
with its default noise floor of 20 records) and the replicate engine (``--engine auto``, which detects
the randomness), both with ``--jobs 2``. Prints, per model: flags among nulls / canaries / random
records for both engines, the replicate engine's undecided counts, fits, CPU and wall time, the load,
and the ratio of the two wall times. Power on ground truth: tests/test_randomness.py.

Usage: python benchmarks/bench_randomness.py [--models nn,rf,lgbm] [--replicates 4:16] [--budget FITS]
       [--canaries K] [--random K]   (fewer audited records: the same T, a prefix of the same draws)
       python benchmarks/bench_randomness.py --known-answer 10 --replicates 4:8   (calibration on ground truth)
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd
import yaml

import mptool
from mptool.inputs.bundled import ADULT_CSV, config

GROUPS, NULLS_PER_GROUP, CANARIES, RANDOM, N_TRAIN = 5, 2, 10, 30, 1000
LGBM = {"data": {"label": "income", "drop": ["fnlwgt"], "train_size": 1000, "missing": "drop"},
        "model": {"estimator": "lightgbm.LGBMClassifier",
                  "params": {"n_estimators": 50, "subsample": 0.8, "subsample_freq": 1, "colsample_bytree": 0.8,
                             "n_jobs": 1}, "preprocess": "auto"},
        "output": {"bin_size": 0.01}, "seed": 0}


def build_t(seed: int, canaries: int = CANARIES, random: int = RANDOM, nulls: int = GROUPS * NULLS_PER_GROUP
            ) -> tuple[pd.DataFrame, dict[str, list[int]]]:
    """T of N_TRAIN rows with planted 12-copy groups and flipped-label canaries; audited CSV rows per kind."""
    df = pd.read_csv(ADULT_CSV).replace("?", np.nan).dropna().reset_index(drop=True)
    rng = np.random.default_rng(seed)
    base = df.iloc[rng.choice(len(df), N_TRAIN - GROUPS * 11, replace=False)].reset_index(drop=True)
    groups = base.iloc[:GROUPS]
    t = pd.concat([base, *[groups] * 11], ignore_index=True)
    t = t.iloc[rng.permutation(len(t))].reset_index(drop=True)
    key = t.drop(columns="income").astype(str).agg("|".join, axis=1)
    counts = key.map(key.value_counts())
    null_rows = []
    for k in key[counts == 12].unique():
        null_rows += key.index[key == k][:NULLS_PER_GROUP].tolist()
    singles = np.array(key.index[counts == 1])
    picked = rng.choice(singles, CANARIES + RANDOM, replace=False)  # the same draw whatever is audited
    canary, random_rows = picked[:canaries].tolist(), picked[CANARIES : CANARIES + random].tolist()
    labels = sorted(t["income"].unique())
    t.loc[canary, "income"] = t.loc[canary, "income"].map({labels[0]: labels[1], labels[1]: labels[0]})
    return t, {"null": sorted(null_rows[:nulls]), "canary": sorted(canary), "random": sorted(random_rows)}


def spec_for(name: str) -> dict:
    raw = LGBM if name == "lgbm" else yaml.safe_load(config(f"adult-{name}.yaml").read_text())
    raw = {**raw, "data": {**raw["data"], "train_size": None}}
    return raw


def timed(fn):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def flags(table: pd.DataFrame, rows: list[int]) -> str:
    v = table.set_index("row").loc[rows, "violation"]
    true = sum(x is True or x is np.True_ for x in v)
    und = sum(isinstance(x, str) for x in v)
    return f"{true}/{len(rows)}" + (f" ({und} undecided)" if und else "")


def known_answer(seeds: int, replicates: str, params: dict[str, float]) -> None:
    """The calibration of tests/test_randomness.py over more draws: null rate, power, fits, time, both engines."""
    from mptool.inputs.known_answer import MODULE, known_frame, known_spec

    ALLOW = (MODULE,)  # noqa: N806 - as in tests/test_randomness.py
    rows = []
    for engine in ("refit", "auto"):
        null = large = n_null = n_large = fits = und = 0
        c = w = 0.0
        for seed in range(seeds):
            df, kind = known_frame(seed)
            r, c1, w1 = timed(lambda df=df, seed=seed, engine=engine: mptool.pdtp(
                df, known_spec(seed, **params), allow_import=ALLOW, engine=engine, jobs=1, replicates=replicates,
                noise_floor=0))
            c, w = c + c1, w + w1
            k = kind[r.table["row"].to_numpy()]
            v = np.array([x is True or x is np.True_ for x in r.table["violation"]])
            null, large = null + int(v[k == "null"].sum()), large + int(v[k == "large"].sum())
            n_null, n_large = n_null + int((k == "null").sum()), n_large + int((k == "large").sum())
            und += sum(isinstance(x, str) for x in r.table["violation"])
            fits += r.summary["replicates"]["fits"] if engine == "auto" else len(r.table)
        rows.append(f"| {'replicates ' + replicates if engine == 'auto' else 'refit (today)'} | {null}/{n_null} "
                    f"({100 * null / n_null:.1f}%) | {large}/{n_large} ({100 * large / n_large:.1f}%) | {und} | "
                    f"{fits} | {c:.1f} | {w:.1f} |")
    print(f"known-answer classifier {params or ''}, {seeds} draws (seeds 0..{seeds - 1}), jobs 1, "
          f"load {os.getloadavg()[0]:.1f}")
    print("| engine | nulls flagged | large flagged | undecided | fits | CPU s | wall s |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="nn,rf,lgbm")
    ap.add_argument("--replicates", default="4:16")
    ap.add_argument("--budget", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--canaries", type=int, default=CANARIES, help=f"canaries audited (at most {CANARIES})")
    ap.add_argument("--random", type=int, default=RANDOM, help=f"random records audited (at most {RANDOM})")
    ap.add_argument("--nulls", type=int, default=GROUPS * NULLS_PER_GROUP, help="null records audited")
    ap.add_argument("--known-answer", type=int, default=0, metavar="DRAWS",
                    help="instead: the known-answer calibration over DRAWS seeds (tests/test_randomness.py)")
    ap.add_argument("--ka-params", default="", help="known-answer parameters, e.g. noise=2,memorise=3")
    args = ap.parse_args()
    if args.known_answer:
        params = {k: float(v) for k, v in (kv.split("=") for kv in args.ka_params.split(",") if kv)}
        known_answer(args.known_answer, args.replicates, params)
        return
    t, kinds = build_t(args.seed, min(args.canaries, CANARIES), min(args.random, RANDOM), args.nulls)
    records = sorted(sum(kinds.values(), []))
    print(f"T = {len(t)} Adult records; audited: {len(kinds['null'])} nulls (copies of records present 12 times), "
          f"{len(kinds['canary'])} flipped-label canaries, {len(kinds['random'])} random; jobs 2; "
          f"replicates {args.replicates}, budget {args.budget}")
    print("| model | engine | nulls flagged | canaries flagged | random flagged | fits | CPU s (main process) "
          "| wall s | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        spec = spec_for(name)
        allow = ("lightgbm",) if name == "lgbm" else ()
        old, c_old, w_old = timed(lambda spec=spec, allow=allow: mptool.pdtp(
            t, spec, records=records, engine="refit", jobs=2, allow_import=allow))
        new, c_new, w_new = timed(lambda spec=spec, allow=allow: mptool.pdtp(
            t, spec, records=records, engine="auto", jobs=2, allow_import=allow, replicates=args.replicates,
            budget=args.budget))
        load = os.getloadavg()[0]
        floor = old.summary["noise_floor"]
        fits_old = len(records) + floor.get("records", 0)
        print(f"| {name} | refit (today) | {flags(old.table, kinds['null'])} | {flags(old.table, kinds['canary'])} "
              f"| {flags(old.table, kinds['random'])} | {fits_old} | {c_old:.0f} | {w_old:.0f} | {load:.1f} |")
        rep = new.summary["replicates"]
        print(f"| {name} | replicates | {flags(new.table, kinds['null'])} | {flags(new.table, kinds['canary'])} "
              f"| {flags(new.table, kinds['random'])} | {rep['fits']} | {c_new:.0f} | {w_new:.0f} | {load:.1f} |")
        above = sum(bool(x) for x in old.table.set_index("row").loc[kinds["null"], "above_noise_floor"]) \
            if "above_noise_floor" in old.table else None
        print(f"|   | {name}: randomness {new.summary['randomness']['sources']}; today's floor p95 "
              f"{floor.get('p95', float('nan')):.3f}, nulls above it {above}; replicates used "
              f"{rep['replicates_used']}; decided below {rep['decided_below']}, undecided {rep['undecided']}; "
              f"wall ratio replicates/refit {w_new / w_old:.1f} | | | | | | | |")


if __name__ == "__main__":
    main()
