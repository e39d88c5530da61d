"""The run: the phases of :mod:`mptool.attacks.protocol` in order, with the planned counts."""

from __future__ import annotations

import time
from collections.abc import Callable

from mptool.attacks import synthesis as synth_mod
from mptool.attacks.protocol.adapters import run_attacks
from mptool.attacks.protocol.draw import draw_candidates
from mptool.attacks.protocol.evidence import gather_evidence
from mptool.attacks.protocol.planning import Planned, plan_attack
from mptool.attacks.protocol.score import score
from mptool.attacks.protocol.state import AttackOptions, AttackOutcome, Progress, new_run, select_pdtp_engine
from mptool.attacks.protocol.targets import measure_pdtp, train_targets
from mptool.inputs.prepare import Prepared
from mptool.runtime.parallel import one_thread


def run_attack(
    prep: Prepared,
    options: AttackOptions,
    progress: Progress,
    announce: Callable[[str], None] | None = None,
    planned: Planned | None = None,
) -> AttackOutcome:
    """Run the protocol and every chosen attack; ``progress(total, label)`` yields ``advance(n)``.

    ``planned``: the plan :func:`plan_attack` made of ``options`` (else it is made here and
    its line goes to ``announce``). BLAS/OpenMP pools are limited to one thread in this
    process: the protocol makes many small fits, which multi-threaded BLAS slows down
    (several times over on a busy machine); parallelism comes from --jobs worker processes
    instead (joblib limits theirs likewise).
    """
    if planned is None:
        planned = plan_attack(prep, options)
        (announce or (lambda line: None))(planned.line)
    with one_thread(None):
        return run_phases(prep, planned, progress)


def run_phases(prep: Prepared, planned: Planned, progress: Progress) -> AttackOutcome:
    """The phases of Long et al. 5.4 in order, with the planned counts; each phase is a function below."""
    t_start = time.perf_counter()
    run = new_run(prep, planned.options, progress)
    run.plan = dict(planned.plan)
    run.timings["plan_s"] = planned.plan["seconds"]
    if planned.synthesis is not None:
        run.synthesis = planned.synthesis
        run.fits["synthesis_model"] = 1
        run.timings["synthesis_s"] = planned.synthesis.seconds
        note = synth_mod.failure_note(planned.synthesis.summary)
        run.notes.extend([note] if note else [])
    engine = select_pdtp_engine(run.options, prep)
    draw = draw_candidates(run, check=False)  # the plan's draw, checked there
    targets = train_targets(run, draw)
    measured = measure_pdtp(run, draw, engine)
    evidence = gather_evidence(run, draw)
    attacked = run_attacks(run, draw, targets, evidence)
    return score(run, draw, targets, measured, attacked, t_start)
