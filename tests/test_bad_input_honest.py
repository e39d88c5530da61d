"""``--gate`` and ``--noise-floor`` out of range: exit 2, one line naming the flag, nothing written.

Rows honest-1 .. honest-5, honest-8 and honest-9 of docs/bad-input.md; honest-6 .. honest-7 are the Python API's
parameters (mptool.pdtp), refused with InputError before any work.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli
from test_bad_input import assert_refused, good_csv, good_spec, pdtp_args, snapshot

import mptool
from mptool.runtime.errors import InputError

CASES = {
    "honest-1 unknown gate": (["--gate", "exact"], "--gate must be binned or raw (got 'exact')"),
    "honest-2 empty gate": (["--gate", ""], "--gate must be binned or raw (got '')"),
    "honest-3 negative noise floor": (["--noise-floor", "-1"], "--noise-floor must be at least 0"),
    "honest-4 noise floor above the audited records": (
        ["--sample", "3", "--noise-floor", "4"],
        "--noise-floor must be at most the number of audited records 3 (got 4)",
    ),
    "honest-5 noise floor not a number": (["--noise-floor", "many"], "--noise-floor"),
    "honest-8 raw gate with a baseline": (
        ["--gate", "raw", "--baseline", "prev/pdtp.json"],
        "--gate raw cannot be combined with --baseline or --waivers",
    ),
    "honest-9 raw gate with waivers": (
        ["--gate", "raw", "--waivers", "waivers.yaml"],
        "--gate raw cannot be combined with --baseline or --waivers",
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=[c.split()[0] for c in CASES])
def test_bad_gate_or_noise_floor_exits_2(tmp_path: Path, case: str) -> None:
    extra, fragment = CASES[case]
    args = pdtp_args(tmp_path, good_csv(tmp_path), good_spec(tmp_path), *extra)
    before = snapshot(tmp_path)
    assert_refused(run_cli(*args), [fragment], tmp_path, before, prefix="mptool: error: ")


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"gate": "Binned"}, "gate must be binned or raw (got 'Binned')"),  # honest-6
        ({"noise_floor": 2.5}, "noise_floor must be a whole number of records or None (got 2.5)"),  # honest-7
        ({"noise_floor": True}, "noise_floor must be a whole number of records or None (got True)"),
        ({"noise_floor": -2}, "noise_floor must be at least 0"),
    ],
)
def test_api_refuses_bad_gate_and_noise_floor(tmp_path: Path, kwargs: dict, fragment: str) -> None:
    csv, spec = good_csv(tmp_path), good_spec(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(InputError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        mptool.pdtp(csv, spec, jobs=1, **kwargs)
    assert snapshot(tmp_path) == before
