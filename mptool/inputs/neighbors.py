"""k-nearest neighbours with a deterministic tie rule, for A(T) and every A(T\\{t}) alike.

Long et al. (section 6.3) audit k-NN; PDTP compares A(T) with A(T\\{t}) on x_t, so both must
break ties among equidistant records the same way. scikit-learn's KNeighborsClassifier does
not promise that: which of several records at the k-th distance it keeps depends on its search
structure (a KD-tree built on T or on T\\{t}) and, for brute force, on the number of OpenMP
threads. On one-hot or binned data most distances tie, and PDTP then depends on ``--jobs``.

**The tie rule.** The neighbours of a query x among the training rows X_0 .. X_{n-1} with
labels y_0 .. y_{n-1} are ordered by the key ``(d(x, X_i), c_i, i)``: distance first, then the
record's content key c_i (:func:`content_keys`, a 64-bit mix of the bits of X_i and of y_i),
then training-row position. The k nearest are the first k in that order. Two properties follow:

- Removing a record t keeps the relative order of every other row (no key depends on the
  other rows), so the neighbours of x_t in T\\{t} are the first k+1 neighbours in T with t
  dropped (or the first k when t is not among them): the exact engine and the refit engine
  agree by construction.
- Identical records (same features and label) have the same distance to every query and the
  same content key: they sit next to each other in every order, and removing one or another
  leaves the same sequence of (distance, label). Identical records get identical leave-one-out
  predictions, hence identical PDTP. Ordering ties by row alone did not: with copies of x at
  rows 0 (label yes), 1 (no), 2 (yes) and k = 1, removing row 0 leaves row 1 (no) first,
  removing row 2 leaves row 0 (yes) first (issue 26).

The content key spreads equidistant records pseudo-randomly, so ties favour no class and no
region of the feature space. A pipeline that standardises numerics for k-NN uses
:class:`OrderFreeStandardScaler` (``build_pipeline`` in mptool.inputs.models), whose mean and scale depend on T as a
multiset: T\\{t} and T\\{t'} for identical t, t' are then scaled to the same bits.

**Distances are computed so that a tie is a real tie.** The distance of a pair depends only on
the two rows, never on the batch, the thread count or the backend:

- integer-valued data (one-hot, binned codes, counts) within ``2**52`` after squaring and
  summing: squared Euclidean distances by matrix products, which are exact in float64;
- otherwise: ``sum_j (q_j - x_j)**2`` (or ``|q_j - x_j|``, or the max for Chebyshev),
  accumulated feature by feature in column order, IEEE float64, so equal computed values are
  the ties. On integer-valued rows both ways give the same (exact) number.

Euclidean (Minkowski ``p=2``), Manhattan (``p=1``) and Chebyshev (``p=inf``) are supported;
weights ``uniform`` or ``distance`` (a zero distance takes all the weight, as in sklearn).
``algorithm``, ``leaf_size`` and ``n_jobs`` are accepted for compatibility and ignored: the
search is always one exact brute-force pass. Other metrics, ``metric_params`` and callable
weights are refused (:meth:`TieStableKNeighborsClassifier.unsupported`).
"""

from __future__ import annotations

import hashlib
import math
import numbers
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.preprocessing import StandardScaler
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _sk_validate_data
except ImportError:  # pragma: no cover - scikit-learn 1.4/1.5
    _sk_validate_data = None

#: Metric names → the distance kind: 'l2' (key = squared distance), 'l1' or 'linf'.
METRICS: dict[str, str] = {
    "euclidean": "l2",
    "l2": "l2",
    "manhattan": "l1",
    "l1": "l1",
    "cityblock": "l1",
    "chebyshev": "linf",
    "infinity": "linf",
}

#: Pairs per block of the distance matrix (memory: a few float64 arrays of this size).
BLOCK_PAIRS = 1 << 20

#: Pairs per tile of the feature-by-feature sums (kept in cache while every feature is added).
TILE_PAIRS = 1 << 14

#: Largest integer float64 adds without rounding; the matrix-product path stays below it.
EXACT_INT = float(2**52)

SUPPORTED_HINT = "use metric euclidean, manhattan or chebyshev (or minkowski with p 1 or 2), no metric_params"


