"""Bad inputs of ``attack --shadow-data synthesize[:Q]`` (issue 19 item 2): exit 2, one line,
nothing written. Rows synth-1 to synth-6 of docs/bad-input.md."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import mixed_frame, run_cli
from test_bad_input import assert_refused, good_csv, good_spec, snapshot

Case = Callable[[Path], tuple[list[str], list[str]]]

RANGE = "--shadow-data synthesize:Q takes Q, the queries allowed per synthetic record, a whole number from 1 to 100,000"


def synth_args(d: Path, source: str, *extra: str, csv: Path | None = None, spec: Path | None = None) -> list[str]:
    """A small untargeted attack run with ``--shadow-data source``."""
    return ["attack", str(csv or good_csv(d)), "--model", str(spec or good_spec(d)), "--out", str(d / "out"),
            "--jobs", "1", "--candidates", "20", "--targets", "10", "--iterations", "2", "--attacks", "untargeted",
            "--shadow-data", source, *extra]  # fmt: skip


def queries_zero(d: Path):  # synth-1
    return synth_args(d, "synthesize:0"), [RANGE, "(got '0')"]


def queries_not_a_number(d: Path):  # synth-2
    return synth_args(d, "synthesize:many"), [RANGE, "(got 'many')"]


def queries_decimal(d: Path):  # synth-3
    return synth_args(d, "synthesize:1.5"), [RANGE, "(got '1.5')"]


def queries_above_cap(d: Path):  # synth-4
    return synth_args(d, "synthesize:100001"), [RANGE, "(got '100001')"]


def total_above_cap(d: Path):  # synth-5: |D| x Q above 100,000,000 queries
    csv = good_csv(d, mixed_frame(1010, seed=2))
    args = synth_args(d, "synthesize:100000", csv=csv)
    args[args.index("--candidates") + 1] = "1002"
    return args, ["--shadow-data synthesize:100000: 1,002 records x 100,000 queries is more than 100,000,000",
                  "lower Q or --candidates"]  # fmt: skip


def model_never_confident(d: Path):  # synth-6: heavily regularised LR outputs its prior everywhere
    spec = good_spec(d, "logistic_regression", model={"params": {"C": 1e-9}})
    return synth_args(d, "synthesize:20", spec=spec), [
        "--shadow-data synthesize: only",
        "within 20 queries each",
        "shadow models need two classes: raise Q (synthesize:Q) or use --shadow-data marginals",
    ]


def features_unknown(d: Path):  # synth-7
    return synth_args(d, "population", "--untargeted-features", "xy"), [
        "--untargeted-features must be one of auto, xyq, yq (got 'xy')"
    ]


CASES: list[Case] = [
    queries_zero,
    queries_not_a_number,
    queries_decimal,
    queries_above_cap,
    total_above_cap,
    model_never_confident,
    features_unknown,
]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_bad_synthesis_exits_2_with_one_clear_line(tmp_path: Path, case: Case) -> None:
    args, fragments = case(tmp_path)
    before = snapshot(tmp_path)
    assert_refused(run_cli(*args), fragments, tmp_path, before, max_len=400, stdout_empty=True)
