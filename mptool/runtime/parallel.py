"""Spreading independent work over cores or a cluster with joblib: backends, sessions, chunking.

One place for the backend and for chunking. Every task is independent and seeded from
the spec, and results are put back in submission order, so the output never depends on
``--jobs`` or the backend.

Backends (``--backend``):

- ``loky`` (default): worker processes on this machine.
- ``threading``: threads in this process (useful when the estimator releases the GIL).
- ``dask``: a Dask cluster, through its client. ``--scheduler ADDRESS`` connects
  to a running scheduler; without it a local cluster of ``--jobs`` worker processes is
  started. Large shared inputs (the training set, the pipeline) are scattered to every
  worker once, not shipped with every task. Tasks cancelled because a lost worker held the
  last copy of that data are rerun with the data scattered again (:func:`_dispatch_dask`).

There is no Ray backend: no test could run one on the machines the suite runs on (a wheel of
about 80 MB and a local Ray of its own processes), and no backend is offered untested
(issue 15). ``--backend ray`` is refused with that reason.

A subcommand opens the backend once for the whole run with :func:`session`; every
:func:`run_tasks` call inside it reuses the same client.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import joblib
import numpy as np
import pandas as pd
from joblib import Parallel, delayed

from mptool.runtime import prestart, signals
from mptool.runtime.errors import InputError

#: Accepted values of ``--backend``.
BACKENDS = ("loky", "threading", "dask")
#: Seconds to wait for a Dask scheduler given with ``--scheduler`` before giving up (exit 2).
CONNECT_TIMEOUT_S = 10

#: Attempts at a Dask run whose shared data is lost with a worker (:func:`_dispatch_dask`).
DASK_ATTEMPTS = 3

#: The backend opened by :func:`session` (name, Dask client), so nested calls reuse it.
_active: dict[str, Any] = {"backend": None, "client": None, "checkpoint": None, "calls": 0}


#: Per threadpoolctl ``user_api`` (None: every library): [blocks inside :func:`one_thread`, the limiter of the first].
_ONE_THREAD: dict[str | None, list[Any]] = {}
_ONE_THREAD_LOCK = threading.Lock()
#: [threadpoolctl's ThreadpoolController, len(sys.modules) when it was made] (:func:`_controller`).
_CONTROLLER: list[Any] = [None, -1]


def _controller() -> Any:
    """A ``threadpoolctl.ThreadpoolController`` of the native libraries loaded now, made again after any import.

    Making one reads /proc/self/maps and inspects every loaded library (about 5 CPU ms in a process that
    imported scikit-learn): once per refit chunk that was a few CPU seconds per thousand chunks. Native
    thread pools (BLAS, OpenMP) are loaded by importing a module, so a controller is reused while
    ``sys.modules`` has not grown since it was made, and made afresh otherwise. Called under
    ``_ONE_THREAD_LOCK``.
    """
    import threadpoolctl

    n = len(sys.modules)
    if _CONTROLLER[0] is None or _CONTROLLER[1] != n:
        _CONTROLLER[0], _CONTROLLER[1] = threadpoolctl.ThreadpoolController(), n
    return _CONTROLLER[0]


@contextmanager
def one_thread(user_api: str | None = "blas") -> Iterator[None]:
    """``threadpoolctl``'s limit of one thread per pool for ``user_api`` that several threads may be inside at once.

    threadpoolctl's limits hold for the whole process and each block restores, on leaving, the counts
    it saw on entering: two blocks overlapping in two threads (the threading backend, Dask's in-process
    workers) let the first one's exit lift the limit under the second one's fits, and the second one's
    exit left the process at one BLAS thread for good. Here the first block in sets the limit and the
    last one out restores the counts from before the first.
    """
    with _ONE_THREAD_LOCK:
        entry = _ONE_THREAD.setdefault(user_api, [0, None])
        if entry[0] == 0:
            entry[1] = _controller().limit(limits=1, user_api=user_api)
        entry[0] += 1
    try:
        yield
    finally:
        with _ONE_THREAD_LOCK:
            entry[0] -= 1
            if entry[0] == 0:
                entry[1].restore_original_limits()
                entry[1] = None


def resolve_jobs(jobs: int | None) -> int:
    """Number of workers: None or <= 0 means every core, or every worker thread of an open Dask cluster."""
    if jobs is not None and jobs > 0:
        return jobs
    client = _active.get("client")
    if client is not None:
        try:
            return max(1, sum(client.nthreads().values()))
        except Exception:  # noqa: BLE001 - a cluster that cannot answer falls back to local cores
            pass
    return os.cpu_count() or 1


#: Seconds to start the --jobs worker processes (each imports scikit-learn and mptool), measured on
#: the 2-core test machine when idle; scaled by the load average per core when that is above 1.
WORKER_START_S = 3.0


def _busy() -> float:
    """The load average per core, at least 1 (how much slower work runs than on an idle machine)."""
    cores = os.cpu_count() or 1
    return max(1.0, (os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0) / cores)


def parallel_seconds(alone: float, workers: int, start: bool = True) -> float:
    """Wall seconds of work that takes ``alone`` seconds in one process, shared by ``workers`` processes:
    starting them (:data:`WORKER_START_S`, more on a loaded machine; left out when ``start`` is False) and
    the work divided by the cores it gets (at most the cores over the load per core)."""
    if workers <= 1:
        return alone
    busy = _busy()
    cores = os.cpu_count() or 1
    return (WORKER_START_S * busy if start else 0.0) + alone / max(1.0, min(workers, cores) / busy)


def choose_workers(jobs: int | None, backend: str, fits: int, fit_s: float) -> dict[str, Any]:
    """How many workers run ``fits`` model fits of about ``fit_s`` seconds each (issue 28).

    ``--jobs N`` (N > 0) is taken as given, and so are the threading and Dask backends (no
    process to start). ``--jobs 0`` (every core) becomes 1, this process, when the fits alone
    are estimated to finish before the workers would: starting them costs
    :data:`WORKER_START_S` and more on a loaded machine, and they speed the fits up by at most
    the cores over the load per core (the estimate of ``mptool attack``'s planner,
    :func:`mptool.attacks.plan.time_costs`). A given ``--jobs N`` (N > 1) on loky workers still
    says that estimate in ``why``, so a user who asked for workers on short work sees what they
    cost. The results are the same for any count. Returns ``requested``, ``workers`` (the count
    used), ``fits``, ``fit_s`` and ``why``.
    """
    requested = resolve_jobs(jobs)
    out = {"requested": requested, "workers": requested, "fits": int(fits), "fit_s": round(float(fit_s), 6)}
    alone = fits * fit_s
    spread = parallel_seconds(alone, requested, start=True)
    if jobs is not None and jobs > 0:
        if backend != "loky" or requested <= 1 or fits <= 0:
            return {**out, "why": "--jobs as given"}
        slower = ": slower than this process alone" if alone <= spread else ""
        return {**out, "why": f"--jobs as given; about {alone:.1f} s of fits in this process, {spread:.1f} s on "
                f"{requested} workers with their start{slower}"}
    if backend != "loky" or requested <= 1:
        return {**out, "why": f"every worker of the {backend} backend"}
    if alone <= spread:
        return {**out, "workers": 1, "why": f"in this process: about {alone:.1f} s of fits, less than starting "
                f"{requested} workers and sharing the fits ({spread:.1f} s)"}
    return {**out, "why": f"about {alone:.1f} s of fits in this process, {spread:.1f} s on {requested} workers"}


def workers_line(choice: dict[str, Any], what: str) -> str:
    """One stderr line saying how many workers ``what`` uses and why (:func:`choose_workers`)."""
    return f"workers for {what}: {choice['workers']} ({choice['why']})"


#: Longest a chunk of refits is planned to take (by the fit of A(T)): what an interrupt can lose per worker,
#: how often progress and the checkpoint advance, and the idle tail a last chunk can leave.
CHUNK_SECONDS = 20.0


def chunk_limit(fit_s: float) -> int | None:
    """The most fits a chunk takes so that it lasts about :data:`CHUNK_SECONDS` (None: fit time unknown)."""
    return max(1, int(CHUNK_SECONDS / fit_s)) if fit_s > 0 else None


def chunk_positions(
    positions: Sequence[int] | np.ndarray, jobs: int, per_job: int = 8, max_items: int | None = None
) -> list[np.ndarray]:
    """Split work into about ``jobs * per_job`` contiguous chunks (at least one item each), more where
    a chunk would otherwise hold over ``max_items`` items.

    Several chunks per worker keep cores busy to the end and let progress advance, while
    each chunk is large enough that a small fit is not dominated by dispatch overhead;
    ``max_items`` (:func:`chunk_limit`) bounds a chunk of slow fits in time, so that a long
    audit saves its checkpoint and shows progress as it goes. Results never depend on the chunks.
    """
    positions = np.asarray(positions, dtype=np.int64)
    if positions.size == 0:
        return []
    wanted = jobs * per_job
    if max_items:
        wanted = max(wanted, -(-positions.size // max_items))
    n_chunks = max(1, min(positions.size, wanted))
    return [c for c in np.array_split(positions, n_chunks) if c.size]


def check_backend(backend: str, scheduler: str | None = None) -> str:
    """Validate ``--backend``/``--scheduler``; ``--scheduler`` alone implies dask. InputError otherwise."""
    name = (backend or "loky").strip().lower()
    if name == "ray":
        raise InputError(
            "--backend ray is not offered: no test runs it, so it was removed (issue 15); use --backend dask "
            "with --scheduler for a cluster"
        )
    if name not in BACKENDS:
        raise InputError(f"--backend must be one of {', '.join(BACKENDS)} (got '{backend}')")
    if scheduler and name == "threading":
        raise InputError("--scheduler needs --backend dask (threading runs on this machine only)")
    if scheduler and name == "loky":
        name = "dask"  # a scheduler address means a Dask cluster
    if name == "dask" and importlib.util.find_spec("distributed") is None:
        raise InputError("--backend dask needs the 'distributed' package: install mptool[dask]")
    return name


def _dask_client(scheduler: str | None, jobs: int | None) -> tuple[Any, Any]:
    """A Dask client: connected to ``scheduler``, or to a new local cluster of ``jobs`` processes."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InputError("--backend dask needs the 'distributed' package: pip install 'mptool[dask]'") from None
    if scheduler:
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            detail = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
            raise InputError(
                f"--scheduler {scheduler}: cannot connect to a Dask scheduler ({detail}); "
                "start one with 'dask scheduler' and check the address"
            ) from None
        return client, None
    n = jobs if jobs and jobs > 0 else (os.cpu_count() or 1)
    cluster = LocalCluster(
        n_workers=n,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        silence_logs=logging.CRITICAL,  # e.g. "lost scattered data" when the cluster closes at the end
    )
    client = Client(cluster, set_as_default=False)
    # The workers of a cluster started here share the terminal's process group: a Ctrl-C
    # reaches them too, and is left to this process, which closes the cluster.
    client.run(signals.leave_to_main_process, os.getpid())
    return client, cluster


