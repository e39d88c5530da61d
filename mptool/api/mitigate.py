"""``mptool mitigate``: defences against membership inference, each scored on PDTP and utility.

Families (each row of the result is one setting, scored on the same footing):

- ``release`` (Shokri et al. VIII-A): top-k, rounding, temperature, label-only -- functions of the
  model's outputs, so the whole sweep is computed from the stored p_{A(T)} and p_{A(T\\{t})}
  arrays of the baseline with no refit (:mod:`mptool.privacy.release`).
- ``regularise`` (Shokri VIII-A; Yeom et al. 3.2: membership advantage grows with the
  generalisation gap): a small grid of the estimator's regularisation parameter, each
  audited with the fastest exact engine (refits where none applies).
- ``removal`` (Long et al. section 8): the ``reduce-dtp`` result as one row.
- ``dp`` (an epsilon-DP algorithm has DTP <= epsilon over its noise: Long et al. 4.2, Definition
  4.1, derived in :mod:`mptool.inputs.dp_nb`): over an epsilon grid, with that bound beside the
  paired-seed PDTP. Categorical naive Bayes gets mptool's own ``dp_categorical_nb`` (Laplace
  noise on its counts; no optional dependency; audited by the exact naive Bayes engine, which
  downdates the counts under the same seeded noise: :mod:`mptool.loo.dp_naive_bayes`); other
  naive Bayes and logistic regression get diffprivlib's models (refitted), skipped with a note
  when diffprivlib is not usable.

Each setting gets max/mean/p95 PDTP of the released outputs as the gate measures them (binned,
Long et al. 5.2; both scales are kept), the records above the target, and accuracy and log loss
on the rows of the data outside T, beside the accuracy of always predicting the majority class.
The decision is the most accurate recommendable setting whose max PDTP is at most the target
(:func:`judge`: utility measured, above the majority class by more than :data:`MAJORITY_MARGIN`);
its spec is the recommendation, and ``mptool pdtp`` on it reproduces the claimed maximum. With a
sample the decision is confirmed on the gate the user will run (:func:`confirm`: a full audit
where an exact engine makes it cheap, else the sample's stated bound), and the sentence says which.

Randomized training (detected: the fit depends on the seed or the row order) is judged per setting
on *decided* violations beyond the randomness, with undecided records counted and never passing
(:mod:`mptool.api.mitigate_random`, docs/randomness.md section 8).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from mptool.api import mitigate_random as randomized
from mptool.api.pdtp import select_positions
from mptool.api.reduce import ReduceOptions, parse_strategy, run_reduce
from mptool.inputs.dpmodels import diffprivlib_problem
from mptool.inputs.models import proba_in
from mptool.inputs.prepare import Prepared, fit_checked, respecified
from mptool.inputs.spec import Spec, parse_spec
from mptool.loo import LooRequest, RefitEngine, select_engine
from mptool.outputs.results import manifest
from mptool.privacy.calibration import bin_probabilities
from mptool.privacy.dtp import pdtp_of, summarize
from mptool.privacy.release import apply_policy, describe, is_invertible, measured
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import choose_workers, resolve_jobs, workers_line

DEFENCES = ("release", "regularise", "removal", "dp")
#: Release policies swept by default (Shokri et al. Table III's settings; top_k only below the class count).
RELEASE_GRID: tuple[dict[str, Any], ...] = (
    {"top_k": 3}, {"top_k": 1}, {"round": 2}, {"round": 1},
    {"temperature": 2.0}, {"temperature": 5.0}, {"temperature": 20.0}, {"label_only": True},
)
#: Regularisation grid per estimator class: parameter and values (stronger regularisation to the right).
REGULARISE_GRID: dict[str, tuple[str, tuple[Any, ...]]] = {
    "CategoricalNB": ("alpha", (3.0, 10.0, 30.0, 100.0)),
    "BernoulliNB": ("alpha", (3.0, 10.0, 30.0, 100.0)),
    "MultinomialNB": ("alpha", (3.0, 10.0, 30.0, 100.0)),
    "GaussianNB": ("var_smoothing", (1e-3, 1e-2, 1e-1)),
    "LogisticRegression": ("C", (0.3, 0.1, 0.03, 0.01)),
    "TieStableKNeighborsClassifier": ("n_neighbors", (15, 45, 135)),
    "DecisionTreeClassifier": ("min_samples_leaf", (5, 20, 50)),
    "RandomForestClassifier": ("min_samples_leaf", (5, 20)),
    "MLPClassifier": ("alpha", (0.01, 1.0)),
}
#: A setting whose held-out accuracy is at most the majority-class accuracy plus this (absolute accuracy) is
#: not recommended: it is (close to) a constant model that predicts the majority class (issue 30).
MAJORITY_MARGIN = 0.01
#: Records audited by default when the estimator has no exact engine (each setting then refits once per record).
REFIT_SAMPLE = 100
#: Epsilon grid of the DP family, and which DP estimator stands in for which family.
DP_EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
DP_FOR = {"categorical_nb": "dp_categorical_nb", "nb": "dp_gaussian_nb", "lr": "dp_logistic_regression"}
#: DP estimators that need no optional dependency (mptool's own).
DP_OWN = ("dp_categorical_nb",)
NB_CLASSES = ("CategoricalNB", "BernoulliNB", "MultinomialNB", "GaussianNB")

#: Columns of mitigate.csv, in order.
MITIGATE_COLUMNS = {
    "setting": "short name of the setting",
    "family": "baseline, release, regularise, removal or dp",
    "change": "what differs from the spec (a release policy, a parameter, removals, a DP estimator)",
    "max_pdtp": "largest PDTP of the audited records (released outputs; binned, Long et al. 4.4, 5.2, unless "
    "--gate raw; mean and p95 on the same scale)",
    "mean_pdtp": "mean PDTP", "p95_pdtp": "95th percentile of PDTP",
    "above_target": "records whose PDTP exceeds the target",
    "bin_edge_only": "of those, records above it only by a bin-edge step (unbinned ratio within the target; "
    "docs/bin-edges-and-noise.md)",
    "max_pdtp_raw": "largest unbinned PDTP of the released outputs (what mptool pdtp --gate raw gates on)",
    "max_pdtp_binned": "largest binned PDTP (what mptool pdtp gates on by default)",
    "above_target_binned": "records above the target on the binned scale",
    "above_target_raw": "records above the target on the raw scale",
    "n_audited": "records audited",
    "accuracy": "accuracy on the rows of the data outside T (argmax of the released vector)",
    "log_loss": "mean -ln of the released, binned probability of the true class on the rows outside T",
    "dtp_bound": "dp only: DTP <= epsilon over the training noise (Long et al. Def. 4.1; see mptool.inputs.dp_nb); "
    "empty when dp_categorical_nb's domain is read from the data rather than declared in the spec (no guarantee)",
    "passes": "max_pdtp <= target (randomized training, replicate engine: every audited record decided below the "
    "target; a setting with undecided records is not established and does not pass)",
    "recommendable": "the setting may be recommended: a spec (removal changes the data) that hides something (a "
    "temperature alone is invertible, p from q for a known t, and changes no verdict), with utility measured on rows "
    "outside T and accuracy above the majority-class accuracy by more than MAJORITY_MARGIN",
    "why_not": "why a setting is not recommendable (empty when it is)",
    "engine": "leave-one-out engine", "fits": "model fits this setting took", "seconds": "wall time",
}


@dataclass(frozen=True)
class MitigateOptions:
    """Run options that are not part of the spec."""

    defences: tuple[str, ...] = DEFENCES
    target: float = 1.0
    sample: int | None = None
    jobs: int | None = None
    backend: str = "loky"
    max_removals: int | None = None  # None: min(50, |T| / 10)
    gate: str = "binned"  # the scale ``passes`` is judged on: binned PDTP (the paper's) or raw (unbinned)
    replicates: str | None = None  # randomized training: MIN:MAX replicates per record (None: 4:32)
    error_control: str = "bh"  # randomized training: bh (FDR), holm (FWER) or record


@dataclass(frozen=True)
class Setting:
    """One candidate: its family, a label, and the spec that re-audits to it (None: removal)."""

    family: str
    name: str
    change: str
    spec: Spec | None
    dtp_bound: float | None = None


@dataclass
class MitigateOutcome:
    """The settings table, the JSON summary and the recommended spec (None when nothing passes)."""

    table: pd.DataFrame
    summary: dict[str, Any]
    recommended: Spec | None
    notes: list[str] = field(default_factory=list)


def parse_defences(text: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``--defences``: 'all' or a comma list of :data:`DEFENCES` (validated in mptool.inputs.options)."""
    from mptool.inputs.options import check_defences

    return check_defences(text, DEFENCES, "defences")


