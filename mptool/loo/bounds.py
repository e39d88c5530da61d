"""The DTP upper bound shared by naive Bayes and logistic regression (Long et al. section 6).

Both families predict a softmax of per-class scores, p(y|x) = e^{S_y(x)} / sum_k e^{S_k(x)}:
naive Bayes with S_y = ln p(y) + sum_i ln p(x_i|y) (Props. 6.4/6.5 work on these scores),
logistic regression with S_y = w_y . x + b_y (a binary model is the softmax of (0, z)).

**Lemma (posterior ratio from score shifts).** Let A(T) have scores S and A(T\\{t}) scores
S', and D_k(x) = S_k(x) - S'_k(x). Then for every class y and query x

    ln p_T(y|x) - ln p_{T\\{t}}(y|x) = D_y(x) - ln sum_k p_{T\\{t}}(k|x) e^{D_k(x)},

and the sum is an average of e^{D_k} under the weights p_{T\\{t}}(k|x), so it lies in
[e^{min_k D_k}, e^{max_k D_k}]. Hence

    |ln p_T(y|x) - ln p_{T\\{t}}(y|x)| <= max_k |D_y(x) - D_k(x)| <= max_{a,b} (D_a(x) - D_b(x)).

Shifting every score by the same amount changes nothing, as it should (the n/(n-1) of a
fitted prior, the softmax gauge of a multinomial logistic regression). The classic
argument "each score ratio is within e^{+-a}, so the posterior ratio is within e^{2a}" is
the special case where every |D_k| <= a; the pairwise form is never looser.

**Separable scores over a product domain.** If D_k(x) = c_k + sum_beta h_{k,beta}(x_beta)
over blocks beta of the features (naive Bayes: conditional independence; linear models:
linearity), and the domain is a product of the blocks' domains, then for each pair (a, b)

    sup_x (D_a(x) - D_b(x)) = c_a - c_b + sum_beta max_{v in block beta} (h_{a,beta}(v) - h_{b,beta}(v)),

exactly, because each block's maximum can be chosen independently. So

    DTP(t) = sup_x max_y |ln p_T(y|x) - ln p_{T\\{t}}(y|x)| <= max_{a,b} sup_x (D_a(x) - D_b(x)),

computed exactly from the two fitted models, per record. A block's states are its
reachable values: the K indicator patterns of a one-hot block, the codes of a categorical
feature, the endpoints (or breakpoints) of a numeric range on which h is piecewise linear.
The bound is attained in the limit where p_{T\\{t}}(b|x) -> 1 at the maximising x; it is
otherwise conservative by the posterior's own softness.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Work arrays hold at most about this many floats (records x classes^2 x states).
_CELLS = 1 << 22


def pairwise_shift_bound(
    const: np.ndarray, blocks: Sequence[np.ndarray], present: np.ndarray | None = None
) -> np.ndarray:
    """Per record: max over class pairs (a, b) of sup_x (D_a(x) - D_b(x)) (module docstring).

    ``const`` is (records, classes): the part of D_k that does not depend on x. Each block is
    (records, classes, states): h_k(v) at each reachable state v of the block; NaN marks a
    state the record's models cannot reach (ignored). ``present`` (classes,) selects the
    classes both models can predict (others have probability 0 in both and no ratio).
    A record with an infinite score shift gets an infinite bound.
    """
    const = np.asarray(const, dtype=float)
    if present is not None:
        keep = np.flatnonzero(present)
        const = const[:, keep]
        blocks = [np.asarray(h, dtype=float)[:, keep] for h in blocks]
    r, C = const.shape
    out = np.empty(r)
    width = max([1] + [h.shape[2] for h in blocks])
    step = max(1, _CELLS // max(1, C * C * width))
    for s in range(0, r, step):
        out[s : s + step] = _pair_chunk(const[s : s + step], [h[s : s + step] for h in blocks])
    return out


def _pair_chunk(const: np.ndarray, blocks: list[np.ndarray]) -> np.ndarray:
    infinite = np.isinf(const).any(axis=1)
    with np.errstate(invalid="ignore"):
        total = const[:, :, None] - const[:, None, :]
    for h in blocks:
        infinite |= np.isinf(h).any(axis=(1, 2))
        with np.errstate(invalid="ignore"):
            diff = h[:, :, None, :] - h[:, None, :, :]
        diff = np.where(np.isnan(diff), -np.inf, diff)
        total = total + diff.max(axis=3)
    with np.errstate(invalid="ignore"):
        bound = np.nan_to_num(total, nan=np.inf).max(axis=(1, 2)) if total.size else np.zeros(len(const))
    return np.where(infinite, np.inf, np.maximum(bound, 0.0))
