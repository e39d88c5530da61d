"""Shared design-matrix helpers of the exact leave-one-out engines (naive Bayes, logistic, k-NN).

An exact engine follows mptool's pipeline (``inputs.models.build_pipeline``) only when the
part of the preprocessing fitted on T is a scaler it can downdate: this module splits a
pipeline into its T-independent transformers (fixed-domain encoders, one-hot over the CSV's
domain, fixed bins) and the numeric block a scaler standardises on T (:func:`design_parts`,
:func:`build_design`), and keeps per-group running statistics that can drop one record
(:class:`GroupStats`, a Welford downdate). Removing a record never changes the fixed block,
which is why exact leave-one-out exists at all (Long et al. section 4: DTP is defined over a
fixed domain).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, StandardScaler

from mptool.inputs.memo import factorized
from mptool.inputs.models import ColumnTransformer, DomainEncoder, category_positions


def class_index(y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Index of each label in ``classes`` (ValueError when a label is not one of them).

    Each distinct label is looked up once, from the labels' kept factorisation
    (:func:`mptool.inputs.memo.factorized`; the same codes as a lookup of every label, issue 28).
    """
    arr = np.asarray(y)
    if arr.dtype == object and arr.ndim == 1:
        seen, distinct = factorized(arr)
        lookup = category_positions(pd.Series(np.asarray(distinct, dtype=object), dtype=object), classes)
        codes = np.where(seen >= 0, lookup[np.maximum(seen, 0)], -1)
    else:
        codes = category_positions(pd.Series(y, dtype=object), classes)
    if (codes < 0).any():
        raise ValueError("a label is not among the classes")
    return codes


def distinct_rows(codes: np.ndarray, y_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each distinct (codes row, class) pair, the pair index of every row).

    The exact categorical naive Bayes quantities of a record (its two probability vectors, its
    DTP bound) are functions of its codes and class alone, computed row by row, so the engine
    computes them once per distinct pair and gathers them: the same numbers, bit for bit (the
    1.41 M military records hold 1,646 distinct pairs, issue 28). The pair index is built one
    column at a time and renumbered by a hash factorisation at each step, so it stays below the
    row count (no overflow, O(rows) per column).
    """
    inverse = np.asarray(y_idx, dtype=np.int64)
    for i in range(codes.shape[1]):
        col = np.asarray(codes[:, i], dtype=np.int64)
        k = int(col.max()) + 1 if col.size else 1
        inverse = np.asarray(pd.factorize(inverse * k + col)[0], dtype=np.int64)
    return first_rows(inverse), inverse


def first_rows(inverse: np.ndarray) -> np.ndarray:
    """The first row of each group of ``inverse`` (groups numbered 0, 1, ...)."""
    first = np.full(int(inverse.max()) + 1 if inverse.size else 0, -1, dtype=np.int64)
    first[inverse[::-1]] = np.arange(len(inverse) - 1, -1, -1)
    return first


# --------------------------------------------------------------------------- fixed design


@dataclass(frozen=True)
class Design:
    """The transformed features of T split into a T-independent block and scaled raw numerics."""

    fixed: np.ndarray  # (n, d_fixed): one-hot / bins / raw numeric columns, independent of T
    raw: np.ndarray  # (n, d_num): numerics a StandardScaler standardises on T
    est: Any


def design_parts(template: Any) -> tuple[list[tuple[Any, list[str]]], list[str], Any] | str:
    """(stateless transformers with their columns, standardised columns, estimator) or why not."""
    if not isinstance(template, Pipeline):
        return "not a pipeline"
    steps = [s for _, s in template.steps]
    est = steps[-1]
    if len(steps) == 1:
        return [], [], est  # preprocess: none, nothing missing: raw numeric columns
    if len(steps) != 2 or not isinstance(steps[0], ColumnTransformer):
        return "a median imputer fitted on T (missing values) moves when t leaves"
    stateless: list[tuple[Any, list[str]]] = []
    scaled: list[str] = []
    for name, tr, cols in steps[0].transformers:
        inner = [s for _, s in tr.steps] if isinstance(tr, Pipeline) else [tr]
        if all(isinstance(s, DomainEncoder | OneHotEncoder) for s in inner):
            if any(isinstance(s, OneHotEncoder) and s.categories == "auto" for s in inner):
                return f"'{name}' one-hot categories are learned from T"
            stateless.append((tr, list(cols)))
        elif len(inner) == 1 and isinstance(inner[0], StandardScaler):
            sc = inner[0]
            if not (sc.with_mean and sc.with_std):
                return "StandardScaler without mean or std"
            scaled.extend(cols)
        elif len(inner) == 1 and isinstance(inner[0], MinMaxScaler):
            sc = inner[0]
            if not sc.clip or tuple(sc.feature_range) != (0, 1):
                return "MinMaxScaler without clip=True and feature_range (0, 1)"
            scaled.extend(cols)
        else:
            kinds = ", ".join(type(s).__name__ for s in inner)
            return f"'{name}' ({kinds}) is fitted on T and moves when t leaves"
    return stateless, scaled, est


def scaler_kind(template: Any) -> str | None:
    """'standard' or 'minmax' for the scaler of the numeric block, None without one."""
    if not isinstance(template, Pipeline) or len(template.steps) != 2:
        return None
    for _, tr, _ in template.steps[0][1].transformers:
        inner = [s for _, s in tr.steps] if isinstance(tr, Pipeline) else [tr]
        if len(inner) == 1 and isinstance(inner[0], StandardScaler):
            return "standard"
        if len(inner) == 1 and isinstance(inner[0], MinMaxScaler):
            return "minmax"
    return None


def build_design(template: Any, X: pd.DataFrame) -> Design:
    """Transform T with the T-independent parts; keep standardised columns raw."""
    parts = design_parts(template)
    assert not isinstance(parts, str)
    stateless, scaled, est = parts
    if len(template.steps) == 1:
        fixed = X.to_numpy(dtype=float)
    else:
        blocks = [np.asarray(clone(tr).fit(X[cols]).transform(X[cols]), dtype=float) for tr, cols in stateless]
        fixed = np.hstack(blocks) if blocks else np.empty((len(X), 0))
    raw = X[scaled].to_numpy(dtype=float) if scaled else np.empty((len(X), 0))
    return Design(fixed, raw, est)


@dataclass(frozen=True)
class GroupStats:
    """Per-group count, mean, sum of squared deviations (M2), extremes and how often they occur."""

    count: np.ndarray  # (G,)
    mean: np.ndarray  # (G, d)
    m2: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    n_lo: np.ndarray
    n_hi: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray, groups: np.ndarray, n_groups: int) -> GroupStats:
        d = values.shape[1]
        count = np.bincount(groups, minlength=n_groups).astype(float)
        arrays = [np.zeros((n_groups, d)) for _ in range(6)]
        mean, m2, lo, hi, n_lo, n_hi = arrays
        for g in range(n_groups):
            v = values[groups == g]
            if len(v) == 0:
                continue
            mean[g] = v.mean(axis=0)
            m2[g] = ((v - mean[g]) ** 2).sum(axis=0)
            lo[g], hi[g] = v.min(axis=0), v.max(axis=0)
            n_lo[g], n_hi[g] = (v == lo[g]).sum(axis=0), (v == hi[g]).sum(axis=0)
        return cls(count, mean, m2, lo, hi, n_lo, n_hi)

    def without(self, x: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and M2 of group ``g[k]`` with the value row ``x[k]`` removed, for each k.

        Welford downdate; a group left with a single distinct value gets M2 = 0 exactly and
        that value as mean (the downdate alone could leave rounding residue where a fresh
        fit gets exactly 0).
        """
        n = self.count[g][:, None]
        mean, lo, hi, n_lo, n_hi = self.mean[g], self.lo[g], self.hi[g], self.n_lo[g], self.n_hi[g]
        with np.errstate(divide="ignore", invalid="ignore"):
            new_mean = (n * mean - x) / (n - 1)
            new_m2 = np.maximum(self.m2[g] - (x - mean) * (x - new_mean), 0.0)
        two_values = n_lo + n_hi == n
        left_hi = (x == lo) & (n_lo == 1) & two_values
        left_lo = (x == hi) & (n_hi == 1) & two_values
        same = lo == hi
        new_mean = np.where(left_hi, hi, np.where(left_lo | same, lo, new_mean))
        new_m2 = np.where(left_hi | left_lo | same, 0.0, new_m2)
        return new_mean, new_m2


