"""RMIA, the relative membership inference attack (Zarifzadeh et al., "Low-Cost High-Power
Membership Inference Attacks", ICML 2024), online and offline, on the shadow pool.

**Statistic** (paper, section 3). For a target record x, a target model theta and a
population record z that theta did not train on, the pairwise likelihood ratio is

    LR(x, z) = (Pr(x | theta) / Pr(x)) / (Pr(z | theta) / Pr(z)),

where Pr(v | theta) is theta's probability of v's true label and Pr(v) is the same
probability averaged over reference models (the marginal over training sets). The score of
x is the fraction of population records z with LR(x, z) > gamma:

    Score(x) = |{z in Z : LR(x, z) > gamma}| / |Z|.

A member is, relative to the population, much more likely under theta than under an
average model, so it dominates most z. x is never compared with itself.

**Pr(v) from the pool** (the reference models are mptool's shadow pool: random halves of
the candidate set D, see :mod:`mptool.attacks.shadows`).

- Online: Pr(v) = (Pr_IN(v) + Pr_OUT(v)) / 2, the means over the pool models that did and
  did not train on v. The paper averages over reference models of which half contain v; a
  random pool is only about half and half per record, so the two sides get equal weight.
  Where one side has no model (a tiny pool), the other side's mean is used alone.
- Offline: only models without v: Pr(v) = ((1 + a) Pr_OUT(v) + (1 - a)) / 2, the paper's
  linear approximation of Pr_IN from Pr_OUT (Pr_IN ~ a Pr_OUT + 1 - a). Population records
  with no OUT model are left out of Z; a target with none falls back to the online marginal.

**Defaults and why.** ``GAMMA = 1``: a z counts when x's ratio beats it at all; this is
ML Privacy Meter's setting and makes the score x's rank among the population, the form
whose ROC the paper reports; larger gamma only counts decisive wins and coarsens the score.
``a`` is tuned as the paper (appendix) and ML Privacy Meter do: one pool model plays the
target, the other pool models are its offline references, and the a of the grid 0, 0.1,
..., 1 with the highest AUC over the records of D (at most ``TUNE_RECORDS``, seeded) is
kept (the auditor knows its own models' training sets; no target model is looked at).
``OFFLINE_A = 0.3`` (Privacy Meter's default) stands in when the pool is too small to tune.
|Z| is at most ``POPULATION`` records per target model, drawn (seeded) from the half of D that
model did not train on.

**Ties.** With a finite population the fraction saturates: a non-member exchangeable with the
z beats all of them with probability 1 / (|Z| + 1), about 0.1% at |Z| = 1000, so without more
the score could never reach 0.1% FPR (benchmarks/bench_rmia.py measured 0.11% of non-member
attempts at 1.0 on Adult). The reported score is therefore the fraction plus
``TIE_BREAK * r / (1 + r)``, r = Pr(x | theta) / Pr(x) (less than 1e-7): within one target
model the fraction is a non-decreasing function of r, so this orders exactly the records the
fraction ties, as RMIA itself orders them, and no two different fractions (multiples of
1 / |Z| with |Z| <= POPULATION) swap.

**Decision.** "member" iff the fraction (Score) > 0.5 (x beats most of the population); as with
lira_offline this threshold only sets accuracy/precision, AUC and TPR at low FPR use the
score itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mptool.attacks.shadows import rng_for

#: Pairwise likelihood-ratio threshold gamma (ML Privacy Meter's default; see the module docstring).
GAMMA = 1.0
#: Offline coefficient a used when the pool is too small to tune it (ML Privacy Meter's default).
OFFLINE_A = 0.3
#: Grid of a searched by :func:`tune_offline_a`.
A_GRID = tuple(round(0.1 * k, 1) for k in range(11))
#: Most population records z per target model.
POPULATION = 1000
#: Probability floor (unbinned outputs may be exactly 0).
CLIP = 1e-12
#: Weight of the tie-break by x's own ratio (below the smallest gap between two fractions k / |Z|).
TIE_BREAK = 1e-7
#: Records x per block of the pairwise comparison (bounds memory at ROWS x POPULATION cells).
ROWS = 2048
#: Most records of D scored when tuning a (a seeded sample beyond that).
TUNE_RECORDS = 4000
#: Seed tag of the population draws (see mptool.attacks.shadows.rng_for).
TAG_RMIA = 131


def side_means(p_ref: np.ndarray, inside: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per record: mean of ``p_ref`` (K, N) over models with the record in, and over those without (NaN if none)."""
    p = np.asarray(p_ref, dtype=float)
    n_in, n_out = inside.sum(axis=0), (~inside).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_in = np.where(n_in > 0, (p * inside).sum(axis=0) / n_in, np.nan)
        mean_out = np.where(n_out > 0, (p * ~inside).sum(axis=0) / n_out, np.nan)
    return mean_in, mean_out


