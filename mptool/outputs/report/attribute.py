"""The report's attribute-inference block (``mptool attack --attacks attribute:COLUMN``; Yeom et al. section 4).

Aggregates only: the column's name, how many candidate values, the adversaries' accuracy on members
and non-members and the advantages with their 95% bootstrap intervals. Never a sensitive value.
"""

from __future__ import annotations

from typing import Any

from mptool.outputs.report.loader import ReportInputs
from mptool.outputs.report.values import fmt
from mptool.runtime import ui

#: (label, key in attack.json's attacks.attribute, key of its interval in attribute_intervals)
ROWS = (
    ("inversion adversary right, members", "inference_accuracy_members"),
    ("inversion adversary right, non-members", "inference_accuracy_nonmembers"),
    ("attribute advantage (Yeom Def. 5: members minus non-members)", "attribute_advantage"),
    ("inversion adversary right, all attempts", "inference_accuracy"),
    ("baseline adversary right (prior only, the most frequent value)", "baseline_accuracy"),
    ("inversion minus baseline (Yeom Def. 6)", "advantage_over_baseline"),
)


def attribute_block(inputs: ReportInputs) -> dict[str, Any] | None:
    """Key/value rows of the attribute inference in attack.json, or None when the run had none."""
    entry = next((a.entry for a in inputs.attacks if a.name == "attribute"), None)
    if not isinstance(entry, dict) or "attribute_advantage" not in entry:
        return None
    intervals = entry.get("attribute_intervals") if isinstance(entry.get("attribute_intervals"), dict) else {}
    how = ui.excerpt(entry.get("candidates_from", ""), 200)
    items = [
        ("sensitive column", ui.excerpt(entry.get("column", "—"), 40)),
        ("candidate values", f"{fmt(entry.get('candidates'), None)} ({how})"),
    ]
    for label, key in ROWS:
        iv = intervals.get(key) if isinstance(intervals.get(key), dict) else {}
        span = "" if iv.get("low") is None else f" (95% interval {fmt(iv['low'], 3)} to {fmt(iv['high'], 3)})"
        items.append((label, f"{fmt(entry.get(key), 3)}{span}"))
    note = (
        "The adversary knows a record's other features and label and the model; for each candidate value it "
        "takes the model's loss on the label and guesses the value of highest prior × exp(−loss). The row "
        "'attribute' of the table above is the membership adversary that says 'member' when the inference is "
        "right (Yeom et al., Theorem 6): its advantage equals the attribute advantage. Per-record results in "
        "attack.csv hold whether the inference was right and its confidence, never the values."
    )
    return {"items": items, "note": note}
