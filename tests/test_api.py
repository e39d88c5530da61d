"""The public Python API (issue 17): operations without the CLI, frozen results, exceptions not exits."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
from conftest import mixed_frame, run_cli, write_spec

import mptool
from mptool.runtime.errors import InputError


def test_pdtp_from_dataframe_and_dict_spec_matches_the_cli(tmp_path: Path) -> None:
    frame = mixed_frame(40, seed=3)
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    spec_path = write_spec(tmp_path / "s.yaml", "gaussian_nb")
    spec = {"data": {"label": "label"}, "model": {"estimator": "gaussian_nb"}, "output": {"bin_size": 0.01}}
    result = mptool.pdtp(frame, spec, jobs=1)
    assert isinstance(result, mptool.PdtpResult)
    assert result.verdict in ("pass", "fail")
    assert len(result.table) == 40 and result.summary["n"] == 40
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.table = None  # type: ignore[misc]
    with pytest.raises(TypeError):
        result.summary["max"] = 0  # type: ignore[index]
    res = run_cli("pdtp", csv, "--model", spec_path, "--out", tmp_path / "out", "--jobs", "1", "--quiet")
    assert res.code == (1 if result.verdict == "fail" else 0)
    cli_table = pd.read_csv(tmp_path / "out" / "pdtp.csv")
    assert cli_table["row"].tolist() == result.table["row"].tolist()
    assert (cli_table["pdtp"] - result.table["pdtp"].astype(float)).abs().max() < 1e-9
    from_path = mptool.pdtp(csv, spec_path, jobs=1)
    pd.testing.assert_frame_equal(from_path.table, result.table)


def test_api_raises_input_error_and_never_exits(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="data.label"):
        mptool.pdtp(mixed_frame(20), {"data": {"label": "nope"}, "model": {"estimator": "gaussian_nb"}})
    with pytest.raises(InputError):
        mptool.pdtp(tmp_path / "missing.csv", {"data": {"label": "label"}, "model": {"estimator": "gaussian_nb"}})


def test_reduce_and_attack_from_the_api(tmp_path: Path) -> None:
    frame = mixed_frame(60, seed=1)
    spec = {"data": {"label": "label"}, "model": {"estimator": "categorical_nb"}, "seed": 0}
    reduced = mptool.reduce_dtp(frame, spec, max_removals=3, jobs=1)
    assert reduced.table["step"].tolist()[0] == 0 and reduced.verdict in ("pass", "fail")
    attacked = mptool.attack(
        frame, spec, attacks="distance,threshold", candidates=40, iterations=2, targets=6, shadows=2, pairs=1,
        pdtp_iterations=1, jobs=1,
    )
    assert set(attacked.attacks) >= {"distance", "threshold"}
    assert len(attacked.table) == 6
