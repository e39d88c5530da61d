"""Phase 7, gate: --max-accuracy and --max-auc decided on the bootstrap intervals (GATE_RULE):
exceeded, undecided (fails closed) or held."""

from __future__ import annotations

from typing import Any

from mptool.attacks.protocol.state import AttackOptions

#: How --max-accuracy and --max-auc decide (written in attack.json's summary.gate).
GATE_RULE = (
    "a gate is exceeded when the lower end of an attack's 95% bootstrap interval (over targets) is above the "
    "limit; it is undecided when no lower end is but an attack's estimate or upper end is: the run is too "
    "small to tell the attack from noise. An undecided gate fails closed (exit 1, with a line saying it could "
    "not decide and how to make the run decide): a gate that could not check never passes"
)


def gate(
    options: AttackOptions, attack_out: dict[str, dict[str, Any]]
) -> tuple[str, str | None, list[str], list[str]]:
    """The most accurate attack, the attack of highest AUC, the gates exceeded and the gates undecided (GATE_RULE)."""
    best_acc = max(attack_out, key=lambda k: attack_out[k]["accuracy"])
    aucs = {k: v["auc"] for k, v in attack_out.items() if v["auc"] is not None}
    best_auc = max(aucs, key=lambda k: aucs[k]) if aucs else None
    exceeded: list[str] = []
    undecided: list[str] = []
    for key, word, limit in (("accuracy", "accuracy", options.max_accuracy), ("auc", "AUC", options.max_auc)):
        if limit is None:
            continue
        rows = []
        for name, m in attack_out.items():
            if m.get(key) is None:
                continue
            iv = (m.get("intervals") or {}).get(key) or {}
            low, high = iv.get("low"), iv.get("high")
            rows.append((name, m[key], m[key] if low is None else low, m[key] if high is None else high))
        over = [r for r in rows if r[2] > limit]
        near = [r for r in rows if max(r[1], r[3]) > limit]
        if over:
            name, point, low, high = max(over, key=lambda r: (r[2], r[1]))
            exceeded.append(f"{name} {word} {point:.4f} (95% interval {low:.4f} to {high:.4f}) > {limit:g}")
        elif near:
            name, point, low, high = max(near, key=lambda r: (r[1], r[3]))
            undecided.append(
                f"{name} {word} {point:.4f}, 95% interval {low:.4f} to {high:.4f}, contains {limit:g}: too few "
                "targets or iterations to decide (raise --targets or --iterations)"
            )
    return best_acc, best_auc, exceeded, undecided
