"""Exact optima of L2-regularised logistic regression by Newton's method, and their leave-one-out.

scikit-learn's ``LogisticRegression`` with an L2 penalty (solvers lbfgs, newton-cg,
newton-cholesky, sag, saga) minimises over U, one row per score column and one column per
feature plus the intercept,

    F(U) = sum_i loss(U x_i, y_i) + 1/(2C) sum_k ||w_k||^2        (the intercept is not penalised)

(scikit-learn divides both terms by the number of records, ``sw_sum``; that does not move
the optimum, in T or in T minus one record). Binary: one score column for the larger
class label, loss(s, y) = log(1 + e^s) - y s. Multinomial (three classes or more): K score
columns, loss(s, y) = logsumexp(s) - s_y, the penalty on all K weight rows. The multinomial
intercepts are unique only up to a common constant; we keep them summing to zero (where
lbfgs, which starts from zero and follows gradients that sum to zero, stays as well).

F is strictly convex (the penalty makes the weights unique), so it has one optimum. This
module computes it to a relative Newton step of ``XTOL`` (1e-10: the estimated distance
to the optimum, from the exact gradient), far tighter than any solver ``tol``. Leave-one-out
(Long et al. section 4.2: PDTP needs A(T \\ {t}) for every t) starts each A(T \\ {t}) at
A(T)'s optimum and iterates on T \\ {t}'s own objective with a fixed Hessian (the chord
method): H_T minus t's term (rank 1 binary, rank K multinomial) plus the change of penalty,
inverted once per record; every step evaluates T \\ {t}'s exact gradient, for a batch of
records at once as two matrix products over T's distinct design rows (``DistinctRows``: equal
rows merged and weighted by their records, the same function with fewer terms). Because each
step uses the exact gradient, the Hessian only sets how fast the iteration contracts, not where it stops. Records whose
chord iteration contracts too slowly are finished by damped Newton with their exact
Hessian; a record that does not converge raises :class:`NewtonNotConverged`.

``shift``: a vector c added to every row of the design (``x_i + c``), how the change of
StandardScaler mean enters a model without intercept (see ``mptool.loo.linear``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.special import expit, logsumexp, softmax

from mptool.runtime.errors import InputError

#: Converged when the Newton step is at most XTOL * max(1, max |U|) in every coordinate.
XTOL = 1e-10
#: Chord steps (one gradient pass over T each) before a record falls back to damped Newton.
MAX_CHORD = 12
#: Damped Newton iterations (exact Hessian) before giving up: on T, and for a stalled record.
MAX_NEWTON = 100
MAX_FALLBACK = 50
#: Floats per (records x training rows x score columns) work array of one batch.
BATCH_FLOATS = 4_000_000


class NewtonNotConverged(InputError):
    """Newton's method did not reach XTOL for record ``position`` of T (-1: the fit on T itself)."""

    def __init__(self, detail: str, position: int) -> None:
        super().__init__(detail, position)  # both in args, so the error survives pickling from a worker
        self.detail, self.position = detail, position

    def __str__(self) -> str:
        return f"model: Newton's method did not converge without training record {self.position}: {self.detail}"


@dataclass(frozen=True)
class Problem:
    """An L2 logistic regression objective: design (intercept column last), labels, penalty."""

    X: np.ndarray  # (n, D)
    y: np.ndarray  # (n,) class index 0..K-1
    n_classes: int
    pen: np.ndarray  # (D,) 1/C on weights, 0 on the intercept
    intercept: bool

    @property
    def m(self) -> int:
        """Score columns: 1 for two classes, K otherwise."""
        return 1 if self.n_classes == 2 else self.n_classes


def probabilities(S: np.ndarray, n_classes: int) -> np.ndarray:
    """Class probabilities (..., K) from scores (..., m): expit of the one score for two classes, else softmax."""
    if n_classes == 2:
        p1 = expit(S[..., 0])
        return np.stack([1.0 - p1, p1], axis=-1)
    return softmax(S, axis=-1)


