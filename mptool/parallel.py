"""Spreading independent work over cores (or a cluster) with joblib.

One place for the backend and for chunking. Every task is independent and seeded from
the spec, and results come back in submission order, so the output never depends on
``--jobs`` or the backend.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from joblib import Parallel, delayed


def resolve_jobs(jobs: int | None) -> int:
    """Number of workers: None or <= 0 means every core."""
    cores = os.cpu_count() or 1
    if jobs is None or jobs <= 0:
        return cores
    return jobs


def chunk_positions(positions: Sequence[int] | np.ndarray, jobs: int, per_job: int = 8) -> list[np.ndarray]:
    """Split work into about ``jobs * per_job`` contiguous chunks (at least one item each).

    Several chunks per worker keep cores busy to the end and let progress advance, while
    each chunk is large enough that a small fit is not dominated by dispatch overhead.
    """
    positions = np.asarray(positions, dtype=np.int64)
    if positions.size == 0:
        return []
    n_chunks = max(1, min(positions.size, jobs * per_job))
    return [c for c in np.array_split(positions, n_chunks) if c.size]


def run_tasks(
    fn: Callable[..., Any],
    tasks: Iterable[tuple[Any, ...]],
    jobs: int,
    backend: str = "loky",
    on_result: Callable[[Any], None] | None = None,
) -> list[Any]:
    """Run ``fn(*args)`` for every args tuple, in parallel; results in submission order.

    ``on_result`` is called with each result as it arrives (for progress).
    """
    tasks = list(tasks)
    if jobs == 1 or len(tasks) <= 1:
        out = []
        for args in tasks:
            r = fn(*args)
            if on_result:
                on_result(r)
            out.append(r)
        return out
    runner = Parallel(n_jobs=jobs, backend=backend, return_as="generator")
    out = []
    for r in runner(delayed(fn)(*args) for args in tasks):
        if on_result:
            on_result(r)
        out.append(r)
    return out
