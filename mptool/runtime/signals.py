"""SIGINT, SIGTERM and SIGHUP end a run cleanly: checkpoint kept, exit 130, 143 or 129, no result of an interrupted fit.

Python turns SIGINT into ``KeyboardInterrupt``, and library code may catch that:
scikit-learn's ``MLPClassifier`` (solvers sgd and adam) catches it in its training loop,
warns "Training interrupted by user." and returns the half-trained model. A Ctrl-C at
``--jobs 1`` used to let the run go on with one record's PDTP taken from such a model.
SIGTERM, what CI runners and cron send, ended the process on the spot (no checkpoint note,
loky semaphores leaked, worker processes left behind).

While a command runs, :func:`handling_interrupts` turns these signals (and SIGHUP: a closed
terminal or ssh session, handled like SIGTERM) into
:class:`Interrupted`. It derives from ``BaseException`` but not from ``KeyboardInterrupt``,
so neither ``except KeyboardInterrupt`` nor ``except Exception`` can swallow it. Four rules
make sure nothing computed after the signal is saved or used:

1. The first signal sets a flag that stays set; :func:`check` raises while it is set, and
   ``parallel.run_tasks`` calls it before it accepts a finished task, so a result that
   arrives after the signal is dropped, never saved in the checkpoint.
2. :func:`guard_fit` turns scikit-learn's "Training interrupted by user" warning into
   :class:`Interrupted`: a fit whose ``KeyboardInterrupt`` was swallowed, by whatever route,
   raises instead of returning a half-trained model. Its warning filter is one of the fit filters
   held once per process while any fit runs (:func:`fit_filters`), so fits in several threads
   never drop or leave behind each other's filter.
3. Worker processes of the loky backend ignore SIGINT and SIGHUP (:func:`leave_to_main_process`). A
   Ctrl-C in a terminal reaches the whole process group; the main process alone decides, and
   joblib kills the workers while the interrupt unwinds, so a worker never swallows it.
4. :func:`deferred` holds the interrupt back until a short critical section (saving one
   checkpoint chunk) is complete, so no file is cut in half; :func:`shield` marks the work as
   done, after which a signal is only noted (the results are written in full).

A second signal while the first is being handled (or after :func:`shield`) restores the
previous handlers and delivers it again: a second Ctrl-C stops at once.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

#: The signals turned into :class:`Interrupted`: Ctrl-C, a CI cancel or ``timeout``, and a closed terminal or
#: ssh session (SIGHUP, POSIX only), which would otherwise end the run on the spot with its lock left behind.
SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)
#: What scikit-learn warns when it has caught a KeyboardInterrupt and kept the half-trained model.
SWALLOWED_WARNING = "Training interrupted by user"

#: Installers of the warning filters every fit runs under, registered by the layer that defines them (e.g.
#: ``mptool.inputs.models``: a fit's muted ConvergenceWarning); :func:`fit_filters` holds them, with
#: :func:`guard_fit`'s own filter checked first.
FIT_FILTERS: list[Callable[[], None]] = []

_state: dict[str, Any] = {
    "installed": False,
    "previous": {},  # signal number -> handler to restore
    "signum": None,  # the first signal received, None if none
    "raised": False,  # Interrupted has been raised once
    "defer": 0,  # depth of deferred() sections
    "pending": False,  # a signal came inside a deferred() section and is still to be raised
    "shielded": False,  # shield(): the work is done, signals are only noted
}


class Interrupted(BaseException):  # noqa: N818 - named for what happened, like KeyboardInterrupt
    """The run was stopped by SIGINT, SIGTERM or SIGHUP; exit code 128 + the signal number (130, 143, 129).

    Not a ``KeyboardInterrupt`` (scikit-learn's MLP swallows those) and not an ``Exception``.
    ``reported`` is set once a line on stderr has said what was saved and how to resume.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = int(signum)
        self.reported = False

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def name(self) -> str:
        return signal_name(self.signum)

    def __str__(self) -> str:
        return f"interrupted by {self.name}"


def signal_name(signum: int) -> str:
    """``SIGINT`` for 2, ``SIGTERM`` for 15, ``signal N`` for anything unnamed."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _handler(signum: int, frame: FrameType | None) -> None:
    """Record the signal; raise :class:`Interrupted` the first time, unless deferred or shielded."""
    st = _state
    if st["signum"] is not None and (st["raised"] or st["shielded"]):
        _restore()  # a second signal while the first is handled: stop the way the caller's handler would
        signal.raise_signal(signum)
        return
    if st["signum"] is None:
        st["signum"] = signum
    if st["shielded"]:
        return
    if st["defer"]:
        st["pending"] = True
        return
    st["raised"] = True
    raise Interrupted(signum)


def _restore() -> None:
    for signum, previous in _state["previous"].items():
        signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
    _state["previous"] = {}


def _reset() -> None:
    _state.update(signum=None, raised=False, defer=0, pending=False, shielded=False)


@contextmanager
def handling_interrupts() -> Iterator[None]:
    """Turn SIGINT, SIGTERM and SIGHUP into :class:`Interrupted` inside the block; restore the previous handlers after.

    Only the main thread can install handlers: elsewhere, and when already installed
    (nested), this does nothing. A signal the caller ignores (``SIG_IGN``, e.g. SIGINT of a
    background job started by a shell) stays ignored.
    """
    if _state["installed"] or threading.current_thread() is not threading.main_thread():
        yield
        return
    _reset()
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    _state.update(installed=True, previous=previous)
    try:
        for signum, handler in previous.items():
            if handler is not signal.SIG_IGN:
                signal.signal(signum, _handler)
        yield
    finally:
        _restore()
        _state["installed"] = False
        _reset()


def received() -> int | None:
    """The first signal received inside :func:`handling_interrupts`, or None."""
    return _state["signum"]


def check() -> None:
    """Raise :class:`Interrupted` if a signal has been received: what follows must not run or be used."""
    signum = _state["signum"]
    if signum is not None and not _state["shielded"]:
        _state.update(raised=True, pending=False)
        raise Interrupted(signum)


@contextmanager
def deferred() -> Iterator[None]:
    """Hold a signal back until the block ends, then raise it (for short critical sections such as one file save)."""
    _state["defer"] += 1
    try:
        yield
    finally:
        _state["defer"] -= 1
    if not _state["defer"] and _state["pending"]:
        check()


def shield() -> None:
    """The run's work is complete: from now on a first signal is only noted (see :func:`received`), not raised."""
    if _state["installed"]:
        _state["shielded"] = True


def shielded() -> bool:
    """True after :func:`shield`: the run's work was complete when a signal came."""
    return bool(_state["shielded"])


def leave_to_main_process(parent_pid: int) -> None:
    """In a worker process, ignore SIGINT and SIGHUP: the main process handles them and stops the workers.

    Without this, a Ctrl-C typed in a terminal (sent to the whole process group) would raise
    KeyboardInterrupt inside the worker's fit, which scikit-learn's MLP swallows, and the
    worker would send back a half-trained result. Does nothing in the main process or off
    the worker's main thread (threads cannot set handlers; threading workers never get signals).
    SIGTERM keeps its default action in workers: a worker killed by it returns nothing.
    """
    if os.getpid() == parent_pid or threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGINT, getattr(signal, "SIGHUP", None)):  # SIGHUP too reaches the whole group
        if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, signal.SIG_IGN)


