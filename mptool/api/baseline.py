"""Known findings are not new findings: the PDTP gate against a baseline run and a waiver file.

With a baseline (a previous pdtp run), each record of this run above the threshold is
matched with the same record of the baseline (by ``data.id``, else by fingerprint; never by
row number) and classified:

- ``new``: above the threshold now, not above it (or not audited) in the baseline;
- ``worse``: above it in both, and its PDTP rose by more than the tolerance (nats);
- ``unchanged``: above it in both, within the tolerance (or lower);
- ``fixed``: above it in the baseline, not now (a record of this run at or below the threshold).

Both runs are judged against this run's threshold. Baseline violations whose record is not
in this run at all (removed from the data, or not sampled) are listed as ``absent``, never
counted as fixed. Only new and worse records count towards the verdict.

A waiver takes a record out of the count until its expiry date (inclusive). From the next
day the record counts again: an expired waiver on a violating record is a finding (exit 1)
with a warning line naming the waiver; an expired waiver on a record that no longer violates
is only a warning (remove it). Without a baseline, waivers apply to every violating record.

Randomized training (the replicate engine, docs/randomness.md): a baseline of *decisions*. The
baseline must be a replicate run too, and records are classified by their decisions (``True``,
``False``, ``undecided``), not by a PDTP rise: ``new`` is decided above now and not decided
above in the baseline (or not in it); ``unchanged`` decided above in both; ``fixed`` decided
above in the baseline and decided *below* now. A baseline violator now undecided is neither
fixed nor counted: it is undecided, and undecided records never let the gate pass. No record is
``worse`` (a decided violation has no "worse" by its estimate's rise), and the tolerance is
not used.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mptool.inputs import options
from mptool.inputs.baseline import PreviousRun, Waiver, key_text
from mptool.outputs.formats import CSV_FLOAT_FORMAT
from mptool.runtime import ui
from mptool.runtime.errors import InputError

#: Default ``--baseline-tolerance``: PDTP rise (nats) within which a violation is "unchanged".
DEFAULT_TOLERANCE = options.DEFAULT_TOLERANCE
#: Statuses of the ``baseline_status`` column.
STATUSES = ("new", "worse", "unchanged", "fixed")
#: Most records named per list in the terminal and in pdtp.json's baseline block lists.
LISTED = 1000


@dataclass
class GateOutcome:
    """The verdict after baseline and waivers: statuses per record, counts, lists and warnings."""

    status: pd.Series  # baseline_status per record of this run ('' where none applies)
    waived: pd.Series  # bool per record: violating and covered by a waiver in force
    counted: pd.Series  # bool per record: counts towards the verdict
    block: dict[str, Any]
    before: pd.Series  # the baseline's PDTP of each record of this run (NaN where not in the baseline)
    warnings: list[str] = field(default_factory=list)
    undecided: int = 0  # replicate engine: records neither decided above nor below (never waived: fail closed)

    @property
    def verdict(self) -> str:
        """fail when a counted record remains; else undecided (replicate engine) while records are; else pass."""
        return "fail" if bool(self.counted.any()) else "undecided" if self.undecided else "pass"


def check_unique_ids(rows: np.ndarray, ids: np.ndarray, column: str) -> pd.Series:
    """The ids as match keys; InputError naming two rows if one id is used twice (checked before any work)."""
    keys = pd.Series(ids).map(key_text)
    dup = keys[keys.duplicated()]
    if not dup.empty:
        where = np.asarray(rows)[(keys == dup.iloc[0]).to_numpy()][:2]
        raise InputError(
            f"data.id column '{ui.excerpt(column)}' has one value at rows {where[0]} and {where[1]}; "
            "ids must be unique to match records with a baseline or waiver"
        )
    return keys


def match_keys(table: pd.DataFrame, identity: dict[str, Any]) -> pd.Series:
    """The key each record is matched by: its id where the run has an id column, else its fingerprint."""
    if identity.get("id"):
        return check_unique_ids(table["row"].to_numpy(), table["id"].to_numpy(), identity["id"])
    return table["fingerprint"].astype(str)


def check_comparable(current: dict[str, Any], previous: PreviousRun, flag: str) -> None:
    """InputError unless the two runs' records can be matched and their PDTP compared (same identity)."""
    old = previous.identity
    where = f"{previous.path}: {flag}"
    for key, what in (("label", "label column differs"), ("id", "data.id column differs"),
                      ("features", "feature columns differ")):
        if old.get(key) != current.get(key):
            raise InputError(f"{where} comes from other data or another spec (its {what}); compare runs of one dataset")
    if old.get("bin_size") != current.get("bin_size"):
        raise InputError(
            f"{where} was made with output.bin_size {old.get('bin_size')}, this run with {current.get('bin_size')}: "
            "PDTP on different scales cannot be compared"
        )
    fp_old, fp_new = old.get("fingerprint") or {}, current["fingerprint"]
    if not current.get("id") and (fp_old.get("scheme"), fp_old.get("key_id")) != (fp_new["scheme"], fp_new["key_id"]):
        raise InputError(
            f"{where} fingerprints were made with another key (key id {fp_old.get('key_id')}, now "
            f"{fp_new['key_id']}): the data's records changed, or MPTOOL_FINGERPRINT_KEY differs; set "
            "MPTOOL_FINGERPRINT_KEY to one secret for every run, or set data.id in the spec"
        )


