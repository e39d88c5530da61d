"""Attribute inference (Yeom et al., section 4): can the model reveal a sensitive column?

A record is z = (v, t, y): t is the sensitive column, v the other features, y the label. The
adversary knows v and y (phi(z) = (v, y)), the model A_S and the distribution of t, and guesses t.

- The **inversion adversary** (Yeom et al. 4.1, Adversary 4, for classifiers; the maximum a
  posteriori estimator of Fredrikson et al.): for every candidate value t_i it queries the model
  on (v, t_i), takes the loss l_i = -log p(y | v, t_i) of the published (binned) output, and
  guesses argmax_i Pr[t = t_i] * exp(-l_i). Its confidence is that product normalised over the
  candidates (the posterior); if the model gives every candidate probability 0 the posterior is
  the prior. Ties go to the more frequent value (candidates are kept in descending prior order).
- The **baseline adversary** uses only the prior: it always guesses the most frequent value.
- The **attribute advantage** (Definition 5) is Pr[right | z in S] - Pr[right | z ~ D]: how much
  better the adversary infers t for members than for non-members. Yeom et al.'s alternative
  (Definition 6, against a simulator without the model) is reported too: accuracy of the
  inversion adversary minus that of the baseline.

Under Long et al.'s protocol every target is attacked once as a member and once as a non-member
per iteration, so the Definition 5 advantage is exactly TPR - FPR of the membership adversary
that says "member" when the inference is right (Yeom et al., Theorem 6's reduction): the result
``attribute`` is scored with the membership metrics and bootstrap intervals of every other
attack (its score: the posterior of the record's true value).

Numeric columns: binned by the spec's model.bins edges when it bins that column (the model only
sees the bin, so the substitution is exact); else each distinct value is a candidate when there
are at most :data:`MAX_VALUES`; else :data:`QUANTILE_BINS` bins at the population's quantiles
(edges deduplicated). The model is queried with the median of the population values in each
bin; the truth is the record's bin.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mptool.attacks.intervals import CONFIDENCE, METHOD, RESAMPLES
from mptool.inputs.data import Records
from mptool.inputs.models import fit, proba_in
from mptool.privacy.calibration import bin_probabilities
from mptool.runtime import ui
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import chunk_positions, run_tasks

#: The --attacks entry: attribute:COLUMN.
PREFIX = "attribute:"
#: Result name in attack.json / attack.csv / attempts.csv.
NAME = "attribute"
#: A numeric column with at most this many distinct values: one candidate per value.
MAX_VALUES = 10
#: Otherwise: this many bins at the population's quantiles.
QUANTILE_BINS = 5
#: Most candidate values of a categorical column (the model is queried once per candidate).
MAX_CANDIDATES = 100
#: Seed tag of the attribute bootstrap (mptool.attacks.shadows.rng_for).
TAG_ATTRIBUTE_BOOTSTRAP = 251

#: attack.csv columns this attack adds (no true or inferred values: never publish what you protect).
COLUMNS = {
    "attribute_right_member": "fraction of the attempts while a member in which the inversion adversary "
    "inferred the sensitive value right",
    "attribute_right_nonmember": "the same while not a member",
    "attribute_confidence": "mean confidence (posterior) of the inversion adversary in the value it inferred",
}


def split_choices(parts: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """The --attacks entries other than attribute:COLUMN, and ('attribute:COLUMN',) or ()."""
    attr = [p for p in parts if p.lower().startswith(PREFIX) or p.lower() == NAME]
    rest = [p for p in parts if p not in attr]
    if not attr:
        return rest, ()
    if len(attr) > 1:
        raise InputError("--attacks: one attribute:COLUMN per run")
    column = attr[0][len(PREFIX):].strip() if ":" in attr[0] else ""
    if not column:
        raise InputError("--attacks: attribute needs a column: attribute:COLUMN")
    return rest, (PREFIX + column,)


def column_of(attacks: tuple[str, ...]) -> str | None:
    """The sensitive column named in the options' attacks, or None."""
    return next((a[len(PREFIX):] for a in attacks if a.startswith(PREFIX)), None)


