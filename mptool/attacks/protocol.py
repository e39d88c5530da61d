"""The evaluation protocol of Long et al. (section 5.4) around the membership attacks.

1. A candidate set D of ``candidates`` rows is drawn (seeded) from every usable CSV row.
   ``targets`` records of D are the adversary's targets.
2. In each of ``iterations`` iterations D is split into equal halves D1, D2; the target
   model A(D1) is attacked on every target, then A(D2), so each target is once a member and
   once not (baseline accuracy 0.5). The training-set size is therefore |D| / 2 and the
   spec's data.train_size is not used.
3. Per-target accuracy of an attack = correct guesses / attacks on that record (2 per
   iteration). PDTP of each target is measured while it is a member in the first
   ``pdtp_iterations`` iterations (one leave-one-out per iteration) and averaged.
4. Over all attacks: accuracy, precision, recall, F1, ROC AUC, advantage TPR - FPR (Yeom et
   al., Definition 4), TPR at 1% and 0.1% FPR, and the Pearson and Spearman correlations of
   per-target accuracy with mean PDTP (Long et al., Tables 1 and 2).

Every random choice is seeded from the spec's seed and a per-phase tag, so results do not
depend on --jobs.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.metrics import roc_auc_score, roc_curve
from threadpoolctl import threadpool_limits

from mptool.attacks import ATTACK_CHOICES, NEEDS_EVIDENCE, RESULT_NAMES
from mptool.attacks import lira as lira_mod
from mptool.attacks.leakage import kl_leakage
from mptool.attacks.shadows import (
    ShadowPool,
    parse_source,
    rng_for,
    train_pairs,
    train_pool,
    train_synthetic,
)
from mptool.attacks.targeted import distance, frequency
from mptool.attacks.threshold import expected_training_loss, threshold
from mptool.attacks.untargeted import FeatureEncoder, train_untargeted
from mptool.inputs.models import fit, proba_in
from mptool.inputs.prepare import Prepared, fit_checked
from mptool.loo import LooRequest, select_engine
from mptool.outputs.results import manifest
from mptool.privacy.calibration import bin_probabilities
from mptool.privacy.dtp import pdtp
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import chunk_positions, resolve_jobs, run_tasks

TAG_CANDIDATES, TAG_TARGETS, TAG_SPLIT = 1, 2, 3
#: Most ROC points kept per attack in attack.json.
ROC_POINTS = 200

#: attack.csv columns (``<attack>_accuracy`` appears once per attack run, in run order).
ATTACK_COLUMNS = {
    "row": "0-based data row of the input CSV (header excluded)",
    "id": "value of the spec's id column (only when data.id is set)",
    "label": "the record's label",
    "pdtp_mean": "mean PDTP of the record while a member, over the first --pdtp-iterations iterations",
    "<attack>_accuracy": "per-target accuracy: correct membership guesses / attacks on the record (2 per iteration)",
    "max_accuracy": "largest per-target accuracy over the attacks run",
    "lira_score": "mean online LiRA log-likelihood ratio while the record is a member (empty without lira)",
    "kl_leakage": "Farokhi-Kaafar KL membership leakage (Gaussian approximation) from in/out shadow outputs",
    "n_attacks": "number of attacks on the record (2 x iterations)",
    "pdtp_measurements": "number of PDTP measurements averaged in pdtp_mean",
}


@dataclass(frozen=True)
class AttackOptions:
    """Run options of ``mptool attack`` that are not part of the spec."""

    attacks: tuple[str, ...] = ATTACK_CHOICES
    candidates: int = 2000
    iterations: int = 10
    targets: int = 100
    shadows: int = 20
    pairs: int = 5
    shadow_pool: int = 0
    shadow_data: str = "population"
    per_class: bool = False
    pdtp_iterations: int = 10
    jobs: int | None = None
    engine: str = "auto"
    backend: str = "loky"
    max_accuracy: float | None = None
    max_auc: float | None = None


@dataclass
class AttackOutcome:
    """Per-target table, per-attack metrics and the run summary."""

    table: pd.DataFrame
    attacks: dict[str, dict[str, Any]]
    summary: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def parse_attacks(text: str) -> tuple[str, ...]:
    """``all`` or a comma-separated subset of the attack names, in canonical order."""
    parts = [p.strip().lower() for p in text.split(",") if p.strip()]
    if not parts:
        raise InputError("--attacks needs at least one attack name or 'all'")
    if "all" in parts:
        return ATTACK_CHOICES
    bad = [p for p in parts if p not in ATTACK_CHOICES]
    if bad:
        raise InputError(f"--attacks: unknown attack '{bad[0]}' (choose from {', '.join(ATTACK_CHOICES)} or all)")
    return tuple(a for a in ATTACK_CHOICES if a in parts)


# ---------------------------------------------------------------------------- metrics


def tpr_at_fpr(fpr: np.ndarray, tpr: np.ndarray, limit: float) -> float:
    """Largest TPR on the ROC curve with FPR <= ``limit``."""
    ok = fpr <= limit + 1e-15
    return float(tpr[ok].max()) if ok.any() else 0.0


def downsample_roc(fpr: np.ndarray, tpr: np.ndarray, points: int = ROC_POINTS) -> tuple[list[float], list[float]]:
    """At most ``points`` ROC points, end points kept, evenly spaced along the curve."""
    if len(fpr) <= points:
        return fpr.tolist(), tpr.tolist()
    idx = np.unique(np.round(np.linspace(0, len(fpr) - 1, points)).astype(int))
    return fpr[idx].tolist(), tpr[idx].tolist()


def binary_metrics(member: np.ndarray, decision: np.ndarray, score: np.ndarray) -> dict[str, Any]:
    """Accuracy, precision, recall, F1, advantage (TPR - FPR), ROC AUC, TPR at 1% / 0.1% FPR, ROC points.

    Precision with no "member" guess is 0 (as F1); AUC is None when only one truth occurs.
    """
    member = np.asarray(member, dtype=bool).ravel()
    decision = np.asarray(decision, dtype=bool).ravel()
    score = np.asarray(score, dtype=float).ravel()
    tp = int(np.sum(decision & member))
    fp = int(np.sum(decision & ~member))
    fn = int(np.sum(~decision & member))
    tn = int(np.sum(~decision & ~member))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    fpr_dec = fp / (fp + tn) if fp + tn else 0.0
    out: dict[str, Any] = {
        "n_attacks": int(member.size),
        "accuracy": (tp + tn) / member.size if member.size else float("nan"),
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        "advantage": recall - fpr_dec,
        "auc": None,
        "tpr_at_1pct_fpr": None,
        "tpr_at_0.1pct_fpr": None,
        "roc": {"fpr": [], "tpr": []},
    }
    if 0 < member.sum() < member.size:
        finite = np.nan_to_num(score, nan=0.0, posinf=1e300, neginf=-1e300)
        fpr, tpr, _ = roc_curve(member, finite)
        out["auc"] = float(roc_auc_score(member, finite))
        out["tpr_at_1pct_fpr"] = tpr_at_fpr(fpr, tpr, 0.01)
        out["tpr_at_0.1pct_fpr"] = tpr_at_fpr(fpr, tpr, 0.001)
        f, t = downsample_roc(fpr, tpr)
        out["roc"] = {"fpr": f, "tpr": t}
    return out


def correlations(accuracy: np.ndarray, pdtp_mean: np.ndarray) -> dict[str, float | None]:
    """Pearson and Spearman correlation of per-target accuracy with mean PDTP, with p-values.

    None where undefined (fewer than 3 records with both values, or a constant input).
    """
    a = np.asarray(accuracy, dtype=float)
    p = np.asarray(pdtp_mean, dtype=float)
    ok = np.isfinite(a) & np.isfinite(p)
    empty: dict[str, float | None] = {"pearson": None, "pearson_p": None, "spearman": None, "spearman_p": None}
    if ok.sum() < 3 or np.ptp(a[ok]) == 0 or np.ptp(p[ok]) == 0:
        return empty
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r, rp = stats.pearsonr(a[ok], p[ok])
        s, sp = stats.spearmanr(a[ok], p[ok])
    return {"pearson": float(r), "pearson_p": float(rp), "spearman": float(s), "spearman_p": float(sp)}


# ---------------------------------------------------------------------------- target models


def target_chunk(
    template: Any,
    X: pd.DataFrame,
    y: np.ndarray,
    classes: np.ndarray,
    in_first: np.ndarray,
    targets: np.ndarray,
    bin_size: float,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Fit A(D1) and A(D2) for each split row of ``in_first``: binned outputs on the targets, train/test accuracy."""
    out = []
    for mask in in_first:
        q = np.empty((2, len(targets), len(classes)))
        train_acc, test_acc = np.empty(2), np.empty(2)
        for h, half in enumerate((mask, ~mask)):
            model = fit(template, X.iloc[np.flatnonzero(half)], y[half])
            q[h] = bin_probabilities(proba_in(model, X.iloc[targets], classes), bin_size)
            pred = model.predict(X)
            train_acc[h] = np.mean(pred[half] == y[half])
            test_acc[h] = np.mean(pred[~half] == y[~half])
        out.append((q, train_acc, test_acc))
    return out


