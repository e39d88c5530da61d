"""Phase 3, train targets (Long et al. 5.4, steps 2-3): A(D1) and A(D2) in every iteration with
their binned outputs on the targets, and the PDTP of each target while it is a member."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mptool.attacks.protocol.draw import Draw
from mptool.attacks.protocol.state import Run
from mptool.inputs.models import fit, model_numerics, proba_in
from mptool.loo import LooRequest
from mptool.outputs.formats import PDTP_DECISIONS
from mptool.privacy.calibration import bin_probabilities
from mptool.privacy.dtp import pdtp_of
from mptool.runtime.parallel import chunk_positions, run_tasks


def target_chunk(
    template: Any,
    X: pd.DataFrame,
    y: np.ndarray,
    classes: np.ndarray,
    in_first: np.ndarray,
    targets: np.ndarray,
    bin_size: float,
    y_idx: np.ndarray | None = None,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]]:
    """Fit A(D1) and A(D2) for each split row of ``in_first``: binned outputs on the targets, train/test
    accuracy, and with ``y_idx`` (class index per record of D) the binned true-label probability on all of D."""
    out = []
    for mask in in_first:
        q = np.empty((2, len(targets), len(classes)))
        p_all = None if y_idx is None else np.empty((2, len(y)))
        train_acc, test_acc = np.empty(2), np.empty(2)
        for h, half in enumerate((mask, ~mask)):
            model = fit(template, X.iloc[np.flatnonzero(half)], y[half])
            q[h] = bin_probabilities(proba_in(model, X.iloc[targets], classes), bin_size)
            if p_all is not None:
                every = bin_probabilities(proba_in(model, X, classes), bin_size)
                p_all[h] = every[np.arange(len(y)), y_idx]
            with model_numerics():
                pred = model.predict(X)
            train_acc[h] = np.mean(pred[half] == y[half])
            test_acc[h] = np.mean(pred[~half] == y[~half])
        out.append((q, train_acc, test_acc, p_all))
    return out


@dataclass(frozen=True)
class TargetOutputs:
    """Phase 2 (Long et al. 5.4, step 2): the target models' binned outputs on the targets."""

    q: np.ndarray  # (iterations, 2, targets, classes): A(D1) then A(D2)
    member: np.ndarray  # (iterations, 2, targets) bool: the target is in that model's training half
    train_accuracy: float
    test_accuracy: float
    p_all: np.ndarray | None = None  # (iterations, 2, |D|): true-label probability on all of D (rmia only)


def train_targets(run: Run, draw: Draw) -> TargetOutputs:
    """Fit A(D1) and A(D2) in every iteration and record their binned outputs on the targets
    (Long et al. 5.4, step 2: each target is once a member and once not per iteration)."""
    o, D = run.options, draw.D
    t0 = time.perf_counter()
    y_full = draw.y_idx if "rmia" in o.attacks else None  # rmia also needs every record's output (its z)
    chunks = chunk_positions(np.arange(o.iterations), run.jobs, per_job=1)
    with run.progress(o.iterations, "target models") as advance:
        parts = run_tasks(
            target_chunk,
            (
                (run.prep.template, D.X, D.y, draw.classes, draw.in_first[c], draw.tpos, run.bin_size, y_full)
                for c in chunks
            ),
            jobs=run.jobs,
            backend=o.backend,
            on_result=lambda r: advance(len(r)),
        )
    flat = [r for part in parts for r in part]
    first = draw.in_first[:, draw.tpos]
    run.fits["target"] = 2 * o.iterations
    run.timings["target_models_s"] = time.perf_counter() - t0
    return TargetOutputs(
        q=np.stack([r[0] for r in flat]),
        member=np.stack([np.stack([first[i], ~first[i]]) for i in range(o.iterations)]),
        train_accuracy=float(np.mean([r[1] for r in flat])),
        test_accuracy=float(np.mean([r[2] for r in flat])),
        p_all=None if y_full is None else np.stack([r[3] for r in flat]),
    )


