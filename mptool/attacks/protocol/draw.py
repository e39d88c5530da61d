"""Phase 1, draw candidates (Long et al. 5.4, steps 1-2): the candidate set D, the targets
and one D1/D2 split per iteration, each seeded from the spec's seed and a per-phase tag."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mptool.attacks.protocol.state import Run
from mptool.attacks.shadows import rng_for
from mptool.inputs.data import Records
from mptool.inputs.prepare import fit_checked
from mptool.runtime.errors import InputError

TAG_CANDIDATES, TAG_TARGETS, TAG_SPLIT, TAG_PLAN = 1, 2, 3, 4


@dataclass(frozen=True)
class Draw:
    """Phase 1 (Long et al. 5.4, steps 1-2): the candidate set D, the targets and the splits."""

    D: Records
    classes: np.ndarray  # the output columns, in label order
    y_idx: np.ndarray  # (|D|,) class index of every record of D
    tpos: np.ndarray  # (targets,) positions of the targets in D, sorted
    in_first: np.ndarray  # (iterations, |D|) bool: record j of D is in D1 in iteration i
    n_half: int  # |D1| = |D2| = |D| / 2, the training-set size

    @property
    def cls_pos(self) -> dict[Any, int]:
        """Class label -> output column."""
        return {c: i for i, c in enumerate(self.classes)}

    @property
    def target_y(self) -> np.ndarray:
        """Class index of each target."""
        return self.y_idx[self.tpos]


def draw_candidates(run: Run, check: bool = True) -> Draw:
    """Draw D, the targets and one D1/D2 split per iteration (Long et al. 5.4, steps 1-2).

    D is ``candidates`` rows of the population without replacement; the targets are
    ``targets`` positions of D; in iteration i, D1 is the first half of a seeded
    permutation of D. One fit on D1 of the first iteration checks the data and parameters
    before any parallel work (bad input -> exit 2 early; skipped with ``check`` False).
    """
    o, seed, pop = run.options, run.seed, run.prep.population
    cand = np.sort(rng_for(seed, TAG_CANDIDATES).choice(pop.n, size=o.candidates, replace=False))
    D = pop.take(cand)
    classes = np.array(sorted(set(D.y.tolist()), key=lambda v: (str(type(v)), v)), dtype=object)
    if len(classes) < 2:
        raise InputError(f"{pop.source}: the candidate set has a single class; raise --candidates")
    cls_pos = {c: i for i, c in enumerate(classes)}
    y_idx = np.array([cls_pos[v] for v in D.y], dtype=np.int64)
    n_half = o.candidates // 2
    tpos = np.sort(rng_for(seed, TAG_TARGETS).choice(o.candidates, size=o.targets, replace=False))
    in_first = np.zeros((o.iterations, o.candidates), dtype=bool)
    for i in range(o.iterations):
        in_first[i, rng_for(seed, TAG_SPLIT, i).permutation(o.candidates)[:n_half]] = True
    if check:
        fit_checked(run.prep.template, D.take(np.flatnonzero(in_first[0])))  # bad data/params -> exit 2 early
    return Draw(D, classes, y_idx, tpos, in_first, n_half)
