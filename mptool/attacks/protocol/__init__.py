"""The evaluation protocol of Long et al. (section 5.4) around the membership attacks.

1. A candidate set D of ``candidates`` rows is drawn (seeded) from every usable CSV row.
   ``targets`` records of D are the adversary's targets.
2. In each of ``iterations`` iterations D is split into equal halves D1, D2; the target
   model A(D1) is attacked on every target, then A(D2), so each target is once a member and
   once not (baseline accuracy 0.5). The training-set size is therefore |D| / 2: without
   --candidates, |D| is 2 x the spec's data.train_size, so the target models train on as many
   records as ``mptool pdtp``'s T (:func:`mptool.attacks.plan.resolve_candidates`).
3. Per-target accuracy of an attack = correct guesses / attacks on that record (2 per
   iteration). PDTP of each target is measured while it is a member in the first
   ``pdtp_iterations`` iterations (one leave-one-out per iteration) and averaged.
4. Over all attempts of an attack (each saved in attempts.csv): accuracy, precision, recall,
   F1, ROC AUC, advantage TPR - FPR (Yeom et al., Definition 4; = 2 * accuracy - 1 here, as
   members and non-members are attacked equally often), TPR at 1% and 0.1% FPR, and the
   Pearson and Spearman correlations of per-target accuracy with mean PDTP (Long et al.,
   Tables 1 and 2). The strongest attack is the one of highest TPR at 1% FPR, named with the
   bootstrap interval of that TPR.

The run is a sequence of named phases, each a function of the previous phases' results:
The run is a sequence of phases, one module each, each a function of the previous phases'
results (:func:`run.run_phases` calls them in order):

1. ``draw``: :func:`draw.draw_candidates` -- D, the targets and the splits;
2. ``planning``: :func:`planning.plan_attack` / :func:`planning.plan_work` -- fit counts, an estimated
   time, --budget, the covering pool (:mod:`mptool.attacks.plan` holds the arithmetic);
3. ``targets``: :func:`targets.train_targets` (A(D1), A(D2) and their outputs on the targets) and
   :func:`targets.measure_pdtp`;
4. ``evidence``: :func:`evidence.gather_evidence` -- shadow models: pool, general shadows or
   per-target pairs;
5. ``adapters``: :func:`adapters.run_attacks` -- one adapter per attack;
6. ``score``: :func:`score.score` -- per-target table, metrics, summary;
7. ``gate``: :func:`gate.gate` -- --max-accuracy / --max-auc on the bootstrap intervals.

``state`` holds what they share (the options, :class:`state.Run`, the outcome); the terminal text
lives in :mod:`mptool.outputs.attack_text`. Every random choice is seeded from the spec's seed and
a per-phase tag, so results do not depend on --jobs.
"""

from __future__ import annotations

from mptool.attacks.metrics import ATTEMPT_COLUMNS, ROC_POINTS, binary_metrics, correlations, downsample_roc, tpr_at_fpr
from mptool.attacks.protocol.draw import TAG_CANDIDATES, TAG_PLAN, TAG_SPLIT, TAG_TARGETS
from mptool.attacks.protocol.planning import Planned, plan_attack
from mptool.attacks.protocol.run import run_attack
from mptool.attacks.protocol.score import ATTACK_COLUMNS
from mptool.attacks.protocol.state import AttackOptions, AttackOutcome, parse_attacks
from mptool.outputs.attack_text import strongest_line, summary_lines

__all__ = [
    "ATTACK_COLUMNS",
    "ATTEMPT_COLUMNS",
    "ROC_POINTS",
    "TAG_CANDIDATES",
    "TAG_PLAN",
    "TAG_SPLIT",
    "TAG_TARGETS",
    "AttackOptions",
    "AttackOutcome",
    "Planned",
    "binary_metrics",
    "correlations",
    "downsample_roc",
    "parse_attacks",
    "plan_attack",
    "run_attack",
    "strongest_line",
    "summary_lines",
    "tpr_at_fpr",
]
