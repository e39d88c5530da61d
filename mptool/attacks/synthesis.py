"""Model-based synthesis of shadow data (Shokri et al., section V-C, Algorithm 1).

An auditor who holds no population data and no statistics of it, only the model's
prediction API and the *syntactic format* of the records (each feature's domain), can make
shadow training data by querying the model: for a class c, start from a record drawn
uniformly over the domain and hill-climb on the model's confidence y_c.

Algorithm 1 (one record of class c), as in the paper:

- x <- a random record; y*_c <- 0; j <- 0; k <- k_max.
- Each iteration queries the model once: y <- f(x). If y_c >= y*_c the proposal is
  accepted: if moreover y_c > conf_min and c is the argmax of y (strictly above every other
  class), the record is returned with probability y_c (one uniform draw); else x* <- x,
  y*_c <- y_c, j <- 0. A rejected proposal counts j <- j + 1; after more than rej_max
  consecutive rejections k <- max(k_min, ceil(k / 2)) and j <- 0.
- The next proposal is x* with k randomly chosen features changed: a binary feature is
  flipped, any other takes a value drawn uniformly from the *other* values of its domain.
- After ``max_queries`` queries the record has failed (the paper's iter_max; "return ⊥").

The domain (:func:`schema_domain`) is the schema's: every categorical column's categories,
and for a numeric column its distinct values when it has at most :data:`NUMERIC_LEVELS` of
them, else :data:`NUMERIC_LEVELS` equally spaced points over its [minimum, maximum] (whole
numbers when the column holds whole numbers). The schema comes from every usable row of the
data file: what the auditor uses is the features' names, types and ranges, i.e. knowledge of
the feature domain only, as Shokri et al. V-C assume, never the records or their joint
distribution.

Every record r has its own generator (from the spec seed and r) and is hill-climbed in a
fixed block of :data:`BLOCK` records whose proposals go to the model in one batch, so
the result never depends on --jobs. :func:`synthesize_record` is the plain one-record
procedure; :func:`synthesize_batch` runs many in lock-step and returns the same records
(tests check the two agree).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import astuple, dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from mptool.inputs.data import Schema
from mptool.runtime import signals

#: Proposals of one block of records go to the model in one batch (fixed: results do not depend on --jobs).
BLOCK = 256
#: A numeric column with more distinct values is represented by this many equally spaced points.
NUMERIC_LEVELS = 20
#: The paper's search settings for the 600 binary purchase features (Shokri et al. VI-E):
#: k_max 128 and k_min 4 (scaled in proportion to the number of features), rej_max 10, conf_min 0.2.
PAPER_FEATURES, PAPER_K_MAX, PAPER_K_MIN, PAPER_REJ_MAX, PAPER_CONF_MIN = 600, 128, 4, 10, 0.2

Predict = Callable[[pd.DataFrame], np.ndarray]


@dataclass(frozen=True)
class Domain:
    """Per feature the finite set of values a synthetic record may take (codes index them)."""

    names: tuple[str, ...]
    values: tuple[np.ndarray, ...]
    dtypes: tuple[Any, ...]

    @property
    def sizes(self) -> np.ndarray:
        """Number of values of each feature."""
        return np.array([len(v) for v in self.values], dtype=np.int64)

    @cached_property
    def _blocks(self) -> list[tuple[Any, np.ndarray, np.ndarray | None]]:
        """Columns grouped by numpy number dtype (dtype, positions, padded value table); others one by one."""
        out: list[tuple[Any, np.ndarray, np.ndarray | None]] = []
        numeric: dict[Any, list[int]] = {}
        for j, dtype in enumerate(self.dtypes):
            if isinstance(dtype, np.dtype) and dtype.kind in "biuf":
                numeric.setdefault(dtype, []).append(j)
            else:
                out.append((dtype, np.array([j]), None))
        for dtype, cols in numeric.items():
            width = max(len(self.values[j]) for j in cols)
            table = np.zeros((len(cols), width), dtype=dtype)
            for r, j in enumerate(cols):
                table[r, : len(self.values[j])] = self.values[j]
            out.append((dtype, np.array(cols), table))
        return out

    def decode(self, codes: np.ndarray) -> pd.DataFrame:
        """Records (rows of value codes) as a frame with the data's columns and dtypes."""
        codes = np.atleast_2d(codes)
        parts = []
        for dtype, cols, table in self._blocks:
            names = [self.names[j] for j in cols]
            if table is not None:  # one fancy-indexing gather for every column of this dtype
                parts.append(pd.DataFrame(table[np.arange(len(cols)), codes[:, cols]], columns=names))
                continue
            col = self.values[cols[0]][codes[:, cols[0]]]
            parts.append(pd.DataFrame({names[0]: pd.Series(col).astype(dtype) if dtype is not None else col}))
        frame = parts[0] if len(parts) == 1 else pd.concat(parts, axis=1)
        return frame[list(self.names)]


