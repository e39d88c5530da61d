"""``mptool reduce-dtp``: remove high-risk records until the classifier satisfies DTP-1.

Long et al., section 8 ("Reducing DTP", Figure 6): compute every training record's PDTP,
remove the record with the highest value, recompute the PDTP of every record that
remains (the model is refitted on the smaller set, so every value can change) and
repeat. The maximum follows a sawtooth: a removal can lower it below the DTP-1 threshold
and the next one raise it again, because records protect one another.

Strategies:

- ``greedy``: the paper's procedure; one full recompute per step.
- ``lookahead:K``: at each step try the K riskiest removable records, recompute the PDTP
  of every remaining record for each, and keep the removal whose resulting maximum is
  lowest (ties go to the riskier record, so K=1 is greedy). K recomputes per step.

The run does not stop at the first step that satisfies DTP-1: it runs to the removal
budget (the whole trace is the evidence) and reports the smallest prefix of removals
after which the maximum PDTP is at or below the threshold.

A record that is the last of its class in the remaining set is never removed (its
removal would change the label set the classifier outputs).
"""

from __future__ import annotations

import copy
import shlex
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mptool.inputs.models import category_positions
from mptool.inputs.prepare import Prepared, fit_checked
from mptool.loo import Engine, LooRequest, select_engine
from mptool.outputs.results import manifest
from mptool.privacy.dtp import pdtp_of
from mptool.privacy.release import measured, release_summary
from mptool.runtime import prestart, ui
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import choose_workers, resolve_jobs

#: Columns of DIR/reduce.csv, in order, with their meaning.
REDUCE_COLUMNS = {
    "step": "number of removals so far; step 0 is the starting training set T (no removal)",
    "row": "0-based CSV data row of the record removed at this step (empty at step 0)",
    "id": "the removed record's value of the spec's id column (empty without data.id or at step 0)",
    "pdtp_before": "PDTP of the removed record in the set it was removed from (empty at step 0)",
    "max_pdtp_after": "maximum PDTP over the records left after this step's removal",
    "violations_after": "records left whose PDTP exceeds the threshold",
    "records_left": "size of the training set after this step",
}

Progress = Callable[[int, str], AbstractContextManager[Callable[[int], None]]]


@dataclass(frozen=True)
class Strategy:
    """A removal strategy: ``greedy`` (k = 1) or ``lookahead`` with k candidates per step."""

    name: str
    k: int = 1

    @property
    def label(self) -> str:
        return "greedy" if self.name == "greedy" else f"lookahead:{self.k}"


def parse_strategy(text: str) -> Strategy:
    """``greedy`` or ``lookahead:K`` (K >= 1) -> Strategy; InputError otherwise."""
    text = text.strip()
    if text == "greedy":
        return Strategy("greedy", 1)
    name, sep, k = text.partition(":")
    if name == "lookahead" and sep:
        try:
            kk = int(k)
        except ValueError:
            kk = 0
        if kk >= 1:
            return Strategy("lookahead", kk)
    raise InputError(f"--strategy must be greedy or lookahead:K with K >= 1, e.g. lookahead:3 (got '{text}')")


@dataclass(frozen=True)
class ReduceOptions:
    """Run options that are not part of the spec."""

    threshold: float = 1.0
    max_removals: int = 50
    strategy: Strategy = field(default_factory=lambda: Strategy("greedy", 1))
    jobs: int | None = None
    engine: str = "auto"
    backend: str = "loky"
    compare_greedy: bool = True  # lookahead only: also run greedy and report the comparison
    incremental: bool = True  # categorical NB: update counts per removal instead of refitting


@dataclass(frozen=True)
class State:
    """PDTP of every record of a reduced training set (positions in T, sorted ascending)."""

    positions: np.ndarray
    pdtp: np.ndarray
    cache: Any = field(default=None, repr=False, compare=False)  # evaluator's model state (e.g. NB counts)

    @property
    def max(self) -> float:
        return float(self.pdtp.max()) if self.pdtp.size else 0.0

    def violations(self, threshold: float) -> int:
        return int(np.sum(self.pdtp > threshold))


