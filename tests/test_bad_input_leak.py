"""Bad inputs of issue 12 item 5 (nothing raw reaches a terminal): exit 2, one short, escaped line.

Rows leak-1 to leak-5 of docs/bad-input.md. The line names the value as a visible, cut
excerpt: no ESC or bidi character reaches the terminal, no cell is echoed whole.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import mixed_frame, run_cli, write_spec
from test_bad_input import assert_refused, good_csv, good_spec, pdtp_args, snapshot

Case = Callable[[Path], tuple[list[str], list[str]]]


def bidi_in_column_name(d: Path):  # leak-1
    frame = mixed_frame(30, seed=5).rename(columns={"x1": "x1\u202egnp.exe"})
    return pdtp_args(d, good_csv(d, frame), good_spec(d)), ["d.csv", "'x1\\u202egnp.exe'", "control character"]


def huge_text_cell(d: Path):  # leak-2
    frame = mixed_frame(30, seed=5)
    frame["color"] = frame["color"].astype(object)
    frame.loc[0, "color"] = "\x1b[2J" + "z" * 5_000_000
    spec = good_spec(d, model={"preprocess": "none"})
    return pdtp_args(d, good_csv(d, frame), spec), ["'\\x1b[2Jzzz", "…(5000004 chars)'", "data.drop"]


def huge_single_class_label(d: Path):  # leak-3
    frame = mixed_frame(3, seed=5)  # 3 rows of one 3 MB label (was 30: a 90 MB file for the same refusal)
    frame["label"] = "\u202e" + "z" * 3_000_000
    return pdtp_args(d, good_csv(d, frame), good_spec(d)), ["single class ('\\u202ezzz", "…(3000001 chars)')"]


def escape_in_typed_option(d: Path):  # leak-4
    args = pdtp_args(d, good_csv(d), good_spec(d), "--engine", "\x1b[2J\x1b[Hfast")
    return args, ["--engine", "(got '\\x1b[2J\\x1b[Hfast')"]


def show_values_with_markdown_only(d: Path):  # leak-5
    csv = good_csv(d)
    out = d / "res"
    r = run_cli("pdtp", csv, "--model", write_spec(d / "s.yaml", "categorical_nb"), "--out", out, "-q")
    assert r.code in (0, 1), r.stderr
    return ["report", str(out), "--format", "md", "--show-values"], ["--show-values", "HTML report only", "Markdown"]


CASES: list[Case] = [
    bidi_in_column_name,
    huge_text_cell,
    huge_single_class_label,
    escape_in_typed_option,
    show_values_with_markdown_only,
]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_bad_input_exits_2_with_one_short_escaped_line(tmp_path: Path, case: Case) -> None:
    args, fragments = case(tmp_path)
    before = snapshot(tmp_path)
    res = run_cli(*args)
    assert len(res.stderr.splitlines()) == 1, res.stderr[:500]  # not even an empty second line
    assert_refused(res, fragments, tmp_path, before, max_len=400, stdout_empty=True)
    assert "\x1b" not in res.stderr and "\u202e" not in res.stderr
