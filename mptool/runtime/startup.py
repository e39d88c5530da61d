"""CPython's cyclic garbage collector while a command starts: held back, then the start-up's objects frozen.

Importing scikit-learn, SciPy, pandas, pydantic and mptool creates several hundred thousand objects
(modules, classes, functions, docstrings) that live until the process ends; none of them is garbage.
With the collector at its defaults (a young collection every 700 new objects) CPython walks them again
at each full collection while they are created, at each full collection during the run, and once more
at exit. Measured on the 1,000-record naive Bayes demo (``benchmarks/bench_startup.py``, 2 shared cores)
that was about 1 CPU s of its 3.2 to 4.2 CPU s: the whole of its excess over importing scikit-learn alone.

The console script (:func:`mptool.cli.main` without ``argv``, i.e. a process of its own) calls
:func:`hold` before importing anything: no young collection until ``HOLD_THRESHOLD`` new objects (so a
command that never calls :func:`loaded` still collects, rarely). A command calls :func:`loaded` once its
heavy modules are imported: the objects made so far move to the permanent generation
(:func:`gc.freeze`: never examined again, never freed before exit) and the usual thresholds return.

Nothing here decides anything: no result depends on when the collector runs. In-process callers (the
Python API, the tests' ``run_cli``) never call :func:`hold`, and :func:`loaded` then does nothing.
"""

from __future__ import annotations

import gc
import os
import sys

#: The young-generation threshold while modules load (CPython's default is 700).
HOLD_THRESHOLD = 1_000_000

#: The thresholds to restore, while held (at most one entry).
_held: list[tuple[int, int, int]] = []


def hold() -> None:
    """Hold collections back while modules load (a young collection only every ``HOLD_THRESHOLD`` objects)."""
    if not _held:
        _held.append(gc.get_threshold())
        gc.set_threshold(HOLD_THRESHOLD, *_held[0][1:])


def loaded() -> None:
    """After the start-up's imports: freeze the objects made so far (:func:`gc.freeze`), restore the thresholds.

    Does nothing unless :func:`hold` was called and :func:`loaded` not yet.
    """
    if _held:
        gc.freeze()
        gc.set_threshold(*_held.pop())


def held() -> bool:
    """Whether collections are held back (:func:`hold` called, :func:`loaded` not yet)."""
    return bool(_held)


#: The environment variable that sizes OpenBLAS's thread pool (NumPy's and SciPy's wheels), read once when
#: the library loads.
BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"
#: Every variable OpenBLAS sizes its pool from (it reads the others when the first is unset or empty).
BLAS_SIZING_ENV = (BLAS_THREADS_ENV, "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def one_blas_thread() -> bool:
    """Before NumPy loads, in a command's own process: OpenBLAS with one thread unless the user sized it.

    OpenBLAS starts one thread per core when it loads, and they spin while they wait for work. On an
    idle 16-core machine (2026-11-28, ``benchmarks/bench_startup.py`` and ``bench_nb_military.py``)
    ``python -c "import sklearn.naive_bayes"`` cost 5.26 CPU s for 1.43 s of wall time with the pool, 1.13
    with one thread; the military audit 9.71 CPU s (6.06 s wall) against 3.61 CPU s (3.71 s wall). mptool's
    heavy linear algebra already runs with one BLAS thread (the engines, and every fit of the refit and
    replicate engines, under :func:`mptool.runtime.parallel.one_thread`), and its parallel work is processes,
    so the pool bought nothing but spinning. A pool the user sized (a non-empty ``OPENBLAS_NUM_THREADS``,
    ``GOTO_NUM_THREADS`` or ``OMP_NUM_THREADS``: OpenBLAS reads each, an empty one as unset) is kept as it is.
    Returns whether it set the variable (False when the user sized the pool or NumPy was loaded first, too late).
    """
    if any(os.environ.get(name, "").strip() for name in BLAS_SIZING_ENV) or "numpy" in sys.modules:
        return False
    os.environ[BLAS_THREADS_ENV] = "1"
    return True