def with_changes(spec: Spec, model: dict[str, Any] | None = None, release: dict[str, Any] | None = None) -> Spec:
    """``spec`` with model keys replaced (estimator, params merged) and/or ``output.release`` set."""
    raw = spec.dumped()
    if model:
        params = {**raw["model"]["params"], **model.get("params", {})}
        raw["model"] = {**raw["model"], **model, "params": params}
    if release is not None:
        raw["output"] = {**raw["output"], "release": release}
    return parse_spec(raw, "mitigate setting")


def release_settings(spec: Spec, n_classes: int) -> list[Setting]:
    """The release family: :data:`RELEASE_GRID` (top_k only when below the class count)."""
    out = []
    for policy in RELEASE_GRID:
        if policy.get("top_k", 0) >= n_classes:
            continue
        out.append(Setting("release", describe(policy), f"output.release: {describe(policy)}",
                           with_changes(spec, release=policy)))
    return out


def regularise_settings(spec: Spec, cls_name: str, current: dict[str, Any]) -> list[Setting]:
    """The regularisation family: :data:`REGULARISE_GRID` for the estimator, the spec's own value left out."""
    if cls_name not in REGULARISE_GRID:
        return []
    name, values = REGULARISE_GRID[cls_name]
    return [
        Setting("regularise", f"{name}={v:g}", f"model.params.{name}: {v:g}",
                with_changes(spec, model={"params": {name: v}}))
        for v in values if current.get(name) != v
    ]


def dp_settings(spec: Spec, cls_name: str) -> tuple[list[Setting], str | None]:
    """The DP family for naive Bayes and logistic regression; a note instead when it does not apply.

    Categorical naive Bayes becomes ``dp_categorical_nb`` with the spec's ``alpha`` (its other
    CategoricalNB parameters do not apply); other families use diffprivlib when it imports.
    """
    kind = ("categorical_nb" if cls_name in ("CategoricalNB", "DPCategoricalNB") else
            "nb" if cls_name in NB_CLASSES else "lr" if cls_name == "LogisticRegression" else None)
    if kind is None:
        return [], (f"dp: no DP estimator for {cls_name} (categorical naive Bayes, and diffprivlib naive Bayes "
                    "and logistic regression only)")
    est = DP_FOR[kind]
    if est not in DP_OWN and (why := diffprivlib_problem()) is not None:
        return [], f"dp: skipped: {why}; install it with: pip install 'mptool[dp]'"
    return [
        Setting("dp", f"{est} eps={e:g}", f"model.estimator: {est}, epsilon {e:g}", dp_spec(spec, est, e), dtp_bound=e)
        for e in DP_EPSILONS
    ], None