@dataclass(frozen=True)
class Sensitive:
    """The sensitive column: the model input of each candidate, the prior, each population record's value."""

    column: str
    kind: str  # "categorical", "numeric values", "numeric bins (spec)", "numeric bins (quantiles)"
    inputs: tuple[Any, ...]  # what the model is queried with for each candidate, descending prior
    prior: np.ndarray  # (k,) Pr[t = t_i] over the population, descending
    edges: tuple[float, ...] | None  # bin edges (numeric bins): bin j = [edge j-1, edge j)
    bin_map: tuple[int, ...] = ()  # bin number -> candidate index (candidates sorted by descending prior)

    @property
    def k(self) -> int:
        return len(self.inputs)

    def codes(self, X: pd.DataFrame) -> np.ndarray:
        """Candidate index of each record's value of the column."""
        col = X[self.column]
        if self.edges is not None:
            raw = np.searchsorted(np.asarray(self.edges), col.to_numpy(dtype=float), side="right")
            return np.asarray(self.bin_map, dtype=np.int64)[raw]
        pos = {v: i for i, v in enumerate(self.inputs)}
        return np.array([pos[v] for v in col.tolist()], dtype=np.int64)


def resolve(population: Records, bins: dict[str, list[float]], column: str) -> Sensitive:
    """Check ``column`` and make its candidates (module docstring); InputError names the problem."""
    schema = population.schema
    shown = ui.excerpt(column, 40)
    if column == schema.label:
        raise InputError(f"--attacks attribute:{shown}: that is the label column; name a feature column")
    if column not in schema.names:
        raise InputError(f"--attacks attribute:{shown}: not a feature column of the model (unknown, dropped or the id)")
    spec_col = schema.column(column)
    x = population.X[column]
    if spec_col.kind == "categorical":
        raw = x.tolist()
        uniq = list(dict.fromkeys(raw))
        counts_by = pd.Series(raw).value_counts(sort=False)
        uniq = sorted(uniq, key=lambda v: (-int(counts_by[v]), str(v)))
        if len(uniq) > MAX_CANDIDATES:
            raise InputError(f"--attacks attribute:{shown}: {len(uniq)} values, more than {MAX_CANDIDATES}")
        prior = np.array([counts_by[v] for v in uniq], dtype=float) / len(raw)
        out = Sensitive(column, "categorical", tuple(uniq), prior, None)
    else:
        vals = x.to_numpy(dtype=float)
        if np.isnan(vals).any():
            raise InputError(f"--attacks attribute:{shown}: a numeric column with empty cells is not supported")
        out = _numeric(column, vals, bins.get(column))
    if out.k < 2:
        raise InputError(f"--attacks attribute:{shown}: the column has a single value in the data; nothing to infer")
    return out


def _numeric(column: str, vals: np.ndarray, spec_edges: list[float] | None) -> Sensitive:
    """Candidates of a numeric column: the spec's bins, its distinct values, or quantile bins."""
    distinct = np.unique(vals)
    if spec_edges is not None:
        edges, kind = np.asarray(spec_edges, dtype=float), "numeric bins (spec)"
    elif distinct.size <= MAX_VALUES:
        edges, kind = (distinct[1:] + distinct[:-1]) / 2, "numeric values"
    else:
        qs = np.quantile(vals, np.linspace(0, 1, QUANTILE_BINS + 1)[1:-1])
        edges, kind = np.unique(qs), "numeric bins (quantiles)"
    raw = np.searchsorted(edges, vals, side="right")
    used = np.unique(raw)
    counts = np.array([np.sum(raw == b) for b in used], dtype=float)
    medians = [float(np.median(vals[raw == b])) for b in used]
    if kind == "numeric values":
        medians = [float(distinct[b]) for b in used]
    order = sorted(range(len(used)), key=lambda j: (-counts[j], used[j]))
    bin_to_cand = np.full(len(edges) + 1, -1, dtype=np.int64)
    for cand, j in enumerate(order):
        bin_to_cand[used[j]] = cand
    return Sensitive(
        column, kind, tuple(medians[j] for j in order), counts[order] / len(vals),
        tuple(float(e) for e in edges), tuple(int(b) for b in bin_to_cand),
    )


