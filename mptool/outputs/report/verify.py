"""The report's verdict is recomputed from the records, never taken from ``summary.verdict`` alone (issue 26).

pdtp.json's ``summary`` says the verdict, the maximum and the count above the threshold; pdtp.csv
holds every reported record's PDTP on both scales, and (with ``--baseline``/``--waivers``) its
``baseline_status`` and ``waived``. :func:`verify_pdtp` recomputes the DTP-1 verdict on the run's
``--gate`` scale and the gate's verdict after baseline and waivers exactly as ``mptool pdtp`` did
(:func:`mptool.api.baseline.gate`: a record counts when its status is new or worse and it is not
waived), and refuses the folder (exit 2, one line) when the summary says otherwise: an edited
result file. :func:`gate_label` names a pass that rests on excused records (``pass-with-waivers``,
``pass-with-baseline``, ``pass-with-baseline-and-waivers``), so no report shows it as a plain pass
or a plain fail.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from mptool.outputs.ending import BUDGET, COMPLETE, STOP, replicate_ending
from mptool.outputs.report.values import number
from mptool.runtime.errors import InputError

#: Relative tolerance of the summary's max against the records' max (both written from the same floats;
#: pdtp.csv round-trips them exactly, so anything beyond float formatting is an edit).
MAX_RTOL = 1e-9


def _number(value: Any) -> float | None:
    """A JSON number as a finite float; None for anything else (text, a bool, NaN, a whole number beyond a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return number(value)


def _flags(column: pd.Series) -> np.ndarray:
    """A CSV column of true/false as booleans (anything but true reads as false)."""
    return column.astype(str).str.strip().str.lower().isin(["true", "1"]).to_numpy()


#: pdtp.csv writes 12 significant digits (``CSV_FLOAT_FORMAT``): a value read back is within this relative
#: distance of the one pdtp compared with the threshold.
CSV_RTOL = 1e-11


def above_as_written(values: np.ndarray, threshold: float, table: pd.DataFrame, cells: bool = True) -> np.ndarray:
    """Which records are above ``threshold``, from their values as pdtp.csv wrote them (12 digits).

    A value within the file's rounding of the threshold cannot say on which side pdtp's exact value was
    (a ``--threshold 0.3364722366211`` against ln(0.035/0.025) = 0.33647223662121: written 0.336472236621):
    there the record's ``violation`` cell, written from the exact value, decides (``cells``: only when that
    cell is on the scale of ``values``). Everywhere else the value does, so an edited cell still disagrees
    with the summary."""
    above = values > threshold
    near = np.abs(values - threshold) <= CSV_RTOL * max(abs(threshold), np.finfo(float).tiny)
    if cells and near.any() and "violation" in table:
        cells = table["violation"].astype(str).str.strip().str.lower().to_numpy()
        above = np.where(near, cells == "true", above)
    return above


def recomputed(table: pd.DataFrame, summary: dict[str, Any], where: str,
               unevaluated: np.ndarray | None = None) -> dict[str, Any]:
    """The DTP-1 verdict, the count above the threshold and the max, from the records on the ``--gate`` scale.

    ``unevaluated`` (a replicate-engine run: records left undecided by a spent budget) marks the records whose
    estimate may be empty; the max is over the others.
    """
    threshold = _number(summary.get("threshold"))
    if threshold is None:
        raise InputError(f"{where}: summary.threshold is not a finite number; the verdict cannot be checked")
    column = "pdtp_raw" if summary.get("gate") == "raw" else "pdtp"
    if column not in table:
        raise InputError(f"{where}: pdtp.csv has no '{column}' column; the verdict cannot be checked")
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
    kept = table
    if unevaluated is not None:
        keep = ~(np.isnan(values) & unevaluated)
        values, kept = values[keep], table[keep]
    if np.isnan(values).any():
        raise InputError(f"{where}: pdtp.csv has a '{column}' cell that is not a number; the verdict cannot be checked")
    above = int(np.sum(above_as_written(values, threshold, kept)))
    return {"verdict": "fail" if above else "pass", "violations": above, "n": int(len(table)),
            "max": float(values.max()) if values.size else 0.0, "threshold": threshold, "column": column}


def decisions_recomputed(table: pd.DataFrame, where: str) -> dict[str, Any]:
    """A replicate-engine run's verdict from pdtp.csv's ``violation`` column (True, False, undecided).

    fail when a record is decided above the threshold, else undecided when any is undecided, else pass
    (docs/randomness.md); any other cell refuses the folder.
    """
    if "violation" not in table:
        raise InputError(f"{where}: pdtp.csv has no 'violation' column; the verdict cannot be checked")
    cells = table["violation"].astype(str).str.strip().str.lower()
    if not cells.isin(["true", "false", "undecided"]).all():
        raise InputError(f"{where}: pdtp.csv has a 'violation' cell that is not true, false or undecided; the "
                         "verdict cannot be checked")
    above, open_ = int((cells == "true").sum()), int((cells == "undecided").sum())
    return {"verdict": "fail" if above else "undecided" if open_ else "pass", "violations": above,
            "undecided": open_, "decided_below": int((cells == "false").sum())}


#: A replicate-engine run's per-record result columns: each cell empty (a record the budget left unevaluated)
#: or a number; ``replicates`` and ``row`` whole and not negative.
REPLICATE_NUMBER_COLUMNS = ("pdtp", "pdtp_low", "pdtp_high", "sd_full")


def check_replicate_cells(table: pd.DataFrame, where: str, most: Any = None) -> None:
    """InputError (naming the column, never the cell) when a replicate-engine run's pdtp.csv holds a ``row`` that
    is not a row number, a ``replicates`` that is not a whole number from 0 to ``most`` (summary.replicates'
    ``replicates_max`` when whole), or text in :data:`REPLICATE_NUMBER_COLUMNS`: the report would list such a
    record (the undecided records) as if mptool had written it."""
    top = float(most) if _count(most) else math.inf
    for column in ("row", "replicates", *REPLICATE_NUMBER_COLUMNS):
        if column not in table:
            continue
        given = table[column].notna().to_numpy() & (table[column].astype(str).str.strip() != "").to_numpy()
        values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
        if column in REPLICATE_NUMBER_COLUMNS:
            bad, what = given & np.isnan(values), "a number or empty"
        else:
            with np.errstate(invalid="ignore"):
                whole = np.isfinite(values) & (values >= 0) & (values == np.floor(values))
                whole &= values <= (top if column == "replicates" else math.inf)
            bad = (~given | ~whole) if column == "row" else given & ~whole
            what = "a row number" if column == "row" else "a whole number of replicates up to replicates_max"
        if bad.any():
            raise InputError(f"{where}: pdtp.csv has a '{column}' cell that is not {what} (record "
                             f"{int(np.argmax(bad))} of the file); {EDITED}")


def gate_recomputed(table: pd.DataFrame, threshold: float, replicates: bool = False,
                    binned_gate: bool = True) -> dict[str, int | str]:
    """The gate after baseline and waivers, as :func:`mptool.api.baseline.gate` decides it from the columns
    (``replicates``: violating = decided above, from the ``violation`` column; undecided keeps it from passing).
    The baseline gate compares the binned ``pdtp``; ``binned_gate``: the run's ``violation`` column is on
    that scale too (``--gate binned``), so it may settle a value within the file's rounding of the threshold."""
    values = pd.to_numeric(table["pdtp"], errors="coerce").to_numpy(dtype=float)
    violating = above_as_written(values, threshold, table, cells=binned_gate)
    open_ = 0
    if replicates:
        cells = table["violation"].astype(str).str.strip().str.lower()
        violating, open_ = (cells == "true").to_numpy(), int((cells == "undecided").sum())
    if "baseline_status" in table:
        status = table["baseline_status"].astype(str).str.strip().to_numpy()
    else:
        status = np.where(violating, "new", "")
    waived = _flags(table["waived"]) if "waived" in table else np.zeros(len(table), dtype=bool)
    counted = np.isin(status, ["new", "worse"]) & ~waived
    verdict = "fail" if counted.any() else "undecided" if open_ else "pass"
    return {"verdict": verdict, "violations": int(violating.sum()),
            "waived": int((waived & violating).sum()), "counted": int(counted.sum())}


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: What every refusal of a damaged summary field ends with.
EDITED = "a result file was edited: rerun mptool pdtp"


def _count(value: Any, least: int = 0) -> bool:
    """A whole number of at least ``least`` (a count of records or fits; not a bool)."""
    return _whole(value) and value >= least


def _refuse(where: str, field: str, what: str) -> InputError:
    return InputError(f"{where}: summary.{field} is not {what}; {EDITED}")


def _check_stop(summary: dict[str, Any], where: str) -> None:
    """``summary.stopped``: absent, null, or a ``--fail-fast`` stop (whole row, after <= of)."""
    stopped = summary.get("stopped")
    if stopped is not None and not (isinstance(stopped, dict) and all(_count(stopped.get(k)) for k in
                                                                      ("row", "after", "of"))
                                    and stopped["after"] <= stopped["of"]):
        raise InputError(f"{where}: summary.stopped is not a --fail-fast stop (row, after: the records in pdtp.csv, "
                         f"of); {EDITED}")


def _check_replicates(summary: dict[str, Any], where: str) -> None:
    """The replicate engine's block as :func:`mptool.outputs.ending.ending_words` and the report read it: a dict;
    whole ``fits``, ``budget_fits`` null or whole, a true/false ``budget_exhausted``, ``confidence`` in (0, 1), and
    the ``--fail-fast`` block (its split, a known ``stopped_by``, an ``ended`` that agrees with the stop and budget)."""
    rep = summary.get("replicates")
    if rep is None and "replicates" not in summary:
        return
    if not isinstance(rep, dict):
        raise _refuse(where, "replicates", "the replicate engine's block mptool writes")
    if "fits" in rep and not _count(rep["fits"]):
        raise _refuse(where, "replicates.fits", "a whole number of fits")
    if rep.get("budget_fits") is not None and not _count(rep["budget_fits"], 1):
        raise _refuse(where, "replicates.budget_fits", "null or the whole number of fits of --budget")
    if "budget_exhausted" in rep and not isinstance(rep["budget_exhausted"], bool):
        raise _refuse(where, "replicates.budget_exhausted", "true or false")
    if "confidence" in rep and not (_number(rep["confidence"]) is not None and 0 < rep["confidence"] < 1):
        raise _refuse(where, "replicates.confidence", "a confidence level between 0 and 1")
    spend = rep.get("fail_fast_spending")
    if spend is not None:
        split = ("screen_alpha", "screen_records", "audit_alpha_violations", "audit_alpha_below")
        if (not isinstance(spend, dict) or any(_number(spend.get(k)) is None for k in split)
                or spend.get("stopped_by") not in (None, "screen", "audit")
                or (spend.get("stopped_by") is not None and _number(spend.get("level")) is None)
                or (spend.get("stopped_by") == "screen" and not _whole(spend.get("position")))):
            raise InputError(f"{where}: summary.replicates.fail_fast_spending is not the --fail-fast block mptool "
                             f"writes; {EDITED}")
        said = spend.get("ended", replicate_ending(summary))
        if said not in (STOP, BUDGET, COMPLETE) or said != replicate_ending(summary):
            raise InputError(f"{where}: summary.replicates.fail_fast_spending.ended is not how summary.stopped and "
                             f"summary.replicates.budget_exhausted say the run ended; {EDITED}")


def _check_baseline(summary: dict[str, Any], where: str) -> None:
    """``summary.baseline`` (``--baseline``/``--waivers``): absent, or a dict whose gate verdict comes with the
    whole counts the report names it by (violations, waived, counted; with a baseline file new, worse, unchanged,
    fixed)."""
    block = summary.get("baseline")
    if block is None and "baseline" not in summary:
        return
    if not isinstance(block, dict):
        raise _refuse(where, "baseline", "the --baseline/--waivers block mptool writes")
    if "verdict" not in block:
        return
    counts = block.get("counts")
    keys = ("violations", "waived", "counted", *(("new", "worse", "unchanged", "fixed") if "path" in block else ()))
    if block["verdict"] not in ("pass", "fail", "undecided") or not isinstance(counts, dict) or not all(
            _count(counts.get(k)) for k in keys):
        raise _refuse(where, "baseline", "the --baseline/--waivers block mptool writes (a verdict and its counts)")


def check_basis(summary: dict[str, Any], where: str) -> None:
    """InputError unless every field that says what a verdict rests on reads as mptool writes it, where present.

    The fields :func:`mptool.outputs.ending.verdict_rests_on`, :func:`~mptool.outputs.ending.ending_words` and
    :func:`~mptool.outputs.ending.partial_pass` read (the verdict, ``n`` of ``n_train`` records, the release
    policy and its note, a ``--fail-fast`` stop, the replicate engine's block and how the run ended) and the
    baseline/waivers block the report names the gate by. A damaged one used to drop "The verdict rests on"
    without a word, or read a run of records chosen with ``--records`` as "DTP-1 holds": a gate failing open
    (tidy3). An absent optional field is read as before. No value is echoed.
    """
    if "verdict" in summary and summary["verdict"] not in (
            "pass", "fail", *(("undecided",) if isinstance(summary.get("replicates"), dict) else ())):
        raise _refuse(where, "verdict", "pass or fail (or undecided, from the replicate engine)")
    n, n_train = summary.get("n"), summary.get("n_train")
    if "n" in summary and not _count(n):
        raise _refuse(where, "n", "a whole number of records")
    if "n_train" in summary and not (_count(n_train, 1) and (not _whole(n) or n <= n_train)):
        raise _refuse(where, "n_train", "the whole number of records in T (at least n)")
    release, note = summary.get("release"), summary.get("release_note")
    if "release" in summary and not isinstance(release, dict):
        raise _refuse(where, "release", "the release policy mptool writes")
    if "release_note" in summary and not (isinstance(note, str) and ("release" not in summary
                                                                      or bool(note) == bool(release))):
        raise _refuse(where, "release_note", "the note naming summary.release (empty without a policy)")
    _check_stop(summary, where)
    _check_replicates(summary, where)
    _check_baseline(summary, where)


def check_ending(summary: dict[str, Any], unevaluated: np.ndarray, where: str) -> None:
    """InputError unless a replicate run's stop and its budget agree with pdtp.csv (docs/randomness.md 4).

    ``summary.stopped`` (its shape checked by :func:`check_basis`) absent or a stop ``after`` the records pdtp.csv
    holds (``unevaluated``: one entry per record); records left unevaluated only where the budget was spent
    (:func:`mptool.outputs.ending.replicate_ending`). Else the report would say "complete" of a budget-cut run, or
    a stop of records it does not hold. No value is echoed.
    """
    stopped = summary.get("stopped")
    if stopped is not None and stopped["after"] != len(unevaluated):
        raise InputError(f"{where}: summary.stopped is not a --fail-fast stop (row, after: the records in pdtp.csv, "
                         f"of); {EDITED}")
    if unevaluated.any() and replicate_ending(summary) != BUDGET:
        raise InputError(f"{where}: summary.replicates.budget_exhausted does not say a spent --budget, yet pdtp.csv "
                         f"has records left unevaluated (no estimate); {EDITED}")


def check_sample(summary: dict[str, Any], where: str) -> None:
    """InputError unless ``summary.sample`` is absent (null) or the ``--sample`` block mptool writes
    (:func:`mptool.privacy.sampling.sample_summary`): whole ``k`` and ``violations`` with
    0 <= violations <= k <= n_train, ``n_train`` that of the summary, ``fraction_upper_95`` null or in [0, 1],
    a ``method`` text. Else the report's headline (:func:`mptool.outputs.ending.partial_pass`) and what the
    verdict rests on (:func:`mptool.outputs.ending.verdict_rests_on`) could not say the sample: a sampled pass
    read as "DTP-1 holds", or the sample left out without a word (tidy-1). No value is echoed.
    """
    sample = summary.get("sample")
    if "sample" not in summary or sample is None:
        return
    bound = sample.get("fraction_upper_95") if isinstance(sample, dict) else None
    ok = (isinstance(sample, dict) and all(_whole(sample.get(k)) for k in ("k", "n_train", "violations"))
          and 0 <= sample["violations"] <= sample["k"] and 1 <= sample["k"] <= sample["n_train"]
          and sample["n_train"] == summary.get("n_train", sample["n_train"])
          and (bound is None or (_number(bound) is not None and 0 <= bound <= 1))
          and isinstance(sample.get("method"), str))
    if not ok:
        raise InputError(f"{where}: summary.sample is not the --sample block mptool writes (k of n_train records, "
                         "violations, fraction_upper_95, method); a result file was edited: rerun mptool pdtp")


def verify_pdtp(table: pd.DataFrame | None, summary: dict[str, Any] | None, where: str) -> list[str]:
    """Check pdtp.json's summary against pdtp.csv; InputError on any disagreement, else notes (if unverifiable)."""
    if summary is None:
        return []
    check_basis(summary, where)
    replicates = isinstance(summary.get("replicates"), dict)
    if summary.get("verdict") not in ("pass", "fail", "undecided"):
        return []
    check_sample(summary, where)
    if table is None:
        return ["the DTP-1 verdict is pdtp.json's alone: pdtp.csv (the records) is missing, so it is not verified"]
    if replicates:
        check_replicate_cells(table, where, summary["replicates"].get("replicates_max"))
    decided = decisions_recomputed(table, where) if replicates else None
    open_ = (table["violation"].astype(str).str.strip().str.lower() == "undecided").to_numpy() if replicates else None
    got = recomputed(table, summary, where, open_)
    if replicates:
        empty = pd.to_numeric(table["pdtp"], errors="coerce").isna().to_numpy() if "pdtp" in table else open_
        check_ending(summary, open_ & empty, where)
    said = {"verdict": summary.get("verdict"), "violations": summary.get("violations"), "n": summary.get("n")}
    if decided is not None:  # decided violations, not estimates above the threshold (docs/randomness.md)
        got |= decided
        said["undecided"] = summary.get("undecided")
    for key, value in said.items():
        if value is not None and value != got[key]:
            raise InputError(
                f"{where}: summary.{key} ({value}) disagrees with the records in pdtp.csv ({got[key]}: "
                f"{got['violations']} of {got['n']} {'decided ' if replicates else ''}above {got['threshold']:g} "
                f"on {'violation' if replicates else got['column']}); a result file was edited: rerun mptool pdtp"
            )
    said_max = _number(summary.get("max"))
    if said_max is None or not math.isclose(said_max, got["max"], rel_tol=MAX_RTOL, abs_tol=1e-12):
        raise InputError(f"{where}: summary.max disagrees with the records in pdtp.csv; a result file was edited: "
                         "rerun mptool pdtp")
    block = summary.get("baseline")
    if isinstance(block, dict) and "verdict" in block:
        gate = gate_recomputed(table, got["threshold"], replicates, binned_gate=summary.get("gate") != "raw")
        if block.get("verdict") != gate["verdict"]:
            raise InputError(
                f"{where}: summary.baseline.verdict ({block.get('verdict')}) disagrees with pdtp.csv's "
                f"baseline_status and waived columns ({gate['counted']} record(s) counted); a result file was "
                "edited: rerun mptool pdtp"
            )
    return []


def gate_label(summary: dict[str, Any]) -> str:
    """The verdict a run's exit code stood for, naming what excused violations (module docstring)."""
    verdict = str(summary.get("verdict"))
    block = summary.get("baseline")
    if isinstance(block, dict) and block.get("verdict") == "undecided":
        return "undecided"
    if not isinstance(block, dict) or block.get("verdict") not in ("pass", "fail"):
        return verdict
    if block["verdict"] == "fail" or verdict == "pass":
        return str(block["verdict"])
    counts = block.get("counts") if isinstance(block.get("counts"), dict) else {}
    waived = counts.get("waived") or 0
    by = [*(["baseline"] if "path" in block and (counts.get("violations") or 0) > waived else []),
          *(["waivers"] if waived else [])]
    return "pass-with-" + "-and-".join(by or ["baseline"])
