"""Shadow models: pools on random halves of D, per-target in/out pairs, synthetic shadow data.

Every attack of Long et al. (section 5.3) and Shokri et al. (section V-B) learns from
*shadow models*: copies of the training algorithm A fitted on data the adversary controls,
so it knows which records each shadow saw. This module trains them in parallel and returns
only what the attacks need: binned prediction vectors and membership masks, and the
unbinned vectors of the pool and pairs (the auditor's own models: kl_leakage is estimated
on them, see :mod:`mptool.attacks.leakage`).

- :func:`train_pool` fits K models on random size-n subsets of the candidate set D and
  predicts every record of D. It serves as the untargeted attack's shadows (Long et al.,
  Algorithm 1, with the population as shadow data), as the threshold attack's estimate of
  the expected training loss (Yeom et al., section 3.3), and, with ``--shadow-pool K``, as
  the shared source of in/out models for the targeted attacks and LiRA: each record is "in"
  for about half of the K models.
- :func:`train_pairs` fits the paper's per-target pairs: for target t, M datasets T'_j of
  size n-1 drawn from D \\ {t}, and T_j = T'_j + {t} (Long et al. 5.3, distance-based
  attack, step 1); it returns both models' predictions on x_t.
- :func:`synthesize` builds shadow data for auditors without population data (Shokri et al.
  V-C): ``marginals`` (each feature sampled from its marginal) and ``noisy:F`` (a fraction F
  of each record's features resampled).

Every random choice is seeded from (spec seed, a phase tag, the task's index), so results do
not depend on how tasks are spread over --jobs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mptool.inputs.models import fit, proba_in
from mptool.inputs.options import check_synthesize
from mptool.privacy.calibration import bin_probabilities
from mptool.runtime import signals
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import chunk_positions, run_tasks

#: Seed tags that keep the random streams of the phases apart.
TAG_POOL, TAG_PAIRS, TAG_SYNTH = 101, 102, 103


def rng_for(seed: int, *keys: int) -> np.random.Generator:
    """A generator seeded from the spec seed and task keys (independent of --jobs)."""
    return np.random.default_rng([int(seed), *[int(k) for k in keys]])


@dataclass(frozen=True)
class ShadowPool:
    """K shadow models on subsets of D: who was in which, and what each predicts on D."""

    members: np.ndarray  # (K, |D|) bool: record j of D is in shadow k's training set
    preds: np.ndarray  # (K, |D|, classes) binned prediction vectors on every record of D
    raw: np.ndarray | None = None  # (K, |D|, classes) the same vectors unbinned

    @property
    def size(self) -> int:
        return int(self.members.shape[0])

    def evidence(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Prediction vectors on record j of the pool models with j in (first) and out (second)."""
        inside = self.members[:, j]
        return self.preds[inside, j], self.preds[~inside, j]

    def raw_evidence(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`evidence`, unbinned."""
        assert self.raw is not None
        inside = self.members[:, j]
        return self.raw[inside, j], self.raw[~inside, j]


@dataclass(frozen=True)
class ShadowPairs:
    """Per-target shadow pairs of one iteration: predictions on x_t with t in / out."""

    in_preds: np.ndarray  # (targets, M, classes)
    out_preds: np.ndarray  # (targets, M, classes)
    in_raw: np.ndarray | None = None  # (targets, M, classes) unbinned
    out_raw: np.ndarray | None = None


def pool_member_rows(n: int, indices: np.ndarray, train_size: int, seed: int) -> np.ndarray:
    """Membership masks of pool models ``indices``: model k trains on a seeded random subset of D.

    The subsets depend only on (seed, k, |D|, train_size), so they are known before any fit:
    :func:`pool_covers` checks them before the pool is trained.
    """
    members = np.zeros((len(indices), n), dtype=bool)
    for row, k in enumerate(indices):
        members[row, rng_for(seed, TAG_POOL, k).choice(n, size=train_size, replace=False)] = True
    return members


def pool_covers(n: int, n_models: int, train_size: int, seed: int, positions: np.ndarray) -> bool:
    """Whether every record at ``positions`` of D is in at least one and out of at least one pool model."""
    inside = pool_member_rows(n, np.arange(n_models), train_size, seed)[:, positions]
    return bool(inside.any(axis=0).all() and (~inside).any(axis=0).all())


def pool_chunk(
    template: Any,
    X: pd.DataFrame,
    y: np.ndarray,
    classes: np.ndarray,
    indices: np.ndarray,
    train_size: int,
    seed: int,
    bin_size: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit pool models ``indices``: each on a seeded random subset of D of ``train_size`` records.

    Returns membership masks, binned and unbinned prediction vectors on every record of D.
    """
    members = pool_member_rows(len(y), indices, train_size, seed)
    raw = np.empty((len(indices), len(y), len(classes)))
    for row in range(len(indices)):
        signals.check()  # threading workers stop here after an interrupt
        idx = np.flatnonzero(members[row])
        model = fit(template, X.iloc[idx], y[idx])
        raw[row] = proba_in(model, X, classes)
    return members, bin_probabilities(raw, bin_size), raw


def train_pool(
    template: Any,
    X: pd.DataFrame,
    y: np.ndarray,
    classes: np.ndarray,
    n_models: int,
    train_size: int,
    seed: int,
    bin_size: float,
    jobs: int,
    backend: str = "loky",
    advance: Callable[[int], None] = lambda n: None,
) -> ShadowPool:
    """Fit ``n_models`` shadows of A, each on ``train_size`` records drawn from D without replacement."""
    chunks = chunk_positions(np.arange(n_models), jobs, per_job=2)
    parts = run_tasks(
        pool_chunk,
        ((template, X, y, classes, c, train_size, seed, bin_size) for c in chunks),
        jobs=jobs,
        backend=backend,
        on_result=lambda r: advance(len(r[0])),
    )
    return ShadowPool(
        np.vstack([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])
    )


def pairs_chunk(
    template: Any,
    X: pd.DataFrame,
    y: np.ndarray,
    classes: np.ndarray,
    items: np.ndarray,
    n_pairs: int,
    train_size: int,
    seed: int,
    bin_size: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """In/out pairs for each ``(iteration, target position)`` row of ``items`` (Long et al. 5.3).

    Returns the in and out models' binned predictions on x_t, then the same unbinned.
    """
    n = len(y)
    k = len(classes)
    out_in = np.empty((len(items), n_pairs, k))
    out_out = np.empty((len(items), n_pairs, k))
    for row, (iteration, t) in enumerate(items):
        signals.check()  # threading workers stop here after an interrupt
        rng = rng_for(seed, TAG_PAIRS, iteration, t)
        others = np.delete(np.arange(n), t)
        x_t = X.iloc[[t]]
        for j in range(n_pairs):
            base = np.sort(rng.choice(others, size=train_size - 1, replace=False))
            with_t = np.sort(np.append(base, t))
            m_in = fit(template, X.iloc[with_t], y[with_t])
            m_out = fit(template, X.iloc[base], y[base])
            out_in[row, j] = proba_in(m_in, x_t, classes)[0]
            out_out[row, j] = proba_in(m_out, x_t, classes)[0]
    return bin_probabilities(out_in, bin_size), bin_probabilities(out_out, bin_size), out_in, out_out


def train_pairs(
    template: Any,
    X: pd.DataFrame,
    y: np.ndarray,
    classes: np.ndarray,
    targets: np.ndarray,
    iterations: int,
    n_pairs: int,
    train_size: int,
    seed: int,
    bin_size: float,
    jobs: int,
    backend: str = "loky",
    advance: Callable[[int], None] = lambda n: None,
) -> list[ShadowPairs]:
    """Fresh per-target shadow pairs for every iteration (2 * M fits per target per iteration)."""
    items = np.array([(i, t) for i in range(iterations) for t in targets], dtype=np.int64).reshape(-1, 2)
    chunks = [items[c] for c in chunk_positions(np.arange(len(items)), jobs)]
    parts = run_tasks(
        pairs_chunk,
        ((template, X, y, classes, c, n_pairs, train_size, seed, bin_size) for c in chunks),
        jobs=jobs,
        backend=backend,
        on_result=lambda r: advance(len(r[0])),
    )
    shape = (iterations, len(targets), n_pairs, len(classes))
    ins, outs, ins_raw, outs_raw = (np.concatenate([p[c] for p in parts]).reshape(shape) for c in range(4))
    return [ShadowPairs(ins[i], outs[i], ins_raw[i], outs_raw[i]) for i in range(iterations)]


def parse_source(text: str) -> tuple[str, float]:
    """``population`` | ``marginals`` | ``noisy:F`` (0 < F <= 1) | ``synthesize[:Q]`` -> (kind, fraction);
    for ``synthesize`` the second value is Q, the queries per synthetic record (:mod:`mptool.attacks.synthesis`)."""
    if text in ("population", "marginals"):
        return text, 0.0
    queries = check_synthesize(text)
    if queries is not None:
        return "synthesize", float(queries)
    if text.startswith("noisy:"):
        try:
            frac = float(text.split(":", 1)[1])
        except ValueError:
            frac = -1.0
        if 0.0 < frac <= 1.0:
            return "noisy", frac
    raise InputError(
        f"--shadow-data must be population, marginals, noisy:F with 0 < F <= 1 or synthesize[:Q] (got '{text}')"
    )


def synthesize(
    X: pd.DataFrame, y: np.ndarray, size: int, kind: str, fraction: float, rng: np.random.Generator
) -> tuple[pd.DataFrame, np.ndarray]:
    """Shadow data from the statistics of D (Shokri et al., section V-C).

    ``marginals``: a label drawn from the label's marginal, then every feature drawn
    independently from its marginal among the records of that label (class-conditional
    marginals: with unconditional ones the label would carry no signal to learn).
    ``noisy``: records of D drawn with replacement, and in each a fraction ``fraction`` of
    the features (at least one) replaced by values drawn from that feature's marginal
    (Shokri flips 10% or 20% of binary features; resampling generalises this to any column).
    """
    n, m = X.shape
    if kind == "marginals":
        labels = y[rng.integers(0, n, size=size)]
        cols = {}
        for name in X.columns:
            values = X[name].to_numpy()
            col = np.empty(size, dtype=values.dtype)
            for lab in np.unique(labels):
                pool = values[y == lab]
                where = np.flatnonzero(labels == lab)
                col[where] = pool[rng.integers(0, len(pool), size=len(where))]
            cols[name] = col
        return pd.DataFrame(cols, columns=X.columns), labels
    pick = rng.integers(0, n, size=size)
    return resample_features(X, pick, fraction, rng), y[pick]


def resample_features(X: pd.DataFrame, pick: np.ndarray, fraction: float, rng: np.random.Generator) -> pd.DataFrame:
    """Copies of the records of D at ``pick``, in each a fraction ``fraction`` of the features (at
    least one, chosen uniformly) replaced by a value drawn from that feature's marginal over D.

    Shokri et al.'s noisy shadow data (section V-C) and the label-only attack's perturbed queries
    (Choquette-Choo et al., section 4) both draw from this; the draws from ``rng`` come in one fixed
    order (the feature choice, then one column at a time), so a seed gives the same copies.
    """
    n, m = X.shape
    out = X.iloc[pick].reset_index(drop=True).copy()
    n_change = max(1, int(round(fraction * m)))
    change = np.argsort(rng.random((len(pick), m)), axis=1)[:, :n_change]
    for j, name in enumerate(X.columns):
        rows = np.flatnonzero((change == j).any(axis=1))
        if rows.size:
            values = X[name].to_numpy()
            col = out[name].to_numpy().copy()
            col[rows] = values[rng.integers(0, n, size=rows.size)]
            out[name] = col
    return out


def synthetic_chunk(
    template: Any,
    X: pd.DataFrame,
    y: np.ndarray,
    classes: np.ndarray,
    indices: np.ndarray,
    train_size: int,
    kind: str,
    fraction: float,
    seed: int,
    bin_size: float,
) -> list[tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]]:
    """Shadows on synthetic data: each trains on ``train_size`` records and is queried on a disjoint set."""
    out = []
    for k in indices:
        signals.check()  # threading workers stop here after an interrupt
        rng = rng_for(seed, TAG_SYNTH, k)
        Xs, ys = synthesize(X, y, 2 * train_size, kind, fraction, rng)
        inside = np.zeros(2 * train_size, dtype=bool)
        inside[:train_size] = True
        model = fit(template, Xs.iloc[:train_size], ys[:train_size])
        out.append((Xs, ys, inside, bin_probabilities(proba_in(model, Xs, classes), bin_size)))
    return out


def train_synthetic(
    template: Any,
    X: pd.DataFrame,
    y: np.ndarray,
    classes: np.ndarray,
    n_models: int,
    train_size: int,
    kind: str,
    fraction: float,
    seed: int,
    bin_size: float,
    jobs: int,
    backend: str = "loky",
    advance: Callable[[int], None] = lambda n: None,
) -> list[tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]]:
    """Shadows on synthetic data: per model (records, labels, in-mask, binned predictions)."""
    chunks = chunk_positions(np.arange(n_models), jobs, per_job=2)
    parts = run_tasks(
        synthetic_chunk,
        ((template, X, y, classes, c, train_size, kind, fraction, seed, bin_size) for c in chunks),
        jobs=jobs,
        backend=backend,
        on_result=lambda r: advance(len(r)),
    )
    return [s for part in parts for s in part]