def metric_kind(metric: Any, p: Any, metric_params: Any) -> str:
    """The distance kind ('l2', 'l1', 'linf') of sklearn-style metric parameters; ValueError if unsupported."""
    if metric_params not in (None, {}):
        raise ValueError(
            f"metric_params {metric_params!r} are not supported by mptool's tie-stable k-NN; {SUPPORTED_HINT}"
        )
    if not isinstance(metric, str):
        raise ValueError(f"metric {metric!r} is not supported by mptool's tie-stable k-NN; {SUPPORTED_HINT}")
    if metric == "minkowski":
        if isinstance(p, bool) or not isinstance(p, numbers.Real):
            raise ValueError(f"p={p!r} is not a number; {SUPPORTED_HINT}")
        kinds = {1.0: "l1", 2.0: "l2", math.inf: "linf"}
        if float(p) not in kinds:
            raise ValueError(f"minkowski p={p!r} is not supported by mptool's tie-stable k-NN; {SUPPORTED_HINT}")
        return kinds[float(p)]
    if metric not in METRICS:
        raise ValueError(f"metric {metric!r} is not supported by mptool's tie-stable k-NN; {SUPPORTED_HINT}")
    return METRICS[metric]


def _validated(est: BaseEstimator, X: Any, y: Any = None, reset: bool = True) -> Any:
    """X (and y) checked as sklearn does: dense, finite float64; ``n_features_in_`` set on fit."""
    no_y = y is None
    if _sk_validate_data is not None:
        kw = {"reset": reset, "dtype": np.float64, "ensure_all_finite": True, "accept_sparse": False}
        return _sk_validate_data(est, X, **kw) if no_y else _sk_validate_data(est, X, y, **kw)
    kw = {"reset": reset, "dtype": np.float64, "force_all_finite": True, "accept_sparse": False}
    return est._validate_data(X, **kw) if no_y else est._validate_data(X, y, **kw)


_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on each uint64 (wrapping arithmetic): a bijection that spreads every input bit."""
    z = z ^ (z >> np.uint64(30))
    z = z * _MIX1
    z = z ^ (z >> np.uint64(27))
    z = z * _MIX2
    return z ^ (z >> np.uint64(31))


def content_keys(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """A uint64 per training row, a function of that row's feature bits and label only (the tie rule's c_i).

    Identical rows (equal floats, -0.0 counted as 0.0, and equal labels) get equal keys; other
    rows get keys that look random. The key of a row never depends on the other rows.
    """
    X = np.ascontiguousarray(np.asarray(X, dtype=np.float64) + 0.0)  # + 0.0 turns -0.0 into 0.0
    bits = X.view(np.uint64).reshape(X.shape)
    h = np.full(X.shape[0], 0x9E3779B97F4A7C15, dtype=np.uint64)
    for j in range(X.shape[1]):
        h = _mix(h ^ bits[:, j])
    labels = np.asarray(y, dtype=object)
    label_key = {}
    for v in set(labels.tolist()):
        digest = hashlib.blake2b(f"{type(v).__name__}:{v}".encode(), digest_size=8).digest()
        label_key[v] = np.uint64(int.from_bytes(digest, "little"))
    lab = np.array([label_key[v] for v in labels.tolist()], dtype=np.uint64)
    return _mix(h ^ lab)


def tie_order(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Training-row positions sorted by (content key, row): the tie rule's order among equidistant rows."""
    return np.lexsort((np.arange(len(X)), content_keys(X, y))).astype(np.int64)


class OrderFreeStandardScaler(StandardScaler):
    """StandardScaler whose mean and scale depend on the training rows as a multiset, not on their order.

    It fits scikit-learn's StandardScaler on the rows sorted lexicographically, so float sums run
    in the same order for any order of the same rows (T \\ {t} and T \\ {t'} for identical
    records t, t'). Used before mptool's k-NN, whose ties are exact comparisons of distances.
    """

    def fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> OrderFreeStandardScaler:
        if sample_weight is not None:
            return super().fit(X, y, sample_weight)
        values = np.asarray(X, dtype=np.float64)
        order = np.lexsort(values.T[::-1]) if values.ndim == 2 and values.size else np.arange(len(values))
        rows = X.iloc[order] if hasattr(X, "iloc") else np.asarray(X)[order]
        return super().fit(rows, y)


def _integer_bound(A: np.ndarray) -> float | None:
    """max |a| if every entry of A is an integer, else None."""
    if A.size == 0:
        return 0.0
    if not np.array_equal(A, np.trunc(A)):
        return None
    return float(np.abs(A).max())