@dataclass(frozen=True)
class PdtpMeasure:
    """Mean PDTP of each target while a member (Long et al. 5.4, step 3; PDTP of section 4)."""

    mean: np.ndarray  # (targets,) NaN where not measured
    count: np.ndarray  # (targets,) measurements averaged
    iterations: int
    engine: str | None
    basis: dict[str, Any] | None = None  # refit engine: one paired refit per measurement, randomness detected
    decision: np.ndarray | None = None  # (targets,) attack.csv's pdtp_decision (DECISIONS); None: not measured
    replicates: dict[str, Any] | None = None  # --engine replicates: attack.json summary.pdtp_replicates


#: attack.csv's ``pdtp_decision`` values (one per target; "" where PDTP was not measured).
DECISIONS = PDTP_DECISIONS


def measurement_decisions(values: np.ndarray, engine_name: str, basis: dict[str, Any] | None,
                          res: Any, threshold: float = 1.0) -> np.ndarray:
    """Each measured target's DTP-1 decision in one measurement (:data:`DECISIONS`).

    Exact engines and the refit engine of a training detected deterministic: the value is exact,
    so ``violation`` where the binned PDTP exceeds ``threshold`` (as ``mptool pdtp``'s gate), else
    ``below``. The replicate engine: its decision at the stated error control. The refit engine of a
    randomized training: ``undecided`` (one paired refit cannot tell the record from the randomness).
    """
    if engine_name == "replicates":
        return np.array(["violation" if d is True else "below" if d is False else "undecided"
                         for d in res.decisions], dtype=object)
    if engine_name == "refit" and basis is not None and not basis["decided"]:
        return np.full(len(values), "undecided", dtype=object)
    return np.where(np.asarray(values) > threshold, "violation", "below").astype(object)


def combined_decisions(per: list[list[str]]) -> np.ndarray:
    """A target's decision over its measurements: the one every measurement agrees on, else ``undecided``
    ("" where it was never measured). A violation (or a below) is then established in each measurement at
    its own level, so the combined call errs no more often than one measurement's."""
    return np.array(["" if not d else d[0] if all(x == d[0] for x in d) else "undecided" for d in per],
                    dtype=object)


#: What ``pdtp_mean`` of a randomized target model is (attack.json ``summary.pdtp_basis``; docs/randomness.md).
SINGLE_REFIT = (
    "single-refit estimate: each measurement is one paired refit of A(half) and A(half minus t); the training "
    "depends on {sources}, so it counts the training randomness as the record's influence and no record is "
    "decided; mptool pdtp (replicate engine) decides which records violate DTP-1 beyond the randomness"
)


def pdtp_basis(run: Run, half: Any, model: Any, classes: np.ndarray, engine_name: str) -> dict[str, Any] | None:
    """For the refit engine: is the target's training randomized (refits of the first half, detect)? What
    ``pdtp_mean`` then is. None for exact engines (their PDTP is exact; nothing is refitted)."""
    if engine_name != "refit":
        return None
    from mptool.loo.randomness import detect, detection_fits

    found = detect(run.prep.template, model, half.X, half.y, classes, run.seed)
    fits = {"fits": detection_fits(run.prep.template, found), "fits_note": "the detection's refits of the first "
            "half, not in summary.fits (the plan's count)"}
    if not found.randomized:
        return {**found.as_dict(), **fits, "basis": "exact: the paired refit of a deterministic training (detected), "
                "one per measurement", "decided": True}
    return {**found.as_dict(), **fits, "basis": SINGLE_REFIT.format(sources=found.sources), "decided": False}


