"""What the benchmark scripts share: where the data sets not bundled with mptool are, and CPU time with workers.

:func:`dataset`: the folder named by ``MPTOOL_DATASETS``, else ``shared/datasets`` beside the
repository's folder (``/work/shared/datasets`` for a checkout in ``/work``). A missing file stops
the script with one line naming the variable, before any work starts.

:func:`cpu_tree`: CPU seconds of this process and of each live descendant (loky or Dask workers),
so a figure includes the workers' CPU, not only this process's. :func:`run_timed`: a command in a
child process with its wall and CPU seconds (the child's workers included). :func:`base_tree`: another
revision's code in a temporary git worktree, for a baseline measured in the same run.
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

#: The environment variable naming the folder of the data sets.
ENV = "MPTOOL_DATASETS"
#: This repository (the benchmarks folder's parent).
ROOT = Path(__file__).resolve().parents[1]
#: The folder used when ``MPTOOL_DATASETS`` is not set: shared/datasets beside the repository.
DEFAULT = ROOT.parent / "shared" / "datasets"


def dataset(name: str) -> Path:
    """The path of data set file ``name`` (e.g. ``military.csv.gz``); SystemExit with one line if it is missing."""
    folder = Path(os.environ.get(ENV) or DEFAULT)
    path = folder / name
    if not path.is_file():
        raise SystemExit(f"{name} not found in {folder}: set {ENV} to the folder that holds it")
    return path


def cpu_tree() -> dict[int, float]:
    """CPU seconds (user + system) of this process and of each of its live descendants (workers), by pid."""
    import psutil  # a dependency of distributed (the test extra)

    out = {}
    for proc in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            out[proc.pid] = t.user + t.system
    return out


def cpu_since(before: dict[int, float]) -> tuple[float, float]:
    """(CPU s of this process and its workers, CPU s of this process alone) since ``before = cpu_tree()``.

    Workers started in between count from 0; a worker that ended in between is missed (loky's and
    Dask's workers live on between calls)."""
    after = cpu_tree()
    total = sum(v - before.get(pid, 0.0) for pid, v in after.items())
    return total, after[os.getpid()] - before[os.getpid()]


@contextlib.contextmanager
def base_tree(rev: str, where: Path) -> Iterator[Path]:
    """The code of git revision ``rev`` checked out (detached) into the folder ``where`` for the time of the block."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(where), rev], check=True)
    try:
        yield where
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)], check=False)


def run_timed(cmd: list[str], **kwargs: object) -> tuple[subprocess.CompletedProcess, float, float]:
    """``subprocess.run(cmd, **kwargs)``, its wall seconds and its CPU seconds (user + system).

    The CPU is that of the child and of every descendant it waited for (``RUSAGE_CHILDREN``): mptool ends
    and joins its loky workers before it exits, so theirs is included. Run one command at a time: another
    child reaped meanwhile would count too."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, **kwargs)  # noqa: PLW1510 - the caller passes check= as it needs
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return proc, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