def dp_spec(spec: Spec, est: str, epsilon: float) -> Spec:
    """``spec`` with the DP estimator at ``epsilon``; dp_categorical_nb keeps only the spec's ``alpha`` and a
    declared domain (``classes``, ``n_categories``)."""
    if est not in DP_OWN:
        return with_changes(spec, model={"estimator": est, "params": {"epsilon": epsilon}})
    raw = spec.dumped()
    kept = {k: v for k, v in raw["model"]["params"].items() if k in ("alpha", "classes", "n_categories")}
    raw["model"] = {**raw["model"], "estimator": est, "params": {**kept, "epsilon": epsilon}}
    return parse_spec(raw, "mitigate setting")


def holdout_of(prep: Prepared) -> Any:
    """The rows of the data outside T (utility is measured on them)."""
    pop, T = prep.population, prep.train
    return pop.take(np.flatnonzero(~np.isin(pop.rows, T.rows)))


def utility(model: Any, holdout: Any, classes: np.ndarray, policy: Any, bin_size: float) -> tuple[float, float]:
    """Accuracy (argmax of the released vector) and log loss (released, binned) on the rows outside T."""
    if holdout.n == 0:
        return float("nan"), float("nan")
    p = apply_policy(proba_in(model, holdout.X, classes), policy)
    pos = {c: i for i, c in enumerate(classes.tolist())}
    y = np.array([pos.get(v, -1) for v in holdout.y.tolist()], dtype=np.int64)
    acc = float(np.mean(np.argmax(p, axis=1) == y))
    b = bin_probabilities(p, bin_size)
    py = np.where(y >= 0, b[np.arange(len(y)), np.maximum(y, 0)], b.min(axis=1))
    return acc, float(-np.mean(np.log(py)))


@dataclass(frozen=True)
class Trained:
    """A trained configuration's stored outputs: p_{A(T)} and p_{A(T\\{t})} on the audited records, and A(T)."""

    p_full: np.ndarray
    p_loo: np.ndarray
    model: Any
    engine: str
    fits: int
    workers: dict[str, Any] | None = None  # the refit or replicate engine's worker choice (parallel.choose_workers)
    replicate: Any = None  # randomized training: the replicate engine's result, raw draws (mitigate_random)


def fit_count(prep: Prepared, n_audited: int) -> int:
    """Model fits of one trained configuration: A(T), plus one per audited record without an exact engine."""
    engine = select_engine("auto", prep.spec, prep.template)
    return 1 + (n_audited if isinstance(engine, RefitEngine) else 0)


def train_and_loo(
    prep: Prepared, positions: np.ndarray, options: MitigateOptions, progress: Any, label: str
) -> Trained:
    """A(T) and the leave-one-out outputs of the audited records, with the fastest exact engine (refit if none)."""
    engine = select_engine("auto", prep.spec, prep.template)
    t0 = time.perf_counter()
    with progress(1, f"{label}: fitting A(T) on the {prep.train.n} records of T") as advance:  # a line past 5 s
        full = fit_checked(prep.template, prep.train)
        advance(1)
    fit_s = time.perf_counter() - t0
    if randomized.is_randomized(prep):  # decided violations beyond the training randomness (mitigate_random)
        least = randomized.parse_replicates(options.replicates)[0] * (len(positions) + 1)  # fewest fits: as pdtp's
        workers = choose_workers(options.jobs, options.backend, least, fit_s)
        result, fits = randomized.run_replicates(prep, positions, full, options, workers["workers"], progress, label)
        return Trained(result.p_full, result.p_loo, full, "replicates", 1 + fits, workers, result)
    workers = None
    if isinstance(engine, RefitEngine):  # refits: workers only when they pay (an exact engine keeps --jobs)
        workers = choose_workers(options.jobs, options.backend, len(positions), fit_s)
    jobs = workers["workers"] if workers is not None else resolve_jobs(options.jobs)
    request = LooRequest(prep.spec, prep.template, prep.train, full, prep.classes, positions, jobs, options.backend)
    with progress(len(positions), f"{label}: leave-one-out ({engine.name})") as advance:
        try:
            result = engine.run(request, advance)
        except ValueError as exc:
            first = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
            raise InputError(f"mitigate: {label}: leave-one-out failed: {first}") from None
    return Trained(result.p_full, result.p_loo, full, result.engine, fit_count(prep, len(positions)), workers)


