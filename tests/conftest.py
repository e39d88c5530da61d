"""Shared test helpers: small datasets written to CSV, specs, and running the CLI in-process."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
import pickle
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, settings

from mptool.cli import main
from mptool.runtime import ui

#: Property tests draw the same examples on every run (a fresh seed per run made a rare failing draw a flicker),
#: keep no example database between runs (a failure replayed from an earlier run made a run depend on its past),
#: and never fail because drawing was slow (``too_slow`` is a wall-clock check: a loaded machine tripped it).
#: What a test proves is unchanged: its own ``@settings`` (max_examples ...) still apply. Explore with fresh
#: random draws by ``pytest --hypothesis-profile=explore``.
settings.register_profile("mptool", derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", derandomize=False, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("mptool")  # pytest --hypothesis-profile=NAME (loaded after this file) overrides it

#: The delay after which a progress phase that printed no line yet prints "running" (ui.FIRST_LINE_S), as
#: mptool ships it. Tests of that line set it themselves; every other test runs with it out of reach.
FIRST_LINE_S = ui.FIRST_LINE_S


@pytest.fixture(scope="session", autouse=True)
def _no_progress_line_from_the_clock() -> Iterator[None]:
    """No stderr line that depends on wall time: the "running" line a phase prints once FIRST_LINE_S (5 s) has
    passed is pushed a day away for every in-process run.

    On a loaded machine a short phase (the randomness check before a baseline refusal, a leave-one-out of a
    few records) took over 5 s, printed that line, and a test of "one stderr line" or of the lines' order
    failed for the machine's load, not for mptool. Session scope: module fixtures' runs are covered too.
    test_estimates checks the line itself (with the shipped delay, or 0 s).
    """
    mp = pytest.MonkeyPatch()
    mp.setattr(ui, "FIRST_LINE_S", 24 * 3600.0)  # threading.Timer cannot wait math.inf
    try:
        yield
    finally:
        mp.undo()


@pytest.fixture(scope="session", autouse=True)
def _private_checkpoint_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Checkpoints signed with a key file of this test session, not the user's ~/.local/state/mptool/checkpoint.key.

    Without it every run that checkpoints read (and first created) the developer's own key file: a key file
    left with mode 0644, or a home folder that cannot be written (a CI runner), changed what the tests saw
    (a refusal, or one more warning line). Subprocesses inherit the variable; tests that set their own
    XDG_STATE_HOME or MPTOOL_CHECKPOINT_KEY still do.
    """
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))
    try:
        yield
    finally:
        mp.undo()


def _fsync_checks_the_descriptor_only(fd: int) -> None:
    """``os.fsync`` without the wait for the disk: raises as fsync does for a descriptor that is not open."""
    os.fstat(fd)


@pytest.fixture(scope="session", autouse=True)
def _no_wait_for_the_disk() -> Iterator[None]:
    """In-process runs do not wait for the disk: ``os.fsync`` only checks its descriptor.

    mptool syncs each result file before its atomic rename (outputs.results.write_atomic) and the lock
    file (runtime.lock): about 6 ms of wall time each on this machine's disk, some thousands per session,
    and no test reads a file back from anywhere but the page cache. What a sync protects (a file complete
    after a power cut) no in-process test can observe; the subprocess tests (signals, resume, locks) run
    mptool with the real ``os.fsync``, and tests that make fsync fail (a full disk) still patch it
    themselves (issue 25).
    """
    mp = pytest.MonkeyPatch()
    mp.setattr(os, "fsync", _fsync_checks_the_descriptor_only)
    try:
        yield
    finally:
        mp.undo()


#: The report's plot functions (mptool.outputs.report.plots): each returns one SVG document, drawn by matplotlib.
PLOT_FUNCTIONS = ("pdtp_histogram", "attack_accuracy_panels", "max_accuracy_plot", "roc_curves", "reduce_sawtooth",
                  "trend_plot", "tradeoff_plot")


