"""PDTP and DTP summaries (Long et al., section 4.2).

PDTP_{A,T}(t) is the least epsilon with e^-eps * p' <= p <= e^eps * p' for every class y,
where p = p_{A(T)}(y | x_t) and p' = p_{A(T \\ {t})}(y | x_t) after output post-processing
(Definitions 4.3/4.4); i.e. max_y |ln p - ln p'|. The classifier's DTP lower bound is the
maximum over records, and DTP-1 (section 5) is violated when it exceeds 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mptool.privacy.calibration import bin_probabilities


@dataclass(frozen=True)
class PdtpValues:
    """Per-record PDTP with the class that attains it and the two probabilities of that class."""

    pdtp: np.ndarray
    worst: np.ndarray  # column index of the worst class
    p_full: np.ndarray
    p_loo: np.ndarray


def pdtp(p_full: np.ndarray, p_loo: np.ndarray) -> PdtpValues:
    """PDTP of each row: max over classes of |ln p_full - ln p_loo| (inputs already post-processed).

    Ties between classes go to the first class in label order.
    """
    p_full = np.asarray(p_full, dtype=float)
    p_loo = np.asarray(p_loo, dtype=float)
    ratio = np.abs(np.log(p_full) - np.log(p_loo))
    worst = np.argmax(ratio, axis=1)
    idx = np.arange(len(worst))
    return PdtpValues(ratio[idx, worst], worst, p_full[idx, worst], p_loo[idx, worst])


#: Rows from which :func:`pdtp_of` and :func:`raw_pdtp` compute each distinct pair of rows once.
DISTINCT_FROM = 4096


def distinct_pairs(p_full: np.ndarray, p_loo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each distinct (p_full row, p_loo row) pair, bit for bit; the pair index of every row).

    Every per-record quantity of this module is a function of the record's two rows alone, so
    it is computed once per distinct pair and gathered: the same numbers (a 1.41 M-record T of
    1,646 distinct records has as many distinct pairs, issue 28). Rows are grouped by a hash of
    their bit patterns, then checked equal to their group's first row bit for bit; a collision
    (never seen) falls back to grouping column by column.
    """
    bits = np.ascontiguousarray(np.concatenate([p_full, p_loo], axis=1), dtype=np.float64).view(np.uint64)
    mix = np.uint64(0x9E3779B97F4A7C15)
    h = np.zeros(len(bits), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(bits.shape[1]):
            h = (h ^ bits[:, j]) * mix + np.uint64(j + 1)
    inverse = _first_seen(h.view(np.int64))
    first = _firsts(inverse)
    if not (bits == bits[first][inverse]).all():  # a hash collision: group column by column instead
        inverse = np.zeros(len(bits), dtype=np.int64)
        for j in range(bits.shape[1]):
            codes = _first_seen(bits[:, j].view(np.int64))
            inverse = _first_seen(inverse * (int(codes.max()) + 1) + codes)
        first = _firsts(inverse)
    return first, inverse


def _first_seen(keys: np.ndarray) -> np.ndarray:
    """The index of each key among the distinct keys, numbered in order of first appearance (a hash table)."""
    import pandas as pd

    return np.asarray(pd.factorize(keys)[0], dtype=np.int64)


def _firsts(inverse: np.ndarray) -> np.ndarray:
    """The first row of each group of ``inverse``."""
    first = np.full(int(inverse.max()) + 1 if inverse.size else 0, -1, dtype=np.int64)
    first[inverse[::-1]] = np.arange(len(inverse) - 1, -1, -1)
    return first


def pair_groups(p_full: np.ndarray, p_loo: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`distinct_pairs` for more than :data:`DISTINCT_FROM` rows (else None: computing row by row is as cheap)."""
    return distinct_pairs(p_full, p_loo) if len(p_full) > DISTINCT_FROM and np.ndim(p_full) == 2 else None


def pdtp_of(
    p_full: np.ndarray, p_loo: np.ndarray, bin_size: float, groups: tuple[np.ndarray, np.ndarray] | None = None
) -> PdtpValues:
    """PDTP of each row from raw probabilities: bin both (section 5.2, ``bin_size`` 0 = floor only), then :func:`pdtp`.

    The one place where "PDTP of a pair of probability arrays" is computed; every engine,
    attack and reduction calls it, so binning is never forgotten on one side. ``groups``
    (:func:`pair_groups` of the same arrays): computed once per distinct pair of rows, then gathered.
    """
    if groups is not None:
        first, inverse = groups
        p, q = np.asarray(p_full, dtype=float)[first], np.asarray(p_loo, dtype=float)[first]
        v = pdtp(bin_probabilities(p, bin_size), bin_probabilities(q, bin_size))
        return PdtpValues(v.pdtp[inverse], v.worst[inverse], v.p_full[inverse], v.p_loo[inverse])
    return pdtp(bin_probabilities(p_full, bin_size), bin_probabilities(p_loo, bin_size))


def raw_pdtp(
    p_full: np.ndarray, p_loo: np.ndarray, groups: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """PDTP of the raw (unbinned, unfloored) probabilities: max_y |ln p - ln p'|; inf where only one is 0.

    ``groups`` (first, inverse) of rows with equal pairs (as in :func:`pdtp_of`): computed once per group, gathered.
    """
    if groups is not None:
        first, inverse = groups
        return raw_pdtp(np.asarray(p_full)[first], np.asarray(p_loo)[first])[inverse]
    p, q = np.asarray(p_full, dtype=float), np.asarray(p_loo, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.abs(np.log(p) - np.log(q))
    ratio = np.where(p == q, 0.0, ratio)
    return ratio.max(axis=1) if ratio.size else np.zeros(len(ratio))


def bin_edge(binned: np.ndarray, raw: np.ndarray, threshold: float) -> np.ndarray:
    """Violations that binning alone makes: binned PDTP above ``threshold``, raw PDTP at or below it.

    ``raw`` is the PDTP of the unbinned probabilities floored at ``PROB_FLOOR`` (``pdtp_of``
    with bin size 0). Binning (section 5.2) replaces each probability by its bin's centre, so two
    probabilities on either side of a bin edge move apart: 0.0099 and 0.0101 (raw ratio
    ln 1.02) become 0.005 and 0.015 (ln 3). Such a record violates DTP-1 as the paper defines
    it, but only through where the edges fall; its raw ratio stays below the threshold.
    """
    b, r = np.asarray(binned, dtype=float), np.asarray(raw, dtype=float)
    return (b > threshold) & (r <= threshold)


def summarize(
    values: np.ndarray, threshold: float, raw: np.ndarray | None = None, gate: str = "binned"
) -> dict[str, float | int | str]:
    """Summary statistics of per-record PDTP and the DTP-1 verdict (max <= threshold passes).

    ``values`` is the binned PDTP (the paper's definition). With ``raw`` (the unbinned PDTP)
    the summary also counts the violations on either scale and those that are only bin-edge
    steps (:func:`bin_edge`), and ``gate`` chooses the scale of the statistics and the verdict:
    ``binned`` (default, the paper's) or ``raw``.
    """
    b = np.asarray(values, dtype=float)
    v = b if raw is None or gate == "binned" else np.asarray(raw, dtype=float)
    violations = int(np.sum(v > threshold))
    out: dict[str, float | int | str] = {
        "n": int(v.size),
        "max": float(v.max()) if v.size else 0.0,
        "mean": float(v.mean()) if v.size else 0.0,
        "median": float(np.median(v)) if v.size else 0.0,
        "p95": float(np.quantile(v, 0.95)) if v.size else 0.0,
        "violations": violations,
        "threshold": float(threshold),
        "verdict": "fail" if violations else "pass",
    }
    if raw is not None:
        r = np.asarray(raw, dtype=float)
        out.update(
            {
                "gate": gate,
                "violations_binned": int(np.sum(b > threshold)),
                "violations_raw": int(np.sum(r > threshold)),
                "violations_bin_edge": int(np.sum(bin_edge(b, r, threshold))),
                "violations_hidden_by_binning": int(np.sum((r > threshold) & (b <= threshold))),
                "max_binned": float(b.max()) if b.size else 0.0,
                "max_raw": float(r.max()) if r.size else 0.0,
            }
        )
    return out
