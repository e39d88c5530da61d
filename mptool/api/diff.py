"""``mptool diff RUN_A RUN_B``: what changed between two pdtp runs, and whether B is worse than A.

Records are matched as with ``--baseline`` (by ``data.id``, else by fingerprint;
:func:`mptool.api.baseline.classify`), both runs judged against one threshold (B's unless
given). B is *worse* than A when it has a violation A did not have (``new``) or a violation
whose PDTP rose by more than the tolerance (``worse``): the same rule as the baseline gate,
so a cron job's "worse than last time" and a CI gate agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mptool.api.baseline import classify
from mptool.inputs.baseline import PreviousRun

#: Most records listed per kind in the result (the counts are always complete).
LISTED = 1000


@dataclass(frozen=True)
class DiffOutcome:
    """Counts, statistics before -> after, and the records named per kind."""

    summary: dict[str, Any]
    records: dict[str, list[dict[str, Any]]]

    @property
    def worse(self) -> bool:
        return bool(self.summary["counts"]["new"] or self.summary["counts"]["worse"])


def _stats(pdtp: np.ndarray, threshold: float) -> dict[str, float | int]:
    return {
        "n": int(pdtp.size),
        "max": float(pdtp.max()) if pdtp.size else 0.0,
        "mean": float(pdtp.mean()) if pdtp.size else 0.0,
        "violations": int((pdtp > threshold).sum()),
    }


def diff_runs(a: PreviousRun, b: PreviousRun, threshold: float, tolerance: float) -> DiffOutcome:
    """Compare run B with run A (both already checked comparable): new, worse, unchanged, fixed, changed, absent."""
    status, before, absent = classify(b.table, a.table, threshold, tolerance)
    now = b.table.assign(status=status.to_numpy(), before=before.to_numpy())
    delta = now["pdtp"] - now["before"]
    # size first, then the rows: assigning a column to an empty selection would re-create every row (as NaN)
    sized = now.assign(size=delta.abs().to_numpy())
    changed = sized[sized["size"].to_numpy() > tolerance]
    changed = changed.sort_values(["size", "row"], ascending=[False, True])
    only_a = ~a.table["key"].isin(set(b.table["key"]))
    records = {kind: _rows(now[now["status"] == kind]) for kind in ("new", "worse", "unchanged", "fixed")}
    records["changed"] = _rows(changed)
    records["absent"] = [{"key": k} for k in absent[:LISTED]]
    summary = {
        "run_a": str(a.path),
        "run_b": str(b.path),
        "threshold": threshold,
        "tolerance": tolerance,
        "matched_by": "id" if b.identity.get("id") else "fingerprint",
        "a": _stats(a.table["pdtp"].to_numpy(dtype=float), threshold),
        "b": _stats(b.table["pdtp"].to_numpy(dtype=float), threshold),
        "counts": {
            **{kind: int((now["status"] == kind).sum()) for kind in ("new", "worse", "unchanged", "fixed")},
            "changed": len(changed),
            "absent": len(absent),
            "only_in_a": int(only_a.sum()),
            "only_in_b": int(now["before"].isna().sum()),
        },
    }
    outcome = DiffOutcome(summary, records)
    summary["verdict"] = "worse" if outcome.worse else "not worse"
    return outcome


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Records as {key, row, pdtp, before}, in the frame's order (at most :data:`LISTED`)."""
    out = []
    for key, row, pdtp, before in frame[["key", "row", "pdtp", "before"]].head(LISTED).itertuples(index=False):
        out.append({"key": key, "row": None if row is None or pd.isna(row) else int(row), "pdtp": float(pdtp),
                    "before": None if pd.isna(before) else float(before)})
    return out


def summary_line(outcome: DiffOutcome) -> str:
    """One line for a cron log: the verdict, violations, max and mean before -> after, counts. No data values."""
    s, c = outcome.summary, outcome.summary["counts"]
    a, b = s["a"], s["b"]
    return (
        f"mptool diff: {'WORSE' if outcome.worse else 'not worse'}: violations {a['violations']} -> "
        f"{b['violations']} ({c['new']} new, {c['worse']} worse, {c['fixed']} fixed, {c['unchanged']} unchanged), "
        f"max PDTP {a['max']:.4f} -> {b['max']:.4f}, mean {a['mean']:.4f} -> {b['mean']:.4f}, "
        f"{c['changed']} record(s) changed by more than {s['tolerance']:g} (threshold {s['threshold']:g})"
    )