@contextmanager
def session(backend: str = "loky", scheduler: str | None = None, jobs: int | None = None) -> Iterator[str]:
    """Open ``backend`` for a whole run and yield its name; a Dask connection is made once here.

    Inside, :func:`run_tasks` with the same backend reuses the connection and
    :func:`resolve_jobs` counts the cluster's worker threads. A local Dask cluster started
    here is shut down on exit; a remote one given with ``scheduler`` is only disconnected.
    """
    name = check_backend(backend, scheduler)
    if _active["backend"] == name:  # nested: the outer session stays in charge
        yield name
        return
    previous = _active["backend"], _active["client"]
    client = cluster = None
    if name == "dask":
        client, cluster = _dask_client(scheduler, jobs)
    _active.update(backend=name, client=client)
    try:
        yield name
    finally:
        _active.update(backend=previous[0], client=previous[1])
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()


class StopTasks(Exception):  # noqa: N818 - a signal to stop, not an error
    """Raised by an ``on_done``/``on_result`` callback of :func:`run_tasks` to end the run early.

    :func:`run_tasks` then returns at once: tasks not finished are left ``None`` in its
    result, tasks running are cancelled (loky stops its workers) and none not yet started
    is started. Used by ``--fail-fast`` (the refit engine stops at a confirmed violator).
    """


