"""Bad ``output.release`` policies and ``mptool mitigate`` flags: exit 2, one line, nothing written.

Rows mitigate-1 .. mitigate-18 of docs/bad-input.md. Spec cases are refused by the strict spec
reader (mptool.inputs.spec.ReleaseSpec) for every command; flag cases by mptool.inputs.options
(check_mitigate_flags, check_defences) before any data is read.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli
from test_bad_input import assert_refused, good_csv, pdtp_args, snapshot

import mptool.api.mitigate as api
from mptool.runtime.errors import InputError

SPEC_HEAD = "data: {label: label, train_size: null}\nmodel: {estimator: gaussian_nb}\n"

SPEC_CASES = {
    "mitigate-1 unknown key in output.release": (
        "output: {release: {rund: 2}}",
        "s.yaml: unknown key 'output.release.rund' (did you mean 'round'?)",
    ),
    "mitigate-2 top_k 0": (
        "output: {release: {top_k: 0}}",
        "s.yaml: key 'output.release.top_k': Input should be greater than or equal to 1 (got 0)",
    ),
    "mitigate-3 top_k not a whole number": (
        "output: {release: {top_k: 1.5}}",
        "s.yaml: key 'output.release.top_k': Input should be a valid integer, got a number with a fractional "
        "part (got 1.5)",
    ),
    "mitigate-4 top_k as text": (
        "output: {release: {top_k: '2'}}",
        "s.yaml: key 'output.release.top_k': expected a number, not text: write numbers without quotes (got '2')",
    ),
    "mitigate-5 round above 15": (
        "output: {release: {round: 16}}",
        "s.yaml: key 'output.release.round': Input should be less than or equal to 15 (got 16)",
    ),
    "mitigate-6 round negative": (
        "output: {release: {round: -1}}",
        "s.yaml: key 'output.release.round': Input should be greater than or equal to 0 (got -1)",
    ),
    "mitigate-7 temperature 0": (
        "output: {release: {temperature: 0}}",
        "s.yaml: key 'output.release.temperature': Input should be greater than 0 (got 0)",
    ),
    "mitigate-8 temperature .inf": (
        "output: {release: {temperature: .inf}}",
        "s.yaml line 3: output.release.temperature: .inf is not a finite number; every number in a spec must be "
        "finite",
    ),
    "mitigate-9 temperature .nan": (
        "output: {release: {temperature: .nan}}",
        "s.yaml line 3: output.release.temperature: .nan is not a finite number; every number in a spec must be "
        "finite",
    ),
    "mitigate-10 label_only with top_k": (
        "output: {release: {top_k: 1, label_only: true}}",
        "s.yaml: key 'output.release.label_only': label_only releases only the label; remove top_k (it would "
        "change nothing) (got True)",
    ),
    "mitigate-11 label_only not a boolean": (
        "output: {release: {label_only: 'yes'}}",
        "s.yaml: key 'output.release.label_only': expected true or false (got 'yes')",
    ),
    "mitigate-12 release not a mapping": (
        "output: {release: 3}",
        "s.yaml: key 'output.release': Input should be a valid dictionary or instance of ReleaseSpec (got 3)",
    ),
}


@pytest.mark.parametrize("case", list(SPEC_CASES), ids=[c.split()[0] for c in SPEC_CASES])
def test_bad_release_policy_exits_2(tmp_path: Path, case: str) -> None:
    text, message = SPEC_CASES[case]
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC_HEAD + text + "\n")
    args = pdtp_args(tmp_path, good_csv(tmp_path), spec)
    before = snapshot(tmp_path)
    line = assert_refused(run_cli(*args), [message], tmp_path, before, stdout_empty=True)
    assert line.endswith(message), line


def mitigate_args(d: Path, *extra: str) -> list[str]:
    spec = d / "s.yaml"
    spec.write_text(SPEC_HEAD)
    return ["mitigate", str(good_csv(d)), "--model", str(spec), "--out", str(d / "out"), "--jobs", "1", *extra]


FLAG_CASES = {
    "mitigate-13 unknown --defences family": (
        ["--defences", "release,prayer"],
        "--defences is 'all' or a comma list of release, regularise, removal, dp, each once (got 'prayer')",
    ),
    "mitigate-14 --target nan": (["--target", "nan"], "--target must be a finite number above 0, e.g. 1.0 for DTP-1 "
                                 "(got nan)"),
    "mitigate-15 --target 0": (["--target", "0"], "--target must be a finite number above 0, e.g. 1.0 for DTP-1 "
                               "(got 0.0)"),
    "mitigate-16 --sample 0": (["--sample", "0"], "--sample must be at least 1 (got 0)"),
    "mitigate-17 --defences repeated": (
        ["--defences", "dp,dp"],
        "--defences is 'all' or a comma list of release, regularise, removal, dp, each once (got 'dp,dp')",
    ),
    "mitigate-18 --queries with output.release (pdtp)": (None, "--queries measures the full probability vector; "
                                                         "it cannot be combined with output.release (remove one)"),
    "mitigate-19 --gate not a scale": (["--gate", "Binned"], "--gate must be binned or raw (got 'Binned')"),
}


@pytest.mark.parametrize("case", list(FLAG_CASES), ids=[c.split()[0] for c in FLAG_CASES])
def test_bad_mitigate_flag_exits_2(tmp_path: Path, case: str) -> None:
    extra, message = FLAG_CASES[case]
    if extra is None:
        spec = tmp_path / "s.yaml"
        spec.write_text(SPEC_HEAD + "output: {release: {round: 2}}\n")
        args = pdtp_args(tmp_path, good_csv(tmp_path), spec, "--queries", "train")
    else:
        args = mitigate_args(tmp_path, *extra)
    before = snapshot(tmp_path)
    line = assert_refused(run_cli(*args), [message], tmp_path, before, stdout_empty=True)
    assert line == f"mptool: error: {message}", line


def test_api_refuses_bad_values(tmp_path: Path) -> None:
    """The Python API names its parameters (target, defences) and raises InputError before any work."""
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC_HEAD)
    with pytest.raises(InputError, match=r"^target must be a finite number above 0"):
        api.mitigate(good_csv(tmp_path), spec, target=float("inf"))
    with pytest.raises(InputError, match=r"^defences is 'all' or a comma list"):
        api.mitigate(good_csv(tmp_path), spec, defences=("release", 3))
