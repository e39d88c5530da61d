"""Workers started early: a run's loky workers start while this process reads the data and fits A(T).

A fresh process that runs work on ``--jobs N`` loky workers pays their start when the first
parallel batch is submitted: each worker is a new interpreter that imports numpy, pandas,
SciPy, scikit-learn and mptool (1 to 2 CPU seconds each) before its first task runs. Without a
pre-start that time is added to the run's wall time after the data is read and A(T) is fitted.

:func:`start` submits one warm-up task per worker as soon as a command knows it will use N > 1
local workers: the task imports the modules the run's tasks need (:func:`warm`) and returns, so
the workers' start overlaps this process's own work. It goes through joblib's ``Parallel`` with
the arguments :func:`mptool.runtime.parallel.run_tasks` uses, so joblib's reusable executor is
the one the run's tasks then reuse (same worker count, same environment). :func:`join`, called
before the run's first parallel batch, waits for the warm-up to end; :func:`release` drops a
warm-up that was never joined (a run that failed or needed no workers), stopping its workers.

The warm-up never decides anything: its errors are dropped (a worker that cannot import a
module meets the same error in its first real task, which reports it as before), and results
do not depend on it. ``MPTOOL_PRESTART=0`` turns it off (benchmarks compare on and off).
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import suppress
from typing import Any

from joblib import Parallel, delayed

from mptool.runtime import signals, startup

#: The environment variable that turns the pre-start off when set to 0.
ENV = "MPTOOL_PRESTART"

#: The pending warm-up: worker count, joblib's result generator, when it started (perf_counter).
_pending: dict[str, Any] = {"jobs": 0, "results": None, "started": 0.0}
#: What the last warm-up did (for timings and tests): jobs, started, joined, wait_s, errors.
last: dict[str, Any] = {}


def enabled() -> bool:
    """False when ``MPTOOL_PRESTART=0``."""
    return os.environ.get(ENV, "1").strip() != "0"


def warm(parent_pid: int, modules: tuple[str, ...]) -> tuple[int, str | None]:
    """In a worker: import ``modules`` (what the run's tasks need); the worker's pid and the first error, if any.

    SIGINT is first left to the main process, as in every task (``signals.leave_to_main_process``).
    An import that fails is returned, not raised: the real task that needs the module raises it.
    A fresh worker imports with the collector held back, then freezes what the imports made
    (:mod:`mptool.runtime.startup`, as the console script does): about a third of a worker's
    start-up CPU (``benchmarks/bench_prestart_gc.py``). Nothing is held in the main process, nor in
    a worker that has the modules already (a reused one: its objects are not all start-up's).
    """
    signals.leave_to_main_process(parent_pid)
    fresh = os.getpid() != parent_pid and not all(name in sys.modules for name in modules)
    if fresh:
        startup.hold()
    try:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - reported by the real task, not here
                return os.getpid(), f"{name}: {exc.__class__.__name__}"
    finally:
        if fresh:
            startup.loaded()
    return os.getpid(), None


def start(jobs: int, backend: str, modules: Sequence[str]) -> bool:
    """Start ``jobs`` loky workers now, each importing ``modules``; True when a warm-up was started.

    Nothing is started for another backend, for one worker, when turned off (:data:`ENV`) or
    when a warm-up is already pending.
    """
    if backend != "loky" or jobs <= 1 or not enabled() or _pending["results"] is not None:
        return False
    calls = [delayed(warm)(os.getpid(), tuple(modules)) for _ in range(jobs)]
    t0 = time.perf_counter()
    # joblib dispatches the calls here (the generator's first step) and returns at once
    results = Parallel(n_jobs=jobs, backend="loky", return_as="generator_unordered")(calls)
    _pending.update(jobs=jobs, results=results, started=t0)
    last.clear()
    last.update(jobs=jobs, joined=False, wait_s=None, errors=[])
    return True


def pending() -> int:
    """The worker count of the warm-up not yet joined, 0 when there is none."""
    return int(_pending["jobs"]) if _pending["results"] is not None else 0


def _take() -> tuple[int, Iterator[Any] | None]:
    jobs, results = int(_pending["jobs"]), _pending["results"]
    _pending.update(jobs=0, results=None)
    return jobs, results


def join(jobs: int) -> None:
    """Before a parallel batch on ``jobs`` loky workers: wait for the pending warm-up to end.

    A warm-up for another worker count is dropped instead (its workers stop; joblib starts
    the count asked for). A warm-up that failed (a worker lost, an error) is dropped: the
    batch runs as without it and meets the error itself.
    """
    n, results = _take()
    if results is None:
        return
    if n != jobs:
        _close(results)
        return
    t0 = time.perf_counter()
    try:
        for _pid, error in results:
            if error:
                last["errors"].append(error)
    except Exception as exc:  # noqa: BLE001 - the run's own tasks report what went wrong
        last["errors"].append(exc.__class__.__name__)
    last.update(joined=True, wait_s=round(time.perf_counter() - t0, 4))


def summary() -> dict[str, Any]:
    """This run's pre-start for its JSON summary: ``started`` (workers), ``joined`` and ``wait_s`` (the wait
    for the warm-up at the first parallel batch: what the start still cost in wall time)."""
    if not last:
        return {"started": 0}
    return {"started": last["jobs"], "joined": last["joined"], "wait_s": last["wait_s"]}


def release() -> None:
    """Drop a warm-up that was never joined (the run ended or failed first); its workers stop.

    Called at the end of every run, so :func:`summary` never reports an earlier run's warm-up.
    """
    _n, results = _take()
    last.clear()
    if results is not None:
        _close(results)


def _close(results: Any) -> None:
    """Close joblib's result generator: joblib aborts the call, stopping the workers still in it."""
    with suppress(Exception), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # joblib's "tasks ... have been cancelled": the warm-up is dropped on purpose
        results.close()
