"""``mptool mitigate`` for randomized training: each setting judged on decided violations (issue 27 item 6).

For a spec with no exact engine, A(T) is refitted with other seeds and with T's rows permuted
(:func:`mptool.loo.randomness.detect`, as ``mptool pdtp --engine auto`` does). A deterministic
A keeps mitigate's paired refit, results unchanged. A randomized A is audited per setting with
the replicate engine (:mod:`mptool.loo.replicates`): a setting **passes** only when every
audited record is *decided* below the target beyond the training randomness at the stated
error control; decided violations are counted in ``above_target``, records neither decided
above nor below in ``undecided``, and a setting with undecided records never passes ("not
established": fail closed). Release settings reuse the baseline's replicates (gathered on the
full probability vector) with no fit: each record keeps the replicates it was given and is
judged again under the policy (:func:`mptool.loo.replicates.redecided`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from mptool.inputs.models import fit
from mptool.inputs.prepare import Prepared
from mptool.loo import LooRequest, RefitEngine, select_engine
from mptool.loo.randomness import detect, detection_fits, planned_fits
from mptool.loo.replicates import ReplicateEngine, ReplicatePlan, ReplicateResult, parse_replicates, redecided
from mptool.privacy.dtp import summarize
from mptool.privacy.influence import CONTROLS, counts
from mptool.privacy.release import gate_policy
from mptool.runtime.errors import InputError

#: mitigate.csv's columns added (after ``above_target``) when a setting was audited with replicates.
REPLICATE_MITIGATE_COLUMNS = {
    "decided_below": "replicate engine (randomized training): records decided below the target beyond the training "
    "randomness (docs/randomness.md); above_target then counts the records decided above it",
    "undecided": "replicate engine: records neither decided above nor below; a setting with any never passes "
    "(not established)",
}


def randomness_of(prep: Prepared, progress: Any = None) -> Any:
    """``prep``'s training randomness (:class:`mptool.loo.randomness.Randomness`), detected once; None when an
    exact engine audits the spec (no detection: those engines' results stay as they are). ``progress``
    reports each fit, as ``mptool pdtp``'s randomness check does (:func:`mptool.api.randomized.detect_for`)."""
    from mptool.api.randomized import RANDOMNESS_PHASE

    if not isinstance(select_engine("auto", prep.spec, prep.template), RefitEngine):
        return None
    if prep.randomness is not None:
        return prep.randomness
    T = prep.train
    if progress is None:
        return detect(prep.template, fit(prep.template, T.X, T.y), T.X, T.y, prep.classes, prep.spec.seed)
    with progress(1 + planned_fits(prep.template), RANDOMNESS_PHASE) as advance:
        full_model = fit(prep.template, T.X, T.y)
        advance(1)
        return detect(prep.template, full_model, T.X, T.y, prep.classes, prep.spec.seed, advance=advance)


def with_randomness(prep: Prepared, progress: Any = None) -> Prepared:
    """``prep`` with its randomness detected (when it has no exact engine)."""
    found = randomness_of(prep, progress)
    return prep if found is None else replace(prep, randomness=found)


def is_randomized(prep: Prepared) -> bool:
    """True when ``prep`` (after :func:`with_randomness`) is audited with replicates."""
    return prep.randomness is not None and prep.randomness.randomized


def plan_for(options: Any, spec: Any, target: float, release: Any) -> ReplicatePlan:
    """The replicate plan of a setting: ``options.replicates``/``error_control``, its target, scale and policy."""
    lo, hi = parse_replicates(options.replicates)
    return ReplicatePlan(lo, hi, None, options.error_control, target, spec.output.bin_size, options.gate,
                         release or None)


def check_options(replicates: str | None, error_control: str) -> None:
    """``replicates`` (MIN:MAX) and ``error_control`` checked before any work (exit 2)."""
    parse_replicates(replicates)
    if error_control not in CONTROLS:
        raise InputError(f"--error-control must be one of {', '.join(CONTROLS)}")


def run_replicates(prep: Prepared, positions: np.ndarray, full: Any, options: Any, jobs: int,
                   progress: Any, label: str) -> tuple[ReplicateResult, int]:
    """The replicate engine on the raw vector (policies are applied per setting afterwards); its fits with
    the detection's."""
    plan = plan_for(options, prep.spec, options.target, None)
    request = LooRequest(prep.spec, prep.template, prep.train, full, prep.classes, positions, jobs, options.backend)
    with progress(len(positions), f"{label}: replicates of A(T) and A(T minus t) (randomized training)") as advance:
        try:
            result = ReplicateEngine(plan).run(request, advance)
        except ValueError as exc:
            first = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
            raise InputError(f"mitigate: {label}: replicates failed: {first}") from None
    return result, int(result.fits) + detection_fits(prep.template, prep.randomness)


def judged(result: ReplicateResult, spec: Any, options: Any, n_classes: int) -> dict[str, Any]:
    """A setting's row fields from the replicates under its release policy (:func:`redecided`): the estimates'
    max/mean/p95 on both scales, decided violations, decided below, undecided, passes and why not."""
    plan = plan_for(options, spec, options.target, gate_policy(spec.output.release, n_classes))
    again = redecided(result, plan)
    s = summarize(pd.Series(again.stats.estimate), options.target, pd.Series(again.raw.estimate), options.gate)
    c = counts(again.decisions)
    passes = c["violations"] == 0 and c["undecided"] == 0
    return {
        "max_pdtp": s["max"], "mean_pdtp": s["mean"], "p95_pdtp": s["p95"], "above_target": c["violations"],
        "bin_edge_only": 0, "max_pdtp_raw": s["max_raw"], "max_pdtp_binned": s["max_binned"],
        "above_target_binned": c["violations"] if options.gate == "binned" else float("nan"),
        "above_target_raw": c["violations"] if options.gate == "raw" else float("nan"), "n_audited": s["n"],
        "decided_below": c["below"], "undecided": c["undecided"], "passes": passes,
        "not_established": "" if passes or c["violations"] else
        f"not established: {c['undecided']} record(s) undecided beyond the training randomness (fail closed)",
    }


def randomness_block(found: Any, options: Any) -> dict[str, Any]:
    """mitigate.json's ``randomness`` block: what was detected, the engine and how settings are judged."""
    lo, hi = parse_replicates(options.replicates)
    return {
        **found.as_dict(),
        "engine": "replicates" if found.randomized else "refit",
        **({"replicates_min": lo, "replicates_max": hi, "error_control": options.error_control,
            "error_control_means": f"{CONTROLS[options.error_control]} at 0.05",
            "passes_means": "every audited record decided below the target beyond the training randomness; "
            "above_target counts decided violations; a setting with undecided records is not established",
            "release_settings": "judged from the baseline's replicates (gathered on the full probability "
            "vector) under each policy, no fit; mptool pdtp on such a spec gathers its own",
            } if found.randomized else {}),
    }