@dataclass(frozen=True)
class SynthesisParams:
    """Algorithm 1's settings: k_max, k_min, rej_max, conf_min and the query budget per record (iter_max)."""

    k_max: int
    k_min: int
    rej_max: int
    conf_min: float
    max_queries: int


@dataclass(frozen=True)
class Synthesized:
    """Outcome of synthesising records: codes, success, queries spent and the final confidence."""

    codes: np.ndarray  # (n, features) value codes; meaningful where ok
    labels: np.ndarray  # (n,) class index each record was synthesised for
    ok: np.ndarray  # (n,) bool: synthesised within the budget
    queries: np.ndarray  # (n,) queries of the model spent on each record
    confidence: np.ndarray  # (n,) y_c of the returned record (the best y*_c reached where failed)

    @property
    def total_queries(self) -> int:
        return int(self.queries.sum())


def paper_params(n_features: int, max_queries: int) -> SynthesisParams:
    """Shokri et al.'s settings (VI-E: k_max 128, k_min 4 for 600 features, rej_max 10, conf_min 0.2)
    with k_max and k_min scaled to ``n_features`` (at least 1, at most the number of features)."""
    m = max(1, n_features)
    k_max = int(min(m, max(1, round(PAPER_K_MAX * m / PAPER_FEATURES))))
    k_min = int(min(k_max, max(1, round(PAPER_K_MIN * m / PAPER_FEATURES))))
    return SynthesisParams(k_max, k_min, PAPER_REJ_MAX, PAPER_CONF_MIN, int(max_queries))


def schema_domain(schema: Schema, X: pd.DataFrame) -> Domain:
    """The feature domain of section V-C from the schema (see the module docstring); dtypes from ``X``."""
    values, dtypes = [], []
    for col in schema.columns:
        dtype = X[col.name].dtype if col.name in X.columns else None
        if col.kind == "categorical":
            values.append(np.array(list(col.categories or ()), dtype=object))
            dtypes.append(None if dtype is None or pd.api.types.is_object_dtype(dtype) else dtype)
            continue
        distinct = col.values
        if distinct is not None and len(distinct) <= NUMERIC_LEVELS:
            vals = np.array(sorted(distinct), dtype=float)
        else:
            lo, hi = float(col.minimum or 0.0), float(col.maximum or 0.0)
            vals = np.unique(np.linspace(lo, hi, NUMERIC_LEVELS))
            whole = distinct is None or all(float(v).is_integer() for v in distinct)
            if whole and math.isfinite(lo) and float(lo).is_integer() and float(hi).is_integer():
                vals = np.unique(np.round(vals))
        if dtype is not None and pd.api.types.is_integer_dtype(dtype) and not np.all(vals == np.round(vals)):
            dtype = np.dtype(float)
        values.append(vals)
        dtypes.append(dtype)
    return Domain(tuple(c.name for c in schema.columns), tuple(values), tuple(dtypes))


