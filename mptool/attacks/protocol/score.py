"""Phase 6, score (Long et al. 5.4, step 4; Tables 1 and 2): the per-target table (attack.csv),
each attack's metrics over all attempts with bootstrap intervals, and attack.json's summary."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd

from mptool.attacks import ATTACK_CHOICES, EXTRA_CHOICES, RESULT_NAMES
from mptool.attacks import attribute as attribute_mod
from mptool.attacks.intervals import TAG_BOOTSTRAP, bootstrap_intervals
from mptool.attacks.leakage import summarise
from mptool.attacks.metrics import METRICS_NOTE, attempts_frame, binary_metrics, correlations, strongest_attack
from mptool.attacks.protocol.adapters import AttackResults
from mptool.attacks.protocol.draw import Draw
from mptool.attacks.protocol.gate import GATE_RULE, gate
from mptool.attacks.protocol.state import AttackOutcome, Run
from mptool.attacks.protocol.targets import DECISIONS, PdtpMeasure, TargetOutputs
from mptool.attacks.shadows import rng_for
from mptool.outputs.results import manifest

#: attack.csv columns (``<attack>_accuracy`` appears once per attack run, in run order).
ATTACK_COLUMNS = {
    "row": "0-based data row of the input CSV (header excluded)",
    "id": "value of the spec's id column (only when data.id is set)",
    "label": "the record's label (written only with --show-values; the API's table always has it)",
    "pdtp_mean": "mean PDTP of the record while a member, over the first --pdtp-iterations iterations; with the "
    "refit engine and randomized training (detected) a single-refit estimate per iteration that counts the training "
    "randomness as influence, no record decided (attack.json summary.pdtp_basis; docs/randomness.md); with "
    "--engine replicates the mean of the replicate estimates (summary.pdtp_replicates)",
    "pdtp_decision": "DTP-1 decision of the record over its PDTP measurements: violation (PDTP above 1 in every "
    "measurement: exact engines and a deterministic refit; or decided above by the replicate engine at its error "
    "control in every one), below (the same below), undecided (the measurements disagree, the replicate engine "
    "could not decide, or the training is randomized and the refit engine cannot tell; --engine replicates "
    "decides); empty where not measured (--pdtp-iterations 0)",
    "<attack>_accuracy": "per-target accuracy: correct membership guesses / attacks on the record (2 per iteration)",
    **attribute_mod.COLUMNS,
    "max_accuracy": "largest per-target accuracy over the attacks run",
    "lira_score": "mean online LiRA log-likelihood ratio while the record is a member (empty without lira)",
    "kl_leakage": "Farokhi-Kaafar KL membership leakage in nats: Gaussian approximation on the logit of the "
    "in/out shadows' unbinned true-label probability; empty where not estimable (reasons in attack.json)",
    "n_attacks": "number of attacks on the record (2 x iterations)",
    "pdtp_measurements": "number of PDTP measurements averaged in pdtp_mean",
}


def score(
    run: Run, draw: Draw, targets: TargetOutputs, measured: PdtpMeasure, attacked: AttackResults, t_start: float
) -> AttackOutcome:
    """Per-target accuracy table, per-attack metrics over all attempts and the run summary
    (Long et al. 5.4, step 4; Tables 1 and 2)."""
    names = [r for a in ATTACK_CHOICES + EXTRA_CHOICES if a in run.options.attacks for r in RESULT_NAMES[a]]
    names += [n for n in (attribute_mod.NAME,) if n in attacked.results]
    table, attack_out = per_target_table(draw, targets, measured, attacked, names, run.seed)
    summary = run_summary(run, draw, targets, measured, table, attack_out, names, attacked)
    summary["timings"] = {k: round(v, 3) for k, v in {**run.timings, "total_s": time.perf_counter() - t_start}.items()}
    summary["manifest"] = manifest(
        run.prep.spec.sha256(), run.prep.population.sha256, run.seed, run.prep.population.source
    )
    notes = run.notes
    attempts = attempts_frame(draw.D.rows[draw.tpos], targets.member, {n: attacked.results[n] for n in names})
    o = run.options
    if "untargeted" in o.attacks and o.shadow_pool and run.source == "population":
        notes.append(
            f"the untargeted attack uses {min(o.shadow_pool, o.shadows)} of the {o.shadow_pool} pool models "
            "as its shadows (--shadows), the threshold attack all of them"
        )
    return AttackOutcome(table=table, attacks=attack_out, summary=summary, notes=notes, attempts=attempts,
                         attribute_values=attacked.attribute_values)


def per_target_table(
    draw: Draw, targets: TargetOutputs, measured: PdtpMeasure, attacked: AttackResults, names: list[str],
    seed: int = 0,
) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """attack.csv (one row per target, columns as in ATTACK_COLUMNS) and each attack's metrics,
    each with its bootstrap confidence intervals (:mod:`mptool.attacks.intervals`, seeded per attack)."""
    D, tpos, member = draw.D, draw.tpos, targets.member
    table = pd.DataFrame({"row": D.rows[tpos]})
    if D.ids is not None:
        table["id"] = D.ids[tpos]
    table["label"] = D.y[tpos]
    table["pdtp_mean"] = measured.mean
    decided = measured.decision if measured.decision is not None else [""] * len(tpos)  # always the column
    table["pdtp_decision"] = pd.Series(list(decided), dtype=object)
    attack_out: dict[str, dict[str, Any]] = {}
    for name in names:
        sc, decision = attacked.results[name]
        per_target = (decision == member).mean(axis=(0, 1))
        table[f"{name}_accuracy"] = per_target
        m = binary_metrics(member, decision, sc)
        m["per_target_accuracy_mean"] = float(per_target.mean())
        m["per_target_accuracy_max"] = float(per_target.max())
        m["correlation_with_pdtp"] = correlations(per_target, measured.mean)
        m.update(attacked.extra.get(name, {}))
        m["intervals"] = bootstrap_intervals(
            *np.broadcast_arrays(member, decision, sc), rng_for(seed, TAG_BOOTSTRAP, names.index(name))
        )
        m["roc"] = m.pop("roc")  # the long arrays last
        attack_out[name] = m
    for column, values in attacked.per_target.items():
        table[column] = values
    table["max_accuracy"] = table[[f"{n}_accuracy" for n in names]].max(axis=1)
    table["lira_score"] = attacked.lira_score
    table["kl_leakage"] = np.full(len(tpos), np.nan) if attacked.kl is None else attacked.kl
    table["n_attacks"] = 2 * member.shape[0]
    table["pdtp_measurements"] = measured.count
    return table, attack_out


def run_summary(
    run: Run,
    draw: Draw,
    targets: TargetOutputs,
    measured: PdtpMeasure,
    table: pd.DataFrame,
    attack_out: dict[str, dict[str, Any]],
    names: list[str],
    attacked: AttackResults,
) -> dict[str, Any]:
    """attack.json's summary: the run's setup, target-model accuracy, PDTP, leakage, gate, fits."""
    o, pm = run.options, measured.mean
    kl = table["kl_leakage"].to_numpy(dtype=float)
    leakage: dict[str, Any] = {
        "estimated": 0,
        "note": "needs per-record shadows: --shadow-pool or the targeted attacks",
    }
    if attacked.leakage is not None:
        leakage = summarise(attacked.leakage, {n: table[f"{n}_accuracy"].to_numpy() for n in names})
    leakage["correlation_with_pdtp"] = correlations(kl, pm)
    best_acc, best_auc, exceeded, undecided = gate(o, attack_out)
    finite = np.isfinite(pm).any()
    return {
        "estimator": run.prep.choice.name,
        "attacks": names,
        "candidates": o.candidates,
        "candidates_from": run.plan.get("candidates_from"),
        "train_size": draw.n_half,
        "targets": o.targets,
        "iterations": o.iterations,
        "pdtp_iterations": measured.iterations,
        "engine": measured.engine,
        **({"pdtp_basis": measured.basis} if measured.basis is not None else {}),
        **({"pdtp_decisions": {d: int(np.sum(measured.decision == d)) for d in DECISIONS}}
           if measured.decision is not None else {}),
        **({"pdtp_replicates": measured.replicates} if measured.replicates is not None else {}),
        "shadows": o.shadows,
        "pairs": o.pairs,
        "shadow_pool": o.shadow_pool,
        "shadow_data": o.shadow_data,
        "classes": draw.classes.tolist(),
        "bin_size": run.bin_size,
        "target_model": {"train_accuracy": targets.train_accuracy, "test_accuracy": targets.test_accuracy},
        "pdtp_mean_average": float(np.nanmean(pm)) if finite else None,
        "pdtp_mean_max": float(np.nanmax(pm)) if finite else None,
        "max_accuracy": {
            "mean": float(table["max_accuracy"].mean()),
            "correlation_with_pdtp": correlations(table["max_accuracy"].to_numpy(), pm),
        },
        "kl_leakage": leakage,
        "best_accuracy_attack": best_acc,
        "best_auc_attack": best_auc,
        "strongest_attack": strongest_attack(attack_out),
        "metrics": METRICS_NOTE,
        "gate": {"max_accuracy": o.max_accuracy, "max_auc": o.max_auc, "exceeded": exceeded, "undecided": undecided,
                 "rule": GATE_RULE},
        "fits": {**run.fits, "total": int(sum(v for k, v in run.fits.items() if k != "pdtp_leave_one_out_records"))},
        "plan": {k: v for k, v in run.plan.items() if k not in ("candidates_from", "seconds")},
        "jobs": run.jobs,
        **({"synthesis": run.synthesis.summary} if run.synthesis is not None else {}),
    }
