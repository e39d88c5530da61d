"""``mptool pdtp``: PDTP of every (or each chosen) training record, and the DTP-1 verdict.

PDTP(t) = max_y |ln p_T(y|x_t) - ln p_{T\\{t}}(y|x_t)| after output post-processing
(Long et al., Definitions 4.3/4.4 and section 5.2).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from mptool.api.randomized import REPLICATE_COLUMNS, choose_engine, replicate_block, replicate_table, replicate_verdict
from mptool.inputs.fingerprint import fingerprints, identity, run_key
from mptool.inputs.memo import factorized
from mptool.inputs.models import model_numerics
from mptool.inputs.prepare import Prepared, fit_checked
from mptool.loo import LooRequest, check_before_work, select_engine
from mptool.loo.naive_bayes import NaiveBayesEngine, categorical_accuracy
from mptool.outputs.results import manifest
from mptool.privacy.dtp import bin_edge, pair_groups, pdtp_of, summarize
from mptool.privacy.noise import (
    DEFAULT_RECORDS,
    OrderDependence,
    floor_positions,
    floor_summary,
    measure_floor,
    order_dependence,
)
from mptool.privacy.release import describe, gate_policy, measured, release_summary
from mptool.privacy.sampling import sample_summary
from mptool.privacy.stability import beyond_pdtp, resolve_queries
from mptool.runtime import prestart
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import choose_workers, resolve_jobs

#: Per-record output columns, in order (``id`` only when the spec names an id column).
PDTP_COLUMNS = {
    "row": "0-based data row of the input CSV (header excluded)",
    "id": "value of the spec's id column (only when data.id is set)",
    "label": "the record's label (a training value: written and printed only with --show-values, "
    "mptool.outputs.formats.published; the API's table always has it)",
    "pdtp": "max over classes of |ln p_T(y|x_t) - ln p_{T minus t}(y|x_t)|, binned probabilities",
    "pdtp_raw": "the same on the raw (unbinned) probabilities, floored at 1e-12 as with bin_size 0: "
    "pdtp_raw <= DTP(t) <= dtp_upper",
    "worst_class": "the class attaining the maximum (with p_full it names the label as often as the model is "
    "right: written and printed only with --show-values, like label)",
    "p_full": "binned probability of worst_class from the model trained on T",
    "p_loo": "binned probability of worst_class from the model trained on T without the record",
    "violation": "true when the gated PDTP exceeds the threshold (DTP-1 for the default 1.0): pdtp with --gate "
    "binned (default, the paper's definition), pdtp_raw with --gate raw",
    "bin_edge": "true when pdtp exceeds the threshold but pdtp_raw does not: a violation made only by where the bin "
    "edges fall (e.g. 0.0099 vs 0.0101, raw ln 1.02, binned 0.005 vs 0.015 = ln 3)",
    "dtp_upper": "upper bound of DTP(t) over the whole feature domain, raw probabilities (Long et al. section 6, "
    "made per record and exact: naive Bayes, logistic regression); empty where none applies",
    "dtp_upper_binned": "dtp_upper carried to binned probabilities (never below ln 3 when binning): pdtp <= this",
    "dtp_upper_vacuous": "true when dtp_upper is at or above the binning cap ln((1 - b/2)/(b/2)) (5.29 for b = 0.01)",
    "dtp_queries": "with --queries train|FILE: max over the query points and classes of the binned log-ratio",
    "above_noise_floor": "with a measured noise floor: true when the gated PDTP exceeds the floor's 95th percentile "
    "(PDTP of A(T) vs A(T with a row moved to the end)); empty when no floor was measured",
    "fingerprint": "HMAC of the record's feature and label values under MPTOOL_FINGERPRINT_KEY "
    "(mptool.inputs.fingerprint): finds the record again in another run (--baseline, --waivers, mptool diff) "
    "without publishing its values; empty when the key is not set (no unkeyed hash is ever written)",
}


@dataclass(frozen=True)
class PdtpOptions:
    """Run options that are not part of the spec."""

    threshold: float = 1.0
    records: list[int] | None = None  # CSV row numbers
    sample: int | None = None
    jobs: int | None = None
    engine: str = "auto"
    backend: str = "loky"
    queries: str = "self"  # self (PDTP), train (every record of T) or a CSV path
    gate: str = "binned"  # the scale of the verdict: binned (the paper's) or raw
    noise_floor: int | None = None  # records in the noise floor's sample; None = 20 if order matters, else 0
    fail_fast: bool = False  # refit engine: stop at the first confirmed violator (in refit order)
    order: str = "risk"  # refit engine: "risk" (screened riskiest first) or "row"
    trained: str | None = None  # a skops file: the shipped model, checked to be A(T), stands for A(T)
    replicates: str | None = None  # replicate engine: "MIN:MAX" replicates per record (None: 4:32)
    budget: int | None = None  # replicate engine: most fits (replicates of T and of T minus t); None: no limit
    error_control: str = "bh"  # replicate engine: bh (FDR), holm (FWER) or record (per record)


@dataclass
class PdtpOutcome:
    """Per-record table and JSON summary of a PDTP run."""

    table: pd.DataFrame
    summary: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def select_positions(prep: Prepared, records: list[int] | None, sample: int | None) -> np.ndarray:
    """Positions in T of the records to audit: given CSV rows, a seeded sample, or all."""
    T = prep.train
    if records is not None and sample is not None:
        raise InputError("--records and --sample exclude each other; give one")
    if records is not None:
        pos_of = {int(r): i for i, r in enumerate(T.rows)}
        missing = [r for r in records if r not in pos_of]
        if missing:
            raise InputError(
                f"--records: row(s) {', '.join(map(str, missing[:5]))} are not in the training set T "
                f"({T.n} rows drawn with seed {prep.spec.seed}); list rows from T, or use --train-size with null"
            )
        return np.array(sorted({pos_of[r] for r in records}), dtype=np.int64)
    if sample is not None:
        if not 1 <= sample <= T.n:
            raise InputError(f"--sample must be between 1 and the training set size {T.n} (got {sample})")
        rng = np.random.default_rng(prep.spec.seed)
        return np.sort(rng.choice(T.n, size=sample, replace=False)).astype(np.int64)
    return np.arange(T.n, dtype=np.int64)


def noise_floor_records(template: Any, requested: int | None, n_audited: int) -> tuple[int, OrderDependence]:
    """Records in the noise floor's sample (``--noise-floor``) and the estimator's order dependence.

    Default: ``DEFAULT_RECORDS`` (at most every audited record) when the fit depends on the
    row order or may, 0 when it is exactly paired. A requested count above the number of
    audited records is refused.
    """
    dependence = order_dependence(template)
    if requested is not None and (isinstance(requested, bool) or not isinstance(requested, int | np.integer)):
        raise InputError(f"--noise-floor must be a whole number of records (got {requested!r})")
    if requested is None:
        return (0 if dependence.dependent is False else min(DEFAULT_RECORDS, n_audited)), dependence
    if requested > n_audited:
        raise InputError(
            f"--noise-floor must be at most the number of audited records {n_audited} (got {requested})"
        )
    return requested, dependence


def check_finite(p_full: np.ndarray, p_loo: np.ndarray, rows: np.ndarray, estimator: str) -> None:
    """Refuse non-finite probabilities: a NaN PDTP would otherwise read as "DTP-1 holds"."""
    bad = ~(np.isfinite(p_full).all(axis=1) & np.isfinite(p_loo).all(axis=1))
    if bad.any():
        raise InputError(
            f"model: {estimator} gives non-finite probabilities for CSV row {rows[bad][0]} "
            f"({int(bad.sum())} of {len(rows)} records), e.g. from a feature that is constant in T; "
            "drop such columns or change model.params"
        )


def record_table(
    prep: Prepared, positions: np.ndarray, p_full: np.ndarray, p_loo: np.ndarray, options: PdtpOptions,
    groups: tuple[np.ndarray, np.ndarray] | None = None,
) -> pd.DataFrame:
    """The per-record columns of ``PDTP_COLUMNS`` up to ``bin_edge`` (Long et al. 4.3-4.4, 5.2).

    ``pdtp`` on binned probabilities, ``pdtp_raw`` unbinned and floored at ``PROB_FLOOR``
    (bin size 0), ``violation`` on the ``--gate`` scale, ``bin_edge`` on both. ``groups``: the
    engine's rows of equal (p_full, p_loo) (``LooResult.groups``), else found here for a big T.
    """
    T = prep.train
    if groups is None or len(groups[1]) != len(p_full):
        groups = pair_groups(p_full, p_loo)  # a big T: each distinct pair of rows once (issue 28)
    values = pdtp_of(p_full, p_loo, prep.spec.output.bin_size, groups)
    raw = pdtp_of(p_full, p_loo, 0.0, groups).pdtp
    table = pd.DataFrame({"row": T.rows[positions]})
    if T.ids is not None:
        table["id"] = T.ids[positions]
    table["label"] = taken(T.y, positions)
    table["pdtp"] = values.pdtp
    table["pdtp_raw"] = raw
    table["worst_class"] = taken(prep.classes, values.worst)
    table["p_full"] = values.p_full
    table["p_loo"] = values.p_loo
    table["violation"] = (values.pdtp if options.gate == "binned" else raw) > options.threshold
    table["bin_edge"] = bin_edge(values.pdtp, raw, options.threshold)
    return table


def taken(values: np.ndarray, idx: np.ndarray) -> Any:
    """``values[idx]`` as the column pandas makes of it; text built from the distinct values (issue 28).

    pandas turns an object array of text into its text dtype cell by cell (0.2 CPU s for 1.41 M
    labels); when it would, the distinct values are converted once and taken by index instead.
    """
    if values.dtype != object or len(idx) <= 4096:
        return values[idx]
    known, distinct = factorized(values)  # T's labels: their kept factorisation (mptool.inputs.memo)
    if (known < 0).any():
        codes, distinct = pd.factorize(values[idx], use_na_sentinel=False)
    else:
        codes = known[idx]
    small = pd.Series(np.asarray(distinct, dtype=object))
    if not isinstance(small.dtype, pd.StringDtype) or small.isna().any():
        return values[idx]
    return small.array.take(codes)


def violation_rule(
    threshold: float, bin_size: float, gate: str, fail_fast: bool, release: Any = None
) -> Callable | None:
    """``--fail-fast``: the refit engine's test for a confirmed violator, else None.

    The same test as the table's ``violation`` column (PDTP on the ``--gate`` scale above the
    threshold of the released outputs, :func:`record_table`), so the record a run stops at is
    one the table marks.
    """
    if not fail_fast:
        return None

    def violates(p_full: np.ndarray, p_loo: np.ndarray) -> np.ndarray:
        p, q = measured(p_full, release), measured(p_loo, release)
        return pdtp_of(p, q, bin_size if gate == "binned" else 0.0).pdtp > threshold

    return violates


def keep_reported(request: LooRequest, result: Any) -> tuple[LooRequest, Any, int | None]:
    """After a ``--fail-fast`` stop, the request and result cut to the reported records; else unchanged.

    Returns the position in T of the first confirmed violator when the run stopped, else None.
    """
    done = getattr(result, "done", None)
    if done is None:
        return request, result, None
    stopped = int(request.positions[result.stopped_at])
    kept = replace(result, p_full=result.p_full[done], p_loo=result.p_loo[done], done=None, groups=None)
    return replace(request, positions=request.positions[done]), kept, stopped


def coverage(
    options: PdtpOptions, T: Any, result: Any, stopped: int | None, requested: int, violations: int
) -> dict[str, Any]:
    """Summary keys saying what the verdict covers: ``complete``, ``order`` (refit engine), ``stopped``, ``sample``.

    ``complete`` is False when ``--fail-fast`` stopped before every requested record was
    refitted: ``stopped`` then names the first confirmed violator (CSV row), how many records
    are reported (``after``, the records up to it in the refit order, the same for any
    ``--jobs``) of how many were requested (``of``), and ``refits_run``, the refits this run
    actually made (a few more: the rest of the chunks in progress, whose size depends on ``--jobs``
    and, for slow fits, on the timed fit of A(T); fewer when resumed): a cost, not a result. With ``--sample``,
    ``sample`` bounds the fraction of T above the threshold (``mptool.privacy.sampling``).
    """
    out: dict[str, Any] = {"complete": stopped is None}
    if hasattr(result, "order"):  # the refit engine; exact engines compute every record at once
        out["order"] = result.order
    if stopped is not None:
        out["stopped"] = {
            "reason": "fail-fast",
            "row": int(T.rows[stopped]),
            "after": len(result.p_full),
            "of": requested,
            "refits_run": int(result.refits),
        }
    if options.sample is not None:
        out["sample"] = sample_summary(options.sample, T.n, violations, stopped is None)
    return out


def run_engine(
    engine: Any, request: LooRequest, progress: Callable[[int, str], AbstractContextManager[Callable[[int], None]]]
) -> Any:
    """The engine's leave-one-out over ``request.positions`` with a progress bar.

    A ``ValueError`` from a fit (as in :func:`mptool.inputs.prepare.fit_checked`: a fit the data
    or the parameters make impossible, e.g. T minus one record with a single class) becomes an
    :class:`InputError` naming the engine and the usual fix.
    """
    with progress(len(request.positions), f"leave-one-out ({engine.name})") as advance:
        try:
            return engine.run(request, advance)
        except ValueError as exc:
            first = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
            raise InputError(
                f"model: leave-one-out with engine {engine.name} failed: {first} "
                "(T minus one record may be too small or have a single class; raise data.train_size)"
            ) from None


def loo_request(
    prep: Prepared, options: PdtpOptions, positions: np.ndarray, full_model: Any, jobs: int, checkpoint: Any,
    fit_s: float = 0.0,
) -> LooRequest:
    """The engine's request: T, A(T) (and how long its fit took), the records, the workers, and the
    ``--fail-fast`` stop rule."""
    spec = prep.spec
    return LooRequest(
        spec, prep.template, prep.train, full_model, prep.classes, positions, jobs, options.backend,
        checkpoint=checkpoint, fit_s=fit_s, order=options.order,
        stop_on=violation_rule(
            options.threshold, spec.output.bin_size, options.gate, options.fail_fast, spec.output.release
        ),
    )


def audited_outputs(prep: Prepared, result: Any, shipped: dict[str, Any] | None, positions: np.ndarray) -> Any:
    """The two models' outputs as audited, checked finite.

    With ``--trained`` the shipped artefact's probabilities stand for A(T)'s (checked equal to the
    spec's A(T) within the tolerance in ``prepare_pdtp``); then the spec's release policy
    (``output.release``, :mod:`mptool.privacy.release`) is applied to both models' outputs.
    """
    if shipped is not None:
        result = dataclasses.replace(result, p_full=shipped.pop("probabilities")[positions], groups=None)
    result = released(result, prep.spec.output.release)
    check_finite(result.p_full, result.p_loo, prep.train.rows[positions], prep.choice.name)
    return result


def run_facts(prep: Prepared, full_model: Any, jobs: int, accuracy: float | None = None) -> dict[str, Any]:
    """Summary keys on the run itself: T's size, classes, estimator, bin size, A(T)'s accuracy on T, jobs.

    ``accuracy``: A(T)'s accuracy on T when an engine has computed it the same way (else predicted here).
    """
    spec, T = prep.spec, prep.train
    if accuracy is None:
        with model_numerics():
            accuracy = float(np.mean(full_model.predict(T.X) == T.y))
    return {
        "n_train": T.n,
        "rows_dropped_missing": prep.population.dropped_missing,
        "classes": prep.classes.tolist(),
        "estimator": prep.choice.name,
        "bin_size": spec.output.bin_size,
        "train_accuracy": accuracy,
        "jobs": jobs,
    }


def released(result: Any, policy: Any) -> Any:
    """The engine's result with both outputs as the model releases them (``output.release``, Shokri VIII-A).

    The one place where ``pdtp`` applies the release policy (:mod:`mptool.privacy.release`):
    everything after it (PDTP, verdict, noise floor) measures the released outputs, less what an
    attacker can undo (:func:`mptool.privacy.release.measured`: a temperature never counts).
    """
    if not gate_policy(policy, result.p_full.shape[1]):
        return result
    return replace(result, p_full=measured(result.p_full, policy), p_loo=measured(result.p_loo, policy), groups=None)


def without_bounds(
    columns: dict[str, np.ndarray], summary: dict[str, Any], policy: Any
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Blank the ``dtp_upper`` columns under a release policy: the family bounds are of the unreleased model."""
    n = len(columns["dtp_upper"])
    columns = {**columns, "dtp_upper": np.full(n, np.nan), "dtp_upper_binned": np.full(n, np.nan),
               "dtp_upper_vacuous": np.full(n, None, dtype=object)}
    why = (f"none under the release policy as measured ({describe(policy)}): the family bounds are of the full "
           "probability vector, and a release policy (rounding, top-k) can raise a log-ratio")
    summary = {**summary, "upper_bound": {**summary["upper_bound"], "kind": "none", "why": why, "max": None,
                                          "median": None, "min": None, "n_vacuous": None}}
    return columns, summary


def pdtp_workers(prep: Prepared, options: PdtpOptions, engine: Any, n: int, fit_s: float) -> dict[str, Any]:
    """The worker count of the run (:func:`mptool.runtime.parallel.choose_workers`): the refit engine's
    ``n`` refits (and the noise floor's), or the replicate engine's fewest fits (MIN replicates of T
    and of T minus t per record), timed by the fit of A(T); an exact engine keeps ``--jobs``."""
    if engine.name == "replicates":
        from mptool.loo.replicates import parse_replicates

        least = parse_replicates(options.replicates)[0] * (n + 1)
        return choose_workers(options.jobs, options.backend, least, fit_s)
    if engine.name != "refit":
        jobs = resolve_jobs(options.jobs)
        return {"requested": jobs, "workers": jobs, "fits": 0, "fit_s": round(fit_s, 6),
                "why": f"{engine.name}: no refits to weigh against starting workers"}
    k, _ = noise_floor_records(prep.template, options.noise_floor, n)
    return choose_workers(options.jobs, options.backend, n + k, fit_s)


def run_pdtp(
    prep: Prepared,
    options: PdtpOptions,
    progress: Callable[[int, str], AbstractContextManager[Callable[[int], None]]],
    checkpoint: Any = None,
) -> PdtpOutcome:
    """Compute PDTP for the chosen records of T; ``progress(total, label)`` yields ``advance(n)``.

    ``checkpoint`` (a :class:`mptool.runtime.checkpoint.Checkpoint`) lets the refit and the replicate
    engines save finished chunks and skip those an interrupted run already saved (``--resume``).
    """
    t0 = time.perf_counter()
    spec, T = prep.spec, prep.train
    positions = select_positions(prep, options.records, options.sample)
    key = run_key()  # before any fit: an empty MPTOOL_FINGERPRINT_KEY stops the run here; unset: no fingerprints
    t_key = time.perf_counter()
    queries = resolve_queries(options.queries, T, spec.data.missing_values)
    engine = select_engine(options.engine, spec, prep.template, replicates=True)
    t_fit0 = time.perf_counter()
    with progress(1, f"A(T): fitting the model on the {T.n} records of T") as advance:  # a line past 5 s (issue 30)
        full_model = fit_checked(prep.template, T)
        advance(1)
    fit_s = time.perf_counter() - t_fit0  # A(T)'s fit alone (the check below refits once more)
    check_before_work(engine, prep.template, T, prep.classes, positions)  # what the work would refuse after it
    shipped = {k: v for k, v in prep.trained.items() if k != "model"} if prep.trained is not None else None
    engine, randomness = choose_engine(prep, options, engine, full_model)
    t_fit = time.perf_counter()
    workers = pdtp_workers(prep, options, engine, len(positions), fit_s)
    jobs = workers["workers"]
    request = loo_request(prep, options, positions, full_model, jobs, checkpoint, fit_s)
    if engine.name == "replicates":
        return run_randomized(prep, options, engine, request, randomness, key, progress, (t0, t_fit), workers)
    accuracy = categorical_accuracy(request) if engine.name == NaiveBayesEngine.name else None  # T encoded once
    facts = run_facts(prep, full_model, jobs, accuracy)  # before the per-record arrays exist: a lower peak (issue 28)
    t_facts = time.perf_counter()
    result = run_engine(engine, request, progress)
    requested = len(positions)
    request, result, stopped = keep_reported(request, result)
    positions = request.positions
    result = audited_outputs(prep, result, shipped, positions)
    t_loo = time.perf_counter()

    bin_size = spec.output.bin_size
    t_table = time.perf_counter()
    beyond, dtp_summary = beyond_pdtp(request, result, queries, options.queries, bin_size, progress)
    request.memo.clear()  # what the engine shared with the bound (T's codes), freed before the table: a lower peak
    table = record_table(prep, positions, result.p_full, result.p_loo, options, result.groups)
    result = replace(result, groups=None)  # the engine's row groups: not needed past the table (a lower peak)
    gated = table["pdtp" if options.gate == "binned" else "pdtp_raw"].to_numpy()
    if kept := gate_policy(spec.output.release, len(prep.classes)):
        beyond, dtp_summary = without_bounds(beyond, dtp_summary, kept)
    for name, column in beyond.items():
        table[name] = column
    t_noise = time.perf_counter()
    t_table = t_noise - t_table
    noise, above = _noise_floor(prep, options, request, gated, progress, stopped is not None)
    t_noise = time.perf_counter() - t_noise
    if above is not None:
        table["above_noise_floor"] = above
    t_prints = time.perf_counter()
    table["fingerprint"] = fingerprints(T.take(positions), key)
    t_prints = time.perf_counter() - t_prints

    summary: dict[str, Any] = summarize(table["pdtp"], options.threshold, table["pdtp_raw"], options.gate)
    summary.update(
        {
            "engine": result.engine,
            "randomness": randomness,
            "dtp": dtp_summary,
            "noise_floor": noise,
            **facts,
            **release_summary(spec.output.release, len(prep.classes)),
            "workers": {**workers, "prestart": prestart.summary()},
            "timings": {
                "fit_full_s": round(t_fit - t0, 4),
                "train_accuracy_s": round(t_facts - t_fit, 4),  # A(T)'s predictions on T
                "leave_one_out_s": round(t_loo - t_facts, 4),
                "noise_floor_s": round(t_noise, 4),
                # inside fit_full_s: the fingerprint key (mptool.inputs.fingerprint.run_key)
                "fingerprint_key_s": round(t_key - t0, 4),
                "table_s": round(t_table, 4),  # the per-record columns and the DTP bounds
                "fingerprints_s": round(t_prints, 4),
                "total_s": round(time.perf_counter() - t0, 4),
            },
            "manifest": manifest(spec.sha256(), T.sha256, spec.seed, T.source),
            "identity": identity(T, key, bin_size),
        }
    )
    summary.update(coverage(options, T, result, stopped, requested, int(table["violation"].sum())))
    if shipped is not None:
        summary["trained"] = shipped
    return PdtpOutcome(table=table, summary=summary, notes=list(prep.notes))


def _noise_floor(
    prep: Prepared,
    options: PdtpOptions,
    request: LooRequest,
    gated: np.ndarray,
    progress: Callable[[int, str], AbstractContextManager[Callable[[int], None]]],
    stopped: bool = False,
) -> tuple[dict[str, Any], np.ndarray | None]:
    """Measure the noise floor (:mod:`mptool.privacy.noise`) when it applies; its summary and column.

    A run that ``stopped`` (``--fail-fast``) measures it on the records it reports, at most.
    """
    T = prep.train
    positions = request.positions
    if stopped and options.noise_floor is not None:
        options = replace(options, noise_floor=min(options.noise_floor, len(positions)))
    k, dependence = noise_floor_records(prep.template, options.noise_floor, len(positions))
    floor = None
    if k > 0:
        sample = floor_positions(positions, k, prep.spec.seed)
        with progress(k, "noise floor (a row moved to the end of T)") as advance:
            floor = measure_floor(
                prep.template, request.full_model, T.X, T.y, prep.classes, sample,
                prep.spec.output.bin_size, request.jobs, request.backend, advance, prep.spec.output.release,
            )
    return floor_summary(floor, dependence, T.rows, gated, options.gate, options.threshold)


def run_randomized(
    prep: Prepared, options: PdtpOptions, engine: Any, request: LooRequest, randomness: dict[str, Any], key: Any,
    progress: Callable[[int, str], AbstractContextManager[Callable[[int], None]]], times: tuple[float, float],
    workers: dict[str, Any] | None = None,
) -> PdtpOutcome:
    """The audit of a randomized A with the replicate engine (:mod:`mptool.api.randomized`): table and summary.

    The noise floor (a row moved) is not measured by default: each record's bounds and its
    ``sd_full`` replace it; an explicit ``--noise-floor K`` still measures it, with a deprecation note.
    ``--queries`` and the family bounds (``dtp_upper``) need single models and are left empty.
    """
    t0, t_fit = times
    spec, T = prep.spec, prep.train
    requested = len(request.positions)
    result = run_engine(engine, request, progress)
    stopped = None
    if result.done is not None:
        stopped = int(request.positions[result.stopped_at]) if result.stopped_at is not None else None
        request = replace(request, positions=request.positions[result.done])
    positions = request.positions
    t_loo = time.perf_counter()
    table = replicate_table(prep, positions, result, options)
    n = len(table)
    table["dtp_upper"], table["dtp_upper_binned"] = np.full(n, np.nan), np.full(n, np.nan)
    table["dtp_upper_vacuous"] = np.full(n, None, dtype=object)
    notes = list(prep.notes)
    noise: dict[str, Any] = {"records": 0, "note": "replaced by the replicate engine: each record's bounds "
                             "(pdtp_low, pdtp_high) and sd_full measure the training randomness"}
    t_noise = time.perf_counter()
    if options.noise_floor:
        notes.append("--noise-floor is deprecated for randomized training: the replicate engine's bounds replace "
                     "it (measured anyway, as asked)")
        gated = table["pdtp" if options.gate == "binned" else "pdtp_raw"].to_numpy()
        noise, above = _noise_floor(prep, options, request, gated, progress, stopped is not None)
        if above is not None:
            table["above_noise_floor"] = above
    t_noise = time.perf_counter() - t_noise
    if options.queries != "self":
        notes.append("--queries: not computed with the replicate engine (a maximum over query points of replicate "
                     "means is biased upward by the training randomness: no lower bound; docs/randomness.md section 4)")
    table["fingerprint"] = fingerprints(T.take(positions), key)
    done = np.isfinite(table["pdtp"].to_numpy(dtype=float))  # a spent --budget leaves records unevaluated
    summary: dict[str, Any] = summarize(table["pdtp"][done], options.threshold, table["pdtp_raw"][done], options.gate)
    summary = replicate_verdict({**summary, "n": n, "evaluated": int(done.sum())}, result.decisions)
    summary.update({
        "engine": result.engine,
        "randomness": randomness,
        "replicates": replicate_block(result, options),
        "dtp": {"upper_bound": {"kind": "none", "why": "no family bound for a randomized training algorithm"}},
        "noise_floor": noise,
        **run_facts(prep, request.full_model, request.jobs),
        **release_summary(spec.output.release, len(prep.classes)),
        "workers": {**workers, "prestart": prestart.summary()},
        "timings": {
            "fit_full_s": round(t_fit - t0, 4),
            "leave_one_out_s": round(t_loo - t_fit, 4),
            "noise_floor_s": round(t_noise, 4),
            "total_s": round(time.perf_counter() - t0, 4),
        },
        "manifest": manifest(spec.sha256(), T.sha256, spec.seed, T.source),
        "identity": identity(T, key, spec.output.bin_size),
        "columns": {**REPLICATE_COLUMNS},
    })
    summary["replicates"]["notes"] = notes[len(prep.notes):]
    summary.update(coverage(options, T, result, stopped, requested, summary["violations"]))
    if summary.get("sample") and summary["undecided"]:
        summary["sample"]["fraction_upper_95"] = None
        summary["sample"]["method"] = "none: records are undecided, so the count of violations is not known"
    return PdtpOutcome(table=table, summary=summary, notes=notes)
