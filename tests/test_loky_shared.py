"""``run_tasks(..., shared=...)`` on loky pickles the shared objects once and each worker unpickles them once.

Issue 27 item 5: joblib pickled the training set and pipeline again for every chunk, serially in
the parent, which capped the refit engine's efficiency at many workers on short fits. These
tests count the unpickled copies the tasks were handed (by worker process and serial number).
"""

from __future__ import annotations

import itertools
import os

from mptool.runtime import parallel

#: Serial numbers of the unpickled copies of a :class:`Marked` payload, per process.
COPIES = itertools.count()


class Marked:
    """A payload whose every unpickled copy is marked with its process id and a serial number."""

    def __init__(self, size: int, tag: int = 0) -> None:
        self.blob, self.tag, self.copy = bytes(size), tag, (os.getpid(), -1)

    def __reduce__(self):
        return (Marked._rebuild, (self.blob, self.tag))

    @staticmethod
    def _rebuild(blob: bytes, tag: int) -> Marked:
        obj = Marked.__new__(Marked)
        obj.blob, obj.tag, obj.copy = blob, tag, (os.getpid(), next(COPIES))
        return obj


def used(payload: Marked, k: int) -> tuple[tuple[int, int], int]:
    """The copy of the payload this task was handed, and a result that uses both arguments."""
    return payload.copy, payload.tag * 1000 + len(payload.blob) + k


def test_loky_ships_shared_data_once_per_worker() -> None:
    payload = Marked(50_000, tag=1)
    tasks = [(payload, k) for k in range(40)]
    got = parallel.run_tasks(used, tasks, jobs=2, backend="loky", shared=[payload])
    assert [r for _, r in got] == [1000 + 50_000 + k for k in range(40)]
    copies = {c for c, _ in got}
    assert -1 not in {n for _, n in copies}  # the tasks ran on copies, in worker processes
    assert len(copies) == len({pid for pid, _ in copies}) <= 2  # one copy per worker process
    # Without shared=, joblib pickles the payload with every batch of tasks: more copies than workers.
    plain = parallel.run_tasks(used, tasks, jobs=2, backend="loky")
    assert len({c for c, _ in plain}) > 2


def test_a_new_run_never_sees_the_last_runs_shared_data() -> None:
    """Reused workers keep one run's objects under that run's token: the next run gets its own."""
    for tag in (2, 3, 2):
        payload = Marked(10, tag=tag)
        got = parallel.run_tasks(used, [(payload, k) for k in range(12)], jobs=2, backend="loky", shared=[payload])
        assert [r for _, r in got] == [tag * 1000 + 10 + k for k in range(12)]
