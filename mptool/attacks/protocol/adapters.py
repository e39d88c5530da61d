"""Phase 5, run attacks: one adapter per attack that turns the target models' outputs and the
shadow evidence into a score and a membership decision per attempt (the attacks themselves live in
:mod:`mptool.attacks.targeted`, ``threshold``, ``untargeted``, ``lira``, ``rmia``, ``attribute``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mptool.attacks import NEEDS_EVIDENCE
from mptool.attacks import attribute as attribute_mod
from mptool.attacks import label_only as label_only_mod
from mptool.attacks import lira as lira_mod
from mptool.attacks import rmia as rmia_mod
from mptool.attacks.leakage import LeakageEstimate, kl_leakage, true_label_logit
from mptool.attacks.protocol.draw import Draw
from mptool.attacks.protocol.evidence import Evidence
from mptool.attacks.protocol.state import Run, sensitive_column
from mptool.attacks.protocol.targets import TargetOutputs
from mptool.attacks.shadows import ShadowPool, rng_for, train_pool, train_synthetic
from mptool.attacks.targeted import distance, frequency
from mptool.attacks.threshold import expected_training_loss, threshold
from mptool.attacks.untargeted import FeatureEncoder, resolve_features, train_untargeted


@dataclass
class AttackResults:
    """Phase 4: per attempt score and decision of every attack, shaped like TargetOutputs.member."""

    results: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    lira_score: np.ndarray | None = None
    leakage: list[LeakageEstimate] | None = None
    per_target: dict[str, np.ndarray] = field(default_factory=dict)  # attack.csv columns of attribute inference
    attribute_values: pd.DataFrame | None = None  # true and inferred sensitive values per attempt (opt-in file)

    @property
    def kl(self) -> np.ndarray | None:
        """Per-target kl_leakage in nats, NaN where not estimable; None without per-record shadows."""
        if self.leakage is None:
            return None
        return np.array([np.nan if e.value is None else e.value for e in self.leakage], dtype=float)


def run_attacks(run: Run, draw: Draw, targets: TargetOutputs, evidence: Evidence) -> AttackResults:
    """Attack every target model on every target with each chosen attack (Long et al. 5.3-5.4)."""
    wants = set(run.options.attacks)
    t0 = time.perf_counter()
    out = AttackResults()
    if "untargeted" in wants:
        out.results["untargeted"], out.extra["untargeted"] = attack_untargeted(run, draw, targets, evidence)
    if "threshold" in wants:
        out.results["threshold"], out.extra["threshold"] = attack_threshold(run, draw, targets, evidence)
    out.lira_score = np.full(run.options.targets, np.nan)
    if wants & NEEDS_EVIDENCE:
        for name, fn in (("distance", distance), ("frequency", frequency)):
            if name in wants:
                out.results[name] = per_target_attack(fn, targets, evidence)
        if "lira" in wants:
            online, offline, out.extra["lira"] = attack_lira(draw, targets, evidence, run.bin_size)
            out.results["lira"], out.results["lira_offline"] = online, offline
            out.lira_score = mean_member_score(online[0], targets.member)
    if "rmia" in wants:
        online, offline, out.extra["rmia"] = attack_rmia(run, draw, targets, evidence)
        out.extra["rmia_offline"] = out.extra["rmia"]
        out.results["rmia"], out.results["rmia_offline"] = online, offline
    if "label_only" in wants:
        (out.results["label_only"], out.results["label_free"]), (out.extra["label_only"], out.extra["label_free"]) = (
            attack_label_only(run, draw)
        )
    out.leakage = leakage_per_target(evidence, draw, run.options.iterations)
    if attribute_mod.column_of(run.options.attacks) is not None:
        out.results[attribute_mod.NAME], out.extra[attribute_mod.NAME], out.per_target, out.attribute_values = (
            attack_attribute(run, draw, targets)
        )
    run.timings["attacks_s"] = time.perf_counter() - t0
    return out


def attack_attribute(
    run: Run, draw: Draw, targets: TargetOutputs
) -> tuple[Scored, dict, dict[str, np.ndarray], pd.DataFrame]:
    """Yeom et al.'s attribute inference (section 4) on every target under every target model
    (:mod:`mptool.attacks.attribute`): the membership-reduction result, its extra values, attack.csv
    columns and the per-attempt true/inferred values (written only with --attribute-values)."""
    o = run.options
    sens = sensitive_column(run.prep, o)
    assert sens is not None
    with run.progress(o.iterations, f"attribute inference ({sens.k} candidate values)") as advance:
        p_y = attribute_mod.query_targets(
            run.prep.template, draw.D, draw.classes, draw.y_idx, draw.in_first, draw.tpos, sens, run.bin_size,
            run.jobs, o.backend, advance,
        )
    run.fits["attribute_target"] = 2 * o.iterations
    truth = sens.codes(draw.D.X.iloc[draw.tpos])
    inf = attribute_mod.infer(p_y, sens.prior, truth)
    m = targets.member
    extra = {**attribute_mod.describe(sens),
             **attribute_mod.summarise(m, inf, rng_for(run.seed, attribute_mod.TAG_ATTRIBUTE_BOOTSTRAP))}
    extra["attribute_intervals"] = extra.pop("intervals")
    with np.errstate(invalid="ignore"):
        columns = {
            "attribute_right_member": (inf.right & m).sum(axis=(0, 1)) / m.sum(axis=(0, 1)),
            "attribute_right_nonmember": (inf.right & ~m).sum(axis=(0, 1)) / (~m).sum(axis=(0, 1)),
            "attribute_confidence": inf.confidence.mean(axis=(0, 1)),
        }
    values = attribute_mod.values_frame(draw.D.rows[draw.tpos], m, inf, truth, sens)
    return (inf.p_true, inf.right), extra, columns, values


Scored = tuple[np.ndarray, np.ndarray]


def attack_label_only(run: Run, draw: Draw) -> tuple[tuple[Scored, Scored], tuple[dict, dict]]:
    """Choquette-Choo et al.'s label-only attack and its label-free variant (:mod:`mptool.attacks.label_only`):
    the share of perturbed copies keeping the label, thresholded on --shadows shadow models."""
    o = run.options
    r = label_only_mod.attack(
        run.prep.template, draw.D.X, draw.D.y, draw.classes, draw.y_idx, draw.tpos, draw.in_first, draw.n_half,
        o.shadows, run.seed, run.jobs, o.backend, run.progress,
    )
    run.fits["label_only_shadow"] = o.shadows
    run.fits["label_only_target"] = 2 * o.iterations
    return ((r.score, r.decision), (r.free_score, r.free_decision)), (
        label_only_mod.describe(r, o.shadows, free=False), label_only_mod.describe(r, o.shadows, free=True))


def attack_untargeted(run: Run, draw: Draw, targets: TargetOutputs, evidence: Evidence) -> tuple[Scored, dict]:
    """Shokri et al.'s shadow-model attack (Long et al., Algorithm 1): an attack classifier
    trained on the shadows' (x, y, q, in/out) rows, queried with each target model's output."""
    o, D, k = run.options, draw.D, len(draw.classes)
    features = resolve_features(o.untargeted_features, run.source != "population")
    encoder = FeatureEncoder.fit(D.X, D.schema, use_record=features == "xyq")
    if run.source == "synthesize":
        Xs, ys_idx, pool = synthesized_shadows(run, draw)
        m = pool.size
        x_rows = np.tile(encoder.transform(Xs), (m, 1))
        y_rows = np.tile(ys_idx, m)
        q_rows = pool.preds.reshape(-1, k)
        m_rows = pool.members.reshape(-1)
    elif run.source == "population":
        general = evidence.general
        assert general is not None
        m = min(general.size, o.shadows)  # a pool larger than --shadows lends its first --shadows models
        x_rows = np.tile(encoder.transform(D.X), (m, 1))
        y_rows = np.tile(draw.y_idx, m)
        q_rows = general.preds[:m].reshape(-1, k)
        m_rows = general.members[:m].reshape(-1)
    else:
        with run.progress(o.shadows, f"shadow models ({o.shadow_data} data)") as advance:
            synth = train_synthetic(
                run.prep.template,
                D.X,
                D.y,
                draw.classes,
                o.shadows,
                draw.n_half,
                run.source,
                run.fraction,
                run.seed,
                run.bin_size,
                run.jobs,
                o.backend,
                advance,
            )
        run.fits["shadow_synthetic"] = o.shadows
        cls_pos = draw.cls_pos
        x_rows = np.vstack([encoder.transform(s[0]) for s in synth])
        y_rows = np.concatenate([[cls_pos.get(v, 0) for v in s[1]] for s in synth]).astype(np.int64)
        m_rows = np.concatenate([s[2] for s in synth])
        q_rows = np.vstack([s[3] for s in synth])
    with run.progress(1, "untargeted attack classifier") as advance:
        model = train_untargeted(x_rows, y_rows, q_rows, m_rows, k, run.seed, o.per_class)
        advance(1)
    xt = encoder.transform(D.X.iloc[draw.tpos])
    reps = targets.q.shape[0] * targets.q.shape[1]
    s, d = model.score(np.tile(xt, (reps, 1)), np.tile(draw.target_y, reps), targets.q.reshape(-1, k))
    shape = targets.member.shape
    extra = {
        "attack_training_rows": int(len(m_rows)), "per_class": o.per_class, "shadow_data": o.shadow_data,
        "features": {"xyq": "x, y, q (Long et al. Algorithm 1)", "yq": "y, q (Shokri et al.)"}[features],
    }
    return (s.reshape(shape), d.reshape(shape)), extra


def synthesized_shadows(run: Run, draw: Draw) -> tuple[pd.DataFrame, np.ndarray, ShadowPool]:
    """Shadows on model-based shadow data (Shokri et al. V-C; made while planning,
    :func:`synthesize_shadow_data`): --shadows models, each on a random half of the records made,
    queried on all of them, as the population shadows are on D."""
    o, made = run.options, run.synthesis
    assert made is not None
    with run.progress(o.shadows, "shadow models (model-based synthetic data)") as advance:
        labels = draw.classes[made.y_idx].astype(draw.D.y.dtype)  # the data's label type (not object)
        pool = train_pool(run.prep.template, made.X, labels, draw.classes, o.shadows,
                          len(made.y_idx) // 2, run.seed, run.bin_size, run.jobs, o.backend, advance)
    run.fits["shadow_synthetic"] = o.shadows
    return made.X, made.y_idx, pool


def attack_threshold(run: Run, draw: Draw, targets: TargetOutputs, evidence: Evidence) -> tuple[Scored, dict]:
    """Yeom et al.'s loss threshold at the shadows' expected training loss."""
    general = evidence.general
    assert general is not None
    tau = expected_training_loss(general.preds, general.members, draw.y_idx)
    shape = targets.member.shape
    sc, dc = np.empty(shape), np.zeros(shape, dtype=bool)
    ty = draw.target_y
    for i in range(shape[0]):
        for t in range(shape[2]):
            sc[i, :, t], dc[i, :, t] = threshold(targets.q[i, :, t], int(ty[t]), tau)
    return (sc, dc), {"threshold_loss": tau}


def per_target_attack(fn: Callable[..., Scored], targets: TargetOutputs, evidence: Evidence) -> Scored:
    """A targeted attack ``fn(q, in_preds, out_preds)`` (Long et al. 5.3) on every target model."""
    shape = targets.member.shape
    sc, dc = np.empty(shape), np.zeros(shape, dtype=bool)
    for i in range(shape[0]):
        for t in range(shape[2]):
            sc[i, :, t], dc[i, :, t] = fn(targets.q[i, :, t], *evidence.for_target(i, t))
    return sc, dc


def attack_lira(draw: Draw, targets: TargetOutputs, evidence: Evidence, bin_size: float) -> tuple[Scored, Scored, dict]:
    """Carlini et al.'s LiRA, online and offline, on the logit of the true class's probability, with the
    binned observation integrated over its bin and shrunk per-record variances (mptool.attacks.lira)."""
    shape = targets.member.shape
    ty = draw.target_y
    keys = [(i, t) for i in evidence.iterations_used(shape[0]) for t in range(shape[2])]
    phis = [[lira_mod.logit_confidence(e, int(ty[t])) for e in evidence.for_target(i, t)] for i, t in keys]
    fit_in = lira_mod.fit_side([p[0] for p in phis], bin_size)
    fit_out = lira_mod.fit_side([p[1] for p in phis], bin_size)
    where = {k: j for j, k in enumerate(keys)}
    on_s, on_d = np.empty(shape), np.zeros(shape, dtype=bool)
    off_s, off_d = np.empty(shape), np.zeros(shape, dtype=bool)
    for i in range(shape[0]):
        for t in range(shape[2]):
            j = where[(0, t) if evidence.pool is not None else (i, t)]
            lo, hi = lira_mod.logit_interval(targets.q[i, :, t], int(ty[t]), bin_size)
            (on_s[i, :, t], on_d[i, :, t]), (off_s[i, :, t], off_d[i, :, t]) = lira_mod.lira_binned(
                lo, hi, (fit_in.mean[j], fit_in.std[j]), (fit_out.mean[j], fit_out.std[j])
            )
    extra = {
        "observation": "the bin of p_y (Gaussian in logit space integrated over it)" if bin_size > 0 else "exact p_y",
        "prior_models": lira_mod.PRIOR_MODELS,
        "pooled_std_in": fit_in.pooled_std,
        "pooled_std_out": fit_out.pooled_std,
        "models_in": [int(fit_in.count.min()), int(fit_in.count.max())],
        "models_out": [int(fit_out.count.min()), int(fit_out.count.max())],
    }
    return (on_s, on_d), (off_s, off_d), extra


def attack_rmia(run: Run, draw: Draw, targets: TargetOutputs, evidence: Evidence) -> tuple[Scored, Scored, dict]:
    """Zarifzadeh et al.'s RMIA, online and offline (mptool.attacks.rmia): the pool (else the general
    shadows) as reference models, z drawn from the records each target model did not train on."""
    refs = evidence.pool if evidence.pool is not None else evidence.general
    assert refs is not None and targets.p_all is not None
    p_ref = refs.preds[:, np.arange(len(draw.y_idx)), draw.y_idx]
    in_target = np.stack([np.stack([m, ~m]) for m in draw.in_first])
    o = run.options
    r = rmia_mod.rmia(
        targets.p_all, in_target, draw.tpos, p_ref, refs.members, run.seed, o.rmia_gamma, o.rmia_offline_a
    )
    on_d, off_d = r.decisions
    extra = {
        "gamma": r.gamma,
        "offline_a": r.a,
        "offline_a_from": "tuned on the reference models (grid 0..1 by 0.1)" if r.a_tuned
        else ("--rmia-offline-a" if o.rmia_offline_a is not None else "default (too few reference models to tune)"),
        "population_per_model": r.population,
        "reference_models": refs.size,
        "references": "shadow pool" if evidence.pool is not None else "general shadows (--shadows)",
        "offline_fallback_targets": r.offline_fallback,
    }
    return (r.online, on_d), (r.offline, off_d), extra


def mean_member_score(scores: np.ndarray, member: np.ndarray) -> np.ndarray:
    """Per target: the mean score over the attempts where the target was a member."""
    return np.array([scores[:, :, t][member[:, :, t]].mean() for t in range(member.shape[2])])


def leakage_per_target(evidence: Evidence, draw: Draw, iterations: int) -> list[LeakageEstimate] | None:
    """Farokhi & Kaafar's KL membership leakage of each target from all its unbinned in/out shadow
    outputs (mptool.attacks.leakage); None without per-record shadows (no pool, no pairs)."""
    if evidence.pool is None and evidence.pairs is None:
        return None
    out = []
    for t, y in enumerate(draw.target_y):
        ev = [evidence.raw_for_target(i, t) for i in evidence.iterations_used(iterations)]
        phi_in, sat_in = true_label_logit(np.concatenate([e[0] for e in ev]), int(y))
        phi_out, sat_out = true_label_logit(np.concatenate([e[1] for e in ev]), int(y))
        out.append(kl_leakage(phi_in, phi_out, sat_in, sat_out))
    return out