def _numbered(keys: pd.Series) -> pd.Series:
    """Match keys made unique: duplicate keys (identical records without an id) numbered in order of occurrence."""
    return keys + "#" + keys.groupby(keys).cumcount().astype(str)


def classify(
    now: pd.DataFrame, before: pd.DataFrame, threshold: float, tolerance: float
) -> tuple[pd.Series, pd.Series, list]:
    """``baseline_status`` of each record of ``now`` (key, pdtp) against ``before``, the baseline's PDTP of
    each (NaN where not in it), and the keys of baseline violations not in ``now``.

    Duplicate keys (identical records without an id) are matched in order of occurrence:
    identical records have the same PDTP, so the order does not matter.
    """
    now_keys, before_keys = _numbered(now["key"]), _numbered(before["key"])
    old = pd.Series(before["pdtp"].to_numpy(), index=before_keys.to_numpy())
    prev = now_keys.map(old)
    p = now["pdtp"].to_numpy(dtype=float)
    was = (prev > threshold).to_numpy()
    is_ = p > threshold
    status = np.full(len(now), "", dtype=object)
    status[is_ & ~was] = "new"
    # a baseline's PDTP comes from its pdtp.csv (12 significant digits): compare this run's as written there
    written = np.array([float(CSV_FLOAT_FORMAT % v) for v in p], dtype=float)
    status[is_ & was & (written > prev.to_numpy(dtype=float) + tolerance)] = "worse"
    status[is_ & was & (written <= prev.to_numpy(dtype=float) + tolerance)] = "unchanged"
    status[~is_ & was] = "fixed"
    gone = before[(before["pdtp"] > threshold).to_numpy() & ~before_keys.isin(set(now_keys)).to_numpy()]
    return pd.Series(status, index=now.index), prev.astype(float), gone["key"].tolist()


def classify_decisions(
    now: pd.DataFrame, before: pd.DataFrame, decisions: pd.Series
) -> tuple[pd.Series, pd.Series, list]:
    """As :func:`classify` for the replicate engine: statuses from this run's ``decisions`` (True, False,
    undecided) and the baseline's ``violation`` column (module docstring), never from a PDTP rise.

    Identical records (one key) have the same distribution of influence, so their order does not matter.
    """
    now_keys, before_keys = _numbered(now["key"]), _numbered(before["key"])
    was_above = pd.Series((before["violation"].astype(str) == "True").to_numpy(), index=before_keys.to_numpy())
    prev = now_keys.map(pd.Series(before["pdtp"].to_numpy(dtype=float), index=before_keys.to_numpy()))
    was = now_keys.map(was_above).fillna(False).to_numpy(dtype=bool)
    is_ = np.array([v is True for v in decisions], dtype=bool)
    below = np.array([v is False for v in decisions], dtype=bool)
    status = np.full(len(now), "", dtype=object)
    status[is_ & ~was] = "new"
    status[is_ & was] = "unchanged"
    status[below & was] = "fixed"
    gone = was_above.to_numpy() & ~before_keys.isin(set(now_keys)).to_numpy()
    return pd.Series(status, index=now.index), prev.astype(float), before["key"][gone].tolist()


def check_decisions_baseline(previous: PreviousRun, replicates: bool, flag: str = "--baseline") -> None:
    """InputError unless the baseline and this run judge records the same way: both by decisions beyond the
    training randomness (replicate engine) or both by single-refit or exact PDTP (every other engine)."""
    then = isinstance(previous.summary.get("replicates"), dict)
    if then == replicates:
        if then and "violation" not in previous.table:
            raise InputError(f"{previous.path}: {flag} is a replicate-engine run without a 'violation' column in its "
                             "records; its decisions cannot be compared: rerun it with this mptool")
        return
    rep = "a replicate-engine run (decided violations)"
    single = "a run of PDTP above the threshold (refit or exact engine)"
    was, now = (rep, single) if then else (single, rep)
    raise InputError(
        f"{previous.path}: {flag} is {was}, this run is {now}: the two cannot be compared; use a baseline made "
        "with the same engine (--engine, or the detection of training randomness, chose another)"
    )