class Evaluator:
    """Recomputes PDTP of every record of ``T restricted to positions`` (Long et al., Def. 4.3/4.4).

    One recompute: fit A on the remaining records, ask the leave-one-out engine for
    p_{A(T')}(.|x_t) and p_{A(T' minus t)}(.|x_t) for every t in T', bin both (section 5.2)
    and take max_y |ln p - ln p'|.
    """

    def __init__(self, prep: Prepared, engine: Engine, jobs: int, backend: str) -> None:
        self.prep = prep
        self.engine = engine
        self.jobs = jobs
        self.backend = backend
        self.recomputes = 0
        self.seconds = 0.0
        self.engine_name = engine.name

    def __call__(self, positions: np.ndarray, advance: Callable[[int], None] | None = None) -> State:
        t0 = time.perf_counter()
        prep = self.prep
        positions = np.asarray(positions, dtype=np.int64)
        sub = prep.train if len(positions) == prep.train.n else prep.train.take(positions)
        full_model = fit_checked(prep.template, sub)
        request = LooRequest(
            prep.spec,
            prep.template,
            sub,
            full_model,
            prep.classes,
            np.arange(sub.n, dtype=np.int64),
            self.jobs,
            self.backend,
        )
        result = self.engine.run(request, advance or (lambda n: None))
        self.engine_name = result.engine
        b, rel = prep.spec.output.bin_size, prep.spec.output.release  # as the gate measures the release
        values = pdtp_of(measured(result.p_full, rel), measured(result.p_loo, rel), b)
        self.recomputes += 1
        self.seconds += time.perf_counter() - t0
        return State(positions, values.pdtp)

    def without(self, state: State, i: int) -> State:
        """PDTP of every record of ``state`` but its i-th, recomputed on that smaller set."""
        return self(np.delete(state.positions, i))


class CountsEvaluator(Evaluator):
    """The same recompute for categorical naive Bayes, from class/category counts.

    T is encoded once. A removal takes the record's codes out of the counts (the engine's
    ``CategoricalCounts.remove``), so a step neither refits nor copies the data frame.
    A record's PDTP depends only on its (feature codes, class) pattern and the counts, so
    the closed-form leave-one-out (``CategoricalCounts.loo_proba``, mptool.loo.naive_bayes)
    is evaluated once per distinct pattern present and gathered back to the records: one
    bincount and one gather over the remaining records per step, the arithmetic over the
    patterns only (military: 1.41 M records, a few thousand patterns).
    """

    def __init__(self, prep: Prepared, engine: Engine, counts_cls: Any, encoder: Any, estimator: Any) -> None:
        super().__init__(prep, engine, 1, "loky")
        cols = list(prep.template.steps[0][1].transformers[0][2])
        codes = np.asarray(encoder.transform(prep.train.X[cols]), dtype=np.int64)
        self.codes, self.y_idx = codes, category_positions(pd.Series(prep.train.y, dtype=object), prep.classes)
        n_codes = np.asarray(estimator.min_categories, dtype=np.int64)
        self.pattern, first = _patterns(codes, self.y_idx, n_codes, len(prep.classes))
        self.pat_codes, self.pat_y = codes[first], self.y_idx[first]
        self.counts_cls = counts_cls
        alpha = float(estimator.alpha) if estimator.force_alpha else max(float(estimator.alpha), 1e-10)
        self.params = (len(prep.classes), n_codes, alpha)
        self.fit_prior = bool(estimator.fit_prior)
        self.engine_name = engine.name

    def _state(self, positions: np.ndarray, counts: Any, t0: float) -> State:
        pat = self.pattern[positions]
        present = np.flatnonzero(np.bincount(pat, minlength=len(self.pat_y)))
        p_full, p_loo = counts.loo_proba(self.pat_codes[present], self.pat_y[present])
        b, rel = self.prep.spec.output.bin_size, self.prep.spec.output.release
        per_pattern = np.full(len(self.pat_y), np.nan)
        per_pattern[present] = pdtp_of(measured(p_full, rel), measured(p_loo, rel), b).pdtp
        self.recomputes += 1
        self.seconds += time.perf_counter() - t0
        return State(positions, per_pattern[pat], counts)

    def __call__(self, positions: np.ndarray, advance: Callable[[int], None] | None = None) -> State:
        t0 = time.perf_counter()
        positions = np.asarray(positions, dtype=np.int64)
        counts = self.counts_cls.from_codes(
            self.codes[positions], self.y_idx[positions], *self.params, fit_prior=self.fit_prior
        )
        return self._state(positions, counts, t0)

    def without(self, state: State, i: int) -> State:
        if state.cache is None:
            return super().without(state, i)
        t0 = time.perf_counter()
        t = int(state.positions[i])
        counts = copy.deepcopy(state.cache)
        counts.remove(self.codes[t], int(self.y_idx[t]))
        return self._state(np.delete(state.positions, i), counts, t0)


