"""Bad attribute:COLUMN / --attribute-values input: exit 2 (InputError in the API), one line, nothing written.

Rows attr-1 .. attr-10 of docs/bad-input.md. The --attacks entries are refused by
mptool.attacks.protocol.parse_attacks (mptool.attacks.attribute.split_choices) before any data is
read; the column by mptool.attacks.attribute.resolve from plan_attack, before any model is fitted.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import mixed_frame, run_cli, write_spec
from test_bad_input import assert_refused, good_csv, snapshot

import mptool
from mptool.runtime.errors import InputError

LONG = "colour" + "x" * 80


def constant_frame() -> pd.DataFrame:
    frame = mixed_frame(30, seed=5)
    frame.insert(0, "const", "same")
    return frame


CASES = {
    "attr-1 the label column": ("attribute:label", {}, None,
                                "--attacks attribute:label: that is the label column; name a feature column"),
    "attr-2 an unknown column": ("attribute:colour", {}, None, "--attacks attribute:colour: not a feature column of "
                                 "the model (unknown, dropped or the id)"),
    "attr-3 a dropped column": ("attribute:x2", {"data": {"drop": ["x2"]}}, None, "--attacks attribute:x2: not a "
                                "feature column of the model (unknown, dropped or the id)"),
    "attr-4 no column after the colon": ("attribute:", {}, None,
                                         "--attacks: attribute needs a column: attribute:COLUMN"),
    "attr-5 attribute without a column": ("threshold,attribute", {}, None,
                                          "--attacks: attribute needs a column: attribute:COLUMN"),
    "attr-6 two attribute columns": ("attribute:color,attribute:size", {}, None,
                                     "--attacks: one attribute:COLUMN per run"),
    "attr-7 a column with a single value": ("attribute:const", {}, constant_frame(),
                                            "--attacks attribute:const: the column has a single value in the data; "
                                            "nothing to infer"),
    "attr-8 a long unknown name is cut": (f"attribute:{LONG}", {}, None, "--attacks attribute:colourxxxxxxxxxxxxxxx"
                                          "xxxxxxxxxxxxxxxxxxx…(86 chars): not a feature column of the model "
                                          "(unknown, dropped or the id)"),
    "attr-9 --attribute-values without attribute:COLUMN": (
        "threshold", {}, None,
        "--attribute-values writes the values of attribute:COLUMN; add attribute:COLUMN to --attacks",
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=[c.split()[0] for c in CASES])
def test_bad_attribute_exits_2(tmp_path: Path, case: str) -> None:
    attacks, sections, frame, message = CASES[case]
    csv = good_csv(tmp_path, frame)
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb", **sections)
    extra = ["--attribute-values"] if case.startswith("attr-9") else []
    before = snapshot(tmp_path)
    res = run_cli("attack", csv, "--model", spec, "--attacks", attacks, "--out", tmp_path / "out", "--jobs", "1",
                  "--targets", "10", "-q", *extra)
    line = assert_refused(res, [message], tmp_path, before, stdout_empty=True)
    assert line == f"mptool: error: {message}"


def test_attr_10_api_refuses_the_label(tmp_path: Path) -> None:
    """attr-10: mptool.attack(attacks='attribute:label') raises InputError before any fit, writes nothing."""
    csv = good_csv(tmp_path)
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb")
    before = snapshot(tmp_path)
    with pytest.raises(InputError) as info:
        mptool.attack(csv, spec, attacks="attribute:label", jobs=1, targets=10)
    assert str(info.value) == "--attacks attribute:label: that is the label column; name a feature column"
    assert snapshot(tmp_path) == before
