"""Bad --rmia-gamma / --rmia-offline-a values: exit 2 (InputError in the API), one line, nothing written.

Rows rmia-1 .. rmia-9 of docs/bad-input.md. They are refused by
mptool.inputs.options.check_rmia_flags before any data is read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli, write_spec
from test_bad_input import assert_refused, good_csv, snapshot

import mptool
from mptool.runtime.errors import InputError

CLI_CASES = {
    "rmia-1 --rmia-gamma 0": (["--rmia-gamma", "0"], "--rmia-gamma must be above 0 and at most 1e+06 (got 0)"),
    "rmia-2 --rmia-gamma negative": (["--rmia-gamma", "-1"], "--rmia-gamma must be above 0 and at most 1e+06 (got -1)"),
    "rmia-3 --rmia-gamma nan": (["--rmia-gamma", "nan"], "--rmia-gamma must be a finite number above 0 (got nan)"),
    "rmia-4 --rmia-gamma inf": (["--rmia-gamma", "inf"], "--rmia-gamma must be a finite number above 0 (got inf)"),
    "rmia-5 --rmia-offline-a above 1": (
        ["--rmia-offline-a", "1.5"], "--rmia-offline-a must be 'auto' or a number from 0 to 1 (got '1.5')"
    ),
    "rmia-6 --rmia-offline-a not a number": (
        ["--rmia-offline-a", "tuned"], "--rmia-offline-a must be 'auto' or a number from 0 to 1 (got 'tuned')"
    ),
    "rmia-7 --rmia-offline-a nan": (
        ["--rmia-offline-a", "nan"], "--rmia-offline-a must be 'auto' or a number from 0 to 1 (got 'nan')"
    ),
}


@pytest.mark.parametrize("case", list(CLI_CASES), ids=[c.split()[0] for c in CLI_CASES])
def test_bad_rmia_flag_exits_2(tmp_path: Path, case: str) -> None:
    extra, message = CLI_CASES[case]
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb")
    args = ["attack", good_csv(tmp_path), "--model", spec, "--out", tmp_path / "out", "-j", "1", *extra]
    before = snapshot(tmp_path)
    line = assert_refused(run_cli(*args), [message], tmp_path, before, stdout_empty=True)
    assert line == f"mptool: error: {message}", line


API_CASES = {
    "rmia-8 rmia_gamma a bool (API)": ({"rmia_gamma": True}, "rmia_gamma must be a finite number above 0 (got True)"),
    "rmia-9 rmia_offline_a out of range (API)": (
        {"rmia_offline_a": -0.1}, "rmia_offline_a must be 'auto' or a number from 0 to 1 (got '-0.1')"
    ),
}


@pytest.mark.parametrize("case", list(API_CASES), ids=[f"api-{i}" for i in range(len(API_CASES))])
def test_bad_rmia_api_values_raise_input_error(tmp_path: Path, case: str) -> None:
    kwargs, message = API_CASES[case]
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb")
    csv = good_csv(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(InputError) as info:
        mptool.attack(csv, spec, **kwargs)
    assert str(info.value) == message
    assert snapshot(tmp_path) == before


def test_given_gamma_and_a_reach_the_attack(tmp_path: Path) -> None:
    """The flags are used, not only checked: attack.json records them."""
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb")
    out = tmp_path / "out"
    res = run_cli("attack", good_csv(tmp_path), "--model", spec, "--out", out, "-j", "1", "-q", "--attacks", "rmia",
                  "--candidates", "20", "--targets", "10", "--iterations", "1", "--shadow-pool", "16",
                  "--pdtp-iterations", "0", "--rmia-gamma", "2", "--rmia-offline-a", "0.25")
    assert res.code == 0, res.stderr
    doc = json.loads((out / "attack.json").read_text())
    m = doc["attacks"]["rmia_offline"]
    assert m["gamma"] == 2.0 and m["offline_a"] == 0.25 and m["offline_a_from"] == "--rmia-offline-a"
