"""``--fail-fast`` on a Dask backend cannot hang, and the noise floor and the replicates ship T once (issue 27).

A tiny in-process Dask cluster (``LocalCluster(processes=False)``: a scheduler and two
single-thread workers in this process, started in about 0.1 s) stands for a remote one:
mptool connects to it through ``scheduler=`` exactly as to ``--scheduler ADDRESS``. Each run
that could hang runs in a thread joined with a generous timeout, so a hang fails the test
instead of stopping the suite. ``distributed.Client.scatter`` is wrapped to see how T travels.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import mptool
from mptool.inputs.known_answer import MODULE, known_frame, known_spec
from mptool.runtime.parallel import StopTasks, run_tasks, session

distributed = pytest.importorskip("distributed")

#: Seconds a run may take before it counts as hung. The runs take well under a second alone; a hang never
#: returns, so the margin only has to outlast a loaded machine (120 s was 100x a run alone: widened as the
#: suite's other waits, e.g. test_signals' 600 s, so that a load of 20+ cannot read as a hang).
HANG_S = 600


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """The address of an in-process cluster of two one-thread workers."""
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp://",
                                       host="127.0.0.1", dashboard_address=None, silence_logs=logging.CRITICAL,
                                       scheduler_kwargs={"dashboard_address": ":0"})  # no fixed port (8787)
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


def _within(fn: Callable[[], Any]) -> Any:
    """``fn()`` in a thread; fails (instead of hanging the suite) if it has not returned after :data:`HANG_S`."""
    out: dict[str, Any] = {}

    def go() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # re-raised in the test's thread
            out["error"] = exc

    th = threading.Thread(target=go, daemon=True)
    th.start()
    th.join(HANG_S)
    assert not th.is_alive(), f"the run did not return within {HANG_S} s on a Dask backend (hung)"
    if "error" in out:
        raise out["error"]
    return out["value"]


def _double(x: int, big: np.ndarray) -> int:
    return 2 * x + len(big)


def test_stop_tasks_returns_at_once_and_the_client_stays_usable(scheduler: str) -> None:
    """A callback raising StopTasks (what --fail-fast does) ends a Dask run; the next run on the client works."""
    big = np.arange(2000)
    seen: list[int] = []

    def stop(i: int, r: int) -> None:
        seen.append(i)
        if len(seen) == 2:
            raise StopTasks

    def run() -> tuple[list, list]:
        with session("dask", scheduler):
            first = run_tasks(_double, ((i, big) for i in range(40)), jobs=2, backend="dask", shared=(big,),
                              on_done=stop)
            again = run_tasks(_double, ((i, big) for i in range(4)), jobs=2, backend="dask", shared=(big,))
        return first, again

    first, again = _within(run)
    assert sum(r is not None for r in first) >= 2 and any(r is None for r in first)
    assert again == [2000, 2002, 2004, 2006]


@pytest.mark.parametrize("engine", ["refit", "replicates"])
def test_fail_fast_on_dask_stops_like_the_local_run(scheduler: str, engine: str) -> None:
    """--fail-fast with the refit and the replicate engine on Dask: it stops, and at the local run's record."""
    df, _ = known_frame(0, unique=4, copies=4, zeros=2)
    kw = {"allow_import": (MODULE,), "engine": engine, "fail_fast": True, "noise_floor": 0}
    kw |= {"replicates": "4:4"} if engine == "replicates" else {}
    local = mptool.pdtp(df, known_spec(0), jobs=1, **kw)
    remote = _within(lambda: mptool.pdtp(df, known_spec(0), jobs=2, backend="dask", scheduler=scheduler, **kw))
    assert local.verdict == remote.verdict == "fail"
    assert remote.summary["stopped"]["row"] == local.summary["stopped"]["row"]


@pytest.fixture
def scatters(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[int], bool]]:
    """Every ``Client.scatter`` call as (ids of the objects scattered, broadcast?)."""
    calls: list[tuple[list[int], bool]] = []
    real = distributed.Client.scatter

    def spy(self: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        items = data if isinstance(data, list | tuple) else [data]
        calls.append(([id(x) for x in items], bool(kwargs.get("broadcast"))))
        return real(self, data, *args, **kwargs)

    monkeypatch.setattr(distributed.Client, "scatter", spy)
    return calls


def test_replicates_and_noise_floor_ship_t_once_per_call(scheduler: str, scatters: list) -> None:
    """T's features reach the workers only by a broadcast scatter (``shared=``), never with a task."""
    from mptool.api.operations import prepare_pdtp
    from mptool.api.pdtp import PdtpOptions, run_pdtp
    from mptool.inputs.spec import parse_spec
    from mptool.runtime.parallel import session as open_session

    df, _ = known_frame(0, unique=4, copies=4, zeros=2)
    spec = parse_spec(known_spec(0), "spec")
    options = PdtpOptions(1.0, None, None, 2, "replicates", backend="dask", noise_floor=3, replicates="4:4")
    prep = prepare_pdtp(df, spec, options, (MODULE,))

    def run() -> Any:
        with open_session("dask", scheduler, 2):
            return run_pdtp(prep, options, _no_progress)

    out = _within(run)
    assert out.summary["noise_floor"]["records"] == 3  # measured (deprecated, asked for) on the cluster
    x = id(prep.train.X)
    with_x = [b for ids, b in scatters if x in ids]
    assert with_x and all(with_x), "T's features were shipped without a broadcast scatter (once per task)"


class _Bar:
    def __enter__(self) -> Callable[[int], None]:
        return lambda n: None

    def __exit__(self, *exc: object) -> None:
        return None


def _no_progress(total: int, label: str) -> _Bar:
    return _Bar()