def _waiver_state(keys: pd.Series, prints: pd.Series, violating: np.ndarray, waivers: list[Waiver],
                  on: dt.date) -> tuple[np.ndarray, list[str], dict[str, list]]:
    """Which records a waiver in force covers, the warning lines, and the waivers by state.

    A waiver names a record by its match key or its fingerprint; identical records (one
    fingerprint, no id) are all covered by it.
    """
    positions: dict[str, list[int]] = {}
    for i, (key, fp) in enumerate(zip(keys, prints, strict=True)):
        positions.setdefault(key, []).append(i)
        if fp != key:
            positions.setdefault(fp, []).append(i)
    waived = np.zeros(len(keys), dtype=bool)
    warnings: list[str] = []
    state: dict[str, list] = {"in_force": [], "expired": [], "unused": []}
    for w in waivers:
        hit = [i for i in positions.get(w.record, []) if violating[i]]
        name = f"waiver for {ui.excerpt(w.record)} ({ui.excerpt(w.who)}: {ui.excerpt(w.reason, 80)})"
        entry = {"record": w.record, "who": w.who, "reason": w.reason, "expires": w.expires.isoformat()}
        if w.expires < on:
            state["expired"].append(entry)
            if hit:
                warnings.append(f"{name} expired on {w.expires}: the record counts again (PDTP above the threshold)")
            else:
                warnings.append(f"{name} expired on {w.expires}; its record is not above the threshold: remove it")
        elif not hit:
            state["unused"].append(entry)
        else:
            waived[hit] = True
            state["in_force"].append(entry)
    return waived, warnings, state


def gate(table: pd.DataFrame, identity: dict[str, Any], threshold: float, *, baseline: PreviousRun | None = None,
         tolerance: float = DEFAULT_TOLERANCE, waivers: list[Waiver] | None = None,
         today: dt.date | None = None, decisions: pd.Series | None = None) -> GateOutcome:
    """The verdict of a pdtp run (``table``: row, [id], pdtp, fingerprint) with a baseline and/or waivers.

    ``decisions`` (the replicate engine's ``violation`` column: True, False, undecided): the violating records
    are those decided above the threshold, and undecided ones keep the verdict from passing (waivers only).
    """
    keys = match_keys(table, identity).reset_index(drop=True)
    now = pd.DataFrame({"key": keys, "pdtp": table["pdtp"].to_numpy(dtype=float)})
    violating = now["pdtp"].to_numpy() > threshold
    undecided = 0
    if decisions is not None:
        violating = np.array([v is True for v in decisions], dtype=bool)
        undecided = sum(1 for v in decisions if isinstance(v, str))
    block: dict[str, Any] = {"threshold": threshold, "matched_by": "id" if identity.get("id") else "fingerprint"}
    absent: list = []
    if baseline is not None:
        check_comparable(identity, baseline, "--baseline")
        check_decisions_baseline(baseline, decisions is not None)
        if decisions is not None:
            status, prev, absent = classify_decisions(now, baseline.table, decisions)
            was = int((baseline.table["violation"].astype(str) == "True").sum())
        else:
            status, prev, absent = classify(now, baseline.table, threshold, tolerance)
            was = int((baseline.table["pdtp"] > threshold).sum())
        block.update({"path": str(baseline.path), "tolerance": tolerance,
                      "baseline_max": baseline.summary.get("max"), "baseline_violations": was})
        if decisions is not None:
            block["compares"] = "decisions"  # decided violations beyond the training randomness, no tolerance
    else:
        status = pd.Series(np.where(violating, "new", ""), dtype=object)
        prev = pd.Series(np.nan, index=now.index)
    prints = table["fingerprint"].astype(str).reset_index(drop=True)
    waived, warnings, state = _waiver_state(keys, prints, violating, waivers or [], today or dt.date.today())
    counted = status.isin(["new", "worse"]).to_numpy() & ~waived
    counts = {"violations": int(violating.sum()), "waived": int(waived.sum()), "counted": int(counted.sum())}
    block["records"] = {"counted": _listed(table, keys, counted, prev), "waived": _listed(table, keys, waived, prev)}
    if baseline is not None:
        counts.update({s: int((status == s).sum()) for s in STATUSES}, absent=len(absent))
        block["records"].update({s: _listed(table, keys, (status == s).to_numpy(), prev) for s in STATUSES})
        block["records"]["absent"] = [{"key": k} for k in absent[:LISTED]]
    if decisions is not None:
        counts["undecided"] = undecided
    block["counts"] = counts
    block["verdict"] = "fail" if counts["counted"] else "undecided" if undecided else "pass"
    if waivers is not None:
        block["waivers"] = {"today": (today or dt.date.today()).isoformat(), **state}
    idx = table.index
    return GateOutcome(
        pd.Series(status.to_numpy(), index=idx), pd.Series(waived, index=idx), pd.Series(counted, index=idx),
        block, pd.Series(prev.to_numpy(dtype=float), index=idx), warnings, undecided,
    )


def _listed(
    table: pd.DataFrame, keys: pd.Series, mask: np.ndarray, before: pd.Series | None = None
) -> list[dict[str, Any]]:
    """Records under ``mask`` as {key, row, pdtp, before}, highest PDTP first (at most :data:`LISTED`)."""
    prev = np.full(len(keys), np.nan) if before is None else before.to_numpy(dtype=float)
    part = pd.DataFrame({"key": keys.to_numpy()[mask], "row": table["row"].to_numpy()[mask],
                         "pdtp": table["pdtp"].to_numpy(dtype=float)[mask], "before": prev[mask]})
    part = part.sort_values(["pdtp", "row"], ascending=[False, True]).head(LISTED)
    return [
        {"key": k, "row": int(r), "pdtp": float(p), "before": None if np.isnan(b) else float(b)}
        for k, r, p, b in part.itertuples(index=False)
    ]