def _tagged(index: int, parent_pid: int, fn: Callable[..., Any], *args: Any) -> tuple[int, Any]:
    """Run ``fn(*args)`` and return its result with the task's index (results may arrive out of order).

    In a worker process, SIGINT is first left to the main process (``signals.leave_to_main_process``).
    """
    signals.leave_to_main_process(parent_pid)
    return index, fn(*args)


def run_tasks(
    fn: Callable[..., Any],
    tasks: Iterable[tuple[Any, ...]],
    jobs: int,
    backend: str = "loky",
    on_result: Callable[[Any], None] | None = None,
    shared: Sequence[Any] = (),
    on_done: Callable[[int, Any], None] | None = None,
) -> list[Any]:
    """Run ``fn(*args)`` for every args tuple, in parallel; results in submission order.

    ``on_result(result)`` and ``on_done(index, result)`` are called in this process as each
    task finishes (in completion order), for progress and checkpoints. ``shared`` lists
    objects passed (by identity) in many tasks; the dask backend scatters them to every
    worker once and sends only a reference with each task. With ``jobs == 1`` on a local
    backend the tasks run here, one after another.

    Inside :func:`checkpointing`, every finished task is saved and a resumed run takes the
    saved result of the same call and task instead of running it again (see there).

    A task's result is accepted (kept, saved, reported) only if no SIGINT/SIGTERM has
    arrived by then (``signals.check``), and its saving is not cut short by one
    (``signals.deferred``): after a signal, results still arriving are dropped and the run
    stops with ``signals.Interrupted``, also when the signal first shows as another error
    (e.g. a worker killed by the same SIGTERM).

    A callback that raises :class:`StopTasks` ends the run early; the tasks not finished
    stay ``None``.
    """
    tasks = list(tasks)
    out: list[Any] = [None] * len(tasks)

    def finished(i: int, r: Any) -> None:
        out[i] = r
        if on_result:
            on_result(r)
        if on_done:
            on_done(i, r)

    name = check_backend(backend)
    todo, finished = _resume_saved(fn, tasks, finished)

    def accept(i: int, r: Any) -> None:
        with signals.deferred():
            signals.check()
            finished(i, r)

    try:
        _dispatch(fn, tasks, todo, jobs, name, shared, accept)
    except StopTasks:
        return out
    except signals.Interrupted:
        raise
    except BaseException as exc:
        if signals.received() is not None:
            raise signals.Interrupted(signals.received()) from exc
        raise
    return out