def invert(p_y: np.ndarray, prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The inversion adversary (Yeom et al. 4.1; module docstring) on ``p_y`` (..., k): the model's
    probability of each record's label under each candidate. Returns the guess (...) and the
    posterior (..., k) = prior * p_y normalised (the prior where every p_y is 0)."""
    p = np.asarray(p_y, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        top = p.max(axis=-1, keepdims=True)
        p = np.where(top > 0, p / np.where(top > 0, top, 1.0), 0.0)  # equal outputs -> exactly the prior
        w = p * np.asarray(prior, dtype=float)
        total = w.sum(axis=-1, keepdims=True)
        post = np.where(total > 0, w / np.where(total > 0, total, 1.0), np.broadcast_to(prior, w.shape))
    return np.argmax(post, axis=-1), post  # argmax: first maximum = the more frequent value


@dataclass(frozen=True)
class Inference:
    """Per attempt (iterations, 2, targets): the inversion adversary's outcome on each target."""

    right: np.ndarray  # the guess equals the record's value
    confidence: np.ndarray  # posterior of the guess
    p_true: np.ndarray  # posterior of the record's value (the membership reduction's score)
    baseline_right: np.ndarray  # (targets,) the prior's mode equals the record's value
    guess: np.ndarray  # candidate index guessed (kept in memory only; never written)


def infer(p_y: np.ndarray, prior: np.ndarray, truth: np.ndarray) -> Inference:
    """Run both adversaries on every attempt: ``p_y`` (iterations, 2, targets, k), ``truth`` (targets,)."""
    guess, post = invert(p_y, prior)
    truth_b = np.broadcast_to(truth, guess.shape)
    return Inference(
        right=guess == truth_b,
        confidence=np.take_along_axis(post, guess[..., None], axis=-1)[..., 0],
        p_true=np.take_along_axis(post, truth_b[..., None], axis=-1)[..., 0],
        baseline_right=truth == 0,
        guess=guess,
    )


def rates(member: np.ndarray, inf: Inference, weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Accuracy of each adversary on members and non-members and both advantages (Definitions 5 and 6),
    for each row of target ``weights`` (resamples x targets; None: every target once)."""
    m = np.asarray(member, dtype=bool)
    axes = tuple(range(m.ndim - 1))
    per = np.stack([(inf.right & m).sum(axis=axes), m.sum(axis=axes), (inf.right & ~m).sum(axis=axes),
                    (~m).sum(axis=axes), inf.baseline_right * m.shape[0] * m.shape[1]]).astype(float).T
    w = np.ones((1, m.shape[-1])) if weights is None else np.asarray(weights, dtype=float)
    rm, nm, rn, nn, rb = (w @ per).T
    with np.errstate(invalid="ignore", divide="ignore"):
        acc_m, acc_n, acc = rm / nm, rn / nn, (rm + rn) / (nm + nn)
        base = rb / (nm + nn)
    return {"inference_accuracy_members": acc_m, "inference_accuracy_nonmembers": acc_n,
            "attribute_advantage": acc_m - acc_n, "inference_accuracy": acc, "baseline_accuracy": base,
            "advantage_over_baseline": acc - base}


def summarise(member: np.ndarray, inf: Inference, rng: np.random.Generator) -> dict[str, Any]:
    """Point estimates of :func:`rates` with percentile-bootstrap intervals over targets (as
    mptool.attacks.intervals: targets resampled with replacement, all their attempts kept)."""
    point = {k: float(v[0]) for k, v in rates(member, inf).items()}
    t = member.shape[-1]
    w = rng.multinomial(t, np.full(t, 1.0 / t), size=RESAMPLES)
    boot = rates(member, inf, w)
    tail = (1 - CONFIDENCE) / 2
    intervals: dict[str, Any] = {"method": METHOD, "confidence": CONFIDENCE, "resamples": RESAMPLES, "targets": t}
    for key, values in boot.items():
        v = values[np.isfinite(values)]
        lo, hi = (np.quantile(v, [tail, 1 - tail]) if v.size else (None, None))
        intervals[key] = {"low": None if lo is None else float(lo), "high": None if hi is None else float(hi)}
    return {**point, "intervals": intervals}


def variant_frame(X: pd.DataFrame, column: str, inputs: tuple[Any, ...]) -> pd.DataFrame:
    """Each row of ``X`` once per candidate (candidate-major) with ``column`` set to that candidate."""
    n = len(X)
    out = pd.concat([X] * len(inputs), ignore_index=True)
    out[column] = pd.Series(np.repeat(np.asarray(inputs, dtype=object), n), dtype=X[column].dtype)
    return out


def attribute_chunk(
    template: Any, X: pd.DataFrame, y: np.ndarray, classes: np.ndarray, in_first: np.ndarray,
    targets: np.ndarray, label_idx: np.ndarray, column: str, inputs: tuple[Any, ...], bin_size: float,
) -> list[np.ndarray]:
    """For each split row of ``in_first``: A(D1) and A(D2) (the protocol's target models, refitted: a fit
    is deterministic) queried on every target under every candidate. Returns (2, targets, k) arrays of
    the published (binned) probability of the target's label."""
    Xv = variant_frame(X.iloc[targets].reset_index(drop=True), column, inputs)
    n, k = len(targets), len(inputs)
    out = []
    for mask in in_first:
        p = np.empty((2, n, k))
        for h, half in enumerate((mask, ~mask)):
            model = fit(template, X.iloc[np.flatnonzero(half)], y[half])
            q = bin_probabilities(proba_in(model, Xv, classes), bin_size).reshape(k, n, -1)
            p[h] = q[:, np.arange(n), label_idx].T
        out.append(p)
    return out


def query_targets(
    template: Any, D: Records, classes: np.ndarray, y_idx: np.ndarray, in_first: np.ndarray, tpos: np.ndarray,
    sens: Sensitive, bin_size: float, jobs: int, backend: str, advance: Callable[[int], None],
) -> np.ndarray:
    """(iterations, 2, targets, k): every target model's probability of each target's label under each
    candidate value of the sensitive column, in parallel over iterations (seed-free: fits are deterministic)."""
    chunks = chunk_positions(np.arange(in_first.shape[0]), jobs, per_job=1)
    parts = run_tasks(
        attribute_chunk,
        ((template, D.X, D.y, classes, in_first[c], tpos, y_idx[tpos], sens.column, sens.inputs, bin_size)
         for c in chunks),
        jobs=jobs, backend=backend, on_result=lambda r: advance(len(r)),
    )
    return np.stack([p for part in parts for p in part])


def describe(sens: Sensitive) -> dict[str, Any]:
    """attack.json's description of the candidates: counts and how they were made, never the values."""
    how = {
        "categorical": "each category of the column is a candidate",
        "numeric values": "each distinct value of the column is a candidate",
        "numeric bins (spec)": "the spec's model.bins edges for the column; the model is queried with each bin's "
        "median population value",
        "numeric bins (quantiles)": f"{QUANTILE_BINS} bins at the population's quantiles (duplicate edges merged); "
        "the model is queried with each bin's median population value",
    }[sens.kind]
    return {"column": sens.column, "kind": sens.kind, "candidates": sens.k, "candidates_from": how,
            "prior": "frequencies of the candidates over every usable row of the data (Pr over D)"}


def value_label(sens: Sensitive, index: int) -> Any:
    """Candidate ``index`` as written to attribute.csv: the category or value, or the bin as '[low, high)'."""
    if sens.kind in ("categorical", "numeric values"):
        return sens.inputs[index]
    assert sens.edges is not None
    b = sens.bin_map.index(index)
    edges = (-np.inf, *sens.edges, np.inf)
    return f"[{edges[b]:g}, {edges[b + 1]:g})"


#: attribute.csv columns (only with --attribute-values: it holds the sensitive values themselves).
VALUE_COLUMNS = ("row", "iteration", "model", "member", "true_value", "inferred_value", "confidence")


def values_frame(rows: np.ndarray, member: np.ndarray, inf: Inference, truth: np.ndarray,
                 sens: Sensitive) -> pd.DataFrame:
    """attribute.csv: per attempt (iteration, model A(D1)/A(D2), target) the true and inferred value."""
    n_iter, n_models, n_targets = member.shape
    labels = [value_label(sens, i) for i in range(sens.k)]
    return pd.DataFrame({
        "row": np.tile(rows, n_iter * n_models),
        "iteration": np.repeat(np.arange(n_iter), n_models * n_targets),
        "model": np.tile(np.repeat(["D1", "D2"], n_targets), n_iter),
        "member": member.reshape(-1).astype(np.int8),
        "true_value": [labels[i] for i in np.broadcast_to(truth, member.shape).reshape(-1)],
        "inferred_value": [labels[i] for i in inf.guess.reshape(-1)],
        "confidence": inf.confidence.reshape(-1),
    }, columns=list(VALUE_COLUMNS))
