"""``mptool diff RUN_A RUN_B``: what changed between two pdtp runs, and whether B is worse than A.

Records are matched as with ``--baseline`` (by ``data.id``, else by fingerprint;
:func:`mptool.api.baseline.classify`), both runs judged against one threshold (B's unless
given). B is *worse* than A when it has a violation A did not have (``new``) or a violation
whose PDTP rose by more than the tolerance (``worse``): the same rule as the baseline gate,
so a cron job's "worse than last time" and a CI gate agree.

Two replicate-engine runs (randomized training, docs/randomness.md) are compared by their
*decisions* (``violation``: True, False, undecided), as ``--baseline`` compares them
(:func:`mptool.api.baseline.classify_decisions`): B is worse than A when a record is decided above
now and was not decided above in A (``new``), or is undecided now where A decided it below or did
not have it (``worse``: it can no longer be shown below the threshold, and "could not check" is
never a pass); a record decided above in A and decided below now is ``fixed``. Every change of a
record's decision is listed and counted by transition (``above -> undecided``, ...); a change of
the estimate alone is the training randomness or more replicates, never a regression (only
counted). Both runs must be replicate runs decided under one rule (threshold, ``--gate``, error
control, confidence): a replicate run against a refit or exact run is refused, as is a
``--threshold`` other than the runs' own. A RUN_B stopped by ``--fail-fast`` is refused (its other
records were never decided: "not worse" would be a pass nobody checked, why ``--fail-fast``
excludes ``--baseline``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mptool.api.baseline import _numbered, check_decisions_baseline, classify, classify_decisions, rule_of
from mptool.inputs.baseline import PreviousRun
from mptool.runtime.errors import InputError

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
    """Compare run B with run A (both already checked comparable): new, worse, unchanged, fixed, changed, absent.

    Replicate-engine runs are compared by their decisions (:func:`diff_decisions`); a replicate run against
    another kind of run is refused (InputError, exit 2).
    """
    if b.summary.get("stopped"):  # as --fail-fast excludes --baseline: a stop at a known violation checks no other
        raise InputError(f"{b.path}: RUN_B was stopped by --fail-fast (summary.stopped): the records after its stop "
                         "were not evaluated or decided, so it cannot be shown not worse than RUN_A; compare runs "
                         "made without --fail-fast")
    b_decides = isinstance(b.summary.get("replicates"), dict)
    check_decisions_baseline(a, b_decides, "RUN_A", rule_of(b.summary) if b_decides else None)
    if b_decides:
        if threshold != float(b.summary.get("threshold", threshold)):
            raise InputError(f"--threshold {threshold:g}: RUN_A and RUN_B are replicate-engine runs whose decisions "
                             f"were made at the threshold {float(b.summary['threshold']):g}; their diff compares "
                             "those decisions and cannot take another threshold (rerun both with 'mptool pdtp "
                             "--threshold')")
        return diff_decisions(a, b, threshold, tolerance)
    status, before, absent = classify(b.table, a.table, threshold, tolerance)
    now = b.table.assign(status=status.to_numpy(), before=before.to_numpy())
    delta = now["pdtp"] - now["before"]
    # size first, then the rows: assigning a column to an empty selection would re-create every row (as NaN)
    sized = now.assign(size=delta.abs().to_numpy())
    changed = sized[sized["size"].to_numpy() > tolerance]
    changed = changed.sort_values(["size", "row"], ascending=[False, True])
    records = {kind: _rows(now[now["status"] == kind]) for kind in ("new", "worse", "unchanged", "fixed")}
    records["changed"] = _rows(changed)
    counts = {**{kind: int((now["status"] == kind).sum()) for kind in ("new", "worse", "unchanged", "fixed")},
              "changed": len(changed)}
    stats = (_stats(a.table["pdtp"].to_numpy(dtype=float), threshold),
             _stats(b.table["pdtp"].to_numpy(dtype=float), threshold))
    return _outcome(a, b, {"threshold": threshold, "tolerance": tolerance}, now, records, absent, stats, counts)


def _outcome(a: PreviousRun, b: PreviousRun, head: dict[str, Any], now: pd.DataFrame,
             records: dict[str, list[dict[str, Any]]], absent: list, stats: tuple[dict, dict],
             counts: dict[str, Any]) -> DiffOutcome:
    """The outcome both comparisons share: the runs, ``head`` (threshold, tolerance...), the matching, each
    run's ``stats``, ``counts`` then the absent and one-sided records' counts, and the verdict."""
    records["absent"] = [{"key": k} for k in absent[:LISTED]]
    summary = {
        "run_a": str(a.path),
        "run_b": str(b.path),
        **head,
        "matched_by": "id" if b.identity.get("id") else "fingerprint",
        "a": stats[0],
        "b": stats[1],
        "counts": {
            **counts,
            "absent": len(absent),
            "only_in_a": int((~a.table["key"].isin(set(b.table["key"]))).sum()),
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
    if outcome.summary.get("compares") == "decisions":
        return decision_summary_line(outcome)
    s, c = outcome.summary, outcome.summary["counts"]
    a, b = s["a"], s["b"]
    return (
        f"mptool diff: {'WORSE' if outcome.worse else 'not worse'}: violations {a['violations']} -> "
        f"{b['violations']} ({c['new']} new, {c['worse']} worse, {c['fixed']} fixed, {c['unchanged']} unchanged), "
        f"max PDTP {a['max']:.4f} -> {b['max']:.4f}, mean {a['mean']:.4f} -> {b['mean']:.4f}, "
        f"{c['changed']} record(s) changed by more than {s['tolerance']:g} (threshold {s['threshold']:g})"
    )


#: A record's decision as the diff names it (``violation`` of pdtp.csv: True, False, undecided; absent: not in the run).
DECISION_NAMES = {"True": "above", "False": "below", "undecided": "undecided"}


def _decision_stats(table: pd.DataFrame) -> dict[str, float | int]:
    """Records, max and mean estimate, and the decisions' counts of one replicate run."""
    pdtp, said = table["pdtp"].to_numpy(dtype=float), table["violation"].astype(str)
    return {
        "n": int(pdtp.size),
        "max": float(pdtp.max()) if pdtp.size else 0.0,
        "mean": float(pdtp.mean()) if pdtp.size else 0.0,
        "violations": int((said == "True").sum()),
        "decided_below": int((said == "False").sum()),
        "undecided": int((~said.isin(["True", "False"])).sum()),
    }