def _resume_saved(
    fn: Callable[..., Any], tasks: list[tuple[Any, ...]], finished: Callable[[int, Any], None]
) -> tuple[list[int], Callable[[int, Any], None]]:
    """The task indices still to run, and the callback for each finished task.

    Outside :func:`checkpointing`: every index, and ``finished`` itself. Inside: the tasks this
    call of :func:`run_tasks` saved before (same call number, same task fingerprint) are
    reported through ``finished`` now and left out; the callback returned saves each new
    result in the checkpoint before reporting it.
    """
    todo = list(range(len(tasks)))
    ckpt = _active.get("checkpoint")
    if ckpt is None or not tasks:
        return todo, finished
    call = _active["calls"]
    _active["calls"] = call + 1
    prints = [ckpt.task_mac(task_fingerprint(fn, args)) for args in tasks]  # keyed: no unkeyed hash of data on disk
    saved = ckpt.load_tasks(call)
    for i in todo:
        if (i, prints[i]) in saved:
            finished(i, saved[(i, prints[i])])
    todo = [i for i in todo if (i, prints[i]) not in saved]
    if len(todo) < len(tasks):
        ckpt.reused[f"task-{call:05d}"] = len(tasks) - len(todo)

    def save_then_report(i: int, r: Any) -> None:
        ckpt.save_task(call, i, prints[i], r)
        finished(i, r)

    return todo, save_then_report