# ---------------------------------------------------------------------------- the run


Progress = Callable[[int, str], AbstractContextManager[Callable[[int], None]]]


def _check(options: AttackOptions, population_n: int) -> None:
    o = options
    if o.candidates < 4 or o.candidates % 2:
        raise InputError(f"--candidates must be an even number of at least 4 (got {o.candidates})")
    if o.candidates > population_n:
        raise InputError(
            f"--candidates is {o.candidates} but the data has only {population_n} usable rows; lower --candidates"
        )
    if not 1 <= o.targets <= o.candidates:
        raise InputError(f"--targets must be between 1 and --candidates ({o.candidates}) (got {o.targets})")
    if o.iterations < 1:
        raise InputError(f"--iterations must be at least 1 (got {o.iterations})")
    if o.pdtp_iterations < 0:
        raise InputError(f"--pdtp-iterations must be 0 or more (got {o.pdtp_iterations})")
    if o.shadows < 1 or o.pairs < 1:
        raise InputError("--shadows and --pairs must be at least 1")
    if o.shadow_pool < 0 or o.shadow_pool == 1:
        raise InputError(f"--shadow-pool must be 0 (off) or at least 2 models (got {o.shadow_pool})")
    for name, v in (("--max-accuracy", o.max_accuracy), ("--max-auc", o.max_auc)):
        if v is not None and not 0.0 <= v <= 1.0:
            raise InputError(f"{name} must be between 0 and 1 (got {v})")


