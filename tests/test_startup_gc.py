"""Issue 28: the console script holds the garbage collector back while its modules load (mptool.runtime.startup).

Each check that changes the collector runs in a fresh interpreter (the collector is process-wide state);
in this process only what must leave it untouched is checked.
"""

from __future__ import annotations

import gc
import subprocess
import sys

from mptool.runtime import startup


def _probe(code: str) -> list[str]:
    """The stdout lines of ``code`` run in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_hold_then_loaded_freezes_and_restores_the_thresholds() -> None:
    out = _probe(
        "import gc\n"
        "from mptool.runtime import startup\n"
        "before, start = gc.get_threshold(), gc.get_freeze_count()\n"
        "startup.hold(); startup.hold()  # a second hold changes nothing\n"
        "print(gc.get_threshold()[0] == startup.HOLD_THRESHOLD, gc.get_threshold()[1:] == before[1:], startup.held())\n"
        "startup.loaded()\n"
        "print(gc.get_threshold() == before, gc.get_freeze_count() > start, startup.held(), gc.isenabled())\n"
        "frozen = gc.get_freeze_count(); startup.loaded()  # a second loaded changes nothing\n"
        "print(gc.get_freeze_count() == frozen, gc.get_threshold() == before)\n"
    )
    assert out == ["True"] * 3 + ["True", "True", "False", "True"] + ["True"] * 2


def test_loaded_without_hold_leaves_the_collector_alone() -> None:
    """In-process callers (the API, run_cli) never hold: loaded() must not freeze their objects."""
    threshold = gc.get_threshold()
    assert not startup.held()
    startup.loaded()
    assert gc.get_threshold() == threshold


def test_the_console_script_holds_and_in_process_calls_do_not() -> None:
    code = (
        "import atexit, gc, sys\n"
        "from mptool.runtime import startup\n"
        "atexit.register(lambda: print(startup.held()))\n"
        "from mptool.cli import main\n"
        "sys.argv = ['mptool', 'init', '--help']\n"
        "main({argv})\n"
    )
    assert _probe(code.format(argv=""))[-1] == "True"  # init never calls loaded(): still held at exit
    assert _probe(code.format(argv="sys.argv[1:]"))[-1] == "False"


def test_a_fresh_workers_warm_up_holds_and_freezes_a_reused_one_and_the_main_process_do_not() -> None:
    """prestart.warm in a loky worker imports with the collector held, then freezes (issue 25); never elsewhere."""
    out = _probe(
        "import gc, os\n"
        "from mptool.runtime import prestart, startup\n"
        "before, start = gc.get_threshold(), gc.get_freeze_count()  # not 0 where site-packages froze objects\n"
        "prestart.warm(os.getpid(), ('colorsys',))  # the main process itself: nothing held or frozen\n"
        "print(gc.get_freeze_count() == start, gc.get_threshold() == before, startup.held())\n"
        "print(prestart.warm(os.getppid(), ('fractions', 'no_such_module_xyz'))[1])  # a worker: held, then frozen\n"
        "frozen = gc.get_freeze_count()\n"
        "print(frozen > start, gc.get_threshold() == before, startup.held())\n"
        "prestart.warm(os.getppid(), ('fractions',))  # a reused worker has its modules: nothing frozen again\n"
        "print(gc.get_freeze_count() == frozen, gc.get_threshold() == before)\n"
    )
    assert out == ["True", "True", "False", "no_such_module_xyz:", "ModuleNotFoundError", "True", "True", "False",
                   "True", "True"]



def test_the_console_script_gives_openblas_one_thread_unless_the_user_sized_it() -> None:
    """OpenBLAS's pool spins on every core while it waits (5.3 CPU s to import scikit-learn on 16 cores, 1.1
    with one thread): the console script sets OPENBLAS_NUM_THREADS=1 before NumPy loads and keeps a user's
    value; in-process callers are left alone. NumPy is loaded after the command here, as a command would."""
    code = (
        "import atexit, os, sys\n"
        "{env}"
        "def report():\n"
        "    import numpy  # noqa: F401 - OpenBLAS reads the variable as it loads\n"
        "    from threadpoolctl import threadpool_info\n"
        "    pools = [p['num_threads'] for p in threadpool_info() if p['internal_api'] == 'openblas']\n"
        "    print(os.environ.get('OPENBLAS_NUM_THREADS'), pools[0] if pools else 'none')\n"
        "atexit.register(report)\n"
        "from mptool.cli import main\n"
        "sys.argv = ['mptool', 'init', '--help']\n"
        "main({argv})\n"
    )
    clean = "os.environ.pop('OPENBLAS_NUM_THREADS', None)\n"
    assert _probe(code.format(env=clean, argv=""))[-2:] in (["1", "1"], ["1", "none"])  # none: not OpenBLAS
    assert _probe(code.format(env="os.environ['OPENBLAS_NUM_THREADS'] = '2'\n", argv=""))[-2] == "2"
    assert _probe(code.format(env=clean, argv="sys.argv[1:]"))[-2] == "None"  # in-process: untouched
    # OpenBLAS also sizes its pool from OMP_NUM_THREADS and GOTO_NUM_THREADS, and reads an empty value as unset
    omp = "os.environ.pop('OPENBLAS_NUM_THREADS', None); os.environ['OMP_NUM_THREADS'] = '2'\n"
    assert _probe(code.format(env=omp, argv=""))[-2:] == ["None", "2"]
    empty = "os.environ['OPENBLAS_NUM_THREADS'] = ''; os.environ.pop('OMP_NUM_THREADS', None)\n"
    assert _probe(code.format(env=empty, argv=""))[-2:] in (["1", "1"], ["1", "none"])