def score(
    setting: Setting, trained: Trained, prep: Prepared, holdout: Any, target: float, seconds: float,
    gate: str = "binned", options: MitigateOptions | None = None,
) -> dict:
    """One row of mitigate.csv: PDTP of the released outputs (as ``mptool pdtp --gate GATE`` computes it)
    and utility; ``passes`` and ``above_target`` are on the ``gate`` scale."""
    spec = setting.spec or prep.spec
    policy, b = spec.output.release, spec.output.bin_size
    acc, loss = utility(trained.model, holdout, prep.classes, policy, b)
    if trained.replicate is not None:
        return replicate_row(setting, trained, prep, spec, (acc, loss), seconds, options)
    p, q = measured(trained.p_full, policy), measured(trained.p_loo, policy)  # as the gate measures the release
    s = summarize(pdtp_of(p, q, b).pdtp, target, pdtp_of(p, q, 0.0).pdtp, gate)
    return {
        "setting": setting.name, "family": setting.family, "change": setting.change,
        "max_pdtp": s["max"], "mean_pdtp": s["mean"], "p95_pdtp": s["p95"],
        "above_target": s["violations"], "bin_edge_only": s["violations_bin_edge"], "max_pdtp_raw": s["max_raw"],
        "max_pdtp_binned": s["max_binned"], "above_target_binned": s["violations_binned"],
        "above_target_raw": s["violations_raw"], "n_audited": s["n"], "accuracy": acc, "log_loss": loss,
        "dtp_bound": setting.dtp_bound if setting.dtp_bound is not None else float("nan"),
        "passes": bool(s["max"] <= target),  # the gated max: binned, or raw with gate raw
        "recommendable": setting.spec is not None and not is_invertible(policy, len(prep.classes)),
        "why_not": "" if setting.spec is not None and not is_invertible(policy, len(prep.classes)) else
        "invertible, hides nothing",
        "engine": trained.engine, "fits": trained.fits, "seconds": round(seconds, 3),
    }


def replicate_row(setting: Setting, trained: Trained, prep: Prepared, spec: Spec, utility_: tuple[float, float],
                  seconds: float, options: MitigateOptions | None) -> dict:
    """A row of mitigate.csv for randomized training: judged on decided violations (:mod:`.mitigate_random`)."""
    options = options or MitigateOptions()
    fields = randomized.judged(trained.replicate, spec, options, len(prep.classes))
    ok = setting.spec is not None and not is_invertible(spec.output.release, len(prep.classes))
    why = "" if ok else "invertible, hides nothing"
    return {
        "setting": setting.name, "family": setting.family, "change": setting.change,
        **{k: v for k, v in fields.items() if k != "not_established"},
        "accuracy": utility_[0], "log_loss": utility_[1],
        "dtp_bound": setting.dtp_bound if setting.dtp_bound is not None else float("nan"),
        "recommendable": ok, "why_not": why or fields["not_established"],
        "engine": trained.engine, "fits": trained.fits, "seconds": round(seconds, 3),
    }