def diff_decisions(a: PreviousRun, b: PreviousRun, threshold: float, tolerance: float) -> DiffOutcome:
    """Compare two replicate-engine runs by their decisions (module docstring; ``threshold`` is the runs' own).

    ``records``: ``new``, ``unchanged``, ``fixed`` (the baseline gate's statuses), ``changed`` (every
    record whose decision changed, A's decision as ``before_decision``, B's as ``decision``; the riskiest
    first) and ``absent`` (A's decided violations not in B). ``counts.transitions`` counts each change
    ``"A -> B"`` (above, below, undecided; ``absent`` for a record not in A); ``counts.estimate_changed``
    the records whose estimate moved by more than ``tolerance`` (shown, never a regression on its own).
    """
    decisions = b.table["violation"].astype(str).map({"True": True, "False": False}).astype(object)
    decisions = decisions.where(decisions.notna(), "undecided")
    status, before, absent = classify_decisions(b.table, a.table, decisions)
    a_said = pd.Series(a.table["violation"].astype(str).map(DECISION_NAMES).fillna("undecided").to_numpy(),
                       index=_numbered(a.table["key"]).to_numpy())
    was = _numbered(b.table["key"]).map(a_said).fillna("absent").to_numpy()
    now_said = b.table["violation"].astype(str).map(DECISION_NAMES).fillna("undecided").to_numpy()
    now = b.table.assign(status=status.to_numpy(), before=before.to_numpy(), decision=now_said,
                         before_decision=was)
    moved = now["decision"] != now["before_decision"]
    changed = now[moved.to_numpy()].sort_values(["pdtp", "row"], ascending=[False, True])
    transitions: dict[str, int] = {}
    for x, y in zip(changed["before_decision"], changed["decision"], strict=True):
        transitions[f"{x} -> {y}"] = transitions.get(f"{x} -> {y}", 0) + 1
    delta = (now["pdtp"] - now["before"]).abs().to_numpy()
    records = {kind: _decision_rows(now[now["status"] == kind]) for kind in ("new", "unchanged", "fixed")}
    lost = (now_said == "undecided") & np.isin(was, ["below", "absent"])  # no longer shown below the threshold
    worse = now[lost].sort_values(["pdtp", "row"], ascending=[False, True])
    records["worse"] = _decision_rows(worse)
    records["changed"] = _decision_rows(changed)
    counts = {**{kind: int((now["status"] == kind).sum()) for kind in ("new", "unchanged", "fixed")},
              "worse": int(lost.sum()),
              "changed": len(changed), "transitions": dict(sorted(transitions.items())),
              "estimate_changed": int((delta > tolerance).sum())}
    head = {"compares": "decisions", "threshold": threshold, "tolerance": tolerance}
    return _outcome(a, b, head, now, records, absent, (_decision_stats(a.table), _decision_stats(b.table)), counts)


def _decision_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """As :func:`_rows`, with the decision change as the record's ``note`` (``undecided -> above``)."""
    out = _rows(frame)
    for rec, x, y in zip(out, frame["before_decision"].head(LISTED), frame["decision"].head(LISTED), strict=True):
        rec["note"] = f"{x} -> {y}"
    return out


def decision_summary_line(outcome: DiffOutcome) -> str:
    """One line for a cron log on two replicate runs: the verdict, the decisions before -> after, the changes."""
    s, c = outcome.summary, outcome.summary["counts"]
    a, b = s["a"], s["b"]
    moves = ", ".join(f"{k} {v}" for k, v in c["transitions"].items()) or "none"
    return (
        f"mptool diff (decisions beyond training randomness): {'WORSE' if outcome.worse else 'not worse'}: "
        f"decided above {a['violations']} -> {b['violations']} ({c['new']} new, {c['fixed']} fixed, "
        f"{c['unchanged']} unchanged), {c['worse']} no longer decided below (undecided now), "
        f"decided below {a['decided_below']} -> {b['decided_below']}, undecided "
        f"{a['undecided']} -> {b['undecided']}; {c['changed']} decision(s) changed ({moves}); max estimate "
        f"{a['max']:.4f} -> {b['max']:.4f}, {c['estimate_changed']} estimate(s) moved by more than "
        f"{s['tolerance']:g} (not a regression on their own; threshold {s['threshold']:g})"
    )
