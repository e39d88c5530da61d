"""Workers started early (mptool.runtime.prestart, issue 27 item 5): only when they will be used, and
never changing a result, an error or an exit code."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import mixed_frame, run_cli, write_spec
from sklearn.ensemble import RandomForestClassifier

from mptool.api import early, operations
from mptool.api.pdtp import PdtpOptions
from mptool.inputs.models import SHORT_NAMES, resolve_estimator
from mptool.inputs.spec import load_spec, parse_spec
from mptool.loo import no_exact_engine
from mptool.runtime import prestart
from mptool.runtime.errors import InputError


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("prestart")
    data = root / "mixed.csv"
    mixed_frame(40).to_csv(data, index=False)
    return {
        "data": data,
        "forest": write_spec(root / "rf.yaml", "random_forest", model={"params": {"n_estimators": 2}}),
        "nb": write_spec(root / "nb.yaml", "categorical_nb"),
        "lr": write_spec(root / "lr.yaml", "logistic_regression"),
    }


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str, tuple[str, ...]]]:
    """Calls of prestart.start, recorded instead of starting workers."""
    calls: list[tuple[int, str, tuple[str, ...]]] = []

    def record(jobs: int, backend: str, modules: tuple[str, ...]) -> bool:
        calls.append((jobs, backend, modules))
        return True

    monkeypatch.setattr(prestart, "start", record)
    return calls


@pytest.mark.parametrize(
    ("spec", "engine", "jobs", "backend", "fail_fast", "expected"),
    [
        ("forest", "auto", 2, "loky", False, 2),  # no exact engine for a forest: refits on 2 workers
        ("forest", "refit", 4, "loky", False, 4),
        ("nb", "refit", 2, "loky", False, 2),  # --engine refit refits whatever the estimator
        ("nb", "auto", 2, "loky", False, 0),  # exact engines: no worker started early
        ("lr", "auto", 2, "loky", False, 0),
        ("forest", "exact", 2, "loky", False, 0),
        ("forest", "auto", None, "loky", False, 0),  # --jobs 0: the planner decides after timing a fit
        ("forest", "auto", 1, "loky", False, 0),
        ("forest", "auto", 2, "threading", False, 0),
        ("forest", "auto", 2, "dask", False, 0),
        ("forest", "auto", 2, "loky", True, 0),  # --fail-fast refits its riskiest record before any worker
    ],
)
def test_prestart_only_when_workers_will_be_used(
    files: dict[str, Path], started: list[Any], spec: str, engine: str, jobs: int | None, backend: str,
    fail_fast: bool, expected: int,
) -> None:
    operations.prestart_refits(load_spec(files[spec], {}), engine, jobs, backend, fail_fast=fail_fast)
    assert [c[0] for c in started] == ([expected] if expected else [])
    if expected:
        assert "sklearn.ensemble._forest" in started[0][2] or spec == "nb"


@pytest.mark.parametrize(("jobs", "fit_s", "fail_fast", "expected"),
                         [(None, 5.0, False, 3), (None, 0.001, False, 0), (2, 5.0, False, 0), (None, 5.0, True, 0)])
def test_planned_prestart_follows_the_planner(
    started: list[Any], monkeypatch: pytest.MonkeyPatch, jobs: int | None, fit_s: float, fail_fast: bool,
    expected: int,
) -> None:
    """--jobs 0: the workers start once a fit of A(T) is timed, only where the planner picks more than one."""
    monkeypatch.setattr(operations, "choose_workers", lambda j, b, fits, s: {"workers": 3 if s > 1 else 1})
    prep = SimpleNamespace(choice=SimpleNamespace(cls=RandomForestClassifier))
    options = PdtpOptions(jobs=jobs, fail_fast=fail_fast)
    operations.prestart_planned(prep, options, 40, fit_s)  # type: ignore[arg-type]
    assert [c[0] for c in started] == ([expected] if expected else [])


@pytest.mark.parametrize(("spec", "engine", "jobs", "expected"), [
    ("forest", "auto", 2, 2), ("nb", "auto", 2, 0), ("lr", "auto", 2, 0), ("nb", "refit", 3, 3),
    ("forest", "auto", None, 0),
])
def test_early_start_by_name(
    files: dict[str, Path], started: list[Any], spec: str, engine: str, jobs: int | None, expected: int
) -> None:
    """mptool pdtp starts the workers before its heavy imports, judging the estimator by its name."""
    early.start_early(load_spec(files[spec], {}), engine, jobs, "loky")
    assert [c[0] for c in started] == ([expected] if expected else [])


@pytest.mark.parametrize("name", [*SHORT_NAMES, "sklearn.naive_bayes.GaussianNB", "sklearn.svm.SVC",
                                  "sklearn.ensemble.ExtraTreesClassifier", "sklearn.linear_model.LogisticRegression",
                                  "sklearn.neighbors.KNeighborsClassifier", "sklearn.neural_network.MLPClassifier"])
def test_early_judgement_agrees_with_the_engines(name: str) -> None:
    """Every estimator the name alone says is surely refitted has no exact engine (mptool.loo.no_exact_engine)."""
    refits, _ = early.surely_refits(name, "auto")
    if not refits:
        return
    spec = parse_spec({"data": {"label": "label"}, "model": {"estimator": name, "params": {}}}, "spec")
    try:
        choice = resolve_estimator(spec.model, spec.seed)
    except InputError:  # e.g. SVC without probability: refused before any worker would be used
        return
    assert no_exact_engine(spec, choice.make()), name


def test_turned_off_by_env(files: dict[str, Path], started: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(prestart.ENV, "0")
    assert not operations.prestart_refits(load_spec(files["forest"], {}), "auto", 2, "loky")
    assert started == []


def pdtp_run(files: dict[str, Path], out: Path, *extra: str, spec: str = "forest") -> tuple[int, bytes, dict, str]:
    """``mptool pdtp`` on the small file: exit code, pdtp.csv's bytes, pdtp.json's summary, stderr."""
    res = run_cli("pdtp", files["data"], "-m", files[spec], "--out", out, "--engine", "refit", "--noise-floor", "0",
                  "--sample", "8", "-q", *extra)
    csv = (out / "pdtp.csv").read_bytes() if (out / "pdtp.csv").exists() else b""
    summary = json.loads((out / "pdtp.json").read_text())["summary"] if (out / "pdtp.json").exists() else {}
    return res.code, csv, summary, res.stderr


@pytest.fixture(scope="module")
def runs(files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, bytes, dict, str]]:
    """The same refit audit at --jobs 1, at --jobs 2 with and without the pre-start, and with a warm-up that fails
    (a module no worker can import). The loky workers start once, for the first --jobs 2 run."""
    root = tmp_path_factory.mktemp("prestart-runs")
    mp = pytest.MonkeyPatch()
    try:
        out = {"jobs1": pdtp_run(files, root / "j1", "--jobs", "1"),
               "on": pdtp_run(files, root / "on", "--jobs", "2")}
        mp.setenv(prestart.ENV, "0")
        out["off"] = pdtp_run(files, root / "off", "--jobs", "2")
        mp.delenv(prestart.ENV)
        failing = (*early.WARM_MODULES, "mptool_no_such_module")
        mp.setattr(early, "WARM_MODULES", failing)  # mptool pdtp starts its workers here, before the heavy imports
        mp.setattr(operations, "WARM_MODULES", failing)
        out["failing"] = pdtp_run(files, root / "failing", "--jobs", "2")
    finally:
        mp.undo()
    return out


def test_results_equal_without_prestart(runs: dict[str, tuple[int, bytes, dict, str]]) -> None:
    code, csv, _, _ = runs["jobs1"]
    assert csv
    for name in ("on", "off", "failing"):
        assert runs[name][0] == code, name
        assert runs[name][1] == csv, name  # byte for byte
    assert runs["on"][2]["workers"]["prestart"]["started"] == 2
    assert runs["on"][2]["workers"]["prestart"]["joined"] is True
    assert runs["off"][2]["workers"]["prestart"] == {"started": 0}
    assert runs["jobs1"][2]["workers"]["prestart"] == {"started": 0}
    assert prestart.pending() == 0


def test_failing_warmup_changes_nothing(runs: dict[str, tuple[int, bytes, dict, str]]) -> None:
    code, csv, summary, err = runs["failing"]
    assert (code, csv) == runs["jobs1"][:2]
    assert summary["workers"]["prestart"]["joined"] is True  # the warm-up ran, failed, and was dropped
    assert "mptool_no_such_module" not in err


def test_refused_run_keeps_its_error(files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run refused after its workers were started early exits 2 with its own line, and leaves none pending."""
    monkeypatch.setattr(prestart, "start", _fake_start)
    res = run_cli("pdtp", files["data"], "-m", files["forest"], "--out", tmp_path / "o", "--jobs", "2",
                  "--records", "99999")
    assert res.code == 2
    assert "--records: row(s) 99999 are not in the training set T" in res.stderr
    assert prestart.pending() == 0
    assert _fake_start.closed  # the warm-up started for it was dropped


class _FakeResults:
    """Stands for joblib's result generator of a warm-up: records that it was closed."""

    def __iter__(self) -> Any:
        return iter(())

    def close(self) -> None:
        _fake_start.closed = True


def _fake_start(jobs: int, backend: str, modules: tuple[str, ...]) -> bool:
    prestart._pending.update(jobs=jobs, results=_FakeResults(), started=0.0)
    prestart.last.update(jobs=jobs, joined=False, wait_s=None, errors=[])
    return True


_fake_start.closed = False  # type: ignore[attr-defined]
