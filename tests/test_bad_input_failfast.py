"""Bad --order / fail_fast / order values: exit 2 (InputError in the API), one line, nothing written.

Rows failfast-1 .. failfast-6 of docs/bad-input.md. They are refused by
mptool.inputs.options (check_order, check_fail_fast, check_fail_fast_gate) before any data is read.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli, write_spec
from test_bad_input import assert_refused, good_csv, pdtp_args, snapshot

import mptool
from mptool.runtime.errors import InputError

CLI_CASES = {
    "failfast-1 unknown --order": (["--order", "random"], "--order must be one of risk, row (got 'random')"),
    "failfast-2 empty --order": (["--order", ""], "--order must be one of risk, row (got '')"),
    "failfast-5 --fail-fast with --baseline": (
        ["--baseline", "prev"],
        "--fail-fast and --baseline exclude each other: the gate judges every record, and a run stopped at a "
        "known or waived violator would check none of the rest; drop one",
    ),
    "failfast-6 --fail-fast with --waivers": (
        ["--waivers", "w.yaml"],
        "--fail-fast and --waivers exclude each other: the gate judges every record, and a run stopped at a "
        "known or waived violator would check none of the rest; drop one",
    ),
}


@pytest.mark.parametrize("case", list(CLI_CASES), ids=[c.split()[0] for c in CLI_CASES])
def test_bad_order_flag_exits_2(tmp_path: Path, case: str) -> None:
    extra, message = CLI_CASES[case]
    args = pdtp_args(tmp_path, good_csv(tmp_path), write_spec(tmp_path / "s.yaml", "decision_tree"), *extra)
    before = snapshot(tmp_path)
    line = assert_refused(run_cli(*args, "--fail-fast"), [message], tmp_path, before, stdout_empty=True)
    assert line == f"mptool: error: {message}", line


API_CASES = {
    "failfast-3 fail_fast not a bool (API)": ({"fail_fast": "no"}, "fail_fast must be True or False (got 'no')"),
    "failfast-4 order not a known order (API)": ({"order": 3}, "order must be one of risk, row (got 3)"),
}


@pytest.mark.parametrize("case", list(API_CASES), ids=[c.split()[0] for c in API_CASES])
def test_bad_api_values_raise_input_error(tmp_path: Path, case: str) -> None:
    kwargs, message = API_CASES[case]
    spec = write_spec(tmp_path / "s.yaml", "decision_tree")
    before = snapshot(tmp_path)
    with pytest.raises(InputError) as info:
        mptool.pdtp(good_csv(tmp_path), spec, engine="refit", **kwargs)
    assert str(info.value) == message
    assert set(snapshot(tmp_path)) - set(before) <= {"d.csv"}
