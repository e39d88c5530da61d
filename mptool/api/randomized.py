"""``mptool pdtp`` for randomized training: detect the randomness, then audit with replicates.

With ``--engine auto`` and no exact engine for the spec, A(T) is refitted with other seeds and
with its rows permuted (:mod:`mptool.loo.randomness`). A deterministic A keeps today's paired
refit engine, values unchanged. A randomized A gets the replicate engine
(:mod:`mptool.loo.replicates`): each record's PDTP of the expected released prediction, its 95 %
interval and a decision true / false / undecided (:mod:`mptool.privacy.influence`). Exact engines
(naive Bayes, k-NN, logistic regression) are chosen before any detection and never see it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from mptool.inputs.prepare import Prepared
from mptool.loo.randomness import RTOL, detect, not_checked, planned_fits
from mptool.loo.replicates import ReplicateEngine, ReplicatePlan, parse_replicates
from mptool.privacy.dtp import bin_edge
from mptool.privacy.influence import ALPHA, CONTROLS, UNDECIDED, counts
from mptool.privacy.release import gate_policy
from mptool.runtime.errors import InputError

#: Columns of a randomized audit, after ``violation`` (pdtp.csv; see also api.pdtp.PDTP_COLUMNS).
REPLICATE_COLUMNS = {
    "pdtp_low": "replicate engine: one-sided 95% lower bound of pdtp per record (Bonferroni over classes and over "
    "the planned looks: a repeated confidence bound, valid at whichever look the record stopped)",
    "pdtp_high": "one-sided 95% upper bound of pdtp per record (Bonferroni over the planned looks)",
    "replicates": "training replicates of T minus t used for the record (each paired with a replicate of T)",
    "sd_full": "sd of p_T(label | x_t) over the replicates of A(T): the spread from training randomness alone "
    "(Long et al. Figure 7)",
}


def replicate_plan(options: Any, spec: Any, n_classes: int) -> ReplicatePlan:
    """The replicate engine's plan from ``--replicates``, ``--budget``, ``--error-control`` and the verdict options.

    The release policy enters as the gate measures it (:func:`mptool.privacy.release.gate_policy`): the steps
    an attacker can undo (a temperature, a top-k that leaves out one class) are dropped, as for every engine.
    """
    lo, hi = parse_replicates(options.replicates)
    return ReplicatePlan(lo, hi, options.budget, options.error_control, options.threshold, spec.output.bin_size,
                         options.gate, gate_policy(spec.output.release, n_classes) or None)


def check_replicate_options(replicates: str | None, budget: int | None, control: str) -> None:
    """``--replicates MIN:MAX``, ``--budget FITS`` and ``--error-control`` checked before any work (exit 2)."""
    parse_replicates(replicates)
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int | np.integer) or budget < 1):
        raise InputError("--budget must be a whole number of fits >= 1")
    if control not in CONTROLS:
        raise InputError(f"--error-control must be one of {', '.join(CONTROLS)}")


def check_attack_replicates(engine: str, replicates: str | None) -> None:
    """``attack --engine`` one of the engines and ``--replicates MIN:MAX`` valid, given only with ``--engine
    replicates`` (exit 2 before any work, also with ``--pdtp-iterations 0``, where no engine runs)."""
    from mptool.loo import check_engine_choice

    check_engine_choice(engine)
    if replicates is None:
        return
    if engine != "replicates":
        raise InputError("--replicates sets the replicate engine's training replicates: add --engine replicates, "
                         "or leave --replicates out")
    parse_replicates(replicates)


def choose_engine(prep: Prepared, options: Any, engine: Any, full_model: Any) -> tuple[Any, dict[str, Any]]:
    """The engine after randomness detection and the ``randomness`` block of pdtp.json.

    Detection runs only where the refit engine would otherwise run under ``--engine auto``, and
    for ``--engine replicates`` (reported there, the replicates run whatever it finds). Exact
    engines and an explicit ``--engine refit`` skip it: their values stay as they were.
    """
    if options.engine == "replicates" or (options.engine == "auto" and engine.name == "refit"):
        T = prep.train
        found = prep.randomness or detect(prep.template, full_model, T.X, T.y, prep.classes, prep.spec.seed)
        block = found.as_dict()
        if found.randomized or options.engine == "replicates":
            return ReplicateEngine(replicate_plan(options, prep.spec, len(prep.classes))), block
        return engine, {**block, "engine": "refit: A(T) is the same whatever the seed and the row order "
                        f"(to {RTOL:g} relative), so one paired refit per record is exact"}
    if options.engine == "refit":
        return engine, not_checked("--engine refit: one paired refit per record, randomness not checked")
    return engine, not_checked(f"exact engine {engine.name}: computes the leave-one-out without refitting")


def detect_for(prep: Prepared, options: Any, on_fit: Callable[[float], Any] | None = None,
               progress: Any = None) -> Prepared:
    """``prep`` with the randomness detected (``prep.randomness``) when the run will need it, else unchanged.

    Run by ``prepare_pdtp`` so that flags the replicate engine cannot honour are refused before the audit.
    ``on_fit(seconds)`` is told how long A(T)'s fit took, before the detection's refits (the
    planner's first look at the fit time: ``mptool.api.operations.prestart_planned``).
    ``progress(total, label)`` (as :func:`mptool.runtime.ui.progress`) reports each fit: A(T) and the
    refits of :func:`mptool.loo.randomness.detect` (a first line within 5 s of the start, like every phase).
    """
    from mptool.inputs.prepare import fit_checked
    from mptool.loo import select_engine

    if options.engine not in ("auto", "replicates") or prep.randomness is not None:
        return prep
    if options.engine == "auto" and select_engine("auto", prep.spec, prep.template).name != "refit":
        return prep
    T = prep.train
    with (progress or _silent)(1 + planned_fits(prep.template), RANDOMNESS_PHASE) as advance:
        t0 = time.perf_counter()
        full_model = fit_checked(prep.template, T)
        if on_fit is not None:
            on_fit(time.perf_counter() - t0)
        advance(1)
        found = detect(prep.template, full_model, T.X, T.y, prep.classes, prep.spec.seed, advance=advance)
    return replace(prep, randomness=found)


#: The progress label of the randomness check (docs/randomness.md section 1).
RANDOMNESS_PHASE = "randomness check (A(T) refitted as is, with other seeds, with rows permuted)"


@contextmanager
def _silent(total: int, label: str) -> Iterator[Callable[[int], None]]:
    yield lambda n: None


def uses_replicates(prep: Prepared, options: Any) -> bool:
    """True when this run will audit with the replicate engine (after :func:`detect_for`)."""
    return options.engine == "replicates" or (prep.randomness is not None and prep.randomness.randomized)


def randomness_line(block: dict[str, Any], engine: str) -> str:
    """The one stderr line on the detection: which source, and what the audit does about it."""
    if not block.get("checked"):
        return ""
    if not block.get("randomized"):
        return (f"randomness: none detected (A(T) refitted with other seeds and with rows permuted: the same "
                f"predictions to {RTOL:g}); engine {engine}")
    return (f"randomness: A(T) depends on {block['sources']} (largest change of a probability on T "
            f"{block['max_change']:.3g}); engine {engine}: each record's influence is estimated beyond it")


def replicate_table(prep: Prepared, positions: np.ndarray, result: Any, options: Any) -> pd.DataFrame:
    """The per-record table of a randomized audit (PDTP_COLUMNS' names; pdtp is the replicate estimate)."""
    T = prep.train
    s, raw = result.stats, result.raw
    idx = np.arange(len(positions))
    table = pd.DataFrame({"row": T.rows[positions]})
    if T.ids is not None:
        table["id"] = T.ids[positions]
    table["label"] = T.y[positions]
    table["pdtp"] = s.estimate
    table["pdtp_raw"] = raw.estimate
    table["worst_class"] = prep.classes[s.worst]
    table["p_full"] = s.m_full[idx, s.worst] if len(idx) else np.zeros(0)
    table["p_loo"] = s.m_loo[idx, s.worst] if len(idx) else np.zeros(0)
    table["violation"] = pd.Series(list(result.decisions), dtype=object)
    table["bin_edge"] = bin_edge(s.estimate, raw.estimate, options.threshold)
    table["pdtp_low"] = s.lower
    table["pdtp_high"] = s.upper
    table["replicates"] = result.replicates
    table["sd_full"] = result.sd_full
    return table


def replicate_block(result: Any, options: Any) -> dict[str, Any]:
    """The ``replicates`` block of pdtp.json: the statistic, the plan, the error control, the fits used."""
    plan = result.plan
    c = counts(result.decisions)
    return {
        "statistic": "PDTP of the expected released prediction: max_y |ln E[bin p_T(y|x_t)] - ln E[bin p_{T minus t}"
        "(y|x_t)]| over the training randomness (seed and row order); docs/randomness.md",
        "replicates_min": plan.min_r,
        "replicates_max": plan.max_r,
        "schedule": plan.schedule(),
        "looks": len(plan.schedule()),
        "common_random_numbers": "replicate r of T minus t has replicate r of T's seed and row order, t left out; "
        "the replicates of A(T) are shared by every record",
        "confidence": 1 - ALPHA,
        "error_control": plan.control,
        "error_control_means": f"{CONTROLS[plan.control]} at {ALPHA:g}, Bonferroni over the {len(plan.schedule())} "
        "looks",
        "budget_fits": plan.budget,
        "budget_exhausted": bool(result.budget_exhausted),
        "fits": int(result.fits),
        "full_replicates": int(result.full_replicates),
        "decided_violations": c["violations"],
        "decided_below": c["below"],
        "undecided": c["undecided"],
        "replicates_used": {str(k): int(v) for k, v in zip(*np.unique(result.replicates, return_counts=True),
                                                           strict=True)},
        **({} if result.fail_fast is None else {"fail_fast_spending": dict(result.fail_fast)}),
    }


def replicate_verdict(summary: dict[str, Any], decisions: np.ndarray) -> dict[str, Any]:
    """Summary keys of a randomized verdict: violations = decided ones; ``verdict`` fail / undecided / pass."""
    c = counts(decisions)
    verdict = "fail" if c["violations"] else UNDECIDED if c["undecided"] else "pass"
    return {**summary, "violations": c["violations"], "undecided": c["undecided"], "decided_below": c["below"],
            "verdict": verdict}