def run_attack(prep: Prepared, options: AttackOptions, progress: Progress) -> AttackOutcome:
    """Run the protocol and every chosen attack; ``progress(total, label)`` yields ``advance(n)``.

    BLAS/OpenMP pools are limited to one thread in this process: the protocol makes many
    small fits, which multi-threaded BLAS slows down (several times over on a busy machine);
    parallelism comes from --jobs worker processes instead (joblib limits theirs likewise).
    """
    with threadpool_limits(limits=1):
        return _run_attack(prep, options, progress)


def _run_attack(prep: Prepared, options: AttackOptions, progress: Progress) -> AttackOutcome:
    t_start = time.perf_counter()
    spec, o = prep.spec, options
    seed, bin_size = spec.seed, spec.output.bin_size
    pop = prep.population
    _check(o, pop.n)
    source, fraction = parse_source(o.shadow_data)
    jobs = resolve_jobs(o.jobs)
    engine = select_engine(o.engine, spec, prep.template) if o.pdtp_iterations else None
    notes = list(prep.notes)
    timings: dict[str, float] = {}
    fits: dict[str, int] = {}

    cand = np.sort(rng_for(seed, TAG_CANDIDATES).choice(pop.n, size=o.candidates, replace=False))
    D = pop.take(cand)
    classes = np.array(sorted(set(D.y.tolist()), key=lambda v: (str(type(v)), v)), dtype=object)
    if len(classes) < 2:
        raise InputError(f"{pop.source}: the candidate set has a single class; raise --candidates")
    cls_pos = {c: i for i, c in enumerate(classes)}
    y_idx = np.array([cls_pos[v] for v in D.y], dtype=np.int64)
    n_half = o.candidates // 2
    tpos = np.sort(rng_for(seed, TAG_TARGETS).choice(o.candidates, size=o.targets, replace=False))
    in_first = np.zeros((o.iterations, o.candidates), dtype=bool)
    for i in range(o.iterations):
        in_first[i, rng_for(seed, TAG_SPLIT, i).permutation(o.candidates)[:n_half]] = True
    fit_checked(prep.template, D.take(np.flatnonzero(in_first[0])))  # bad data/params -> exit 2 early

    # Phase 1: target models A(D1), A(D2) per iteration.
    t0 = time.perf_counter()
    with progress(o.iterations, "target models") as advance:
        parts = run_tasks(
            target_chunk,
            ((prep.template, D.X, D.y, classes, in_first[c], tpos, bin_size) for c in chunk_positions(
                np.arange(o.iterations), jobs, per_job=1)),
            jobs=jobs,
            backend=o.backend,
            on_result=lambda r: advance(len(r)),
        )
    flat = [r for part in parts for r in part]
    q_all = np.stack([r[0] for r in flat])  # (I, 2, targets, k)
    train_acc = float(np.mean([r[1] for r in flat]))
    test_acc = float(np.mean([r[2] for r in flat]))
    member = np.stack([np.stack([in_first[i, tpos], ~in_first[i, tpos]]) for i in range(o.iterations)])  # (I,2,t)
    fits["target"] = 2 * o.iterations
    timings["target_models_s"] = time.perf_counter() - t0

    # Phase 2: PDTP of each target while a member, first pdtp_iterations iterations.
    t0 = time.perf_counter()
    pdtp_sum = np.zeros(o.targets)
    pdtp_n = np.zeros(o.targets, dtype=int)
    n_pdtp = min(o.pdtp_iterations, o.iterations)
    engine_name = None
    if engine is not None and n_pdtp:
        with progress(n_pdtp * o.targets, f"PDTP leave-one-out ({engine.name})") as advance:
            for i in range(n_pdtp):
                for half in (in_first[i], ~in_first[i]):
                    half_idx = np.flatnonzero(half)
                    which = np.flatnonzero(half[tpos])
                    if not which.size:
                        continue
                    Th = D.take(half_idx)
                    positions = np.searchsorted(half_idx, tpos[which]).astype(np.int64)
                    model = fit(prep.template, Th.X, Th.y)
                    req = LooRequest(spec, prep.template, Th, model, classes, positions, jobs, o.backend)
                    res = engine.run(req, advance)
                    engine_name = res.engine
                    vals = pdtp(bin_probabilities(res.p_full, bin_size), bin_probabilities(res.p_loo, bin_size))
                    pdtp_sum[which] += vals.pdtp
                    pdtp_n[which] += 1
        fits["pdtp_full"] = 2 * n_pdtp
        fits["pdtp_leave_one_out_records"] = int(pdtp_n.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        pdtp_mean = np.where(pdtp_n > 0, pdtp_sum / np.maximum(pdtp_n, 1), np.nan)
    timings["pdtp_s"] = time.perf_counter() - t0

    # Phase 3: shadow models.
    wants = set(o.attacks)
    need_evidence = bool(wants & NEEDS_EVIDENCE)
    need_general = "threshold" in wants or ("untargeted" in wants and source == "population")
    pool: ShadowPool | None = None
    general: ShadowPool | None = None
    pairs = None
    t0 = time.perf_counter()
    if o.shadow_pool:
        with progress(o.shadow_pool, "shadow pool") as advance:
            pool = train_pool(prep.template, D.X, D.y, classes, o.shadow_pool, n_half, seed, bin_size, jobs,
                              o.backend, advance)
        fits["shadow_pool"] = o.shadow_pool
        general = pool
        small = int(min(pool.members[:, tpos].sum(axis=0).min(), (~pool.members[:, tpos]).sum(axis=0).min()))
        if need_evidence and small == 0:
            raise InputError(f"--shadow-pool {o.shadow_pool}: a target is in all or none of the pool; use more models")
    else:
        if need_general:
            with progress(o.shadows, "shadow models") as advance:
                general = train_pool(prep.template, D.X, D.y, classes, o.shadows, n_half, seed, bin_size, jobs,
                                     o.backend, advance)
            fits["shadow_general"] = o.shadows
        if need_evidence:
            with progress(o.iterations * o.targets, f"shadow pairs ({2 * o.pairs} per target)") as advance:
                pairs = train_pairs(prep.template, D.X, D.y, classes, tpos, o.iterations, o.pairs, n_half, seed,
                                    bin_size, jobs, o.backend, advance)
            fits["shadow_pairs"] = 2 * o.pairs * o.targets * o.iterations
    timings["shadows_s"] = time.perf_counter() - t0

    def evidence(i: int, t: int) -> tuple[np.ndarray, np.ndarray]:
        if pool is not None:
            return pool.evidence(int(tpos[t]))
        assert pairs is not None
        return pairs[i].in_preds[t], pairs[i].out_preds[t]

    # Phase 4: attacks.
    t0 = time.perf_counter()
    shape = member.shape
    results: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    extra: dict[str, Any] = {}
    ty = y_idx[tpos]
    if "untargeted" in wants:
        encoder = FeatureEncoder.fit(D.X, D.schema)
        if source == "population":
            assert general is not None
            K = general.size
            x_rows = np.tile(encoder.transform(D.X), (K, 1))
            y_rows = np.tile(y_idx, K)
            q_rows = general.preds.reshape(-1, len(classes))
            m_rows = general.members.reshape(-1)
        else:
            with progress(o.shadows, f"shadow models ({o.shadow_data} data)") as advance:
                synth = train_synthetic(prep.template, D.X, D.y, classes, o.shadows, n_half, source, fraction,
                                        seed, bin_size, jobs, o.backend, advance)
            fits["shadow_synthetic"] = o.shadows
            x_rows = np.vstack([encoder.transform(s[0]) for s in synth])
            y_rows = np.concatenate([[cls_pos.get(v, 0) for v in s[1]] for s in synth]).astype(np.int64)
            m_rows = np.concatenate([s[2] for s in synth])
            q_rows = np.vstack([s[3] for s in synth])
        with progress(1, "untargeted attack classifier") as advance:
            model = train_untargeted(x_rows, y_rows, q_rows, m_rows, len(classes), seed, o.per_class)
            advance(1)
        xt = encoder.transform(D.X.iloc[tpos])
        qf = q_all.reshape(-1, len(classes))
        reps = q_all.shape[0] * q_all.shape[1]
        s, d = model.score(np.tile(xt, (reps, 1)), np.tile(ty, reps), qf)
        results["untargeted"] = (s.reshape(shape), d.reshape(shape))
        extra["untargeted"] = {"attack_training_rows": int(len(m_rows)), "per_class": o.per_class,
                               "shadow_data": o.shadow_data}
    if "threshold" in wants:
        assert general is not None
        tau = expected_training_loss(general.preds, general.members, y_idx)
        sc, dc = np.empty(shape), np.zeros(shape, dtype=bool)
        for i in range(o.iterations):
            for t in range(o.targets):
                sc[i, :, t], dc[i, :, t] = threshold(q_all[i, :, t], int(ty[t]), tau)
        results["threshold"] = (sc, dc)
        extra["threshold"] = {"threshold_loss": tau}
    kl = np.full(o.targets, np.nan)
    lira_score = np.full(o.targets, np.nan)
    if need_evidence:
        for name, fn in (("distance", distance), ("frequency", frequency)):
            if name in wants:
                sc, dc = np.empty(shape), np.zeros(shape, dtype=bool)
                for i in range(o.iterations):
                    for t in range(o.targets):
                        sc[i, :, t], dc[i, :, t] = fn(q_all[i, :, t], *evidence(i, t))
                results[name] = (sc, dc)
        keys = [(0, t) for t in range(o.targets)] if pool is not None else [
            (i, t) for i in range(o.iterations) for t in range(o.targets)]
        if "lira" in wants:
            phis = {(i, t): tuple(lira_mod.logit_confidence(e, int(ty[t])) for e in evidence(i, t)) for i, t in keys}
            m_min = min(min(len(a), len(b)) for a, b in phis.values())
            per_record = m_min >= lira_mod.PER_RECORD_MIN
            s_in = None if per_record else lira_mod.pooled_std([v[0] for v in phis.values()])
            s_out = None if per_record else lira_mod.pooled_std([v[1] for v in phis.values()])
            on_s, on_d = np.empty(shape), np.zeros(shape, dtype=bool)
            off_s, off_d = np.empty(shape), np.zeros(shape, dtype=bool)
            for i in range(o.iterations):
                for t in range(o.targets):
                    phi_in, phi_out = phis[(0, t) if pool is not None else (i, t)]
                    obs = lira_mod.logit_confidence(q_all[i, :, t], int(ty[t]))
                    on_s[i, :, t], on_d[i, :, t] = lira_mod.lira_online(obs, phi_in, phi_out, s_in, s_out)
                    off_s[i, :, t], off_d[i, :, t] = lira_mod.lira_offline(obs, phi_out, s_out)
            results["lira"] = (on_s, on_d)
            results["lira_offline"] = (off_s, off_d)
            lira_score = np.array([on_s[:, :, t][member[:, :, t]].mean() for t in range(o.targets)])
            extra["lira"] = {"variance": "per-record" if per_record else "global",
                             "std_in": s_in, "std_out": s_out}
        for t in range(o.targets):
            ev = [evidence(i, t) for i in ([0] if pool is not None else range(o.iterations))]
            kl[t] = kl_leakage(np.concatenate([e[0] for e in ev]), np.concatenate([e[1] for e in ev]))
    timings["attacks_s"] = time.perf_counter() - t0

    # Per-target table and metrics.
    names = [r for a in ATTACK_CHOICES if a in wants for r in RESULT_NAMES[a]]
    table = pd.DataFrame({"row": D.rows[tpos]})
    if D.ids is not None:
        table["id"] = D.ids[tpos]
    table["label"] = D.y[tpos]
    table["pdtp_mean"] = pdtp_mean
    attack_out: dict[str, dict[str, Any]] = {}
    acc_cols = []
    for name in names:
        score, decision = results[name]
        correct = decision == member
        per_target = correct.mean(axis=(0, 1))
        table[f"{name}_accuracy"] = per_target
        acc_cols.append(f"{name}_accuracy")
        m = binary_metrics(member, decision, score)
        m["per_target_accuracy_mean"] = float(per_target.mean())
        m["per_target_accuracy_max"] = float(per_target.max())
        m["correlation_with_pdtp"] = correlations(per_target, pdtp_mean)
        m.update(extra.get(name, {}))
        m["roc"] = m.pop("roc")  # the long arrays last
        attack_out[name] = m
    table["max_accuracy"] = table[acc_cols].max(axis=1)
    table["lira_score"] = lira_score
    table["kl_leakage"] = kl
    table["n_attacks"] = 2 * o.iterations
    table["pdtp_measurements"] = pdtp_n

    best_acc = max(attack_out, key=lambda k: attack_out[k]["accuracy"])
    aucs = {k: v["auc"] for k, v in attack_out.items() if v["auc"] is not None}
    best_auc = max(aucs, key=lambda k: aucs[k]) if aucs else None
    exceeded = []
    if o.max_accuracy is not None and attack_out[best_acc]["accuracy"] > o.max_accuracy:
        exceeded.append(f"{best_acc} accuracy {attack_out[best_acc]['accuracy']:.4f} > {o.max_accuracy:g}")
    if o.max_auc is not None and best_auc is not None and aucs[best_auc] > o.max_auc:
        exceeded.append(f"{best_auc} AUC {aucs[best_auc]:.4f} > {o.max_auc:g}")

    summary: dict[str, Any] = {
        "estimator": prep.choice.name,
        "attacks": names,
        "candidates": o.candidates,
        "train_size": n_half,
        "targets": o.targets,
        "iterations": o.iterations,
        "pdtp_iterations": n_pdtp,
        "engine": engine_name,
        "shadows": o.shadows,
        "pairs": o.pairs,
        "shadow_pool": o.shadow_pool,
        "shadow_data": o.shadow_data,
        "classes": classes.tolist(),
        "bin_size": bin_size,
        "target_model": {"train_accuracy": train_acc, "test_accuracy": test_acc},
        "pdtp_mean_average": float(np.nanmean(pdtp_mean)) if np.isfinite(pdtp_mean).any() else None,
        "pdtp_mean_max": float(np.nanmax(pdtp_mean)) if np.isfinite(pdtp_mean).any() else None,
        "max_accuracy": {
            "mean": float(table["max_accuracy"].mean()),
            "correlation_with_pdtp": correlations(table["max_accuracy"].to_numpy(), pdtp_mean),
        },
        "kl_leakage": {
            "method": "Farokhi & Kaafar Remark 3: symmetric KL of Gaussians fitted to in/out shadow outputs",
            "mean": float(np.nanmean(kl)) if np.isfinite(kl).any() else None,
            "correlation_with_pdtp": correlations(kl, pdtp_mean),
        },
        "best_accuracy_attack": best_acc,
        "best_auc_attack": best_auc,
        "gate": {"max_accuracy": o.max_accuracy, "max_auc": o.max_auc, "exceeded": exceeded},
        "fits": {**fits, "total": int(sum(v for k, v in fits.items() if k != "pdtp_leave_one_out_records"))},
        "jobs": jobs,
        "timings": {k: round(v, 3) for k, v in {**timings, "total_s": time.perf_counter() - t_start}.items()},
        "manifest": manifest(spec.sha256(), pop.sha256, seed, pop.source),
    }
    if "untargeted" in wants and pool is not None:
        notes.append(f"the untargeted and threshold attacks use the {pool.size} pool models as their shadows")
    return AttackOutcome(table=table, attacks=attack_out, summary=summary, notes=notes)


def summary_lines(outcome: AttackOutcome) -> list[str]:
    """Plain-text lines for the terminal: one per attack, then the target model and PDTP."""
    s = outcome.summary
    lines = [f"{'attack':<14}{'accuracy':>9}{'AUC':>8}{'adv':>8}{'TPR@1%':>8}{'prec':>7}{'recall':>7}"
             f"{'F1':>7}{'r(PDTP)':>9}"]

    def f(v: Any, w: int, d: int = 4) -> str:
        return f"{v:>{w}.{d}f}" if isinstance(v, int | float) and v == v else f"{'-':>{w}}"

    for name, m in outcome.attacks.items():
        r = m["correlation_with_pdtp"]["pearson"]
        lines.append(
            f"{name:<14}{f(m['accuracy'], 9)}{f(m['auc'], 8, 3)}{f(m['advantage'], 8, 3)}"
            f"{f(m['tpr_at_1pct_fpr'], 8, 3)}{f(m['precision'], 7, 3)}{f(m['recall'], 7, 3)}{f(m['f1'], 7, 3)}"
            f"{f(r, 9, 3)}"
        )
    tm = s["target_model"]
    lines.append(
        f"target model: train accuracy {tm['train_accuracy']:.4f}, test accuracy {tm['test_accuracy']:.4f}; "
        f"average PDTP {s['pdtp_mean_average'] if s['pdtp_mean_average'] is None else round(s['pdtp_mean_average'], 4)}"
        f"; max per-target accuracy vs PDTP r = {s['max_accuracy']['correlation_with_pdtp']['pearson']}"
    )
    lines.append(f"model fits: {s['fits']['total']}, {s['timings']['total_s']:.1f}s")
    return lines