def _interrupt_filter() -> None:
    """Make :data:`SWALLOWED_WARNING` an error (:func:`guard_fit`); installed last, so checked before a broader
    filter that ignores every UserWarning."""
    warnings.filterwarnings("error", message=re.escape(SWALLOWED_WARNING), category=UserWarning)


#: The filters of :func:`fit_filters`: one ``warnings.catch_warnings`` per process while any holder is inside.
_FILTERS_LOCK = threading.Lock()
_held: dict[str, Any] = {"depth": 0, "saved": None}


@contextmanager
def fit_filters() -> Iterator[None]:
    """Hold the fit filters (:data:`FIT_FILTERS`, then :func:`guard_fit`'s) for the block, in every thread.

    ``warnings.catch_warnings`` saves and restores the process-wide filter list, so two of them
    overlapping in two threads (the threading backend, an in-process Dask cluster) undo each other: thread
    A's exit restores the list A saw, dropping filters while thread B's fit still runs (a ConvergenceWarning
    printed at random, B's swallowed interrupt no longer an error), and an exit out of order can leave a
    filter installed for good. Here the filters are installed by the first holder to enter and removed by
    the last to leave (a count under a lock), so every fit in any thread runs with them and the list is as
    it was once none runs; in one thread it is exactly one ``catch_warnings`` per fit. The dispatching thread
    of a threading or in-process Dask dispatch holds them for the whole dispatch (``runtime.parallel``), so
    code in a task that saves and restores the list itself cannot drop them while a fit runs.
    """
    with _FILTERS_LOCK:
        if _held["depth"] == 0:
            saved = warnings.catch_warnings()
            saved.__enter__()
            for install in (*FIT_FILTERS, _interrupt_filter):
                install()
            _held["saved"] = saved
        _held["depth"] += 1
    try:
        yield
    finally:
        with _FILTERS_LOCK:
            _held["depth"] -= 1
            if _held["depth"] == 0:
                _held["saved"].__exit__(None, None, None)
                _held["saved"] = None


@contextmanager
def guard_fit() -> Iterator[None]:
    """Make a fit interrupt-safe: if the estimator swallows a KeyboardInterrupt, raise :class:`Interrupted`.

    scikit-learn's MLP catches KeyboardInterrupt and warns "Training interrupted by user."
    instead of raising. Inside this block that warning is an error (one of the :func:`fit_filters`, held
    while any fit in any thread runs; the other fit filters, e.g. an ignored UserWarning, come with it),
    turned into :class:`Interrupted` (the signal received, else SIGINT), so the half-trained model is
    never returned.
    """
    with fit_filters():
        try:
            yield
        except UserWarning as exc:
            if not str(exc).startswith(SWALLOWED_WARNING):
                raise
            _state["raised"] = True
            raise Interrupted(_state["signum"] or signal.SIGINT) from None
