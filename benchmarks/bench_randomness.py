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
and the ratios of the two wall and CPU times. Power on ground truth: tests/test_randomness.py.

``--time-to-verdict`` instead audits every record of T with ``--fail-fast`` (risk order), today's refit engine
(its default noise floor) and the replicate engine, per model in one run, and prints each verdict line, the wall
and CPU seconds to it (CPU of this process and its live workers), the fits, the load, the ratio
replicate/refit, and what the first decided violation is (canary, null or other record of T).

Usage: python benchmarks/bench_randomness.py [--models nn,rf,lgbm] [--replicates 4:16] [--budget FITS]
       [--canaries K] [--random K] [--nulls K]   (a prefix of the same draws: fewer or, for random and
       nulls, more audited records of the same T)
       python benchmarks/bench_randomness.py --time-to-verdict [--models ...] [--budget FITS] [--error-control bh]
       python benchmarks/bench_randomness.py --known-answer 10 --replicates 4:8   (calibration on ground truth)

``--engines refit`` or ``--engines replicates`` runs one engine only; ``--checkpoint DIR`` saves each engine's
finished fits under DIR/<model>-<engine> (the CLI's ``--resume`` checkpoint), so an audit too long for one
sitting is continued by running the same command again: the results are those of an uninterrupted run, the
fits column counts the fits taken from the checkpoint too, and the CPU and wall columns are this sitting's
only (the line after the row says how many fits were taken from the checkpoint).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: this process and loky workers
os.environ.setdefault("OMP_NUM_THREADS", "1")

import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import yaml  # noqa: E402
from _common import cpu_tree as cpu_all  # noqa: E402 - CPU of this process and its live workers

import mptool  # noqa: E402
from mptool.cli.pdtp import qualified_verdict, verdict_line  # noqa: E402
from mptool.inputs.bundled import ADULT_CSV, config  # noqa: E402
from mptool.runtime.checkpoint import Checkpoint  # noqa: E402

GROUPS, NULLS_PER_GROUP, CANARIES, RANDOM, N_TRAIN = 5, 2, 10, 30, 1000
LGBM = {"data": {"label": "income", "drop": ["fnlwgt"], "train_size": 1000, "missing": "drop"},
        "model": {"estimator": "lightgbm.LGBMClassifier",
                  "params": {"n_estimators": 50, "subsample": 0.8, "subsample_freq": 1, "colsample_bytree": 0.8,
                             "n_jobs": 1}, "preprocess": "auto"},
        "output": {"bin_size": 0.01}, "seed": 0}


def build_t(seed: int, canaries: int = CANARIES, random: int = RANDOM, nulls: int = GROUPS * NULLS_PER_GROUP
            ) -> tuple[pd.DataFrame, dict[str, list[int]]]:
    """T of N_TRAIN rows with planted 12-copy groups and flipped-label canaries; audited CSV rows per kind.

    ``random`` above RANDOM and ``nulls`` above GROUPS * NULLS_PER_GROUP extend the default draws (which stay
    a prefix). The returned dict also has ``all_null`` (every copy of a 12-copy group) and ``all_canary``.
    """
    df = pd.read_csv(ADULT_CSV).replace("?", np.nan).dropna().reset_index(drop=True)
    rng = np.random.default_rng(seed)
    base = df.iloc[rng.choice(len(df), N_TRAIN - GROUPS * 11, replace=False)].reset_index(drop=True)
    groups = base.iloc[:GROUPS]
    t = pd.concat([base, *[groups] * 11], ignore_index=True)
    t = t.iloc[rng.permutation(len(t))].reset_index(drop=True)
    key = t.drop(columns="income").astype(str).agg("|".join, axis=1)
    counts = key.map(key.value_counts())
    copies = [key.index[key == k].tolist() for k in key[counts == 12].unique()]
    null_rows = [r for c in copies for r in c[:NULLS_PER_GROUP]] + [r for c in copies for r in c[NULLS_PER_GROUP:]]
    singles = np.array(key.index[counts == 1])
    picked = rng.choice(singles, CANARIES + RANDOM, replace=False)  # the same draw whatever is audited
    if random > RANDOM:  # more random records: drawn after, so the default ones stay the first RANDOM
        picked = np.concatenate([picked, rng.choice(np.setdiff1d(singles, picked), random - RANDOM, replace=False)])
    canary, random_rows = picked[:canaries].tolist(), picked[CANARIES : CANARIES + random].tolist()
    labels = sorted(t["income"].unique())
    t.loc[canary, "income"] = t.loc[canary, "income"].map({labels[0]: labels[1], labels[1]: labels[0]})
    return t, {"null": sorted(null_rows[:nulls]), "canary": sorted(canary), "random": sorted(random_rows),
               "all_null": sorted(null_rows), "all_canary": picked[:CANARIES].tolist()}


def spec_for(name: str) -> dict:
    raw = LGBM if name == "lgbm" else yaml.safe_load(config(f"adult-{name}.yaml").read_text())
    raw = {**raw, "data": {**raw["data"], "train_size": None}}
    return raw


def timed(fn):
    """``fn()``, its CPU seconds (this process and its live workers) and its wall seconds."""
    c0, w0 = cpu_all(), time.perf_counter()
    out = fn()
    w, c1 = time.perf_counter() - w0, cpu_all()
    return out, sum(v - c0.get(pid, 0.0) for pid, v in c1.items()), w


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


def kind_of(row: int | None, kinds: dict[str, list[int]]) -> str:
    """What a CSV row of T is in the benchmark's design: canary, null (a copy of a 12-copy group) or other."""
    if row is None:
        return "none (no decided violation)"
    return "canary" if row in kinds["all_canary"] else "null" if row in kinds["all_null"] else "other (random) record"


def time_to_verdict(t: pd.DataFrame, kinds: dict[str, list[int]], models: list[str], replicates: str,
                    budget: int | None, control: str = "bh") -> None:
    """Issue 27 item 5: ``--fail-fast`` over every record of T, today's refit engine vs the replicate engine.

    Per model: the verdict line, wall and CPU seconds to it, the fits (refit: the refits run and the noise
    floor's; replicates: the engine's, plus the detection's), the load, and the replicate/refit ratio.
    """
    print(f"time to verdict: T = {len(t)} Adult records, every record audited with --fail-fast (risk order), "
          f"jobs 2; replicates {replicates}, budget {budget}, error control {control}")
    rows = []
    for name in models:
        spec, allow = spec_for(name), ("lightgbm",) if name == "lgbm" else ()
        out = {}
        for engine in ("refit", "auto"):
            load = os.getloadavg()[0]
            r, c, w = timed(lambda spec=spec, allow=allow, engine=engine: mptool.pdtp(
                t, spec, engine=engine, jobs=2, allow_import=allow, fail_fast=True, replicates=replicates,
                budget=budget if engine == "auto" else None, error_control=control))
            s = r.summary
            if s.get("replicates"):
                rep = s["replicates"]
                fits = f"{rep['fits']} (+ A(T), 3 detection refits)"
                used = f"; replicates used {rep['replicates_used']}"
            else:
                stop = s.get("stopped") or {}
                fits = f"{stop.get('refits_run', s['n'])} + {s['noise_floor'].get('records', 0)} floor (+ A(T))"
                used = ""
            row = (s.get("stopped") or {}).get("row")
            print(f"{name} {engine}: {qualified_verdict(s, verdict_line(s))}")
            print(f"  first decided violation: {kind_of(row, kinds)}; wall {w:.1f} s, CPU {c:.1f} s, fits {fits}, "
                  f"load {load:.1f} -> {os.getloadavg()[0]:.1f}{used}", flush=True)
            out[engine] = (w, c, fits, kind_of(row, kinds), f"{load:.1f}-{os.getloadavg()[0]:.1f}")
        (w0, c0, f0, k0, l0), (w1, c1, f1, k1, l1) = out["refit"], out["auto"]
        rows.append(f"| {name} | {w0:.0f} / {c0:.0f} | {f0} | {k0} | {w1:.0f} / {c1:.0f} | {f1} | {k1} | "
                    f"{w1 / w0:.1f}x / {c1 / c0:.1f}x | {l0}; {l1} |")
    print("| model | refit: wall / CPU s | refit fits | refit's first violator | replicates: wall / CPU s | "
          "replicate fits | replicates' first decided violator | ratio replicates/refit (wall / CPU) | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="nn,rf,lgbm")
    ap.add_argument("--replicates", default="4:16")
    ap.add_argument("--budget", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--canaries", type=int, default=CANARIES, help=f"canaries audited (at most {CANARIES})")
    ap.add_argument("--random", type=int, default=RANDOM, help="random records audited")
    ap.add_argument("--nulls", type=int, default=GROUPS * NULLS_PER_GROUP, help=f"null records audited (at most "
                    f"{GROUPS * 12})")
    ap.add_argument("--time-to-verdict", action="store_true", help="instead: --fail-fast on every record of T")
    ap.add_argument("--error-control", default="bh", help="replicate engine's error control with --time-to-verdict")
    ap.add_argument("--engines", default="refit,replicates", help="which engines to run (one or both)")
    ap.add_argument("--checkpoint", default=None, metavar="DIR",
                    help="save finished fits under DIR and take them from there when rerun (resume)")
    ap.add_argument("--known-answer", type=int, default=0, metavar="DRAWS",
                    help="instead: the known-answer calibration over DRAWS seeds (tests/test_randomness.py)")
    ap.add_argument("--ka-params", default="", help="known-answer parameters, e.g. noise=2,memorise=3")
    args = ap.parse_args()
    engines = {e.strip() for e in args.engines.split(",") if e.strip()}
    if not engines or not engines <= {"refit", "replicates"}:
        ap.error("--engines takes refit, replicates or refit,replicates")
    if (args.known_answer or args.time_to_verdict) and (args.checkpoint or engines != {"refit", "replicates"}):
        ap.error("--engines and --checkpoint apply to the comparison table only (not --known-answer, "
                 "--time-to-verdict)")
    if args.known_answer:
        params = {k: float(v) for k, v in (kv.split("=") for kv in args.ka_params.split(",") if kv)}
        known_answer(args.known_answer, args.replicates, params)
        return
    t, kinds = build_t(args.seed, min(args.canaries, CANARIES), args.random, args.nulls)
    if args.time_to_verdict:
        time_to_verdict(t, kinds, args.models.split(","), args.replicates, args.budget, args.error_control)
        return
    records = sorted(kinds["null"] + kinds["canary"] + kinds["random"])
    print(f"T = {len(t)} Adult records; audited: {len(kinds['null'])} nulls (copies of records present 12 times), "
          f"{len(kinds['canary'])} flipped-label canaries, {len(kinds['random'])} random; jobs 2; "
          f"replicates {args.replicates}, budget {args.budget}")
    print("| model | engine | nulls flagged | canaries flagged | random flagged | fits | CPU s "
          "| wall s | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        spec = spec_for(name)
        allow = ("lightgbm",) if name == "lgbm" else ()
        load0 = os.getloadavg()[0]
        saved: dict[str, Any] = {}

        def resumable(engine: str, saved: dict[str, Any] = saved, name: str = name) -> Any:
            """A checkpoint factory for the API (None without --checkpoint); keeps the Checkpoint to count reuse."""
            if not args.checkpoint:
                return None

            def factory(key: dict[str, Any]) -> Checkpoint:
                saved[engine] = Checkpoint.open(Path(args.checkpoint) / f"{name}-{engine}", key, resume=True)
                return saved[engine]
            return factory

        if "refit" in engines:
            old, c_old, w_old = timed(lambda spec=spec, allow=allow: mptool.pdtp(
                t, spec, records=records, engine="refit", jobs=2, allow_import=allow,
                checkpoint=resumable("refit")))
            floor = old.summary["noise_floor"]
            fits_old = len(records) + floor.get("records", 0)
            print(f"| {name} | refit (today) | {flags(old.table, kinds['null'])} "
                  f"| {flags(old.table, kinds['canary'])} | {flags(old.table, kinds['random'])} | {fits_old} "
                  f"| {c_old:.0f} | {w_old:.0f} | {load0:.1f}-{os.getloadavg()[0]:.1f} |", flush=True)
            above = sum(bool(x) for x in old.table.set_index("row").loc[kinds["null"], "above_noise_floor"]) \
                if "above_noise_floor" in old.table else None
            print(f"|   | {name}: today's floor p95 {floor.get('p95', float('nan')):.3f}, nulls above it {above}; "
                  f"records from a checkpoint {reused(saved.get('refit'))} | | | | | | | |", flush=True)
        if "replicates" in engines:
            new, c_new, w_new = timed(lambda spec=spec, allow=allow: mptool.pdtp(
                t, spec, records=records, engine="auto", jobs=2, allow_import=allow, replicates=args.replicates,
                budget=args.budget, checkpoint=resumable("replicates")))
            rep = new.summary["replicates"]
            print(f"| {name} | replicates | {flags(new.table, kinds['null'])} | {flags(new.table, kinds['canary'])} "
                  f"| {flags(new.table, kinds['random'])} | {rep['fits']} | {c_new:.0f} | {w_new:.0f} "
                  f"| {load0:.1f}-{os.getloadavg()[0]:.1f} |")
            if "refit" not in engines:
                ratio = "refit engine not run in this sitting"
            elif any(c.reused for c in saved.values()):  # this sitting's CPU and wall cover only the new fits
                ratio = "no ratio: fits were taken from a checkpoint"
            else:
                ratio = f"wall ratio replicates/refit {w_new / w_old:.1f}, CPU {c_new / c_old:.1f}"
            print(f"|   | {name}: randomness {new.summary['randomness']['sources']}; replicates used "
                  f"{rep['replicates_used']}; decided below {rep['decided_below']}, undecided {rep['undecided']}; "
                  f"{ratio}; items from a checkpoint {reused(saved.get('replicates'))} | | | | | | | |",
                  flush=True)


def reused(ckpt: Checkpoint | None) -> str:
    """What a resumed engine took from its checkpoint (per stage), or "none"."""
    return "none" if ckpt is None or not ckpt.reused else ", ".join(f"{k} {v}" for k, v in ckpt.reused.items())

if __name__ == "__main__":
    main()
