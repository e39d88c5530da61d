"""The terminal text of ``mptool attack``: one table row per attack, its 95% intervals, the strongest
attack, attribute inference, the target model and the fits (from attack.json's ``attacks`` and
``summary``)."""

from __future__ import annotations

from typing import Any, Protocol

from mptool.outputs.formats import PDTP_DECISIONS
from mptool.runtime import ui

#: attack.json's key of attribute inference (:data:`mptool.attacks.attribute.NAME`).
ATTRIBUTE = "attribute"


class AttackLike(Protocol):
    """What the text reads of an attack outcome (:class:`mptool.attacks.protocol.AttackOutcome`)."""

    attacks: dict[str, dict[str, Any]]
    summary: dict[str, Any]


def interval_lines(attacks: dict[str, dict[str, Any]]) -> list[str]:
    """One line per attack: the 95% intervals of accuracy, AUC and TPR at 1% FPR ('n/e' = not estimable)."""

    def span(iv: dict[str, Any] | None) -> str:
        if not iv or iv.get("estimable") is False or iv.get("low") is None:
            return "n/e"
        return f"{iv['low']:.3f}-{iv['high']:.3f}"

    lines = []
    for name, m in attacks.items():
        iv = m.get("intervals") or {}
        if iv:
            lines.append(
                f"  {name}: 95% intervals (bootstrap over {iv.get('targets')} targets): accuracy "
                f"{span(iv.get('accuracy'))}, AUC {span(iv.get('auc'))}, TPR@1% {span(iv.get('tpr_at_1pct_fpr'))}, "
                f"TPR@0.1% {span(iv.get('tpr_at_0.1pct_fpr'))}"
            )
    return lines


def strongest_line(best: dict[str, Any]) -> str:
    """The terminal line naming the strongest attack, its TPR at 1% FPR and that TPR's 95% interval."""
    iv = best.get("tpr_at_1pct_fpr_interval")
    where = ""
    if iv and iv.get("estimable") is not False and iv.get("low") is not None:
        where = f" [{iv.get('confidence', 0.95):.0%} interval {iv['low']:.3f}-{iv['high']:.3f}]"
    elif iv:
        where = " [interval not estimable: fewer than 100 non-member attempts]"
    return (
        f"strongest attack: {best['name']}, TPR {best['tpr_at_1pct_fpr']:.3f}{where} at 1% FPR "
        f"(AUC {best['auc']:.3f}; {best['nonmember_attempts']} non-member attempts)"
    )


def attribute_line(m: dict[str, Any]) -> str:
    """The terminal line of attribute inference: accuracy on members / non-members, both advantages, intervals."""
    iv = m.get("attribute_intervals") or {}

    def span(key: str) -> str:
        v = iv.get(key) or {}
        return "n/e" if v.get("low") is None else f"{v['low']:.3f} to {v['high']:.3f}"

    return (
        f"attribute inference of '{ui.excerpt(m['column'], 40)}' ({m['candidates']} values): right on "
        f"{m['inference_accuracy_members']:.3f} of member and {m['inference_accuracy_nonmembers']:.3f} of "
        f"non-member attempts; advantage (Yeom Def. 5) {m['attribute_advantage']:.3f} "
        f"[95% {span('attribute_advantage')}]; over the prior-only baseline "
        f"({m['baseline_accuracy']:.3f}) {m['advantage_over_baseline']:+.3f} [95% {span('advantage_over_baseline')}]"
    )


def decision_lines(s: dict[str, Any]) -> list[str]:
    """The targets' DTP-1 decisions (attack.csv ``pdtp_decision``, docs/randomness.md section 8), so that
    undecided targets are counted on the terminal too; none where PDTP was not measured."""
    got = s.get("pdtp_decisions")
    if not isinstance(got, dict):
        return []
    basis = s.get("pdtp_basis") or {}
    why = (" (replicate engine: beyond the training randomness)" if s.get("engine") == "replicates"
           else " (randomized training: one paired refit decides no target; --engine replicates does)"
           if basis.get("decided") is False else "")
    counts = ", ".join(f"{got.get(d, 0)} {d}" for d in PDTP_DECISIONS)
    return [f"PDTP decisions (DTP-1, attack.csv pdtp_decision): {counts}{why}"]


def summary_lines(outcome: AttackLike) -> list[str]:
    """Plain-text lines for the terminal: one per attack, then the target model and PDTP."""
    s = outcome.summary
    lines = [
        f"{'attack':<14}{'accuracy':>9}{'AUC':>8}{'adv':>8}{'TPR@1%':>8}{'prec':>7}{'recall':>7}{'F1':>7}{'r(PDTP)':>9}"
    ]

    def f(v: Any, w: int, d: int = 4) -> str:
        return f"{v:>{w}.{d}f}" if isinstance(v, int | float) and v == v else f"{'-':>{w}}"

    for name, m in outcome.attacks.items():
        r = m["correlation_with_pdtp"]["pearson"]
        lines.append(
            f"{name:<14}{f(m['accuracy'], 9)}{f(m['auc'], 8, 3)}{f(m['advantage'], 8, 3)}"
            f"{f(m['tpr_at_1pct_fpr'], 8, 3)}{f(m['precision'], 7, 3)}{f(m['recall'], 7, 3)}{f(m['f1'], 7, 3)}"
            f"{f(r, 9, 3)}"
        )
    lines += interval_lines(outcome.attacks)
    if ATTRIBUTE in outcome.attacks:
        lines.append(attribute_line(outcome.attacks[ATTRIBUTE]))
    best = s.get("strongest_attack")
    if best is not None:
        lines.append(strongest_line(best))
    tm = s["target_model"]
    lines.append(
        f"target model: train accuracy {tm['train_accuracy']:.4f}, test accuracy {tm['test_accuracy']:.4f}; "
        f"average PDTP {s['pdtp_mean_average'] if s['pdtp_mean_average'] is None else round(s['pdtp_mean_average'], 4)}"
        f"; max per-target accuracy vs PDTP r = {s['max_accuracy']['correlation_with_pdtp']['pearson']}"
    )
    lines += decision_lines(s)
    syn = s.get("synthesis")
    if syn is not None:
        lines.append(
            f"model-based shadow data: {syn['synthesized']} of {syn['requested']} records synthesised "
            f"({syn['failed']} failed), {syn['queries']:,} queries of the target model"
        )
    lines.append(f"model fits: {s['fits']['total']}, {s['timings']['total_s']:.1f}s")
    return lines