@pytest.fixture(scope="session", autouse=True)
def _each_plot_drawn_once() -> Iterator[None]:
    """A report plot of the same arrays is drawn once per test process, then its SVG text is reused.

    Drawing one (matplotlib's layout, text and SVG writer) costs 0.3-0.7 CPU s, and tests render reports
    of the same results more than once (with and without --quiet, md and html, after a refused edit).
    A plot is a function of its arguments (fixed SVG hash salt, no date: plots.py), so the text reused is
    the text a fresh drawing gives; the key is the function and its pickled arguments. While a test has
    replaced ``plots._to_svg`` (to see the figure), every call draws and nothing is kept.
    """
    from mptool.outputs.report import plots

    to_svg = plots._to_svg
    drawn: dict[bytes, str] = {}

    def once(name: str, draw: Callable[..., str]) -> Callable[..., str]:
        @functools.wraps(draw)
        def cached(*args: Any, **kwargs: Any) -> str:
            if plots._to_svg is not to_svg:
                return draw(*args, **kwargs)
            try:
                key = hashlib.sha256(pickle.dumps((name, args, sorted(kwargs.items())), protocol=5)).digest()
            except Exception:  # noqa: BLE001 - arguments that do not pickle: drawn every time
                return draw(*args, **kwargs)
            if key not in drawn:
                drawn[key] = draw(*args, **kwargs)
            return drawn[key]

        return cached

    mp = pytest.MonkeyPatch()
    for name in PLOT_FUNCTIONS:
        mp.setattr(plots, name, once(name, getattr(plots, name)))
    try:
        yield
    finally:
        mp.undo()


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(*args: str) -> CliResult:
    """Run ``mptool ARGS`` in-process; returns exit code and captured output."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = int(exc.code or 0)
    return CliResult(code, out.getvalue(), err.getvalue())


def mixed_frame(n: int = 60, seed: int = 0) -> pd.DataFrame:
    """A small dataset with categorical and numeric features and a binary label."""
    rng = np.random.default_rng(seed)
    color = rng.choice(["red", "green", "blue"], size=n)
    size = rng.choice(["S", "M", "L", "XL"], size=n, p=[0.3, 0.3, 0.3, 0.1])
    x1 = rng.normal(size=n).round(3)
    x2 = rng.integers(0, 5, size=n).astype(float)
    logit = 0.8 * x1 + (color == "red") * 1.0 - 0.5
    label = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    return pd.DataFrame({"color": color, "size": size, "x1": x1, "x2": x2, "label": label})


def write_spec(path: Path, estimator: str, **sections: Any) -> Path:
    """Write a spec YAML with ``data.label: label`` and the given overrides per section."""
    spec: dict[str, Any] = {
        "data": {"label": "label", "train_size": None, "missing": "drop"},
        "model": {"estimator": estimator, "params": {}, "preprocess": "auto"},
        "output": {"bin_size": 0.01},
        "seed": 0,
    }
    for section, values in sections.items():
        if isinstance(values, dict):
            spec.setdefault(section, {}).update(values)
        else:
            spec[section] = values
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture
def cli() -> Callable[..., CliResult]:
    return run_cli


@pytest.fixture
def mixed_csv(tmp_path: Path) -> Path:
    path = tmp_path / "mixed.csv"
    mixed_frame().to_csv(path, index=False)
    return path


def numeric_csv_file(path: Path, n: int = 1200, d: int = 4, seed: int = 11) -> Path:
    """The attack tests' numeric data set: ``d`` normal features (3 decimals) and a noisy yes/no
    label from the first one (seed 11, as every attack test has used), written to ``path``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).round(3)
    label = np.where(X[:, 0] + rng.normal(size=n) > 0.4, "yes", "no")
    pd.DataFrame({**{f"x{j}": X[:, j] for j in range(d)}, "label": label}).to_csv(path, index=False)
    return path


@contextlib.contextmanager
def quiet_progress(total: int, label: str) -> Iterator[Callable[[int], None]]:
    """A progress callback that shows nothing (the API's ``progress`` argument)."""
    yield lambda n: None


def attack_spec(label: str, estimator: str, params: dict | None = None, preprocess: str = "none", seed: int = 0):
    """A parsed spec for protocol tests: every row usable (train_size null), bins of 0.01."""
    from mptool.inputs.spec import parse_spec

    return parse_spec({
        "data": {"label": label, "train_size": None},
        "model": {"estimator": estimator, "params": params or {}, "preprocess": preprocess},
        "output": {"bin_size": 0.01},
        "seed": seed,
    })


#: The high-dimensional binary data set of ../shared/datasets (absent on machines without it: tests skip).
GRANTS = Path("/work/shared/datasets/grants.csv.gz")


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[Any]:
    """A Dask cluster of two single-threaded workers on 127.0.0.1, shared by a module's tests.

    Per module, not per session: it starts in well under a second, but while it lives its scheduler
    and workers (heartbeats, system monitors) use about 0.05-0.08 CPU s every second, so a session
    cluster started early in a 6-minute run cost some 20-30 CPU s doing nothing (issue 25).

    The workers run in this process (quick to start), still reached over TCP as a remote cluster
    would be. The scheduler's Active Memory Manager is off: its ReduceReplicas policy drops the
    broadcast copies of scattered data to one every 2 s, so on a slow (loaded) run a worker fetched
    the data a second time from its peer, and how often depended on timing. Dropping and re-fetching
    is Dask's own business; ``test_dask_cluster`` runs mptool against a scheduler with its defaults.
    """
    distributed = pytest.importorskip("distributed")
    import dask

    with dask.config.set({"distributed.scheduler.active-memory-manager.start": False}):
        with distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=False,
            protocol="tcp",
            host="127.0.0.1",
            dashboard_address=None,
            # no fixed port: the scheduler's HTTP server (started even without a dashboard) took :8787 by
            # default, and another cluster on the machine (another pytest worker) made it warn and move
            scheduler_kwargs={"dashboard_address": ":0"},
            silence_logs=40,
        ) as cluster:
            yield cluster


@pytest.fixture(scope="session")
def grants_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """700 Grants rows, their 300 most frequent binary columns, duplicates dropped (memoriser tests)."""
    if not GRANTS.exists():
        pytest.skip("grants.csv.gz not available")
    df = pd.read_csv(GRANTS, nrows=700)
    binary = [c for c in df.columns if c != "class" and df[c].dtype != object and df[c].nunique() == 2]
    cols = df[binary].mean().sort_values(ascending=False).index[:300].tolist()
    sub = df[[*cols, "class"]].iloc[:700]
    sub = sub[~sub.duplicated(subset=cols)]
    path = tmp_path_factory.mktemp("grants") / "grants_sub.csv"
    sub.to_csv(path, index=False)
    return path