class _Distances:
    """Pair keys (monotone in the distance) between query blocks and fixed training rows."""

    def __init__(self, X: np.ndarray, kind: str) -> None:
        self.X, self.kind = X, kind
        self.Xt = np.ascontiguousarray(X.T)  # one contiguous row per feature, for the feature-by-feature sums
        self.x_int = _integer_bound(X)
        self.x_binary = self.x_int is not None and bool(np.isin(X, (0.0, 1.0)).all())
        self.x_sq = np.einsum("ij,ij->i", X, X) if self.x_int is not None else None

    def _product_path(self, Q: np.ndarray) -> bool:
        """True when the matrix-product form of the squared Euclidean distance is exact for Q against X."""
        if self.x_int is None or self.kind == "linf":
            return False
        if self.kind == "l1" and not (self.x_binary and np.isin(Q, (0.0, 1.0)).all()):
            return False  # |d| = d**2 only for 0/1 data
        q_int = _integer_bound(Q)
        if q_int is None:
            return False
        m = max(q_int, self.x_int)
        return self.X.shape[1] * 4.0 * m * m <= EXACT_INT

    def keys(self, Q: np.ndarray) -> np.ndarray:
        """(len(Q), n) keys: squared distance for l2, the distance for l1/linf."""
        X = self.X
        if self._product_path(Q):
            q_sq = np.einsum("ij,ij->i", Q, Q)
            key = q_sq[:, None] + self.x_sq[None, :] - 2.0 * (Q @ X.T)
            return key  # exact integers: every term and partial sum is below 2**52
        key = np.empty((Q.shape[0], X.shape[0]))
        Qt = np.ascontiguousarray(Q.T)
        width = max(1, TILE_PAIRS // max(1, Q.shape[0]))  # a tile of key stays in cache over all features
        for a in range(0, X.shape[0], width):
            self._accumulate(Qt, self.Xt[:, a : a + width], key[:, a : a + width])
        return key

    def _accumulate(self, Qt: np.ndarray, Xt: np.ndarray, out: np.ndarray) -> None:
        """out[r, i] = sum_j (or max_j) of the per-feature term for Q row r and X row i, j in column order."""
        diff = np.empty(out.shape)
        acc = np.zeros(out.shape)
        for j in range(Xt.shape[0]):
            np.subtract(Qt[j][:, None], Xt[j][None, :], out=diff)
            if self.kind == "l2":
                np.multiply(diff, diff, out=diff)
                acc += diff
            elif self.kind == "l1":
                acc += np.abs(diff, out=diff)
            else:
                np.maximum(acc, np.abs(diff, out=diff), out=acc)
        out[...] = acc

    def distance(self, key: np.ndarray) -> np.ndarray:
        """Distances from keys (a square root for l2, correctly rounded)."""
        return np.sqrt(key) if self.kind == "l2" else key


def first_in_order(key: np.ndarray, m: int) -> np.ndarray:
    """Column indices of the first ``m`` entries of each row of ``key`` in the order (key, column).

    The m-th smallest key v of a row is found by partition; the row keeps every entry below v
    and the lowest-indexed entries equal to v until it has m; those m are then sorted stably by
    key, so equal keys stay in column order. Each row's result depends on that row alone.
    """
    B, n = key.shape
    if B == 0:
        return np.empty((0, m), dtype=np.int64)
    v = np.partition(key, m - 1, axis=1)[:, m - 1 : m]
    below = key < v
    equal = key == v
    need = m - below.sum(axis=1, keepdims=True)
    keep = below | (equal & (np.cumsum(equal, axis=1) <= need))
    idx = np.nonzero(keep)[1].reshape(B, m)  # row-major: increasing column within a row
    order = np.argsort(np.take_along_axis(key, idx, axis=1), axis=1, kind="stable")
    return np.take_along_axis(idx, order, axis=1)


def _drop(dist: np.ndarray, ind: np.ndarray, exclude: Any, m: int) -> tuple[np.ndarray, np.ndarray]:
    """From each row's first m + 1 neighbours, the first m other than ``exclude[r]`` (the last when it is absent)."""
    keep = ind != np.asarray(exclude, dtype=np.int64)[:, None]
    keep[keep.all(axis=1), -1] = False
    return dist[keep].reshape(-1, m), ind[keep].reshape(-1, m)


def vote(labels: np.ndarray, dist: np.ndarray, n_classes: int, weights: str) -> np.ndarray:
    """Class probabilities from the class indices and distances of each row's neighbours, in order.

    ``uniform``: each neighbour counts 1. ``distance``: 1/d, and a row with a zero distance gives
    weight 1 to its zero-distance neighbours and 0 to the rest (sklearn's convention). Sums run
    over the neighbours in tie-rule order, then over classes in order, so a row's result does not
    depend on the rows computed with it.
    """
    r, k = labels.shape
    if weights == "distance":
        with np.errstate(divide="ignore"):
            w = 1.0 / dist
        inf = np.isinf(w)
        rows = inf.any(axis=1)
        w[rows] = inf[rows]
    else:
        w = np.ones((r, k))
    out = np.zeros((r, n_classes))
    every = np.arange(r)
    for j in range(k):
        out[every, labels[:, j]] += w[:, j]
    total = out[:, 0].copy()
    for c in range(1, n_classes):
        total += out[:, c]
    total[total == 0] = 1.0
    return out / total[:, None]


class TieStableKNeighborsClassifier(ClassifierMixin, BaseEstimator):
    """KNeighborsClassifier with the deterministic tie rule of this module (distance, content key, row).

    Same parameters as :class:`sklearn.neighbors.KNeighborsClassifier`; mptool uses it for
    ``estimator: knn`` and for ``sklearn.neighbors.KNeighborsClassifier`` in a spec.
    """

    def __init__(
        self,
        n_neighbors: int = 5,
        *,
        weights: Any = "uniform",
        algorithm: str = "auto",
        leaf_size: int = 30,
        p: float = 2,
        metric: Any = "minkowski",
        metric_params: Any = None,
        n_jobs: Any = None,
    ) -> None:
        self.n_neighbors = n_neighbors
        self.weights = weights
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.p = p
        self.metric = metric
        self.metric_params = metric_params
        self.n_jobs = n_jobs

    def unsupported(self) -> str | None:
        """Why these parameters cannot follow the tie rule deterministically (with the fix), or None."""
        k = self.n_neighbors
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            return f"n_neighbors must be a whole number >= 1 (got {k!r})"
        if self.metric == "precomputed":
            return f"metric 'precomputed' cannot be audited from the CSV's features; {SUPPORTED_HINT}"
        if not isinstance(self.weights, str) or self.weights not in ("uniform", "distance"):
            got = self.weights if isinstance(self.weights, str) else "a callable"
            return f"weights must be 'uniform' or 'distance' (got {got!r}); other weights are not supported"
        try:
            metric_kind(self.metric, self.p, self.metric_params)
        except ValueError as exc:
            return str(exc)
        return None

    def fit(self, X: Any, y: Any) -> TieStableKNeighborsClassifier:
        """Store the training rows, the class indices and the tie order (content key, row) of the rows."""
        why = self.unsupported()
        if why is not None:
            raise ValueError(why)
        X, y = _validated(self, X, y)
        check_classification_targets(y)
        self.classes_, self._y = np.unique(y, return_inverse=True)
        self._fit_X = np.ascontiguousarray(X)
        self.n_samples_fit_ = X.shape[0]
        self._kind = metric_kind(self.metric, self.p, self.metric_params)
        self._tie = tie_order(self._fit_X, y)  # distances are searched over the rows in this order
        self._dist = _Distances(self._fit_X[self._tie], self._kind)
        self._train_order: tuple[np.ndarray, np.ndarray] | None = None
        return self

    def training_order(self) -> tuple[np.ndarray, np.ndarray]:
        """Distances and indices of the first min(k + 1, n) training rows of every training row (tie-rule order).

        One search, kept on the fitted model: its first k columns are each training row's
        neighbours in T (``predict_proba`` on the training rows), and with the row itself dropped
        its leave-one-out neighbours (:meth:`excluding_from`). A row's order depends on that row
        alone (module docstring), so the prefix of a longer list is exactly the shorter search.
        """
        check_is_fitted(self)
        if getattr(self, "_train_order", None) is None:
            m = min(self.n_neighbors + 1, self.n_samples_fit_)
            self._train_order = self._ordered(self._fit_X, m)
        return self._train_order

    def __getstate__(self) -> dict:
        """The state without the stored search: a copy (a worker, a saved model) searches again when asked."""
        state = dict(super().__getstate__())
        state.pop("_train_order", None)
        return state

    def __setstate__(self, state: dict) -> None:
        """Restore, never trusting a stored search that came with the state (a model file is not this process)."""
        state = dict(state)
        state.pop("_train_order", None)
        super().__setstate__(state)

    def _is_training(self, Q: np.ndarray) -> bool:
        """True when the queries are the training rows themselves, in order (then the stored search serves)."""
        return Q.shape == self._fit_X.shape and np.array_equal(Q, self._fit_X)

    def _check_k(self, m: int) -> None:
        if m > self.n_samples_fit_:
            n = self.n_samples_fit_
            raise ValueError(f"Expected n_neighbors <= n_samples_fit, but n_neighbors = {m}, n_samples_fit = {n}")

    def _ordered(self, Q: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Distances and indices (training-row positions) of the first m rows of each query, in tie-rule order.

        The rows are searched in the tie order (content key, row), so :func:`first_in_order`'s
        (key, column) order is the rule's (distance, content key, row).
        """
        dist = np.empty((Q.shape[0], m))
        ind = np.empty((Q.shape[0], m), dtype=np.int64)
        step = max(1, BLOCK_PAIRS // max(1, self.n_samples_fit_))
        for a in range(0, Q.shape[0], step):
            key = self._dist.keys(Q[a : a + step])
            idx = first_in_order(key, m)
            ind[a : a + step] = self._tie[idx]
            dist[a : a + step] = self._dist.distance(np.take_along_axis(key, idx, axis=1))
        return dist, ind

    def kneighbors(self, X: Any = None, n_neighbors: int | None = None, return_distance: bool = True) -> Any:
        """The first ``n_neighbors`` training rows of each query by (distance, content key, row).

        ``X=None`` queries every training row without itself (sklearn's convention), which under
        the tie rule is its neighbour list in the training set minus that row.
        """
        check_is_fitted(self)
        m = self.n_neighbors if n_neighbors is None else int(n_neighbors)
        if X is None:
            dist, ind = self.kneighbors_excluding(self._fit_X, np.arange(self.n_samples_fit_), m)
        else:
            Q = _validated(self, X, reset=False)
            self._check_k(m)
            if m <= self.n_neighbors + 1 and self._is_training(Q):
                dist, ind = (a[:, :m] for a in self.training_order())
            else:
                dist, ind = self._ordered(Q, m)
        return (dist, ind) if return_distance else ind

    def kneighbors_excluding(self, Q: np.ndarray, exclude: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Neighbours of query row r among the training rows other than ``exclude[r]`` (tie-rule order).

        The first m+1 in the full order with exclude[r] dropped, or the first m when it is not
        among them: the first m of the order restricted to the other rows.
        """
        self._check_k(m + 1)
        Q = np.ascontiguousarray(Q, dtype=np.float64)
        dist, ind = self._ordered(Q, m + 1)
        return _drop(dist, ind, exclude, m)

    def excluding_from(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For training rows ``positions``: (dist, ind) of their k neighbours in T, then of their k in T without them.

        Both from :meth:`training_order`'s one search: the first k, and the first k + 1 with the
        row itself dropped (:meth:`kneighbors_excluding` on the same rows gives the same lists).
        """
        k = self.n_neighbors
        self._check_k(k + 1)
        pos = np.asarray(positions, dtype=np.int64)
        dist, ind = (a[pos] for a in self.training_order())
        return dist[:, :k], ind[:, :k], *_drop(dist, ind, pos, k)

    def predict_proba_loo(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Class probabilities (``classes_`` order) of training rows ``positions`` from T and from T without them."""
        d_full, i_full, d_loo, i_loo = self.excluding_from(positions)
        n_classes = len(self.classes_)
        full = vote(self._y[i_full], d_full, n_classes, self.weights)
        return full, vote(self._y[i_loo], d_loo, n_classes, self.weights)

    def predict_proba_excluding(self, Q: np.ndarray, exclude: np.ndarray) -> np.ndarray:
        """Class probabilities (``classes_`` order) for query row r from the training rows other than exclude[r].

        With Q the training rows at ``exclude`` this is leave-one-out: the prediction on x_t of the
        same classifier fitted without row t (bit for bit, a class missing from T\\{t} gets 0).
        """
        dist, ind = self.kneighbors_excluding(Q, exclude, self.n_neighbors)
        return vote(self._y[ind], dist, len(self.classes_), self.weights)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Weighted class votes of the k nearest training rows by (distance, content key, row)."""
        dist, ind = self.kneighbors(X)
        return vote(self._y[ind], dist, len(self.classes_), self.weights)

    def predict(self, X: Any) -> np.ndarray:
        """The class of highest probability (the first in ``classes_`` order on a tie)."""
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