def _consume(results: Iterator[tuple[int, Any]], finished: Callable[[int, Any], None]) -> None:
    """``finished(i, r)`` for each result of a joblib generator; on any exception, stop its workers now.

    Throwing the exception into the generator makes joblib abort (loky kills its workers)
    here, in this thread, instead of when the generator is garbage-collected.
    """
    try:
        for i, r in results:
            finished(i, r)
    except BaseException as exc:
        throw = getattr(results, "throw", None)
        if throw is not None:
            with suppress(BaseException):
                throw(exc)
        raise


def _dispatch(
    fn: Callable[..., Any],
    tasks: list[tuple[Any, ...]],
    todo: list[int],
    jobs: int,
    name: str,
    shared: Sequence[Any],
    finished: Callable[[int, Any], None],
) -> None:
    """Run the tasks at indices ``todo`` on backend ``name``; ``finished(i, result)`` as each ends."""
    if not todo:
        return
    if name in ("loky", "threading") and (jobs == 1 or len(todo) == 1):
        for i in todo:
            finished(i, fn(*tasks[i]))
        return
    if name == "dask" and _active["backend"] != name:
        with session(name, None, jobs):
            _dispatch(fn, tasks, todo, jobs, name, shared, finished)
        return

    parent = os.getpid()
    if name == "loky":
        prestart.join(jobs)  # workers started early (mptool.runtime.prestart): wait for their imports to end
    with _thread_filters(name):
        if name == "dask":
            _dispatch_dask(fn, tasks, todo, parent, shared, finished)
            return
        calls = [delayed(_tagged)(i, parent, fn, *tasks[i]) for i in todo]
        _consume(Parallel(n_jobs=jobs, backend=name, return_as="generator_unordered")(calls), finished)


@contextmanager
def _thread_filters(name: str) -> Iterator[None]:
    """For tasks in threads of this process (threading; Dask, whose workers may be threads here): the fit filters
    (:func:`mptool.runtime.signals.fit_filters`) held for the whole dispatch, so a task's own
    ``warnings.catch_warnings`` cannot drop them while another thread's fit runs. loky's workers are processes:
    nothing to hold."""
    if name == "loky":
        yield
        return
    with signals.fit_filters():
        yield


def _lost_data(exc: BaseException) -> bool:
    """True for the error of a Dask task whose inputs were lost with a worker (cancelled, not failed)."""
    try:
        from distributed.client import FutureCancelledError
    except ImportError:  # pragma: no cover - the dask backend needs distributed
        return False
    return isinstance(exc, FutureCancelledError)


def _dispatch_dask(
    fn: Callable[..., Any],
    tasks: list[tuple[Any, ...]],
    todo: list[int],
    parent: int,
    shared: Sequence[Any],
    finished: Callable[[int, Any], None],
) -> None:
    """Run tasks ``todo`` on the open Dask client; ``shared`` is scattered to every worker once per attempt.

    The tasks go to the client directly (one Dask task per task, twice the worker threads in
    flight, results taken as they complete), not through joblib's dask backend: that backend
    polls for results every 10 ms in two threads and adds its own batching round trips, about
    twice the CPU of the work on a small run (issue 25).

    Scattered data has no recipe: when the worker holding its last copy is lost (killed,
    out of memory, or after the scheduler reduced the broadcast copies to one), the tasks
    that need it are cancelled. The data is then scattered again to the workers left and
    only the tasks not finished are run again, up to :data:`DASK_ATTEMPTS` times in all.
    Tasks are pure functions of their arguments, so a rerun gives the same result.
    Whatever stops the run (an error, :class:`StopTasks`, a signal) cancels the tasks not finished.
    """
    client = _active["client"]
    window = 2 * max(1, resolve_jobs(None))  # tasks in flight: twice the worker threads, as joblib pre-dispatched
    done: set[int] = set()

    def record(i: int, r: Any) -> None:
        finished(i, r)
        done.add(i)

    for attempt in range(DASK_ATTEMPTS):
        futures: list[Any] = []
        try:
            calls = _dask_args(client, tasks, [i for i in todo if i not in done], shared)
            _dask_window(client, iter(calls), window, futures, parent, fn, record)
            return
        except Exception as exc:
            if not _lost_data(exc) or signals.received() is not None or attempt + 1 == DASK_ATTEMPTS:
                raise
        finally:
            with suppress(Exception):
                client.cancel([f for f in futures if not f.done()])