def _residual(S: np.ndarray, y: np.ndarray, n_classes: int, overwrite: bool = False) -> np.ndarray:
    """d loss / d scores at S (n, b, m) for labels y (n,): p - onehot(y) (binary: p_1 - y).

    ``overwrite``: binary residuals are written into S itself (no second n x b array; same values).
    """
    if n_classes == 2:
        R = expit(S, out=S) if overwrite else expit(S)
        R -= y[:, None, None]
        return R
    R = softmax(S, axis=-1)
    R[np.arange(len(y))[:, None], np.arange(S.shape[1])[None, :], y[:, None]] -= 1.0
    return R


def _curvature(S: np.ndarray, n_classes: int) -> np.ndarray:
    """d^2 loss / d scores^2 at S (..., m): (..., m, m), p(1-p) binary, diag(p) - p p^T multinomial."""
    if n_classes == 2:
        return (expit(S) * expit(-S))[..., None]
    P = softmax(S, axis=-1)
    return np.einsum("...k,kl->...kl", P, np.eye(P.shape[-1])) - P[..., :, None] * P[..., None, :]


def _value(X: np.ndarray, y: np.ndarray, n_classes: int, pen: np.ndarray, U: np.ndarray) -> float:
    """F(U) on design X (rows already shifted)."""
    S = X @ U.T
    rows = np.arange(len(y))
    if n_classes == 2:
        loss = np.logaddexp(0.0, S[:, 0]).sum() - S[rows, 0][y == 1].sum()
    else:
        loss = (logsumexp(S, axis=1) - S[rows, y]).sum()
    return float(loss + 0.5 * (pen * U**2).sum())


