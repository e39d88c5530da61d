"""Workers only when they pay, through the command line (issue 28 item 6).

``pdtp``, ``reduce-dtp`` and ``mitigate`` each choose the worker count of their refits with
:func:`mptool.runtime.parallel.choose_workers`: ``--jobs 0`` (the default) plans, ``--jobs N`` is taken
as given. Each command prints one ``workers for ...`` line and writes a ``workers`` block in its JSON,
and its results do not depend on the choice. The runs here are in-process, on 12 records and a
``DummyClassifier`` (the refit engine, fits of a few milliseconds). Worker start-up is priced out of
reach for the ``--jobs 0`` runs, so "too short to pay" holds on any machine and at any load; the
``--jobs 2`` runs use the threading backend, so no worker process is ever started.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import CliResult, mixed_frame, run_cli, write_spec

from mptool.api import costs
from mptool.api import mitigate as mitigate_api
from mptool.api.costs import FitTime, replicate_phase
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import load_spec
from mptool.runtime import parallel

#: command -> (extra flags of a short refit run, its JSON, its per-record or per-step CSV, what the line names)
COMMANDS = {
    "pdtp": (("--engine", "refit", "--noise-floor", "0", "--sample", "4"), "pdtp.json", "pdtp.csv", "the refits"),
    "reduce-dtp": (("--engine", "refit", "--max-removals", "1"), "reduce.json", "reduce.csv", "the refits"),
    "mitigate": (("--defences", "release", "--sample", "4"), "mitigate.json", "mitigate.csv",
                 "the baseline's refits"),
}
RUNS = {"jobs0": ("--jobs", "0"), "jobs1": ("--jobs", "1"), "jobs2": ("--jobs", "2", "--backend", "threading")}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("plan6")
    csv = d / "d.csv"
    mixed_frame(20).to_csv(csv, index=False)  # T: 12 records, 8 held out (mitigate judges utility on them)
    spec = write_spec(d / "s.yaml", "sklearn.dummy.DummyClassifier", data={"train_size": 12},
                      model={"params": {"strategy": "prior"}})
    return csv, spec


@pytest.fixture(scope="module")
def runs(files: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple]:
    """Each command at --jobs 0, 1 and 2 (threading): (CliResult, JSON summary, the CSV's text)."""
    csv, spec = files
    root = tmp_path_factory.mktemp("plan6-runs")
    mp = pytest.MonkeyPatch()
    out: dict[tuple[str, str], tuple] = {}
    try:
        mp.setattr(parallel.os, "cpu_count", lambda: 2)  # two cores to plan for, on any machine
        mp.setattr(parallel, "WORKER_START_S", 1e6)  # workers never pay for fits of milliseconds, at any load
        for cmd, (extra, js, table, _) in COMMANDS.items():
            for name, jobs in RUNS.items():
                folder = root / f"{cmd}-{name}"
                res = run_cli(cmd, csv, "--model", spec, "--out", folder, *jobs, *extra)
                doc = json.loads((folder / js).read_text())
                out[cmd, name] = (res, doc.get("summary", doc), (folder / table).read_text())
    finally:
        mp.undo()
    return out


def workers_block(cmd: str, summary: dict) -> dict:
    """The command's worker choice: mitigate has one per setting refitted per record (here the baseline only)."""
    block = summary["workers"]
    return block["baseline"] if cmd == "mitigate" else block


def workers_lines(cmd: str, res: CliResult) -> list[str]:
    return [ln for ln in res.stderr.splitlines() if ln.startswith(f"workers for {COMMANDS[cmd][3]}: ")]


@pytest.mark.parametrize("cmd", list(COMMANDS))
def test_jobs_0_runs_short_refits_in_this_process_and_says_so(runs: dict, cmd: str) -> None:
    res, summary, _ = runs[cmd, "jobs0"]
    assert res.code in (0, 1), res.stderr
    block = workers_block(cmd, summary)
    assert (block["requested"], block["workers"]) == (2, 1)
    assert block["fits"] > 0 and block["why"].startswith("in this process: about ")
    assert workers_lines(cmd, res) == [f"workers for {COMMANDS[cmd][3]}: 1 ({block['why']})"]


@pytest.mark.parametrize("cmd", list(COMMANDS))
def test_given_jobs_are_taken_as_given(runs: dict, cmd: str) -> None:
    for name, workers in (("jobs1", 1), ("jobs2", 2)):
        res, summary, _ = runs[cmd, name]
        assert res.code in (0, 1), res.stderr
        block = workers_block(cmd, summary)
        assert (block["requested"], block["workers"], block["why"]) == (workers, workers, "--jobs as given")
        assert workers_lines(cmd, res) == [f"workers for {COMMANDS[cmd][3]}: {workers} (--jobs as given)"]


@pytest.mark.parametrize("cmd", list(COMMANDS))
def test_results_do_not_depend_on_the_worker_choice(runs: dict, cmd: str) -> None:
    texts = {name: runs[cmd, name][2] for name in RUNS}
    codes = {name: runs[cmd, name][0].code for name in RUNS}
    assert len(set(codes.values())) == 1, codes
    if cmd == "mitigate":  # mitigate.csv's `seconds` column is each setting's time: everything else is compared
        texts = {k: pd.read_csv(io.StringIO(v)).drop(columns="seconds").to_csv(index=False)
                 for k, v in texts.items()}
    assert texts["jobs0"] == texts["jobs1"] == texts["jobs2"]  # byte for byte


@pytest.fixture
def two_idle_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(parallel.os, "getloadavg", lambda: (0.0, 0.0, 0.0))


def test_given_workers_on_short_work_show_the_estimate(two_idle_cores: None) -> None:
    # 16 fits of 0.05 s: 0.8 s here, against 3 s to start two workers + 0.4 s of shared fits
    choice = parallel.choose_workers(2, "loky", 16, 0.05)
    assert choice["workers"] == 2  # --jobs N is still taken as given
    assert parallel.workers_line(choice, "the refits") == (
        "workers for the refits: 2 (--jobs as given; about 0.8 s of fits in this process, 3.4 s on 2 workers "
        "with their start: slower than this process alone)")
    long = parallel.choose_workers(2, "loky", 300, 0.5)["why"]  # 150 s here, 78 s on two: no warning
    assert long == "--jobs as given; about 150.0 s of fits in this process, 78.0 s on 2 workers with their start"
    for jobs, backend in ((1, "loky"), (2, "threading"), (2, "dask")):  # no worker process to start, or one only
        assert parallel.choose_workers(jobs, backend, 16, 0.05)["why"] == "--jobs as given"


def test_mitigate_randomized_training_chooses_its_workers(
        files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A randomized setting's replicates are sized like pdtp's: MIN replicates of T and of T minus t per record."""
    csv, spec_path = files
    prep = prepare(csv, load_spec(spec_path, {}))
    positions = np.arange(3, dtype=np.int64)
    seen: list[int] = []

    def replicates(prep, positions, full, options, jobs, progress, label):  # stands in for the replicate engine
        seen.append(jobs)
        return SimpleNamespace(p_full=None, p_loo=None), 0

    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(parallel, "WORKER_START_S", 1e6)
    monkeypatch.setattr(mitigate_api.randomized, "is_randomized", lambda p: True)
    monkeypatch.setattr(mitigate_api.randomized, "run_replicates", replicates)
    options = mitigate_api.MitigateOptions(jobs=0, replicates="4:8")
    trained = mitigate_api.train_and_loo(prep, positions, options, _no_progress, "baseline")
    assert seen == [1] and trained.engine == "replicates"
    assert trained.workers["fits"] == 4 * (3 + 1) and trained.workers["why"].startswith("in this process")


class _Advance:
    def __enter__(self):
        return lambda n: None

    def __exit__(self, *exc: object) -> None:
        return None


def _no_progress(total: int, label: str) -> _Advance:
    return _Advance()


@pytest.mark.parametrize("cmd", list(COMMANDS))
def test_help_says_what_jobs_0_does(cmd: str) -> None:
    res = run_cli(cmd, "--help")
    text = re.sub(r"\s+", " ", res.stdout)
    assert "0 = every core, but model fits too short to pay for starting workers run in this process" in text
    assert "[default: 0]" in text


def test_mitigate_estimate_of_randomized_training_uses_the_runs_worker_choice(
        files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan line prices the replicates on the workers train_and_loo will choose (here this process), not on
    every core: with a worker start priced out of reach, the estimate is that of one worker."""
    csv, spec_path = files
    prep = prepare(csv, load_spec(spec_path, {}))
    n = prep.train.n
    fake = FitTime(0.01, ((n, 0.01),), 1.0, None, None)  # type: ignore[arg-type]  # one fit of A(T): 0.01 s
    monkeypatch.setattr(costs, "time_fit", lambda *a, **k: fake)
    monkeypatch.setattr(costs, "process_age", lambda: 0.0)
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(parallel, "WORKER_START_S", 1e6)
    lo, hi = costs.mitigate_seconds(prep, [], 5, None, sample=True, removal_steps=0, replicates=(4, 32))
    phase = replicate_phase(fake, n, 5, (4, 32), 1, True)
    assert lo == pytest.approx(fake.main_seconds + phase.seconds, rel=1e-9)  # float sums
    assert hi == pytest.approx(fake.main_seconds + phase.seconds_high, rel=1e-9)
    assert hi < 1e6  # no worker start in it
