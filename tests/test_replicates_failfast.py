"""``--fail-fast`` with the replicate engine: the depth-first screen (issue 27 items 3 and 5; docs/randomness.md 4).

Ground truth: :class:`mptool.inputs.known_answer.KnownAnswerClassifier` on :func:`known_frame`, whose
first rows are memorised (PDTP of the expected prediction about 4); with ``memorise=0`` no record has
any influence (every record a null). ``order="row"`` puts a memorised record first in the audit order,
whatever the risk screen would rank first.
"""

from __future__ import annotations

import pandas as pd
import pytest

import mptool
from mptool.cli.pdtp import verdict_line
from mptool.inputs.known_answer import MODULE, known_frame, known_spec
from mptool.privacy.influence import ALPHA, SCREEN_SHARE, screen_level, screen_records

ALLOW = (MODULE,)
MIN, MAX = 4, 8


@pytest.mark.parametrize("seed", [0, 1])
def test_memorised_record_first_stops_after_few_fits(seed: int) -> None:
    """A memorised record first in the order: the screen decides it above and stops.

    The screen takes the first record through its looks before any other record, so a stop on it
    costs at most MAX replicates of A(T) and MAX of A(T minus t): fits <= 2 * MAX (16 here; one
    look, 8 fits, is what it takes at this influence). Today's breadth-first rule needed every
    record's first look and BH over all records (docs/randomness.md 6.2).
    """
    df, kind = known_frame(seed)
    assert kind[0] == "large"
    r = mptool.pdtp(df, known_spec(seed), allow_import=ALLOW, replicates=f"{MIN}:{MAX}", jobs=1,
                    fail_fast=True, order="row")
    s, rep = r.summary, r.summary["replicates"]
    assert s["verdict"] == "fail" and s["complete"] is False and s["stopped"]["reason"] == "fail-fast"
    assert s["stopped"]["row"] == int(df.index[0]) and kind[s["stopped"]["row"]] == "large"
    assert rep["fits"] <= 2 * MAX
    spend = rep["fail_fast_spending"]
    assert spend["stopped_by"] == "screen" and spend["position"] == 0
    assert spend["level"] == pytest.approx(ALPHA * SCREEN_SHARE / 2, rel=1e-12)  # the first record's weight 1/2
    assert spend["screen_alpha"] + spend["audit_alpha_violations"] == pytest.approx(ALPHA, rel=1e-12)
    assert r.table["violation"].tolist() == [True]
    line = verdict_line(s)
    assert line.startswith("DTP-1 VIOLATED") and "stopped by the screen: record 1 of the audit order" in line
    assert "at level 0.0125" in line


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nulls_only_never_stop_and_end_as_without_fail_fast(seed: int) -> None:
    """No record has influence: no stop, no violation, and the same table as the audit without --fail-fast.

    Every null's estimate is far below the threshold, so the screen gives each of its records only
    the first look, the replicates a full audit gives them too; the below-threshold decisions keep
    the whole alpha (the screen spends only the violations' share), so the decisions are the same.
    """
    df, _ = known_frame(seed)
    spec = known_spec(seed, memorise=0.0)
    ff = mptool.pdtp(df, spec, allow_import=ALLOW, replicates=f"{MIN}:{MAX}", jobs=1, fail_fast=True)
    plain = mptool.pdtp(df, spec, allow_import=ALLOW, replicates=f"{MIN}:{MAX}", jobs=1)
    s = ff.summary
    assert s["complete"] is True and "stopped" not in s
    assert s["violations"] == 0 and s["verdict"] == plain.summary["verdict"] != "fail"
    assert s["replicates"]["fail_fast_spending"]["stopped_by"] is None
    assert s["replicates"]["fits"] == plain.summary["replicates"]["fits"]
    pd.testing.assert_frame_equal(ff.table.sort_values("row").reset_index(drop=True),
                                  plain.table.sort_values("row").reset_index(drop=True))
    assert "fail_fast_spending" not in plain.summary["replicates"]  # without --fail-fast: as before
    assert "fail-fast: violations at 0.025" in verdict_line(s) and "stopped by" not in verdict_line(s)


def test_screen_levels_sum_below_their_share() -> None:
    """The weighted Bonferroni: the screen's levels sum to less than its share, for any number of records."""
    share = ALPHA * SCREEN_SHARE
    assert sum(screen_level(j) for j in range(200)) <= share  # = share up to rounding: 1 - 2^-200
    assert screen_level(0) == pytest.approx(share / 2, rel=1e-12)
    # screened while the level beats the audit's first step alpha_audit / n: 2^(j+1) <= n
    assert [screen_records(n) for n in (1, 2, 26, 1000)] == [1, 1, 4, 9]