def _gradient_hessian(
    X: np.ndarray, y: np.ndarray, n_classes: int, pen: np.ndarray, U: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Exact gradient (m, D) and Hessian (mD, mD) of F at U (index k * D + a)."""
    m, D = U.shape
    S = (X @ U.T)[:, None, :]  # (n, 1, m)
    R = _residual(S, y, n_classes)[:, 0, :]
    A = _curvature(S[:, 0, :], n_classes)  # (n, m, m)
    G = R.T @ X + pen * U
    H = np.empty((m, D, m, D))
    for k in range(m):
        for j in range(k, m):
            H[k, :, j, :] = X.T @ (A[:, k, j, None] * X)
            H[j, :, k, :] = H[k, :, j, :].T
    H = H.reshape(m * D, m * D)
    H[np.diag_indices(m * D)] += np.tile(pen, m)
    return G, H


def gauge(H: np.ndarray, m: int, D: int, intercept: bool) -> np.ndarray:
    """H plus s/K on the multinomial intercept block: F is flat along "all intercepts + c".

    The gradient is orthogonal to that direction, so the step is unchanged elsewhere and
    has no component along it; without intercept (or binary) H is returned as is.
    """
    if m == 1 or not intercept:
        return H
    idx = np.arange(m) * D + (D - 1)
    scale = max(1.0, float(H[idx, idx].max()))
    H = H.copy()
    H[np.ix_(idx, idx)] += scale / m
    return H


def _center(U: np.ndarray, intercept: bool) -> None:
    """Keep multinomial intercepts summing to zero (in place; U (..., m, D))."""
    if intercept and U.shape[-2] > 1:
        U[..., :, -1] -= U[..., :, -1].mean(axis=-1, keepdims=True)


def _step_size(step: np.ndarray, U: np.ndarray) -> np.ndarray:
    """max |step| / max(1, max |U|) over the last two axes."""
    return np.abs(step).max(axis=(-2, -1)) / np.maximum(1.0, np.abs(U).max(axis=(-2, -1)))


def newton_solve(
    prob: Problem,
    U0: np.ndarray,
    pen: np.ndarray | None = None,
    shift: np.ndarray | None = None,
    rows: np.ndarray | None = None,
    position: int = -1,
    max_iter: int | None = None,
) -> np.ndarray:
    """The optimum of F on ``prob`` (optionally: other penalty, shifted design, a subset of rows).

    Damped Newton with the exact Hessian and an Armijo backtracking line search (``_damping``), from U0,
    until the Newton step is below XTOL (relative); raises NewtonNotConverged otherwise.
    """
    X = prob.X if rows is None else prob.X[rows]
    y = prob.y if rows is None else prob.y[rows]
    X = X if shift is None else X + shift
    pen = prob.pen if pen is None else pen
    m, D = U0.shape
    U = np.array(U0, dtype=float)
    _center(U, prob.intercept)
    size = np.inf
    max_iter = MAX_NEWTON if max_iter is None else max_iter
    for _ in range(max_iter):
        G, H = _gradient_hessian(X, y, prob.n_classes, pen, U)
        try:
            step = cho_solve(cho_factor(gauge(H, m, D, prob.intercept)), G.ravel()).reshape(m, D)
        except np.linalg.LinAlgError:
            raise NewtonNotConverged("the Hessian is numerically singular", position) from None
        size = float(_step_size(step, U))
        if size <= XTOL:
            U -= step
            _center(U, prob.intercept)
            return U
        U -= _damping(X, y, prob.n_classes, pen, U, G, step) * step
        _center(U, prob.intercept)
    raise NewtonNotConverged(f"Newton step still {size:.1e} after {max_iter} iterations", position)


def _damping(
    X: np.ndarray, y: np.ndarray, n_classes: int, pen: np.ndarray, U: np.ndarray, G: np.ndarray, step: np.ndarray
) -> float:
    """Armijo backtracking factor for the Newton step; 1 once the Newton decrement g.H^-1 g is
    below 1e-8 (1 + |F|): there Newton converges quadratically and F cannot resolve the decrease."""
    f = _value(X, y, n_classes, pen, U)
    slope = -float((G * step).sum())
    if -slope <= 1e-8 * (1.0 + abs(f)):
        return 1.0
    t = 1.0
    for _ in range(50):
        if _value(X, y, n_classes, pen, U - t * step) <= f + 1e-4 * t * slope:
            break
        t *= 0.5
    return t


@dataclass(frozen=True)
class DistinctRows:
    """T's design rows with equal rows merged, for the gradient passes of leave-one-out.

    Records with the same design row x share its scores, so the data term of the gradient,
    sum_i (p(x_i) - onehot(y_i)) x_i, equals sum_u (w_u p(x_u) - c_u) x_u over the distinct
    rows x_u, with w_u the number of records on x_u and c_u their label counts: the same
    function with fewer terms (45,222 Adult records have 38,229 distinct rows).
    """

    X: np.ndarray  # (u, D) distinct rows, in order of first occurrence
    weight: np.ndarray  # (u,) records per distinct row
    counts: np.ndarray  # (u, m) binary: records of class 1; multinomial: records of each class
    index: np.ndarray  # (n,) the distinct row of each record
    XwT: np.ndarray  # (D, u) (weight * X)^T, contiguous: the back-product
    share: np.ndarray  # (u, m) counts / weight: the label part of a distinct row's residual p - share

    @classmethod
    def of(cls, prob: Problem) -> DistinctRows:
        _, first, inverse = np.unique(prob.X, axis=0, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        index = rank[np.asarray(inverse).ravel()]
        u = len(order)
        weight = np.bincount(index, minlength=u).astype(float)
        if prob.n_classes == 2:
            counts = np.bincount(index, weights=(prob.y == 1).astype(float), minlength=u)[:, None]
        else:
            counts = np.zeros((u, prob.n_classes))
            np.add.at(counts, (index, prob.y), 1.0)
        X = np.ascontiguousarray(prob.X[first[order]])
        XwT = np.ascontiguousarray((X * weight[:, None]).T)
        return cls(X, weight, counts, index, XwT, counts / weight[:, None])


@dataclass(frozen=True)
class FullOptimum:
    """A(T)'s exact optimum with what every leave-one-out start needs."""

    prob: Problem
    U: np.ndarray  # (m, D)
    G: np.ndarray  # (m, D) gradient of F_T at U (rounding level)
    Hinv: np.ndarray  # (mD, mD) inverse Hessian of F_T at U (multinomial: with the gauge term)
    M0: np.ndarray  # (m, m) sum_i A_i: for the Hessian of a shifted design
    Q: np.ndarray  # (mD, m) Q[(k, a), l] = sum_i A_i[k, l] x_i[a]
    rows: DistinctRows  # T's design with equal rows merged: what each leave-one-out pass runs over

    @classmethod
    def solve(cls, prob: Problem, U0: np.ndarray) -> FullOptimum:
        """Polish ``U0`` (e.g. scikit-learn's fit) to the exact optimum of F_T."""
        U = newton_solve(prob, U0)
        m, D = U.shape
        G, H = _gradient_hessian(prob.X, prob.y, prob.n_classes, prob.pen, U)
        try:
            Hinv = np.linalg.inv(gauge(H, m, D, prob.intercept))
        except np.linalg.LinAlgError:
            raise NewtonNotConverged("the Hessian is numerically singular", -1) from None
        A = _curvature(prob.X @ U.T, prob.n_classes)
        Q = np.einsum("nkl,na->kal", A, prob.X).reshape(m * D, m)
        return cls(prob, U, G, (Hinv + Hinv.T) / 2, A.sum(axis=0), Q, DistinctRows.of(prob))

    def batch_size(self) -> int:
        """Records per batch: bounded by BATCH_FLOATS for the score arrays and the low-rank terms."""
        n, D = self.prob.X.shape
        m = self.prob.m
        return int(max(1, min(256, BATCH_FLOATS // (n * m), BATCH_FLOATS // (m * D * m * (D + 3)))))


def _own_terms(opt: FullOptimum, U: np.ndarray, xt: np.ndarray, yt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Residual (b, m) and curvature (b, m, m) of each record's own loss at its parameters U (b, m, D)."""
    S = np.einsum("bkd,bd->bk", U, xt)
    return _residual(S[:, None, :], yt, opt.prob.n_classes)[:, 0, :], _curvature(S, opt.prob.n_classes)


def loo_gradient(
    opt: FullOptimum, U: np.ndarray, pos: np.ndarray, pen_t: np.ndarray, shift: np.ndarray,
    work: np.ndarray | None = None,
) -> np.ndarray:
    """Exact gradient of F_{T \\ {t}} at U[j] for each record t = pos[j]: (b, m, D).

    One pass over T's distinct rows (``DistinctRows``) for the whole batch: scores and the
    back-product are matrix products, each distinct row's residual weighted by its records;
    t's own term is then subtracted and t's penalty added. ``work``: a flat float array of at
    least u * b * m (u distinct rows) that holds the scores (reused across passes: no fresh
    u x b array, and its page faults, per pass).
    """
    rows, K = opt.rows, opt.prob.n_classes
    X = rows.X
    b, m, D = U.shape
    u = len(X)
    if work is None or work.size < u * b * m:
        work = np.empty(u * b * m)
    S = np.matmul(X, U.reshape(b * m, D).T, out=work[: u * b * m].reshape(u, b * m)).reshape(u, b, m)
    shifted = bool(shift.any())
    if shifted:
        S += np.einsum("bkd,bd->bk", U, shift)[None]
    own_S = S[rows.index[pos], np.arange(b), :].copy()  # t's own scores, before S is overwritten
    R = expit(S, out=S) if K == 2 else softmax(S, axis=-1)  # S is not needed again
    R -= rows.share[:, None, :]  # sum_u w_u (p_u - c_u / w_u) x_u: residuals small where the fit is good
    G = (rows.XwT @ R.reshape(u, b * m)).reshape(D, b, m).transpose(1, 2, 0)
    if shifted:
        G = G + np.einsum("u,ubk->bk", rows.weight, R)[:, :, None] * shift[:, None, :]
    own = _residual(own_S[:, None, :], opt.prob.y[pos], K)[:, 0, :]
    G = G - own[:, :, None] * (opt.prob.X[pos] + shift)[:, None, :]
    return G + pen_t[:, None, :] * U


@dataclass(frozen=True)
class InitialInverse:
    """Inverse Hessians of F_{T \\ {t}} at A(T)'s optimum, by Woodbury from H_T's inverse.

    H_t = H_T + V_t S_t V_t^T with the columns of V_t: t's own term (I_m (x) x_t, S = -A_t),
    the penalty change on the columns whose scale moves (unit vectors, S = its change),
    and for a shifted design (I_m (x) c, Q) with S = [[M0, I], [I, 0]]. Then
    H_t^-1 g = H^-1 g - W K W^T g with W = H^-1 V_t and K = S (I + V^T W S)^-1.
    """

    Hinv: np.ndarray  # (mD, mD)
    W: np.ndarray  # (b, mD, r)
    K: np.ndarray  # (b, r, r)

    @classmethod
    def build(cls, opt: FullOptimum, pos: np.ndarray, pen_t: np.ndarray, shift: np.ndarray) -> InitialInverse:
        m, D = opt.U.shape
        b, eye = len(pos), np.eye(m)
        xt = opt.prob.X[pos] + shift
        _, A = _own_terms(opt, np.broadcast_to(opt.U, (b, m, D)), xt, opt.prob.y[pos])
        V = [np.einsum("kl,bd->bkdl", eye, xt).reshape(b, m * D, m)]
        S = [-A]
        dpen = pen_t - opt.prob.pen
        cols = np.flatnonzero((dpen != 0).any(axis=0))
        if cols.size:
            idx = (np.arange(m)[:, None] * D + cols[None, :]).ravel()
            E = np.zeros((m * D, idx.size))
            E[idx, np.arange(idx.size)] = 1.0
            V.append(np.broadcast_to(E, (b, *E.shape)))
            S.append(np.einsum("bj,ij->bij", np.tile(dpen[:, cols], m), np.eye(idx.size)))
        if shift.any():
            V.append(np.einsum("kl,bd->bkdl", eye, shift).reshape(b, m * D, m))
            V.append(np.broadcast_to(opt.Q, (b, *opt.Q.shape)))
            S.append(np.broadcast_to(np.block([[opt.M0, eye], [eye, np.zeros((m, m))]]), (b, 2 * m, 2 * m)))
        Vt = np.concatenate(V, axis=2)
        St = _block_diag(S)
        W = np.matmul(opt.Hinv, Vt)
        r = Vt.shape[2]
        M = np.matmul(Vt.transpose(0, 2, 1), W)
        K = np.linalg.solve(np.eye(r) + np.matmul(St, M), St).transpose(0, 2, 1)
        return cls(opt.Hinv, W, K)

    def apply(self, G: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """H_t^-1 g for the records ``rows`` of the batch: G (len(rows), mD)."""
        W, K = self.W[rows], self.K[rows]
        z = np.einsum("bir,bi->br", W, G)
        return G @ self.Hinv - np.einsum("bir,br->bi", W, np.einsum("brs,bs->br", K, z))


def _block_diag(blocks: list[np.ndarray]) -> np.ndarray:
    """Batched block-diagonal matrix (b, r, r) of blocks (b, r_i, r_i)."""
    b = blocks[0].shape[0]
    r = sum(x.shape[1] for x in blocks)
    out = np.zeros((b, r, r))
    at = 0
    for x in blocks:
        out[:, at : at + x.shape[1], at : at + x.shape[1]] = x
        at += x.shape[1]
    return out


def _direction(
    init: InitialInverse, rows: np.ndarray, G: np.ndarray, history: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
) -> np.ndarray:
    """L-BFGS two-loop recursion over ``history`` (s, y, rho per record) on top of ``init``: H_t^-1 g."""
    q = G.copy()
    alphas = []
    for s, yv, rho in reversed(history):
        a = rho * np.einsum("bi,bi->b", s, q)
        q -= a[:, None] * yv
        alphas.append(a)
    r = init.apply(q, rows)
    for (s, yv, rho), a in zip(history, reversed(alphas), strict=True):
        beta = rho * np.einsum("bi,bi->b", yv, r)
        r += s * (a - beta)[:, None]
    return r


def _pair(s: np.ndarray, yv: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(s, y, rho) with rho = 1 / y.s, and rho 0 where y.s is not clearly positive (rounding at the optimum)."""
    ys = np.einsum("bi,bi->b", yv, s)
    ok = ys > 1e-12 * np.linalg.norm(yv, axis=1) * np.linalg.norm(s, axis=1)
    return s, yv, np.where(ok, 1.0 / np.where(ok, ys, 1.0), 0.0)


def _converged(size: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Step below XTOL, or (after a pass) the error left after it, size * r / (1 - r) with the
    contraction r = size / last below 1/2, below XTOL (the steps shrink superlinearly)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(np.isfinite(last) & (last > 0), size / last, np.inf)
        left = np.where(r < 0.5, size * r / (1.0 - r), np.inf)
    return (size <= XTOL) | (left <= XTOL)


def loo_optima(opt: FullOptimum, pos: np.ndarray, pen_t: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Exact optima of F_{T \\ {t}} for the records t = pos[j] (b, m, D); no class may vanish.

    Quasi-Newton from A(T)'s optimum: U <- U - H_t^-1 grad F_{T \\ {t}}(U) with the exact
    gradient; H_t^-1 starts as the inverse of H_T minus t's term plus the penalty change
    (``InitialInverse``) and is refined by L-BFGS pairs, until the step is below XTOL. A
    record whose step does not shrink (or that needs more than MAX_CHORD steps) is
    finished by damped Newton on its own.
    """
    b = len(pos)
    m, D = opt.U.shape
    U = np.broadcast_to(opt.U, (b, m, D)).copy()
    try:
        init = InitialInverse.build(opt, pos, pen_t, shift)
    except np.linalg.LinAlgError:
        raise NewtonNotConverged("a leave-one-out Hessian is numerically singular", int(pos[0])) from None
    if shift.any():
        G = loo_gradient(opt, U, pos, pen_t, shift)
    else:  # at A(T)'s optimum the gradient over T is known: remove t's term, change the penalty
        own, _ = _own_terms(opt, U, opt.prob.X[pos], opt.prob.y[pos])
        G = opt.G[None] - own[:, :, None] * opt.prob.X[pos][:, None, :] + (pen_t - opt.prob.pen)[:, None, :] * U
    G = G.reshape(b, -1)
    work = np.empty(len(opt.rows.X) * b * m)  # the scores of every pass of this batch
    active, last = np.arange(b), np.full(b, np.inf)
    history: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    slow: list[int] = []
    for _ in range(MAX_CHORD):
        step = _direction(init, active, G, history).reshape(-1, m, D)
        Ua = U[active] - step
        _center(Ua, opt.prob.intercept)
        size = _step_size(step, Ua)
        moved = (Ua - U[active]).reshape(len(active), -1)
        U[active] = Ua
        done = _converged(size, last[active])
        stalled = ~done & (size > last[active])
        last[active] = size
        slow.extend(active[stalled].tolist())
        go = ~done & ~stalled
        active = active[go]
        if not active.size:
            break
        G_new = loo_gradient(opt, U[active], pos[active], pen_t[active], shift[active], work).reshape(len(active), -1)
        history = [(s_[go], y_[go], r_[go]) for s_, y_, r_ in history] + [_pair(moved[go], G_new - G[go])]
        G = G_new
    slow.extend(active.tolist())
    n = len(opt.prob.X)
    for j in sorted(slow):  # from A(T)'s optimum again: a stalled iteration may have wandered off
        keep = np.arange(n) != pos[j]
        U[j] = newton_solve(opt.prob, opt.U, pen_t[j], shift[j], rows=keep, position=int(pos[j]), max_iter=MAX_FALLBACK)
    return U


def loo_without_class(opt: FullOptimum, t: int, pen_t: np.ndarray, shift_t: np.ndarray) -> np.ndarray:
    """p_{A(T \\ {t})}(.|x_t) (K,) when t is the only record of its class: a fit on K - 1 classes.

    scikit-learn then fits K - 1 classes (binary with one score column when two are left);
    the vanished class gets probability 0. Solved from zero by damped Newton.
    """
    prob = opt.prob
    keep = np.arange(len(prob.X)) != t
    present = np.unique(prob.y[keep])
    if len(present) < 2:
        raise ValueError("T minus one record has a single class")
    remap = np.full(prob.n_classes, -1)
    remap[present] = np.arange(len(present))
    sub = Problem(prob.X[keep], remap[prob.y[keep]], len(present), prob.pen, prob.intercept)
    U = newton_solve(sub, np.zeros((sub.m, prob.X.shape[1])), pen_t, shift_t, position=t)
    out = np.zeros(prob.n_classes)
    out[present] = probabilities((prob.X[t] + shift_t) @ U.T, sub.n_classes)
    return out