def _dask_window(client: Any, calls: Iterator[tuple[int, list[Any]]], window: int, futures: list[Any], parent: int,
                 fn: Callable[..., Any], record: Callable[[int, Any], None]) -> None:
    """Submit ``calls`` keeping ``window`` tasks in flight; ``record(i, result)`` as each completes.

    Every future submitted is appended to ``futures`` (the caller cancels those not done).
    """
    from distributed import as_completed

    def submit_next() -> Any:
        nxt = next(calls, None)
        if nxt is None:
            return None
        futures.append(client.submit(_tagged, nxt[0], parent, fn, *nxt[1], pure=False))
        return futures[-1]

    running = as_completed([f for f in (submit_next() for _ in range(window)) if f is not None], loop=client.loop)
    for future in running:
        i, r = future.result()
        record(i, r)
        if (nxt := submit_next()) is not None:
            running.add(nxt)


def _dask_args(client: Any, tasks: list[tuple[Any, ...]], left: list[int],
               shared: Sequence[Any]) -> list[tuple[int, list[Any]]]:
    """Each task's arguments with data sent once: ``shared`` broadcast to every worker, and any other
    object of over 1 kB passed (by identity) to several tasks scattered once, as joblib's dask backend did."""
    from dask.sizeof import sizeof

    futures: dict[int, Any] = {}
    if shared:
        scattered = client.scatter(list(shared), broadcast=True, hash=False)
        futures = {id(obj): f for obj, f in zip(shared, scattered, strict=True)}
    uses: dict[int, int] = {}
    for i in left:
        for arg in tasks[i]:
            uses[id(arg)] = uses.get(id(arg), 0) + 1
    for i in left:
        for arg in tasks[i]:
            if id(arg) not in futures and uses[id(arg)] > 1 and sizeof(arg) > 1_000:
                futures[id(arg)] = client.scatter([arg], hash=False)[0]
    return [(i, [futures.get(id(arg), arg) for arg in tasks[i]]) for i in left]


def _light(arg: Any) -> Any:
    """What of a task argument goes into its fingerprint: big frames and arrays by shape only."""
    if isinstance(arg, pd.DataFrame):
        return ("DataFrame", arg.shape, tuple(map(str, arg.columns)))
    if isinstance(arg, np.ndarray) and arg.nbytes > (1 << 20):
        return ("ndarray", arg.shape, str(arg.dtype))
    return arg


def task_fingerprint(fn: Callable[..., Any], args: tuple[Any, ...]) -> str:
    """A short hash of a task (function and arguments) that tells a saved result belongs to it."""
    name = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"
    return joblib.hash([name, *(_light(a) for a in args)])[:16]


@contextmanager
def checkpointing(ckpt: Any) -> Iterator[None]:
    """Save every finished :func:`run_tasks` task in ``ckpt`` and reuse saved ones.

    A run makes its ``run_tasks`` calls in the same order every time (same inputs, same
    seed), so the k-th call of a resumed run is the k-th call of the interrupted one; a
    saved result is used only when its task's fingerprint matches too. Used by subcommands
    whose long work (shadow models, reduce-dtp steps) goes through ``run_tasks``.
    """
    previous = _active.get("checkpoint"), _active.get("calls", 0)
    _active.update(checkpoint=ckpt, calls=0)
    try:
        yield
    finally:
        _active.update(checkpoint=previous[0], calls=previous[1])