def scale_of(var: np.ndarray) -> np.ndarray:
    """StandardScaler's scale: sqrt(var), with 1 where the variance is (near) zero."""
    scale = np.sqrt(var)
    return np.where(scale < 10 * np.finfo(float).eps, 1.0, scale)


def onehot_widths(transformer: Any) -> list[int] | None:
    """Widths of the indicator blocks a fixed one-hot transformer outputs, one per input column.

    None when the transformer does not end in a ``OneHotEncoder`` with listed categories and no
    dropped column: then the reachable design vectors are not simply the K indicator patterns.
    """
    inner = [s for _, s in transformer.steps] if isinstance(transformer, Pipeline) else [transformer]
    last = inner[-1]
    if not isinstance(last, OneHotEncoder) or isinstance(last.categories, str) or last.drop is not None:
        return None
    return [len(c) for c in last.categories]


def fixed_blocks(template: Any, train: Any) -> list[tuple[slice, np.ndarray]] | str:
    """The T-independent design columns as blocks (column slice, reachable values one row each), or why not.

    A one-hot block of width K reaches its K indicator patterns; a raw numeric column
    (``preprocess: none``) reaches [min, max] of the CSV, represented by its two ends (every
    naive Bayes and linear score is linear in such a column, so the ends attain every extremum).
    """
    parts = design_parts(template)
    if isinstance(parts, str):
        return parts
    if len(template.steps) == 1:
        out = []
        for j, name in enumerate(train.X.columns):
            col = train.schema.column(name)
            out.append((slice(j, j + 1), np.array([[col.minimum], [col.maximum]], dtype=float)))
        return out
    blocks, start = [], 0
    for tr, _cols in parts[0]:
        widths = onehot_widths(tr)
        if widths is None:
            return f"{type(tr).__name__} output is not a fixed one-hot encoding"
        for w in widths:
            blocks.append((slice(start, start + w), np.eye(w)))
            start += w
    return blocks