def online_marginal(p_ref: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """Online Pr(v) = (Pr_IN(v) + Pr_OUT(v)) / 2 per record; one side alone where the other has no model."""
    mean_in, mean_out = side_means(p_ref, inside)
    both = (mean_in + mean_out) / 2
    return np.where(np.isnan(mean_in), mean_out, np.where(np.isnan(mean_out), mean_in, both))


def offline_marginal(p_ref: np.ndarray, inside: np.ndarray, a: float) -> np.ndarray:
    """Offline Pr(v) = ((1 + a) Pr_OUT(v) + (1 - a)) / 2 per record (NaN where no model is without v)."""
    _, mean_out = side_means(p_ref, inside)
    return ((1 + a) * mean_out + (1 - a)) / 2


def pairwise_score(
    ratio_x: np.ndarray,
    ratio_z: np.ndarray,
    gamma: float = GAMMA,
    x_ids: np.ndarray | None = None,
    z_ids: np.ndarray | None = None,
) -> np.ndarray:
    """Score(x) = fraction of z with ratio_x / ratio_z > gamma, per x, skipping pairs whose ids are equal
    (x is never compared with itself); 0.5 where no z is left. Computed in blocks of ROWS x's."""
    rx, rz = np.asarray(ratio_x, dtype=float), np.asarray(ratio_z, dtype=float)
    out = np.empty(len(rx))
    for start in range(0, len(rx), ROWS):
        block = slice(start, start + ROWS)
        wins = (rx[block, None] / rz[None, :]) > gamma
        keep = np.ones(wins.shape, dtype=bool)
        if x_ids is not None and z_ids is not None:
            keep = np.asarray(x_ids)[block, None] != np.asarray(z_ids)[None, :]
        counted = keep.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[block] = np.where(counted > 0, (wins & keep).sum(axis=1) / counted, 0.5)
    return out


def tie_broken(fraction: np.ndarray, ratio_x: np.ndarray) -> np.ndarray:
    """The reported score: fraction + TIE_BREAK * r / (1 + r) (module docstring, "Ties")."""
    r = np.asarray(ratio_x, dtype=float)
    return np.asarray(fraction, dtype=float) + TIE_BREAK * (r / (1.0 + r))


def ratios(p_model: np.ndarray, marginal: np.ndarray) -> np.ndarray:
    """Pr(v | theta) / Pr(v), both floored at CLIP."""
    return np.maximum(np.asarray(p_model, dtype=float), CLIP) / np.maximum(marginal, CLIP)


def _auc(member: np.ndarray, score: np.ndarray) -> float:
    """ROC AUC by ranks (ties count half)."""
    from scipy.stats import rankdata

    r = rankdata(score)
    n1, n0 = int(member.sum()), int((~member).sum())
    return float((r[member].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def tune_offline_a(
    p_ref: np.ndarray, inside: np.ndarray, rng: np.random.Generator, gamma: float = GAMMA
) -> tuple[float, bool]:
    """The a of A_GRID whose offline RMIA best attacks pool model 0 with models 1.. as references, and
    True (AUC over the records of D, at most TUNE_RECORDS of them drawn by ``rng``; z drawn from the
    records model 0 did not train on); (OFFLINE_A, False) when the pool cannot tune it (fewer than 2
    models, or no member/non-member/z to score)."""
    if p_ref.shape[0] < 2:
        return OFFLINE_A, False
    target, refs, ins = p_ref[0], p_ref[1:], inside[1:]
    outside0 = np.flatnonzero(~inside[0])
    z = np.sort(rng.choice(outside0, size=min(POPULATION, len(outside0)), replace=False))
    n = p_ref.shape[1]
    records = np.sort(rng.choice(n, size=TUNE_RECORDS, replace=False)) if n > TUNE_RECORDS else np.arange(n)
    best, best_auc = OFFLINE_A, -1.0
    for a in A_GRID:
        marg = offline_marginal(refs, ins, a)
        zs = z[np.isfinite(marg[z])]
        xs = records[np.isfinite(marg[records])]
        member = inside[0, xs]
        if len(zs) == 0 or member.all() or not member.any():
            return OFFLINE_A, False
        score = pairwise_score(ratios(target[xs], marg[xs]), ratios(target[zs], marg[zs]), gamma, xs, zs)
        auc = _auc(member, score)
        if auc > best_auc:
            best, best_auc = a, auc
    return float(best), True


@dataclass(frozen=True)
class RmiaScores:
    """Online and offline RMIA scores per attempt (shaped like the protocol's membership array): the
    fractions (the paper's Score) and the reported scores (the fractions with ties broken)."""

    online: np.ndarray
    offline: np.ndarray
    online_fraction: np.ndarray
    offline_fraction: np.ndarray
    a: float
    gamma: float
    a_tuned: bool  # a came from tune_offline_a (else given, or OFFLINE_A)
    population: int  # |Z| per target model (before excluding x itself)
    offline_fallback: int  # targets with no OUT model (offline marginal replaced by the online one)

    @property
    def decisions(self) -> tuple[np.ndarray, np.ndarray]:
        """"Member" iff the fraction is above 0.5, online then offline."""
        return self.online_fraction > 0.5, self.offline_fraction > 0.5


def population_draw(outside: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Positions z of D: up to POPULATION records, drawn without replacement, where ``outside`` is True."""
    pool = np.flatnonzero(outside)
    return np.sort(rng.choice(pool, size=min(POPULATION, len(pool)), replace=False))


def rmia(
    p_target: np.ndarray,
    in_target: np.ndarray,
    tpos: np.ndarray,
    p_ref: np.ndarray,
    ref_inside: np.ndarray,
    seed: int,
    gamma: float = GAMMA,
    a: float | None = None,
) -> RmiaScores:
    """Online and offline RMIA of every target model on every target (module docstring).

    ``p_target`` (I, 2, N): target model (iteration i, half h)'s probability of each record's
    true label on all of D; ``in_target`` (I, 2, N): the record is in that model's training set;
    ``tpos`` (T,): the targets' positions in D; ``p_ref``/``ref_inside`` (K, N): the reference
    models' true-label probabilities and training sets. ``a`` None: tuned (:func:`tune_offline_a`).
    Scores are (I, 2, T).
    """
    tuned = False
    if a is None:
        a, tuned = tune_offline_a(p_ref, ref_inside, rng_for(seed, TAG_RMIA, 0, 0, 1), gamma)
    on_m = online_marginal(p_ref, ref_inside)
    off_m = offline_marginal(p_ref, ref_inside, a)
    fallback = ~np.isfinite(off_m[tpos])
    off_x = np.where(fallback, on_m[tpos], off_m[tpos])
    shape = (p_target.shape[0], 2, len(tpos))
    online, offline, on_r, off_r = (np.empty(shape) for _ in range(4))
    sizes = []
    for i in range(shape[0]):
        for h in range(2):
            z = population_draw(~in_target[i, h], rng_for(seed, TAG_RMIA, i, h))
            sizes.append(len(z))
            p = p_target[i, h]
            on_r[i, h], off_r[i, h] = ratios(p[tpos], on_m[tpos]), ratios(p[tpos], off_x)
            online[i, h] = pairwise_score(on_r[i, h], ratios(p[z], on_m[z]), gamma, tpos, z)
            zo = z[np.isfinite(off_m[z])]
            offline[i, h] = pairwise_score(off_r[i, h], ratios(p[zo], off_m[zo]), gamma, tpos, zo)
    return RmiaScores(
        tie_broken(online, on_r), tie_broken(offline, off_r), online, offline,
        float(a), float(gamma), tuned, int(min(sizes)), int(fallback.sum()),
    )
