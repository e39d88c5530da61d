"""red6: hostile review of the report's undecided-records section and ci-gate.sh's report-failure branch.

One tiny replicate pdtp run (known-answer data, ``--replicates 4:4``, a ``--budget`` that leaves records
unevaluated, as in tests/test_replicates_report.py), copied and edited per case; the gate runs with a stub mptool.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli, write_spec
from test_bad_input import assert_refused
from test_sig3 import gate_env, run_gate

from mptool.api.costs import pdtp_cost
from mptool.inputs.known_answer import ESTIMATOR, MODULE, known_frame


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("red6")
    csv = d / "d.csv"
    known_frame(0)[0].to_csv(csv, index=False)
    spec = write_spec(d / "v.yaml", ESTIMATOR,
                      model={"params": {"weight_feature": 1, "noise": 1.0, "memorise": 6.0}, "preprocess": "none"})
    res = run_cli("pdtp", csv, "-m", spec, "--allow-import", MODULE, "--out", d / "run", "--jobs", "1",
                  "--replicates", "4:4", "--budget", "40", "-q")
    assert res.code == 1, res.stderr
    return d / "run"


def _edited(run: Path, tmp_path: Path, column: str, value: str) -> Path:
    """A copy of ``run`` whose pdtp.csv has ``value`` in ``column`` of its first record (an undecided one)."""
    copy = tmp_path / "edited"
    shutil.copytree(run, copy)
    t = pd.read_csv(copy / "pdtp.csv", dtype=str, keep_default_na=False)
    assert t.loc[0, "violation"] == "undecided"
    t.loc[0, column] = value
    t.to_csv(copy / "pdtp.csv", index=False)
    return copy


@pytest.mark.parametrize(("column", "value"), [
    ("pdtp_low", "<b>x</b>"),  # red6-1
    ("pdtp_high", "abc"),
    ("sd_full", "<i>s</i>"),
    ("pdtp", "<b>9</b>"),  # an undecided record's estimate may be empty, not text
    ("replicates", "-5"),  # red6-2
    ("replicates", "2.5"),
    ("replicates", "1e308"),  # beyond replicates_max (4)
    ("replicates", "many"),
    ("row", "<i>r</i>"),  # red6-3
    ("row", ""),
])
def test_edited_record_cells_are_refused(run: Path, tmp_path: Path, column: str, value: str) -> None:
    """Each was listed in the undecided-records section (escaped) as if mptool had written it, exit 0."""
    copy = _edited(run, tmp_path, column, value)
    for fmt in ("md", "html"):
        res = run_cli("report", copy, "--format", fmt, "--out", "-" if fmt == "md" else tmp_path / "r.html")
        line = assert_refused(res, [f"pdtp.csv has a '{column}' cell that is not", "a result file was edited"])
        assert not value or value not in line  # the cell itself is never echoed
        assert not (tmp_path / "r.html").exists()


def test_unedited_run_still_reports(run: Path) -> None:
    res = run_cli("report", run, "--format", "md", "--out", "-")
    assert res.code == 0, res.stderr
    undecided = int((pd.read_csv(run / "pdtp.csv")["violation"].astype(str) == "undecided").sum())
    assert f"### The {undecided} undecided records" in res.stdout


def test_undecided_section_counts_what_the_summary_counts(run: Path, tmp_path: Path) -> None:  # red6-4
    """verify_pdtp reads ' Undecided ' as undecided (stripped, any case); the section left such a record out, so the
    summary said 23 undecided and the section 'The 22 undecided records'."""
    copy = _edited(run, tmp_path, "violation", " UNDECIDED")
    res = run_cli("report", copy, "--format", "md", "--out", "-")
    assert res.code == 0, res.stderr
    undecided = int((pd.read_csv(run / "pdtp.csv")["violation"].astype(str) == "undecided").sum())
    assert f"| records undecided (not established; violation = undecided in pdtp.csv) | {undecided} |" in res.stdout
    assert f"### The {undecided} undecided records" in res.stdout


@pytest.mark.parametrize(("report_code", "gate_code"), [(1, 3), (2, 2), (3, 3), (9, 3)])
def test_gate_never_reads_a_report_crash_as_a_finding(tmp_path: Path, report_code: int, gate_code: int) -> None:
    """red6-5: pdtp passes, `mptool report` fails with 1 (a Python crash exits 1): the gate exited 1 and wrote
    verdict=fail, a DTP-1 finding; now any code but 2 or 3 is an internal error (3, verdict=error)."""
    stub = tmp_path / "mptool-stub"
    stub.write_text(
        "#!/usr/bin/env bash\n"
        f'if [ "$1" = report ]; then echo "Traceback" >&2; exit {report_code}; fi\n'
        'out=""; while [ $# -gt 0 ]; do if [ "$1" = --out ]; then out="$2"; fi; shift; done\n'
        'mkdir -p "$out"; echo "{}" > "$out/pdtp.json"; exit 0\n'
    )
    stub.chmod(0o755)
    env, step, outputs = gate_env(tmp_path, "fresh")
    res = run_gate(tmp_path, **env, MPTOOL_BIN=str(stub))
    assert res.returncode == gate_code, res.stderr
    assert f"mptool report failed (exit code {report_code}) after mptool pdtp exited 0" in step.read_text()
    assert f"The gate exits {gate_code}." in step.read_text()
    assert outputs.read_text().splitlines() == [f"exit-code={gate_code}", "verdict=error", "report=fresh"]


def test_check_prices_one_seed_only_when_a_seed_changed_a() -> None:
    """red6-6 (bf833c1): `mptool check` priced the randomness check of any training its dry run found randomized
    at one seed, while a training randomized by its row order alone (a seed parameter that changes nothing: SGD
    without shuffling) has every seed tried first: 3 planned, 5 made. Now one seed only when a seed changed A."""
    import warnings

    import numpy as np
    from sklearn.linear_model import SGDClassifier
    from test_estimates import fit_time

    from mptool.loo.randomness import detect, detection_fits, planned_fits
    from mptool.loo.replicates import ReplicateEngine

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(60, 3)), columns=list("abc"))
    y = (X["a"].to_numpy() + rng.normal(size=60) > 0).astype(int)
    template = SGDClassifier(loss="log_loss", shuffle=False, random_state=0, max_iter=5, tol=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter=5 does not converge: a tiny fit is all this needs
        model = SGDClassifier(**template.get_params()).fit(X, y)
        classes = np.array([0, 1])
        first = detect(template, model, X, y, classes, 0, first=True)  # what check's dry run finds
        full = detect(template, model, X, y, classes, 0)  # what pdtp's check makes
    assert first.randomized and not first.seed and full.order and not full.seed
    assert detection_fits(template, full) == 5 and planned_fits(template, bool(first.seed)) >= 5
    cost = pdtp_cost(template, ReplicateEngine(), fit_time(1.0, 60), 60, 10, 1, randomized=True,
                     seed_found=bool(first.seed))
    assert {p.name: p for p in cost.phases}["randomness check"].fits == 1 + 5
    seeded = pdtp_cost(template, ReplicateEngine(), fit_time(1.0, 60), 60, 10, 1, randomized=True, seed_found=True)
    assert {p.name: p for p in seeded.phases}["randomness check"].fits == 1 + 3  # as is, one seed, one order
