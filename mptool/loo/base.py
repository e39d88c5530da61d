"""The interface every leave-one-out engine implements.

An engine computes, for chosen records t of T, the prediction vectors of A(T) and of
A(T \\ {t}) on x_t (raw probabilities, before output post-processing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from mptool.inputs.data import Records
from mptool.inputs.spec import Spec


@dataclass(frozen=True)
class LooRequest:
    """What an engine gets: the spec, the unfitted pipeline, T, A(T), and which records."""

    spec: Spec
    template: Any  # unfitted pipeline A
    train: Records  # T
    full_model: Any  # A(T), fitted
    classes: np.ndarray  # class order of the output columns
    positions: np.ndarray  # positions in T of the records to evaluate
    jobs: int = 1
    backend: str = "loky"
    # mptool.runtime.checkpoint.Checkpoint: save finished chunks, skip saved ones (refit and replicate engines)
    checkpoint: Any = None
    # Seconds A(T)'s fit took (0: not timed): bounds a chunk of refits in time (runtime.parallel.chunk_limit)
    fit_s: float = 0.0
    # Refit engine only (exact engines compute every record at once and ignore these):
    order: str = "row"  # "risk": refit the records the screen (loo/screen.py) ranks riskiest first
    # --fail-fast: stop_on(p_full, p_loo) -> bool per record, True for a confirmed violator;
    # the refit engine stops once the first violator in its order is known
    stop_on: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    # What an engine computes of T once and shares with its DTP bound and the training accuracy (e.g. the
    # categorical naive Bayes codes and counts of T, issue 28): a function of spec, template, train and
    # classes only, never of ``positions``, so a request replaced with fewer positions may keep it.
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class LooResult:
    """Raw (un-binned) probabilities, one row per requested record, columns in ``classes`` order."""

    p_full: np.ndarray
    p_loo: np.ndarray
    engine: str
    # (first, inverse): rows with the same ``inverse`` have bit-identical p_full and p_loo rows, those of
    # row ``first[inverse]`` (an engine that computes each distinct record once says so); None: not known.
    # Whoever replaces p_full or p_loo drops it.
    groups: tuple[np.ndarray, np.ndarray] | None = None


class Engine(Protocol):
    """A leave-one-out engine."""

    name: str

    def refuses(self, spec: Spec, template: Any) -> str | None:
        """None if this engine can compute ``spec`` exactly, else the reason it cannot."""

    def run(self, request: LooRequest, advance: Callable[[int], None]) -> LooResult:
        """Compute p_{A(T)}(.|x_t) and p_{A(T\\{t})}(.|x_t) for every requested t."""