def _patterns(codes: np.ndarray, y: np.ndarray, n_codes: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(pattern id of every record, index of each pattern's first record) for rows (codes, class)."""
    radix = [int(n_classes), *(int(k) for k in n_codes)]
    if float(np.prod(np.asarray(radix, dtype=float))) < 2.0**62:
        key = y.astype(np.int64)
        for j, k in enumerate(n_codes):
            key = key * int(k) + codes[:, j]
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    else:
        _, first, inverse = np.unique(np.column_stack([y, codes]), axis=0, return_index=True, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64), first


def make_evaluator(prep: Prepared, engine: Engine, jobs: int, backend: str, incremental: bool) -> Evaluator:
    """The counts-based evaluator when the engine is the exact categorical NB one, else the generic one."""
    if incremental and engine.name == "exact-naive-bayes":
        try:
            from mptool.loo.naive_bayes import CategoricalCounts, categorical_parts
        except ImportError:  # pragma: no cover - the engine module changed shape
            return Evaluator(prep, engine, jobs, backend)
        parts = categorical_parts(prep.template)
        if not isinstance(parts, str):
            return CountsEvaluator(prep, engine, CategoricalCounts, *parts)
    return Evaluator(prep, engine, jobs, backend)


def removable_order(state: State, y_idx: np.ndarray, k: int | None = None) -> np.ndarray:
    """Indices into ``state`` of the removable records, riskiest first (ties: lower position first).

    ``y_idx`` holds the class index of every record of T. A record that is the last of
    its class in the set is not removable. With ``k``, only the first k are returned
    (found by partition, so a step stays linear in the number of records).
    """
    y = y_idx[state.positions]
    ok = np.bincount(y)[y] > 1
    idx = np.flatnonzero(ok)
    v = state.pdtp[idx]
    if k is not None and k < idx.size:
        kth = np.partition(v, idx.size - k)[idx.size - k]  # the k-th largest value
        keep = v >= kth
        idx, v = idx[keep], v[keep]
    # lexsort: the last key is primary -> descending PDTP, then ascending position
    order = idx[np.lexsort((state.positions[idx], -v))]
    return order if k is None else order[:k]


@dataclass(frozen=True)
class Step:
    """One removal: which record, its PDTP before, and the numbers of the set after it."""

    step: int
    position: int | None  # position in T of the removed record (None at step 0)
    pdtp_before: float | None
    max_after: float
    violations_after: int
    records_left: int
    seconds: float
    candidates: tuple[tuple[int, float, float], ...] = ()  # lookahead: (position, pdtp_before, max_after)


@dataclass
class Trace:
    """The steps of one strategy's run, starting with step 0 (no removal), and its last state."""

    strategy: Strategy
    steps: list[Step]
    stop_reason: str
    final: State

    def removed(self, upto: int) -> list[int]:
        """Positions in T removed by the first ``upto`` steps."""
        return [s.position for s in self.steps[1 : upto + 1] if s.position is not None]

    def maxima(self) -> list[float]:
        return [s.max_after for s in self.steps]

    def best(self, threshold: float) -> tuple[int, bool]:
        """(step, reached): the first step whose maximum is <= threshold; else the lowest-maximum step."""
        m = self.maxima()
        for i, v in enumerate(m):
            if v <= threshold:
                return i, True
        return int(np.argmin(m)), False


def run_strategy(
    evaluate: Evaluator,
    initial: State,
    y_idx: np.ndarray,
    strategy: Strategy,
    max_removals: int,
    threshold: float,
    advance: Callable[[int], None],
) -> Trace:
    """Run ``strategy`` for up to ``max_removals`` steps from ``initial`` (section 8's procedure)."""
    n0 = int(initial.positions.size)
    steps = [Step(0, None, None, initial.max, initial.violations(threshold), n0, 0.0)]
    state = initial
    reason = "budget"
    for k in range(1, max_removals + 1):
        t0 = time.perf_counter()
        candidates = removable_order(state, y_idx, strategy.k)
        if state.positions.size <= 2 or candidates.size == 0:
            reason = "nothing removable"
            break
        tried: list[tuple[int, float, float]] = []
        chosen: tuple[int, State] | None = None  # (index into state, state after its removal)
        for i in candidates:
            after = evaluate.without(state, int(i))
            tried.append((int(state.positions[i]), float(state.pdtp[i]), after.max))
            # strictly lower maximum wins; on a tie the earlier (riskier) candidate stays
            if chosen is None or after.max < chosen[1].max:
                chosen = (int(i), after)
        assert chosen is not None
        i, after = chosen
        extra = tuple(tried) if strategy.k > 1 else ()
        steps.append(
            Step(
                k,
                int(state.positions[i]),
                float(state.pdtp[i]),
                after.max,
                after.violations(threshold),
                int(after.positions.size),
                time.perf_counter() - t0,
                extra,
            )
        )
        state = after
        advance(1)
    return Trace(strategy, steps, reason, state)


@dataclass
class ReduceOutcome:
    """Trace table (DIR/reduce.csv), JSON document (DIR/reduce.json) and what --write-clean needs."""

    table: pd.DataFrame
    summary: dict[str, Any]
    trace: Trace
    clean_positions: np.ndarray  # positions in T left after the best prefix
    notes: list[str] = field(default_factory=list)


def trace_table(trace: Trace, prep: Prepared, threshold: float) -> pd.DataFrame:
    """The per-step table with exactly the columns of REDUCE_COLUMNS."""
    T = prep.train
    rows, ids = [], []
    for s in trace.steps:
        rows.append(None if s.position is None else int(T.rows[s.position]))
        ids.append(None if s.position is None or T.ids is None else T.ids[s.position])
    return pd.DataFrame(
        {
            "step": [s.step for s in trace.steps],
            "row": pd.array(rows, dtype="Int64"),
            "id": pd.array(ids, dtype=object),
            "pdtp_before": [np.nan if s.pdtp_before is None else s.pdtp_before for s in trace.steps],
            "max_pdtp_after": [s.max_after for s in trace.steps],
            "violations_after": [s.violations_after for s in trace.steps],
            "records_left": [s.records_left for s in trace.steps],
        }
    )


def _trace_json(trace: Trace, table: pd.DataFrame, prep: Prepared) -> list[dict[str, Any]]:
    out = []
    for s, (_, r) in zip(trace.steps, table.iterrows(), strict=True):
        item: dict[str, Any] = {
            "step": int(r["step"]),
            "row": None if pd.isna(r["row"]) else int(r["row"]),
            "id": None if r["id"] is None or (isinstance(r["id"], float) and np.isnan(r["id"])) else r["id"],
            "pdtp_before": s.pdtp_before,
            "max_pdtp_after": s.max_after,
            "violations_after": int(r["violations_after"]),
            "records_left": int(r["records_left"]),
            "seconds": round(s.seconds, 4),
        }
        if s.candidates:
            item["candidates"] = [
                {"row": int(prep.train.rows[p]), "pdtp_before": pb, "max_pdtp_after": ma} for p, pb, ma in s.candidates
            ]
        out.append(item)
    return out


def reduce_workers(prep: Prepared, options: ReduceOptions, engine: Engine) -> dict[str, Any]:
    """The worker count (:func:`mptool.runtime.parallel.choose_workers`): with the refit engine, T's
    refits of the first PDTP evaluation, timed by one fit of A(T); an exact engine keeps ``--jobs``."""
    if engine.name != "refit":
        jobs = resolve_jobs(options.jobs)
        return {"requested": jobs, "workers": jobs, "fits": 0, "fit_s": 0.0,
                "why": f"{engine.name}: no refits to weigh against starting workers"}
    t0 = time.perf_counter()
    fit_checked(prep.template, prep.train)
    return choose_workers(options.jobs, options.backend, prep.train.n, time.perf_counter() - t0)


def run_reduce(prep: Prepared, options: ReduceOptions, progress: Progress) -> ReduceOutcome:
    """Run the chosen strategy on T and summarise: best prefix, whether DTP-1 was reached, timings."""
    if options.threshold < 0:
        raise InputError(f"--threshold must be non-negative (got {options.threshold})")
    if options.max_removals < 0:
        raise InputError(f"--max-removals must be 0 or more (got {options.max_removals})")
    t0 = time.perf_counter()
    T = prep.train
    y_idx = category_positions(pd.Series(T.y, dtype=object), prep.classes)
    engine = select_engine(options.engine, prep.spec, prep.template)
    workers = reduce_workers(prep, options, engine)
    jobs = workers["workers"]
    evaluate = make_evaluator(prep, engine, jobs, options.backend, options.incremental)
    with progress(T.n, f"PDTP of T ({evaluate.engine_name})") as advance_initial:
        initial = evaluate(np.arange(T.n, dtype=np.int64), advance_initial)
    t_initial = time.perf_counter()
    strat = options.strategy
    budget = options.max_removals if initial.violations(options.threshold) else 0
    with progress(budget, f"reduce-dtp {strat.label} ({evaluate.engine_name})") as advance:
        trace = run_strategy(evaluate, initial, y_idx, strat, budget, options.threshold, advance)
    t_steps = time.perf_counter()
    notes = list(prep.notes)
    if budget == 0 and options.max_removals > 0:
        trace.stop_reason = "no violation at the start"

    comparison: dict[str, Any] | None = None
    if strat.name == "lookahead" and strat.k > 1 and options.compare_greedy and budget > 0:
        greedy = run_strategy(
            evaluate, initial, y_idx, Strategy("greedy", 1), budget, options.threshold, lambda n: None
        )
        comparison = compare(trace, greedy, options.threshold, T.rows)
    t_cmp = time.perf_counter()

    table = trace_table(trace, prep, options.threshold)
    timings = {
        "initial_s": round(t_initial - t0, 4),
        "steps_s": round(t_steps - t_initial, 4),
        "greedy_comparison_s": round(t_cmp - t_steps, 4),
        "mean_recompute_s": round(evaluate.seconds / max(evaluate.recomputes, 1), 4),
        "total_s": round(time.perf_counter() - t0, 4),
    }
    summary, keep = reduce_summary(prep, options, trace, initial, evaluate, jobs, timings)
    summary["workers"] = {**workers, "prestart": prestart.summary()}
    if comparison is not None:
        summary["greedy_comparison"] = comparison
    summary["trace"] = _trace_json(trace, table, prep)
    return ReduceOutcome(table, summary, trace, np.flatnonzero(keep), notes)


def reduce_summary(
    prep: Prepared, options: ReduceOptions, trace: Trace, initial: State, evaluate: Evaluator, jobs: int,
    timings: dict[str, float],
) -> tuple[dict[str, Any], np.ndarray]:
    """reduce.json's summary of a finished trace (best prefix, DTP-1 reached or not) and the kept positions of T."""
    T = prep.train
    best_step, reached = trace.best(options.threshold)
    removed = trace.removed(best_step)
    keep = np.ones(T.n, dtype=bool)
    keep[removed] = False
    summary: dict[str, Any] = {
        "reached": reached,
        "best_step": best_step,
        "best_prefix": [int(T.rows[p]) for p in removed],
        "best_prefix_ids": None if T.ids is None else [T.ids[p] for p in removed],
        "best_max": trace.steps[best_step].max_after,
        "initial_max": initial.max,
        "initial_violations": initial.violations(options.threshold),
        "final_max": trace.steps[-1].max_after,
        "steps": len(trace.steps) - 1,
        "stop_reason": trace.stop_reason,
        "strategy": options.strategy.label,
        "engine": evaluate.engine_name,
        "incremental": isinstance(evaluate, CountsEvaluator),
        "threshold": float(options.threshold),
        "max_removals": options.max_removals,
        "n_train": T.n,
        "estimator": prep.choice.name,
        "bin_size": prep.spec.output.bin_size,
        **release_summary(prep.spec.output.release, len(prep.classes)),
        "jobs": jobs,
        "recomputes": evaluate.recomputes,
        "timings": timings,
        "columns": REDUCE_COLUMNS,
        "manifest": manifest(prep.spec.sha256(), T.sha256, prep.spec.seed, T.source),
    }
    return summary, keep


def compare(lookahead: Trace, greedy: Trace, threshold: float, rows: np.ndarray) -> dict[str, Any]:
    """How lookahead fared against greedy on the same data and budget."""
    la, gr = lookahead.maxima(), greedy.maxima()
    n = min(len(la), len(gr))
    la_step, la_ok = lookahead.best(threshold)
    gr_step, gr_ok = greedy.best(threshold)
    if la_ok and gr_ok:
        beats = la_step < gr_step
    elif la_ok != gr_ok:
        beats = la_ok
    else:
        beats = min(la) < min(gr)
    return {
        "greedy_max_pdtp_after": gr,
        "greedy_reached": gr_ok,
        "greedy_best_step": gr_step,
        "greedy_best_prefix": [int(rows[p]) for p in greedy.removed(gr_step)],
        "beats_greedy": bool(beats),
        "not_worse_at_every_step": bool(all(la[i] <= gr[i] for i in range(n))),
    }


def clean_spec(prep: Prepared) -> dict[str, Any]:
    """The spec for auditing the clean CSV: the same spec with ``data.train_size: null``.

    The clean CSV holds only the records kept, so T is the whole file. The feature domains
    come from the CSV (data.py), and the clean file may lack values the input has; for
    categorical naive Bayes the Laplace denominators use the domain sizes, so they are
    pinned here (``model.params.min_categories``) to the input's. Other estimators keep
    the domain the clean file gives (see :func:`domain_changes`).
    """
    from sklearn.naive_bayes import CategoricalNB

    raw = prep.spec.model_dump(mode="json")
    raw["data"]["train_size"] = None
    # the clean file is UTF-8 CSV with a header row, keeping the input's separator and decimal mark
    read = raw["data"]["read"]
    read.update(header=True, encoding="utf-8", separator=read["separator"] if not _parquet(prep) else ",")
    clf = prep.template.steps[-1][1] if hasattr(prep.template, "steps") else prep.template
    if isinstance(clf, CategoricalNB) and "min_categories" not in raw["model"]["params"]:
        mc = clf.min_categories
        if mc is not None:
            raw["model"]["params"]["min_categories"] = np.asarray(mc).astype(int).tolist()
    return raw


def _parquet(prep: Prepared) -> bool:
    from mptool.inputs.data import is_parquet

    return is_parquet(prep.train.source)


def domain_changes(before: Any, after: Any, binned: set[str]) -> list[str]:
    """Feature columns whose domain differs between two schemas (the model encodes features over it).

    Categories and a numeric column's distinct values count; a column cut at fixed
    ``model.bins`` edges depends only on whether it has empty cells.
    """
    out = []
    for c in before.columns:
        d = after.column(c.name)
        if c.name in binned:
            same = c.has_missing == d.has_missing
        else:
            same = (c.categories, c.values, c.has_missing) == (d.categories, d.values, d.has_missing)
        if not same:
            out.append(c.name)
    return out


def clean_text(data_path: str, rows: np.ndarray, gzip_it: bool, read: Any = None) -> bytes:
    """The rows ``rows`` of ``data_path`` with a header row and the input's cell text, as UTF-8 CSV bytes.

    The input's separator and decimal mark are kept (``data.read``), so the clean spec reads
    the cells as the input's were read.
    """
    import gzip

    from mptool.inputs.data import read_rows_verbatim
    from mptool.outputs.formats import CSV_FLOAT_FORMAT

    frame = read_rows_verbatim(data_path, rows, read)
    sep = read.separator if read is not None else ","
    text = frame.to_csv(index=False, sep=sep, float_format=CSV_FLOAT_FORMAT, lineterminator="\n").encode("utf-8")
    return gzip.compress(text, mtime=0) if gzip_it else text


def write_clean(prep: Prepared, outcome: ReduceOutcome, clean_path: Path, spec_path: Path) -> dict[str, Any]:
    """Write the records left after the best prefix (the input's columns and cell text) and their spec.

    ``mptool pdtp CLEAN.csv --model SPEC_PATH`` then audits exactly the reduced training
    set (train_size null) and reproduces ``best_max``. Returns the JSON entry describing it.
    """
    from sklearn.naive_bayes import CategoricalNB

    from mptool.inputs.data import load_records
    from mptool.inputs.spec import dump_yaml, parse_spec
    from mptool.outputs.results import write_atomic

    rows = prep.train.rows[outcome.clean_positions]
    gz = clean_path.name.endswith(".gz")
    read = prep.spec.data.read if not _parquet(prep) else None
    write_atomic(clean_path, clean_text(prep.train.source, rows, gz, read))
    raw = clean_spec(prep)
    write_atomic(spec_path, dump_yaml(raw))
    spec = parse_spec(raw, where=str(spec_path))
    changed = domain_changes(prep.train.schema, load_records(clean_path, spec).schema, set(spec.model.bins))
    clf = prep.template.steps[-1][1] if hasattr(prep.template, "steps") else prep.template
    pinned = isinstance(clf, CategoricalNB) and spec.model.preprocess == "auto"
    notes = []
    if changed and not pinned:
        notes.append(
            f"the clean CSV lacks values the input has in column(s) {', '.join(changed)}; the model's "
            "feature encoding follows the data, so 'mptool pdtp' on it may not reproduce best_max exactly"
        )
    return {
        "path": str(clean_path),
        "spec": str(spec_path),
        "records": int(rows.size),
        "domain_changed_columns": changed,
        "domain_pinned": bool(pinned and changed),
        "expected_max_pdtp": outcome.summary["best_max"],
        "command": f"mptool pdtp {shlex.quote(str(clean_path))} --model {shlex.quote(str(spec_path))}",
        "notes": notes,
    }


def print_trace(outcome: ReduceOutcome, quiet: bool) -> None:
    """The step table on stdout and the verdict line (only the verdict with --quiet).

    Ids come from the data: printed as escaped excerpts (:func:`mptool.runtime.ui.cell`).
    """
    from rich.table import Table

    s = outcome.summary
    if s["reached"]:
        verdict = (
            f"DTP-1 reached after {s['best_step']} removal(s) (rows {s['best_prefix']}): max PDTP "
            f"{s['initial_max']:.4f} -> {s['best_max']:.4f} (threshold {s['threshold']:g}); "
        )
    else:
        verdict = (
            f"DTP-1 NOT reached within {s['max_removals']} removal(s): lowest max PDTP {s['best_max']:.4f} "
            f"after {s['best_step']} (start {s['initial_max']:.4f}, threshold {s['threshold']:g}); "
        )
    verdict += f"{s['release_note']}; " if s.get("release_note") else ""
    verdict += f"{s['strategy']}, engine {s['engine']}, {s['timings']['total_s']:.2f}s"
    if quiet:
        ui.echo(verdict, limit=None)
        return
    console = ui.out_console
    t = Table(title=f"reduce-dtp trace ({s['strategy']})", title_justify="left")
    for col in REDUCE_COLUMNS:
        t.add_column(col, justify="left" if col == "id" else "right")
    for _, r in outcome.table.iterrows():
        t.add_row(
            str(r["step"]),
            "" if pd.isna(r["row"]) else str(r["row"]),
            "" if r["id"] is None else ui.cell(r["id"]),
            "" if pd.isna(r["pdtp_before"]) else f"{r['pdtp_before']:.4f}",
            f"{r['max_pdtp_after']:.4f}",
            str(r["violations_after"]),
            str(r["records_left"]),
        )
    console.print(t)
    cmp = s.get("greedy_comparison")
    if cmp:
        console.print(
            f"greedy on the same data: {'reached' if cmp['greedy_reached'] else 'not reached'} at step "
            f"{cmp['greedy_best_step']}; lookahead beats greedy: {cmp['beats_greedy']}; "
            f"never worse at any step: {cmp['not_worse_at_every_step']}"
        )
    console.print(ui.safe_line(verdict, None), style="bold green" if s["reached"] else "bold red")
