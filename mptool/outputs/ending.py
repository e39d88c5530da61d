"""How a replicate-engine run ended and what a verdict rests on, in the words every output uses.

A ``--fail-fast`` run of the replicate engine ends one of three ways: a record decided above the
threshold stopped it (``fail-fast stop``), the ``--budget`` of fits ran out before every record was
decided (``budget spent``), or it ran to the end (``complete``: every record decided or at its
most replicates). The verdict line (``mptool pdtp``), the JUnit file and ``mptool report`` take
the reason and its words from here, so they never disagree; the reason is read from pdtp.json's
summary, so a report of an older run (whose ``budget_exhausted`` was also set when a look was
planned beyond the budget and a stop came first) still names the stop (docs/randomness.md section 4).
"""

from __future__ import annotations

from typing import Any

#: The three ways a run ends (``summary.replicates.fail_fast_spending.ended`` in pdtp.json).
STOP, BUDGET, COMPLETE = "fail-fast stop", "budget spent", "complete"


def replicate_ending(summary: dict[str, Any]) -> str:
    """Why a replicate-engine run ended: :data:`STOP`, :data:`BUDGET` or :data:`COMPLETE`.

    A stop (``summary.stopped``, or the ``--fail-fast`` block's ``stopped_by``) comes first: the run
    ended there whatever the budget had left; otherwise a budget that cut records is the reason.
    """
    rep = summary.get("replicates") if isinstance(summary.get("replicates"), dict) else {}
    spend = rep.get("fail_fast_spending") if isinstance(rep.get("fail_fast_spending"), dict) else {}
    if summary.get("stopped") or spend.get("stopped_by"):
        return STOP
    return BUDGET if rep.get("budget_exhausted") else COMPLETE


def ending_words(summary: dict[str, Any]) -> str:
    """One clause on how the run ended, with the fits used and the ``--budget`` (if any).

    E.g. "ended by the --fail-fast stop after 80 of the --budget's 100 fits",
    "ended when the --budget of 40 fits was spent", "ended complete: no stop, every record evaluated".
    """
    rep = summary.get("replicates") if isinstance(summary.get("replicates"), dict) else {}
    fits, budget = rep.get("fits"), rep.get("budget_fits")
    ended = replicate_ending(summary)
    if ended == STOP:
        of = "" if budget is None else f" of the --budget's {budget}"
        return f"ended by the --fail-fast stop after {fits}{of} fits"
    if ended == BUDGET:
        return f"ended when the --budget of {budget} fits was spent, before every record was decided"
    within = "" if budget is None else f", within the --budget of {budget} fits"
    return f"ended complete: no stop, every record evaluated{within}"


def fail_fast_split(spend: dict[str, Any]) -> str:
    """How ``--fail-fast`` split the violations' error level (the screen's share and the audit's)."""
    return (f"violations at {spend['screen_alpha']:g} for a depth-first screen of the "
            f"{spend['screen_records']} first records of the audit order (record j at "
            f"{spend['screen_alpha']:g}*2^-j, weighted Bonferroni) and {spend['audit_alpha_violations']:g} for the "
            "rest")


def stop_words(spend: dict[str, Any]) -> str:
    """Which part of ``--fail-fast`` stopped the run and at what level, or '' when none did."""
    if spend.get("stopped_by") == "screen":
        return (f"stopped by the screen: record {spend['position'] + 1} of the audit order decided above at "
                f"level {spend['level']:.3g}")
    if spend.get("stopped_by") == "audit":
        return f"stopped by the audit at level {spend['level']:g}"
    return ""


def verdict_rests_on(summary: dict[str, Any]) -> list[str]:
    """What a pdtp verdict rests on beyond a full audit of T's full vector (issue 26), from pdtp.json's summary:
    the release policy as measured, a sample, records chosen with --records, a --fail-fast stop (with the
    replicate engine: which part stopped it and how the run ended). The JUnit file's evidence starts with
    these lines (the baseline and waivers follow, :func:`mptool.cli.ci.evidence`); ``mptool report`` shows them.
    """
    lines = []
    if summary.get("release_note"):
        lines.append(summary["release_note"])
    sample, stopped = summary.get("sample"), summary.get("stopped")
    n, n_train = summary.get("n", 0), summary.get("n_train", 0)
    if sample and sample["k"] < sample["n_train"]:
        bound = sample.get("fraction_upper_95")
        said = (f"with 95% confidence at most {100 * bound:.1f}% of T above the threshold"
                if bound is not None else "no bound")
        lines.append(f"a seeded sample of {sample['k']} of {sample['n_train']} records ({said})")
    elif not sample and n < n_train and not stopped:
        lines.append(f"{n} records chosen with --records of {n_train} in T")
    if stopped:
        spend = (summary.get("replicates") or {}).get("fail_fast_spending")
        how = f" ({stop_words(spend)}; {ending_words(summary)})" if spend else ""  # the replicate engine
        lines.append(f"--fail-fast stopped at row {stopped['row']} after {stopped['after']} of {stopped['of']}{how}")
    return lines


def partial_pass(summary: dict[str, Any]) -> str | None:
    """The headline of a pass that covers only part of T, as ``mptool pdtp``'s verdict line words it
    (:func:`mptool.cli.pdtp.qualified_verdict`): records chosen with ``--records``, or a ``--sample`` with the 95%
    upper bound on the fraction of T above the threshold. None for any other run (a fail, or every record of T).
    """
    if summary.get("verdict") != "pass":
        return None
    sample, n, n_train = summary.get("sample"), summary.get("n"), summary.get("n_train")
    whole = (int, float)
    if isinstance(sample, dict) and isinstance(sample.get("k"), whole) and isinstance(sample.get("n_train"), whole):
        if sample["k"] >= sample["n_train"]:
            return None
        frac = sample.get("fraction_upper_95")
        pct = 100.0 * float(frac) if isinstance(frac, whole) else None
        bound = ("no bound" if pct is None else "with 95% confidence at most "
                 f"{f'{pct:.1f}%' if pct >= 0.1 or pct == 0 else f'{pct:.2g}%'} of T is above the threshold")
        return (f"DTP-1 not established (no violation among {sample['k']} sampled records of {sample['n_train']}; "
                f"{bound}; audit every record for a verdict)")
    if not sample and isinstance(n, int) and isinstance(n_train, int) and n < n_train:
        return (f"DTP-1 not established (no violation among the {n} records given with --records, of {n_train} in T; "
                "audit every record for a verdict)")
    return None