def measure_pdtp(run: Run, draw: Draw, engine: Any) -> PdtpMeasure:
    """PDTP of each target while a member, averaged over the first ``pdtp_iterations``
    iterations (Long et al. 5.4, step 3): one leave-one-out per iteration on its half.

    With the replicate engine (``--engine replicates``) each measurement is the replicate estimate
    of ``mptool pdtp`` (docs/randomness.md) and decides each target; every engine's decisions are
    combined over a target's measurements (:func:`combined_decisions`)."""
    o, D, bin_size = run.options, draw.D, run.bin_size
    t0 = time.perf_counter()
    total, count = np.zeros(o.targets), np.zeros(o.targets, dtype=int)
    per: list[list[str]] = [[] for _ in range(o.targets)]
    n_pdtp = min(o.pdtp_iterations, o.iterations)
    engine_name, basis = None, None
    rep: dict[str, Any] = {"fits": 0, "replicates": []}
    if engine is not None and n_pdtp:
        with run.progress(n_pdtp * o.targets, f"PDTP leave-one-out ({engine.name})") as advance:
            for i in range(n_pdtp):
                for half in (draw.in_first[i], ~draw.in_first[i]):
                    half_idx = np.flatnonzero(half)
                    which = np.flatnonzero(half[draw.tpos])
                    if not which.size:
                        continue
                    Th = D.take(half_idx)
                    positions = np.searchsorted(half_idx, draw.tpos[which]).astype(np.int64)
                    model = fit(run.prep.template, Th.X, Th.y)
                    req = LooRequest(
                        run.prep.spec, run.prep.template, Th, model, draw.classes, positions, run.jobs, o.backend
                    )
                    res = engine.run(req, advance)
                    engine_name = res.engine
                    if basis is None and i == 0:
                        basis = pdtp_basis(run, Th, model, draw.classes, res.engine)
                    if engine_name == "replicates":
                        values = np.asarray(res.stats.estimate, dtype=float)
                        rep["fits"] += int(res.fits)
                        rep["replicates"].extend(int(r) for r in res.replicates)
                    else:
                        values = pdtp_of(res.p_full, res.p_loo, bin_size).pdtp
                    total[which] += values
                    count[which] += 1
                    for j, d in zip(which, measurement_decisions(values, engine_name, basis, res), strict=True):
                        per[j].append(str(d))
        run.fits["pdtp_full"] = 2 * n_pdtp
        run.fits["pdtp_leave_one_out_records"] = int(count.sum())
        if engine_name == "refit":  # one fit per record measured: in the total, as the plan counts them
            run.fits["pdtp_refits"] = int(count.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    run.timings["pdtp_s"] = time.perf_counter() - t0
    if basis is not None and not basis["decided"]:
        run.notes.append(f"pdtp_mean is a {basis['basis']}")
    decision = combined_decisions(per) if engine_name is not None else None
    replicates = None
    if engine_name == "replicates":
        run.fits["pdtp_replicates"] = rep["fits"]
        replicates = replicates_summary(engine.plan, rep["replicates"], rep["fits"], decision)
    return PdtpMeasure(mean, count, n_pdtp, engine_name, basis, decision, replicates)


def replicates_summary(plan: Any, used: list[int], fits: int, decision: np.ndarray) -> dict[str, Any]:
    """attack.json ``summary.pdtp_replicates``: the plan, the error control, the fits, the decisions' counts."""
    from mptool.privacy.influence import ALPHA, CONTROLS

    looks = len(plan.schedule())
    return {
        "statistic": "per measurement, mptool pdtp's replicate estimate on that half: PDTP of the expected binned "
        "prediction over the training randomness (docs/randomness.md); pdtp_mean averages it over the measurements",
        "replicates_min": plan.min_r,
        "replicates_max": plan.max_r,
        "replicates_per_record": {str(r): used.count(r) for r in sorted(set(used))},
        "error_control": f"{CONTROLS[plan.control]} at {ALPHA:g} across the targets of each measurement, "
        f"Bonferroni over the {looks} looks; a target's decision is the one all its measurements agree on",
        "fits": int(fits),
        "decisions": {d: int(np.sum(decision == d)) for d in DECISIONS},
    }