def removal_budget(options: MitigateOptions, n_train: int) -> int:
    """Removals the removal family may make: ``max_removals``, by default min(50, |T| / 10)."""
    return options.max_removals if options.max_removals is not None else min(50, n_train // 10)


def removal_row(prep: Prepared, options: MitigateOptions, progress: Any, holdout: Any) -> dict | str:
    """The ``reduce-dtp`` result as a row (Long et al. 8): the best prefix's max PDTP, T minus it retrained.

    A note instead when the search cannot run (e.g. a removal leaves T with one class).
    """
    t0 = time.perf_counter()
    budget = removal_budget(options, prep.train.n)
    reduce_options = ReduceOptions(options.target, budget, parse_strategy("greedy"), options.jobs,
                                   "auto", backend=options.backend, compare_greedy=False)
    try:
        s = run_reduce(prep, reduce_options, progress).summary
    except InputError as exc:
        return f"removal: reduce-dtp stopped, no row: {exc}"
    T, spec = prep.train, prep.spec
    removed = np.isin(T.rows, np.asarray(s["best_prefix"], dtype=T.rows.dtype))
    model = fit_checked(prep.template, T.take(np.flatnonzero(~removed)))
    acc, loss = utility(model, holdout, prep.classes, spec.output.release, spec.output.bin_size)
    k = int(removed.sum())
    return {
        "setting": f"remove {k}", "family": "removal", "change": f"{k} record(s) removed from T (reduce-dtp)",
        "max_pdtp": float(s["best_max"]), "mean_pdtp": float("nan"), "p95_pdtp": float("nan"),
        "above_target": 0 if s["reached"] else float("nan"), "n_audited": T.n - k,
        "max_pdtp_binned": float(s["best_max"]), "above_target_binned": 0 if s["reached"] else float("nan"),
        "max_pdtp_raw": float("nan"), "above_target_raw": float("nan"), "why_not": "changes the data: reduce-dtp "
        "--write-clean",
        "accuracy": acc, "log_loss": loss, "dtp_bound": float("nan"),
        "passes": bool(s["best_max"] <= options.target), "recommendable": False,
        "engine": str(s.get("engine", "")), "fits": float("nan"), "seconds": round(time.perf_counter() - t0, 3),
    }


def plan_settings(prep: Prepared, options: MitigateOptions) -> tuple[list[Setting], list[str]]:
    """The settings to score after the baseline, in family order, and notes on families left out."""
    spec, cls_name, notes = prep.spec, prep.choice.cls.__name__, []
    settings: list[Setting] = []
    if "release" in options.defences:
        settings += release_settings(spec, len(prep.classes))
        notes.append(
            "release: a temperature (and a top-k of all classes but one) is listed, never recommended: it is "
            "invertible, so the gate measures the vector it came from and it changes no verdict "
            "(mptool.privacy.release)"
        )
    if "regularise" in options.defences:
        grid = regularise_settings(spec, cls_name, prep.choice.params)
        settings += grid
        if not grid:
            notes.append(f"regularise: no grid for {cls_name}")
    if "dp" in options.defences:
        dp, note = dp_settings(spec, cls_name)
        if dp and dp[0].spec is not None and (lacks := _dp_lacks(prep, dp[0].spec)):
            dp, note = [], f"dp: skipped: {lacks} class(es) of the label are not in T (the DP model's class set)"
        if dp and dp[0].spec is not None and dp[0].spec.model.estimator in DP_OWN:
            from mptool.inputs.models import dp_domain_problem

            if (why := dp_domain_problem(dp[0].spec, prep.train.schema)) is not None:
                dp = [replace(d, dtp_bound=None) for d in dp]
                notes.append(f"dp: no DTP <= epsilon claim (dtp_bound empty): {why}; the paired-seed PDTP is "
                             "measured as for any estimator")
        settings += dp
        notes += [note] if note else []
    return settings, notes


def _dp_lacks(prep: Prepared, spec: Spec) -> int:
    """Classes of the DP setting's public class set that T lacks (its rows would have no output column)."""
    from mptool.inputs.models import build_pipeline, classes_t_lacks, resolve_estimator

    template = build_pipeline(spec, prep.train.schema, resolve_estimator(spec.model, spec.seed))
    return classes_t_lacks(template, prep.classes)


def table_columns(rows: list[dict]) -> list[str]:
    """mitigate.csv's columns: :data:`MITIGATE_COLUMNS`, with the replicate engine's after ``above_target`` (filled
    in ``rows`` for settings without them)."""
    cols = list(MITIGATE_COLUMNS)
    if any("undecided" in r for r in rows):
        at = cols.index("above_target") + 1
        cols[at:at] = list(randomized.REPLICATE_MITIGATE_COLUMNS)
        for r in rows:  # a setting detected deterministic: its paired refit decides every record
            if "undecided" not in r:
                r["undecided"], r["decided_below"] = 0, r["n_audited"] - r["above_target"]
    return cols


def plan_line(prep: Prepared, settings: list[Setting], n_audited: int, removal: bool,
              options: MitigateOptions | None = None) -> tuple[str, int]:
    """The plan printed before any work: settings x fits (release settings reuse the baseline's outputs) and,
    with ``options``, the estimated time (:func:`mptool.api.costs.mitigate_seconds`: fits timed on T)."""
    fits = fit_count(prep, n_audited)
    trained = [s for s in settings if s.family != "release"]
    for s in trained:
        fits += fit_count(respecified(prep, s.spec), n_audited)
    n_release = len(settings) - len(trained)
    extra = "; removal: reduce-dtp, up to its removal budget of recomputes" if removal else ""
    line = (f"plan: {1 + len(settings) + int(removal)} settings on {n_audited} audited records of T "
            f"({n_release} release policies from the baseline's stored outputs, no refit; "
            f"{len(trained)} retrained) = {fits:,} model fits{extra}")
    reps = (1, 1)
    if randomized.is_randomized(prep):  # the count above is one paired refit per record; say what runs instead
        reps = randomized.parse_replicates((options or MitigateOptions()).replicates)
        lo, hi = reps
        line = (f"{line}; training is randomized ({prep.randomness.sources}): each trained setting is audited "
                f"with {lo}-{hi} replicates per record instead, {lo * (n_audited + 1):,} to "
                f"{hi * (n_audited + 1):,} fits each (how many a record needs is known only as the run decides it)")
    if options is not None:
        from mptool.api.costs import duration, mitigate_seconds

        lo, hi = mitigate_seconds(prep, [s.spec for s in trained], n_audited, options.jobs,
                                  sample=options.sample is not None, removal_steps=removal_budget(options, prep.train.n)
                                  if removal else 0, backend=options.backend, scored=1 + len(settings),
                                  replicates=reps if randomized.is_randomized(prep) else None)
        span = duration(lo) if hi <= lo else f"{duration(lo)} to {duration(hi)}"
        line += f"; about {span} on this machine as loaded now"
    return line, fits


def majority_accuracy(prep: Prepared, holdout: Any) -> float:
    """Accuracy on the rows outside T of always predicting T's most frequent class (first in label order on
    ties); NaN without such rows. A recommendation must beat it by more than :data:`MAJORITY_MARGIN`."""
    if holdout.n == 0:
        return float("nan")
    labels, counts = np.unique(np.asarray(prep.train.y, dtype=object).astype(str), return_counts=True)
    majority = labels[int(np.argmax(counts))]
    return float(np.mean(np.asarray(holdout.y, dtype=object).astype(str) == majority))


def judge(table: pd.DataFrame, majority: float, holdout_n: int) -> pd.DataFrame:
    """``recommendable``/``why_not`` after utility: no setting without rows outside T (utility unmeasured), none
    whose accuracy is within :data:`MAJORITY_MARGIN` of always predicting the majority class (issue 30)."""
    table = table.copy()
    for i, row in table.iterrows():
        if not row["recommendable"]:
            continue
        if holdout_n == 0:
            why = "no rows outside T: utility not measured"
        elif not np.isfinite(row["accuracy"]) or row["accuracy"] <= majority + MAJORITY_MARGIN:
            why = (f"accuracy {row['accuracy']:.4f} within {MAJORITY_MARGIN:g} of always predicting the majority "
                   f"class ({majority:.4f})")
        else:
            continue
        table.loc[i, "recommendable"], table.loc[i, "why_not"] = False, why
    return table


def decide(table: pd.DataFrame, target: float) -> tuple[int | None, dict[str, str]]:
    """Index of the most useful passing, recommendable setting (accuracy, then log loss, then max PDTP) and
    the runner-up of each family (its most useful passing setting other than the recommendation)."""
    ok = table[table["passes"]].copy()
    ok["_acc"] = ok["accuracy"].fillna(-1.0)
    ok = ok.sort_values(["_acc", "log_loss", "max_pdtp"], ascending=[False, True, True], kind="stable")
    eligible = ok[ok["recommendable"]]
    best = int(eligible.index[0]) if len(eligible) else None
    runners = {}
    for family, part in ok.groupby("family", sort=False):
        part = part[part.index != best]
        if len(part):
            runners[str(family)] = str(part.iloc[0]["setting"])
    return best, runners


def scales_clause(row: pd.Series, target: float, gate: str) -> str:
    """Both scales of a setting's max PDTP, and whether the other scale's gate would fail (issue 26)."""
    other = "raw" if gate == "binned" else "binned"
    above = row[f"above_target_{other}"]
    if pd.isna(row[f"max_pdtp_{other}"]):
        return f"max PDTP {row['max_pdtp']:.4f} ({gate})"
    if pd.isna(above):  # the replicate engine decides on the gate's scale only
        return (f"max PDTP estimate {row['max_pdtp']:.4f} ({gate}, the gate; every record decided below the target "
                "beyond the training randomness)")
    said = (f"{int(above)} record(s) above the target on the {other} scale: mptool pdtp --gate {other} would "
            "fail" if above else f"also within it on the {other} scale")
    return f"max PDTP {row['max_pdtp']:.4f} ({gate}, the gate) and {row[f'max_pdtp_{other}']:.4f} ({other}; {said})"


def evidence_clause(evidence: dict[str, Any]) -> str:
    """What the recommendation rests on: a full audit of T, or a sample with its bound (never a bare sample)."""
    if evidence["basis"] == "full":
        return f"audited on all {evidence['n']:,} records of T"
    if evidence["basis"] == "confirmed":
        return (f"chosen on a seeded sample of {evidence['k']} records, then confirmed by a full audit of all "
                f"{evidence['n']:,} records of T")
    return (f"on a seeded sample of {evidence['k']} of {evidence['n']:,} records only: no violation among them, so "
            f"with 95% confidence at most {100 * evidence['fraction_upper_95']:.1f}% of T is above the target; "
            "DTP-1 not established for all of T (mptool pdtp on the recommended spec without --sample audits "
            "every record)")


def sentence(table: pd.DataFrame, best: int | None, target: float, holdout_n: int, gate: str = "binned",
             evidence: dict[str, Any] | None = None, majority: float = float("nan")) -> str:
    """The recommendation in one sentence (no record values: settings and aggregate numbers only); a
    recommendation names both scales and what it rests on (a full audit or a sample's bound)."""
    base = table.iloc[0]
    if best is None and holdout_n == 0:
        return ("No recommendation: utility cannot be judged, as there are no rows outside T (data.train_size "
                "null makes T the whole file); give --train-size below the number of usable rows to hold rows out.")
    if best is None:
        low = table.loc[table["max_pdtp"].idxmin()]
        passing = table[table["passes"]]
        if len(passing):
            names = ", ".join(f"{r['setting']} ({_why_not(r)})" for _, r in passing.iterrows())
            text = (f"No recommendable setting keeps max PDTP within the target {target:g}; passing but not "
                    f"recommended: {names}.")
        else:
            text = (f"No setting keeps max PDTP within the target {target:g}; the lowest max PDTP is "
                    f"{low['max_pdtp']:.4f} ({low['setting']}, {low['family']}); baseline {base['max_pdtp']:.4f}.")
        only_edge = (table["above_target"] == table["bin_edge_only"]) & (table["above_target"] > 0)
        edge = table[~table["passes"] & only_edge]
        if len(edge):
            text += (f" {len(edge)} setting(s) fail only by bin-edge steps (e.g. {edge.iloc[0]['setting']}: every "
                     "record above the target is above it only after binning; unbinned maxima in max_pdtp_raw; "
                     "--gate raw judges on those).")
        return text + not_established_clause(table)
    row = table.loc[best]
    evidence = evidence or {"basis": "full", "n": int(row["n_audited"])}
    return (f"Use {row['setting']} ({row['family']}): {scales_clause(row, target, gate)}, within the target "
            f"{target:g}, {evidence_clause(evidence)}; accuracy "
            f"{row['accuracy']:.4f} on {holdout_n:,} rows outside T (always the majority class: {majority:.4f}; "
            f"baseline: max PDTP {base['max_pdtp']:.4f}, accuracy {base['accuracy']:.4f}).")


def not_established_clause(table: pd.DataFrame) -> str:
    """Randomized training: the settings with no decided violation that still do not pass (records undecided)."""
    if "undecided" not in table:
        return ""
    open_ = table[(table["undecided"] > 0) & (table["above_target"] == 0)]
    if not len(open_):
        return ""
    first = open_.iloc[0]
    return (f" {len(open_)} setting(s) not established: no record decided above the target, but records undecided "
            f"beyond the training randomness (e.g. {first['setting']}: {int(first['undecided'])} undecided); never "
            "recommended (fail closed); more replicates (--replicates) or a larger margin may decide them.")


def _why_not(row: pd.Series) -> str:
    """Why a passing setting is not recommended."""
    return str(row.get("why_not") or ("changes the data: reduce-dtp --write-clean" if row["family"] == "removal"
                                      else "invertible, hides nothing"))


def run_mitigate(prep: Prepared, options: MitigateOptions, progress: Any,
                 on_line: Callable[[str], None]) -> MitigateOutcome:
    """Score the baseline and every setting of the chosen families; decide (module docstring)."""
    t0 = time.perf_counter()
    positions = select_positions(prep, None, options.sample)
    holdout = holdout_of(prep)
    settings, notes = plan_settings(prep, options)
    if holdout.n == 0:
        notes.append("no rows outside T (data.train_size null: T is the whole file): utility cannot be judged, so "
                     "nothing will be recommended; give --train-size below the number of usable rows to hold rows out")
        on_line(f"note: {notes[-1]}")
    prep = randomized.with_randomness(prep, progress) if fit_count(prep, 2) > 1 else prep  # replicates?
    removal = "removal" in options.defences and fit_count(prep, 2) == 1
    if "removal" in options.defences and not removal:
        notes.append("removal: skipped: no exact engine for this estimator (reduce-dtp would refit T per step)")
    with progress(1, "plan: timing fits of the settings for the estimate") as advance:  # issue 30: a line past 5 s
        line, fits = plan_line(prep, settings, len(positions), removal, options)
        advance(1)
    on_line(line)
    t = time.perf_counter()
    base = train_and_loo(prep, positions, options, progress, "baseline")
    chosen = {"baseline": base.workers}
    if base.workers is not None:
        on_line(workers_line(base.workers, "the baseline's refits"))
    rows = [score(Setting("baseline", "baseline", "none (the spec as given)", prep.spec), base, prep, holdout,
                  options.target, time.perf_counter() - t, options.gate, options)]
    for i, s in enumerate(settings, 1):
        on_line(f"setting {i}/{len(settings)}: {s.family}: {s.name}")
        t = time.perf_counter()
        trained = base if s.family == "release" else None
        if trained is None:
            sub = randomized.with_randomness(replace(respecified(prep, s.spec), randomness=None), progress)
            trained = train_and_loo(sub, positions, options, progress, s.name)
            chosen[s.name] = trained.workers
            if trained.workers is not None:
                on_line(workers_line(trained.workers, f"{s.name}'s refits"))
        if s.family == "release":
            trained = replace(trained, fits=0)
        rows.append(score(s, trained, prep, holdout, options.target, time.perf_counter() - t, options.gate, options))
    if removal:
        on_line(f"removal: reduce-dtp (greedy, at most {removal_budget(options, prep.train.n)} removals)")
        row = removal_row(prep, options, progress, holdout)
        notes += [row] if isinstance(row, str) else []
        rows += [] if isinstance(row, str) else [row]
    majority = majority_accuracy(prep, holdout)
    table = judge(pd.DataFrame(rows, columns=table_columns(rows)), majority, holdout.n)
    named = {"baseline": Setting("baseline", "baseline", "none (the spec as given)", prep.spec),
             **{r["setting"]: s for r, s in zip(rows[1:], settings, strict=False)}}
    table, best, evidence, confirmed = confirm(prep, options, table, named, holdout, progress, on_line)
    _, runners = decide(table, options.target)
    runners = {f: s for f, s in runners.items() if best is None or s != table.loc[best, "setting"]}
    recommended = None if best is None else named[str(table.loc[best, "setting"])].spec
    summary = summary_of(prep, options, table, best, runners, line, fits, holdout.n)
    summary.update({"majority_accuracy": majority, "majority_margin": MAJORITY_MARGIN, "evidence": evidence,
                    "sentence": sentence(table, best, options.target, holdout.n, options.gate, evidence, majority)})
    if confirmed is not None and summary["recommended"] is not None:
        summary["recommended"].update(confirmed)
    summary.update({"notes": notes, "timings": {"total_s": round(time.perf_counter() - t0, 3)}})
    summary["workers"] = {name: w for name, w in chosen.items() if w is not None}  # settings refitted per record
    if prep.randomness is not None:  # no exact engine: detected before the audit (mitigate_random)
        summary["randomness"] = randomized.randomness_block(prep.randomness, options)
    return MitigateOutcome(table, summary, recommended, notes)


def confirm(
    prep: Prepared, options: MitigateOptions, table: pd.DataFrame, named: dict[str, Setting], holdout: Any,
    progress: Any, on_line: Callable[[str], None],
) -> tuple[pd.DataFrame, int | None, dict[str, Any] | None, dict[str, Any] | None]:
    """The decision on the gate the user will run (every record of T), not on a sample alone (issue 26).

    Without a sample (or a sample of all of T) the decision stands. With one, the candidates are
    taken in :func:`decide`'s order: one with an exact engine is audited on all of T (one fit and
    one exact leave-one-out) and recommended only when that full audit passes (else marked
    ``fails the full audit`` and the next is tried); one without an exact engine (a refit per record)
    is recommended on the sample with its stated bound: the 95% Clopper-Pearson upper bound on the
    fraction of T above the target (:mod:`mptool.privacy.sampling`), never as "DTP-1 holds".
    Returns the table, the recommended index, the evidence block and the confirmed row's numbers.
    """
    from mptool.privacy.sampling import clopper_pearson_upper

    n, k = prep.train.n, options.sample
    best, _ = decide(table, options.target)
    if k is None or k >= n:
        return table, best, (None if best is None else {"basis": "full", "n": n}), None
    while best is not None:
        setting = named[str(table.loc[best, "setting"])]
        sub = respecified(prep, setting.spec)
        if fit_count(sub, 2) > 1:
            upper = clopper_pearson_upper(int(table.loc[best, "above_target"]), k)
            return table, best, {"basis": "sample", "k": k, "n": n, "fraction_upper_95": upper}, None
        on_line(f"confirming {setting.name}: a full audit of all {n} records of T (exact engine)")
        t = time.perf_counter()
        full = train_and_loo(sub, np.arange(n, dtype=np.int64), options, progress, f"{setting.name} (all of T)")
        row = score(setting, full, prep, holdout, options.target, time.perf_counter() - t, options.gate)
        if row["passes"]:
            keep = ("max_pdtp", "max_pdtp_binned", "max_pdtp_raw", "above_target_binned", "above_target_raw",
                    "mean_pdtp", "n_audited")
            for key in keep:
                table.loc[best, key] = row[key]
            return table, best, {"basis": "confirmed", "k": k, "n": n}, {k_: row[k_] for k_ in keep}
        table.loc[best, ["recommendable", "why_not"]] = [
            False, f"fails the full audit of all {n} records (max PDTP {row['max_pdtp']:.4f})"]
        best, _ = decide(table, options.target)
    return table, None, None, None


def summary_of(prep: Prepared, options: MitigateOptions, table: pd.DataFrame, best: int | None,
               runners: dict[str, str], line: str, fits: int, holdout_n: int) -> dict[str, Any]:
    """The JSON summary: the decision, the runner-ups, the plan and the manifest."""
    T, spec = prep.train, prep.spec
    rec = None
    if best is not None:
        row = table.loc[best]
        rec = {k: row[k] for k in ("setting", "family", "change", "max_pdtp", "max_pdtp_binned", "max_pdtp_raw",
                                   "above_target_binned", "above_target_raw", "mean_pdtp", "n_audited", "accuracy",
                                   "log_loss")}
    return {
        "verdict": "pass" if best is not None else "fail",
        "target": options.target, "gate": options.gate, "defences": list(options.defences), "n_train": T.n,
        "n_audited": int(table.iloc[0]["n_audited"]), "sample": options.sample, "holdout_rows": holdout_n,
        "estimator": prep.choice.name, "recommended": rec, "runners_up": runners,
        "plan": {"line": line, "fits": fits}, "manifest": manifest(spec.sha256(), T.sha256, spec.seed, T.source),
    }


@contextmanager
def _quiet(total: int, label: str) -> Iterator[Callable[[int], None]]:
    yield lambda n: None


@dataclass(frozen=True)
class MitigateResult:
    """:func:`mitigate`'s result: one ``table`` row per setting, the ``summary``, the ``recommended`` spec."""

    table: pd.DataFrame
    summary: Mapping[str, Any]
    spec: Spec
    recommended: Spec | None
    notes: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """'pass' when some recommendable setting passes the target, else 'fail'."""
        return str(self.summary["verdict"])


def mitigate(
    data: Any,
    spec: Any,
    *,
    defences: str | tuple[str, ...] = "all",
    target: float = 1.0,
    sample: int | None = None,
    max_removals: int | None = None,
    gate: str = "binned",
    jobs: int | None = None,
    backend: str = "loky",
    scheduler: str | None = None,
    allow_import: tuple[str, ...] = (),
    progress: Any = None,
    on_line: Callable[[str], None] | None = None,
    prepared: Prepared | None = None,
    replicates: str | None = None,
    error_control: str = "bh",
) -> MitigateResult:
    """Score defences against membership inference on ``spec`` and recommend the most useful that passes.

    ``target`` is the largest max PDTP accepted (1.0: DTP-1); ``sample`` audits a seeded sample
    of K records of T (as ``mptool pdtp --sample K``); ``max_removals`` bounds the removal family
    (None: min(50, |T| / 10)); ``gate`` is the scale a setting passes on (``binned``, the
    paper's; ``raw``: unbinned PDTP, which bin-edge steps do not trip; the removal row stays
    binned, as reduce-dtp is); ``on_line(text)`` gets the plan and each
    setting as it starts. See the module docstring for the families. For randomized training (detected:
    :mod:`mptool.api.mitigate_random`) a setting passes only when every audited record is decided below the
    target beyond the randomness; ``replicates`` ("MIN:MAX") and ``error_control`` (bh, holm, record) set how.
    """
    from mptool.api.operations import as_spec
    from mptool.inputs import options as checks
    from mptool.inputs.prepare import prepare
    from mptool.runtime.parallel import check_backend, session

    checks.check_operation(jobs=jobs, scheduler=scheduler, allow_import=allow_import, sample=sample,
                           max_removals=max_removals)
    checks.check_target(target, "target")
    checks.check_gate(gate, "gate")
    randomized.check_options(replicates, error_control)
    chosen = parse_defences(defences)
    spec = as_spec(spec)
    backend = check_backend(backend, scheduler)
    options = MitigateOptions(chosen, float(target), sample, jobs, backend, max_removals, gate, replicates,
                              error_control)
    prep = prepared or prepare(data, spec, allow_import)
    select_positions(prep, None, sample)  # a --sample above |T| fails before any work
    notes: list[str] = []
    if sample is None and fit_count(prep, 2) > 1 and prep.train.n > REFIT_SAMPLE:
        sample = REFIT_SAMPLE
        notes.append(f"no exact engine for {prep.choice.name}: auditing a seeded sample of {sample} records of T "
                     f"(--sample {sample}; give --sample to change it); re-audit with mptool pdtp --sample {sample}")
    options = replace(options, sample=sample)
    with session(backend, scheduler, jobs):
        outcome = run_mitigate(prep, options, progress or _quiet, on_line or (lambda line: None))
    return MitigateResult(outcome.table, MappingProxyType(outcome.summary), spec, outcome.recommended,
                          (*prep.notes, *notes, *outcome.notes))