def random_record(sizes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """RANDRECORD(): every feature uniform over its domain."""
    return rng.integers(0, sizes)


def perturb(codes: np.ndarray, k: int, sizes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """RANDRECORD(x*, k): ``k`` distinct features (of those with 2+ values) each take another value
    of their domain, uniformly (a binary feature flips)."""
    variable = np.flatnonzero(sizes > 1)
    out = codes.copy()
    if variable.size == 0:
        return out
    feats = variable[rng.choice(variable.size, size=min(k, variable.size), replace=False)]
    out[feats] = (out[feats] + rng.integers(1, sizes[feats])) % sizes[feats]
    return out


@dataclass
class _Climb:
    """The state of one record's hill-climb (Algorithm 1's variables)."""

    x: np.ndarray
    best_x: np.ndarray
    k: int
    best: float = 0.0
    j: int = 0
    queries: int = 0
    done: bool = False
    ok: bool = False
    confidence: float = 0.0


def _step(s: _Climb, y: np.ndarray, c: int, sizes: np.ndarray, rng: np.random.Generator, p: SynthesisParams) -> None:
    """One iteration of Algorithm 1 after the query ``y = f(x)`` (lines 8-24)."""
    s.queries += 1
    yc = float(y[c])
    if yc >= s.best:  # accept
        others = np.delete(y, c)
        if yc > p.conf_min and (others.size == 0 or yc > float(others.max())) and rng.random() < yc:
            s.done, s.ok, s.confidence = True, True, yc
            return
        s.best_x, s.best, s.j = s.x, yc, 0
    else:
        s.j += 1
        if s.j > p.rej_max:  # many consecutive rejects: search closer
            s.k, s.j = max(p.k_min, math.ceil(s.k / 2)), 0
    if s.queries >= p.max_queries:
        s.done, s.confidence = True, s.best
        return
    s.x = perturb(s.best_x, s.k, sizes, rng)


def synthesize_record(
    predict: Predict, domain: Domain, c: int, rng: np.random.Generator, params: SynthesisParams
) -> tuple[np.ndarray | None, int, float]:
    """Algorithm 1 for one record of class index ``c``: (codes or None when it failed, queries, confidence).

    ``predict(frame)`` returns the model's probability vectors (columns in class order); one
    call per query, on one record.
    """
    sizes = domain.sizes
    x = random_record(sizes, rng)
    s = _Climb(x=x, best_x=x, k=params.k_max)
    while not s.done:
        _step(s, np.asarray(predict(domain.decode(s.x[None, :])))[0], c, sizes, rng, params)
    return (s.x if s.ok else None), s.queries, s.confidence


def synthesize_batch(
    predict: Predict, domain: Domain, labels: np.ndarray, rngs: list[np.random.Generator], params: SynthesisParams
) -> Synthesized:
    """Algorithm 1 for ``len(labels)`` records at once, record i for class index ``labels[i]`` with its own
    generator ``rngs[i]``: each round sends every unfinished record's proposal to ``predict`` in one
    batch. Record by record the same as :func:`synthesize_record` with the same generators."""
    sizes = domain.sizes
    climbs = []
    for rng in rngs:
        x = random_record(sizes, rng)
        climbs.append(_Climb(x=x, best_x=x, k=params.k_max))
    while True:
        active = [i for i, s in enumerate(climbs) if not s.done]
        if not active:
            break
        signals.check()  # threading workers stop here after an interrupt
        P = np.asarray(predict(domain.decode(np.stack([climbs[i].x for i in active]))))
        for row, i in enumerate(active):
            _step(climbs[i], P[row], int(labels[i]), sizes, rngs[i], params)
    m = len(domain.names)
    codes = np.stack([s.x for s in climbs]) if climbs else np.zeros((0, m), dtype=np.int64)
    return Synthesized(
        codes=codes,
        labels=np.asarray(labels, dtype=np.int64),
        ok=np.array([s.ok for s in climbs], dtype=bool),
        queries=np.array([s.queries for s in climbs], dtype=np.int64),
        confidence=np.array([s.confidence for s in climbs], dtype=float),
    )


def class_of_record(n_records: int, n_classes: int) -> np.ndarray:
    """Class index each record is synthesised for: classes in turn (equal shares; the auditor has no prior)."""
    return np.arange(n_records, dtype=np.int64) % n_classes


def concat(parts: list[Synthesized], n_features: int) -> Synthesized:
    """Blocks' outcomes in record order."""
    if not parts:
        z = np.zeros(0, dtype=np.int64)
        return Synthesized(np.zeros((0, n_features), dtype=np.int64), z, z.astype(bool), z, z.astype(float))
    return Synthesized(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                         ("codes", "labels", "ok", "queries", "confidence")))


def summarise(s: Synthesized, classes: np.ndarray, params: SynthesisParams) -> dict[str, Any]:
    """attack.json's summary.synthesis: records asked and made per class, failures, the query cost."""
    per_class = {}
    for i, c in enumerate(classes):
        mine = s.labels == i
        per_class[str(c)] = {"requested": int(mine.sum()), "synthesized": int((s.ok & mine).sum()),
                             "failed": int((~s.ok & mine).sum())}
    made = int(s.ok.sum())
    return {
        "method": "model-based (Shokri et al. V-C, Algorithm 1)",
        "requested": int(len(s.ok)),
        "synthesized": made,
        "failed": int(len(s.ok) - made),
        "per_class": per_class,
        "queries": s.total_queries,
        "queries_per_synthesized_record": round(s.total_queries / made, 1) if made else None,
        "mean_confidence": round(float(s.confidence[s.ok].mean()), 4) if made else None,
        "params": {"k_max": params.k_max, "k_min": params.k_min, "rej_max": params.rej_max,
                   "conf_min": params.conf_min, "max_queries_per_record": params.max_queries},
        "domain": f"the schema's: categories; numeric columns' distinct values, or {NUMERIC_LEVELS} equally spaced "
        "points over their range when they have more (knowledge of the feature domain only, Shokri V-C)",
    }


def block_task(
    model: Any,
    classes: np.ndarray,
    bin_size: float,
    domain: Domain,
    blocks: np.ndarray,
    n_records: int,
    seed: int,
    params: SynthesisParams,
) -> tuple[np.ndarray, ...]:
    """Synthesise the records of ``blocks`` (block b = records b*BLOCK ..), querying ``model``'s
    binned outputs (what its API releases, Long et al. 5.2). Record r is for class r mod |classes|
    with the generator of (seed, TAG_MODEL_SYNTH, r). Returns :class:`Synthesized`'s arrays
    (plain arrays: a checkpoint holds them)."""
    from mptool.attacks.shadows import rng_for
    from mptool.inputs.models import proba_in
    from mptool.privacy.calibration import bin_probabilities

    def predict(X: pd.DataFrame) -> np.ndarray:
        return bin_probabilities(proba_in(model, X, classes), bin_size)

    labels = class_of_record(n_records, len(classes))
    out = []
    for b in blocks:
        ids = np.arange(int(b) * BLOCK, min(n_records, (int(b) + 1) * BLOCK))
        rngs = [rng_for(seed, TAG_MODEL_SYNTH, int(r)) for r in ids]
        out.append(synthesize_batch(predict, domain, labels[ids], rngs, params))
    return astuple(concat(out, len(domain.names)))


#: Seed tag of the records' generators (apart from shadows.TAG_POOL/TAG_PAIRS/TAG_SYNTH).
TAG_MODEL_SYNTH = 104


def synthesize_records(
    model: Any,
    classes: np.ndarray,
    bin_size: float,
    domain: Domain,
    n_records: int,
    seed: int,
    params: SynthesisParams,
    jobs: int,
    backend: str = "loky",
    advance: Callable[[int], None] = lambda n: None,
) -> Synthesized:
    """``n_records`` records by Algorithm 1 against ``model``, blocks spread over ``jobs`` workers
    (:func:`mptool.runtime.parallel.run_tasks`); the result does not depend on ``jobs``."""
    from mptool.runtime.parallel import chunk_positions, run_tasks

    n_blocks = -(-n_records // BLOCK)
    chunks = chunk_positions(np.arange(n_blocks), jobs, per_job=2)
    parts = run_tasks(
        block_task,
        ((model, classes, bin_size, domain, c, n_records, seed, params) for c in chunks),
        jobs=jobs,
        backend=backend,
        on_result=lambda r: advance(len(r[2])),
    )
    return concat([Synthesized(*part) for part in parts], len(domain.names))


@dataclass(frozen=True)
class ShadowData:
    """Model-based shadow data of a run: the records made, their class indices and summary.synthesis."""

    X: pd.DataFrame
    y_idx: np.ndarray
    summary: dict[str, Any]
    seconds: float


def make_shadow_data(
    template: Any,
    D: Any,
    half: np.ndarray,
    classes: np.ndarray,
    bin_size: float,
    seed: int,
    queries: int,
    jobs: int,
    backend: str = "loky",
) -> ShadowData:
    """Shadow data without population data (Shokri et al. V-C): A is fitted on the records of D at
    ``half`` (D1 of the protocol's first iteration: the model whose API the auditor queries) and
    |D| records, classes in turn, are hill-climbed on its binned outputs with at most ``queries``
    queries each. Only the schema's domain is used (:func:`schema_domain`), never D's records.

    Raises InputError when fewer than 4 records or a single class came out (no shadow model can
    be trained on them); records that fail are otherwise counted in the summary, not dropped silently.
    """
    from mptool.inputs.models import fit
    from mptool.runtime.errors import InputError

    t0 = time.perf_counter()
    model = fit(template, D.X.iloc[half], D.y[half])
    domain = schema_domain(D.schema, D.X)
    params = paper_params(len(domain.names), queries)
    made = synthesize_records(model, classes, bin_size, domain, len(D.y), seed, params, jobs, backend)
    ok = np.flatnonzero(made.ok)
    n_classes = len(np.unique(made.labels[ok]))
    if ok.size < 4 or n_classes < 2:
        raise InputError(
            f"--shadow-data synthesize: only {ok.size} of {len(made.ok)} records were synthesised ({n_classes} "
            f"class(es)) within {queries} queries each, {made.total_queries:,} queries in all: the target model is "
            "not confident enough anywhere its domain was searched; shadow models need two classes: raise Q "
            "(synthesize:Q) or use --shadow-data marginals"
        )
    summary = summarise(made, classes, params)
    return ShadowData(domain.decode(made.codes[ok]), made.labels[ok], summary, time.perf_counter() - t0)


def failure_note(summary: dict[str, Any]) -> str | None:
    """The run's note on records not synthesised within the budget (None when every record was)."""
    if not summary["failed"]:
        return None
    per_class = ", ".join(f"{v['failed']} of class {c}" for c, v in summary["per_class"].items() if v["failed"])
    return (
        f"model-based synthesis: {summary['failed']} of {summary['requested']} records not synthesised within "
        f"{summary['params']['max_queries_per_record']} queries each ({per_class}); the shadow models train on "
        f"the {summary['synthesized']} made"
    )


def plan_text(summary: dict[str, Any]) -> str:
    """The plan line's part on the synthesis (done before the plan line: its cost is known)."""
    return (
        f"; model-based shadow data (Shokri V-C): {summary['synthesized']:,} of {summary['requested']:,} records "
        f"synthesised with {summary['queries']:,} queries of A(D1) (at most "
        f"{summary['params']['max_queries_per_record']:,} per record)"
    )
