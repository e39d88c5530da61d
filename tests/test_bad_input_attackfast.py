"""Bad inputs of ``attack --budget`` and the default shadow pool (issue 13 item 4): exit 2, one
line, nothing written. Rows attackfast-1 to attackfast-6 of docs/bad-input.md."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import run_cli
from test_bad_input import assert_refused, good_csv, good_spec, snapshot

Case = Callable[[Path], tuple[list[str], list[str]]]


def attack_args(d: Path, *extra: str) -> list[str]:
    """A valid small attack run (30 records, 20 candidates, 10 targets) plus ``extra``."""
    return ["attack", str(good_csv(d)), "--model", str(good_spec(d)), "--out", str(d / "out"), "--jobs", "1",
            "--candidates", "20", "--targets", "10", "--iterations", "2", *extra]  # fmt: skip


def budget_zero(d: Path):  # attackfast-1
    return attack_args(d, "--budget", "0"), ["--budget must be above 0", "(got 0)"]


def budget_negative(d: Path):  # attackfast-2
    return attack_args(d, "--budget", "-5"), ["--budget must be above 0", "(got -5)"]


def budget_nan(d: Path):  # attackfast-3
    return attack_args(d, "--budget", "nan"), ["--budget must be a number of seconds (got nan)"]


def budget_infinite(d: Path):  # attackfast-4
    return attack_args(d, "--budget", "inf"), ["--budget must be a number of seconds (got inf)"]


def budget_too_short(d: Path):  # attackfast-5: measured on this machine, no plan of 20+ fits takes 1 ms
    return attack_args(d, "--budget", "0.001"), [
        "--budget 0.001 s is too short: even the smallest plan",
        "needs an estimated",
        "raise --budget",
    ]


def explicit_pool_misses_a_target(d: Path):  # attackfast-6: checked on the seeded subsets, before any fit
    return attack_args(d, "--shadow-pool", "2", "--attacks", "distance"), [
        "--shadow-pool 2: a target is in all or none of the pool; use more models"
    ]


CASES: list[Case] = [
    budget_zero,
    budget_negative,
    budget_nan,
    budget_infinite,
    budget_too_short,
    explicit_pool_misses_a_target,
]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_bad_budget_or_pool_exits_2_with_one_clear_line(tmp_path: Path, case: Case) -> None:
    args, fragments = case(tmp_path)
    before = snapshot(tmp_path)
    assert_refused(run_cli(*args), fragments, tmp_path, before, max_len=400, stdout_empty=True)
