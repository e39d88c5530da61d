"""Does A(T) depend on training randomness? Detected by refitting, for any estimator.

Before an audit that would refit per record, A(T) is trained again (1) with the same inputs,
(2) with every ``random_state`` of the pipeline set to each of ``SEEDS`` other seeds in turn,
until one changes a prediction (one seed can give the same model by chance: a decision tree's
seed only breaks ties between equally good splits, and at ``configs/adult-dt.yaml``'s seed 0 two
of 15 other seeds gave the same tree) and (3) on T's rows in a
seeded random order (and, when that changed nothing, in reverse order; not for estimators that
``privacy.noise.order_dependence`` knows to depend on the rows only as a set or through their
relative order, which removing t keeps, e.g. k-NN's tie rule), and each model's
``predict_proba`` on T is compared with A(T)'s. Two predictions count as equal when every
probability agrees to ``RTOL`` relative (1e-12: float sums taken in another row order differ in
the last bits, nothing else does). A source whose refit
changes a prediction is a source of randomness: the audit then estimates each record's influence
beyond it (:mod:`mptool.loo.replicates`); with none, today's paired refit is exact.

The seeds and orders of the replicates are derived here too, from the spec's seed and the
replicate index through :class:`numpy.random.SeedSequence`, so no result depends on ``--jobs``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone

from mptool.inputs.models import fit, proba_in
from mptool.privacy.noise import order_dependence

#: Relative tolerance of "the same prediction" (stated in pdtp.json).
RTOL = 1e-12
#: Other seeds the detection refits A(T) with. On configs/adult-dt.yaml, 2 of 15 other seeds gave
#: seed 0's tree; three draws miss a seed-dependent tree that rarely only if the draws are
#: independent (about (2/15)^3 = 0.24 % there), and each costs one fit of A(T).
SEEDS = 3
#: SeedSequence tags: the replicates' seeds, their row orders, and the detection's draws.
_SEED_TAG, _ORDER_TAG, _DETECT_TAG = 0x5EED, 0x0DE5, 0xDE7E


@dataclass(frozen=True)
class Randomness:
    """Which sources of training randomness change A(T)'s predictions on T.

    ``seed``/``order``/``repeat``: True when refitting with another seed / another row order /
    the same inputs changed a prediction; ``seed`` is None when the pipeline has no
    ``random_state`` to vary. ``max_change`` is the largest absolute change of a probability.
    """

    seed: bool | None
    order: bool
    repeat: bool
    max_change: float
    order_why: str = ""  # why the row order was not refitted (an estimator known to be exactly paired)
    seeds_tried: int = 0  # other seeds A(T) was refitted with (0 when the pipeline has no random_state)

    @property
    def randomized(self) -> bool:
        return bool(self.seed) or self.order or self.repeat

    @property
    def sources(self) -> str:
        """``seed``, ``row order``, ``seed and row order``, ``unseeded`` or ``none``."""
        if self.repeat:
            return "unseeded (the same inputs gave another model)"
        if self.seed and self.order:
            return "seed and row order"
        return "seed" if self.seed else "row order" if self.order else "none"

    def as_dict(self) -> dict[str, Any]:
        return {
            "checked": True,
            "randomized": self.randomized,
            "sources": self.sources,
            "seed": self.seed,
            "row_order": self.order,
            "repeat": self.repeat,
            "max_change": self.max_change,
            **({"row_order_not_checked": self.order_why} if self.order_why else {}),
            "seeds_tried": self.seeds_tried,
            "rtol": RTOL,
            "method": f"A(T) refitted with up to {SEEDS} other seeds, with T's rows permuted and as is; "
            f"predict_proba on T compared with A(T)'s to {RTOL:g} relative",
        }


def seed_keys(template: Any) -> list[str]:
    """The ``random_state`` parameters of ``template`` (pipeline steps and nested estimators included)."""
    return sorted(k for k in template.get_params(deep=True) if k == "random_state" or k.endswith("__random_state"))


def with_seed(template: Any, seed: int) -> Any:
    """An unfitted copy of ``template`` with every ``random_state`` set to ``seed``."""
    model = clone(template)
    keys = seed_keys(model)
    if keys:
        model.set_params(**{k: int(seed) for k in keys})
    return model


def replicate_seed(spec_seed: int, r: int) -> int:
    """The ``random_state`` of replicate ``r`` (SeedSequence of the spec's seed, a tag and r)."""
    return int(np.random.SeedSequence([int(spec_seed), _SEED_TAG, int(r)]).generate_state(1)[0] % (2**31 - 1))


def replicate_order(spec_seed: int, r: int, n: int) -> np.ndarray:
    """The row order of T in replicate ``r``: a permutation of ``n`` positions drawn from its own SeedSequence."""
    return np.random.default_rng(np.random.SeedSequence([int(spec_seed), _ORDER_TAG, int(r)])).permutation(n)


def _changed(a: np.ndarray, b: np.ndarray) -> tuple[bool, float]:
    diff = np.abs(a - b)
    return bool(np.any(diff > RTOL * np.maximum(np.abs(a), np.abs(b)))), float(diff.max()) if diff.size else 0.0


def _draws(spec_seed: int, n: int) -> tuple[list[int], np.ndarray]:
    """The detection's :data:`SEEDS` other seeds (distinct, none the spec's) and its permutation of
    ``n`` rows, drawn from the spec's seed (the first seed and the permutation as before there were more seeds)."""
    rng = np.random.default_rng(np.random.SeedSequence([int(spec_seed), _DETECT_TAG]))

    def draw() -> int:
        s = int(rng.integers(1, 2**31 - 1))
        return s + 1 if s == spec_seed else s

    seeds = [draw()]
    perm = rng.permutation(n)
    while len(seeds) < SEEDS:
        s = draw()
        if s not in seeds:
            seeds.append(s)
    return seeds, perm


def detect(template: Any, full_model: Any, X: pd.DataFrame, y: np.ndarray, classes: np.ndarray,
           spec_seed: int, *, advance: Callable[[int], None] | None = None, first: bool = False) -> Randomness:
    """Refit A(T) as is, with :data:`SEEDS` other seeds and with rows permuted; compare predictions on T with A(T)'s.

    The seeds are tried in turn until one changes a prediction (so a seeded randomized estimator
    costs one seed fit, a deterministic one :data:`SEEDS`). ``advance(1)`` is called after each
    refit (a progress line). ``first``: stop at the first source found, the seeds tried first
    (``mptool check`` needs only whether A is randomized; the fields of the sources not tried are
    then False)."""
    step = advance or (lambda n: None)

    def changed(model: Any, rows: np.ndarray | None = None) -> tuple[bool, float]:
        fitted = fit(model, X, y) if rows is None else fit(model, X.iloc[rows], y[rows])
        step(1)
        return _changed(base, proba_in(fitted, X, classes))

    def by_seed() -> tuple[bool, float, int]:
        worst = 0.0
        for i, s in enumerate(seeds, 1):
            hit, c = changed(with_seed(template, s))
            worst = max(worst, c)
            if hit:
                step(len(seeds) - i)  # the seeds not needed: the phase's planned steps are done
                return True, worst, i
        return False, worst, len(seeds)

    base = proba_in(full_model, X, classes)
    seeds, perm = _draws(spec_seed, len(y))
    seeded = bool(seed_keys(template))
    seed: bool | None = None
    c1, tried = 0.0, 0
    if first and seeded:
        seed, c1, tried = by_seed()
        if seed:
            return Randomness(seed, False, False, c1, seeds_tried=tried)
    repeat, c0 = changed(template)
    if seeded and not first:
        seed, c1, tried = by_seed()
    if first and repeat:
        return Randomness(seed, False, repeat, max(c0, c1), seeds_tried=tried)
    known = order_dependence(template)
    if known.dependent is False:  # e.g. k-NN's tie rule: relative row order, which removing t keeps
        return Randomness(seed, False, repeat, max(c0, c1), known.reason, seeds_tried=tried)
    order, c2 = changed(template, perm)
    if not order:  # one random order can leave an order statistic unchanged by chance: try the reverse too
        order, c3 = changed(template, np.arange(len(y))[::-1])
        c2 = max(c2, c3)
    elif known.dependent is None:
        step(1)  # the reverse order planned for an estimator not known (planned_fits) is not needed: done
    return Randomness(seed, order, repeat, max(c0, c1, c2), seeds_tried=tried)


def not_checked(why: str) -> dict[str, Any]:
    """The ``randomness`` block of pdtp.json when no detection ran (an exact engine, or ``--engine refit``)."""
    return {"checked": False, "why": why}


def planned_fits(template: Any, randomized: bool = False) -> int:
    """Fits :func:`detect` makes at most: as is, :data:`SEEDS` other seeds (if seeded), and one row
    order for an estimator known to depend on the order, two (a permutation, its reverse) for one not
    known, none for one known not to. ``randomized`` (an estimate that knows another seed changes A, as
    ``mptool check``'s dry run finds; not one that found only the row order): one seed, the first that changes
    a prediction stops the seeds."""
    known = order_dependence(template).dependent
    seeds = (1 if randomized else SEEDS) * int(bool(seed_keys(template)))
    return 1 + seeds + (0 if known is False else 1 if known else 2)


def detection_fits(template: Any, found: Randomness) -> int:
    """Fits :func:`detect` made for ``found``: as is, the seeds tried, a permutation (and its reverse)."""
    order = 0 if found.order_why else 1 if found.order else 2
    return 1 + found.seeds_tried + order
