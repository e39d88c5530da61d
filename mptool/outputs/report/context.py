"""The report's content, independent of its format: verdict, tables and manifest.

Turns :class:`~mptool.outputs.report.loader.ReportInputs` into plain dicts and lists of
already-formatted strings, which the HTML and Markdown templates lay out. Numbers are
formatted here, once, so both formats show the same values.

What a record shows: its CSV row number, PDTP and probabilities. Its label, its
``worst_class`` (a stand-in for the label, :data:`mptool.outputs.formats.VALUE_COLUMNS`),
its feature values and its ``data.id`` are training data, not results: they appear only
when ``show_values`` is asked for, which only the HTML report does (``mptool report
--show-values``), and then as short escaped excerpts (:func:`mptool.runtime.ui.excerpt`).
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
import yaml

from mptool.outputs import formats
from mptool.outputs.ending import (
    BUDGET,
    ending_words,
    fail_fast_split,
    partial_pass,
    replicate_ending,
    stop_words,
    verdict_rests_on,
)
from mptool.outputs.report.attribute import attribute_block
from mptool.outputs.report.loader import (
    PRODUCER,
    RESULT_FILES,
    AttackResult,
    ReportInputs,
    attack_accuracy_columns,
    lookup,
    norm_key,
    spec_of,
    summary_of,
)
from mptool.outputs.report.mitigation import mitigation_block
from mptool.outputs.report.values import fmt, number
from mptool.outputs.report.verify import gate_label
from mptool.runtime import ui
from mptool.runtime.version import __version__

#: attack.json metric columns shown first, with the key spellings accepted for each.
ATTACK_METRICS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("accuracy", ("accuracy", "acc")),
    ("precision", ("precision",)),
    ("recall", ("recall",)),
    ("F1", ("f1", "f1_score")),
    ("AUC", ("auc", "roc_auc")),
    ("advantage", ("advantage", "membership_advantage")),
    ("TPR @1% FPR", ("tpr_at_1pct_fpr", "tpr_at_fpr_0.01")),
    ("TPR @0.1% FPR", ("tpr_at_0.1pct_fpr", "tpr_at_fpr_0.001")),
)

#: Normalised keys of an attack entry that are shown in their own columns, not as extras.
_NOT_METRICS = {
    "pearson",
    "pearsonp",
    "spearman",
    "spearmanp",
    "pearsonr",
    "spearmanr",
    "pearsonpvalue",
    "spearmanpvalue",
    "pearsonrho",
    "spearmanrho",
}


def fmt_p(value: Any) -> str:
    """A p-value: fixed decimals down to 1e-4, scientific below."""
    x = number(value)
    if x is None:
        return "—"
    return f"{x:.4f}" if x >= 1e-4 else f"{x:.1e}"


#: Columns that hold a value from the data rather than a result: shown as escaped excerpts.
DATA_COLUMNS = ("label", "worst_class", "id")
#: pdtp.csv's columns of a replicate-engine run shown with the riskiest records (decision, bounds, replicates).
REPLICATE_RECORD_COLUMNS = ("violation", "pdtp_low", "pdtp_high", "replicates")
#: Columns that are training data themselves (or stand in for it): shown only with ``show_values``.
VALUE_COLUMNS = ("id", *formats.VALUE_COLUMNS)


def data_cell(value: Any) -> str:
    """A value from the data (class label, id, feature value) for display: formatted, escaped, cut."""
    return ui.excerpt(fmt(value, None))


def _table(columns: list[str], rows: list[list[str]], numeric: set[str] | None = None) -> dict[str, Any]:
    numeric = numeric or set()
    return {"columns": columns, "rows": rows, "numeric": [c in numeric for c in columns]}


# --------------------------------------------------------------------------------------
# verdict and summary


def pdtp_exit_code(verdict: str | None) -> int | None:
    """The exit code ``mptool pdtp`` returned: 1 when DTP-1 failed, 0 when it held."""
    if verdict == "fail":
        return 1
    if verdict == "pass":
        return 0
    return None


def gate_sentence(gate: dict[str, Any]) -> str:
    """What the baseline/waivers made of the violations (``summary.baseline`` of pdtp.json), or ''."""
    counts = gate.get("counts")
    if not isinstance(counts, dict):
        return ""
    if "new" in counts:
        text = (f"Against the baseline: {counts.get('new')} new, {counts.get('worse')} worse, "
                f"{counts.get('unchanged')} unchanged, {counts.get('fixed')} fixed")
    else:
        text = f"{counts.get('violations')} above the threshold"
    return text + f"; {counts.get('waived')} waived; {counts.get('counted')} counted by the gate. "


def replicate_verdict(s: dict[str, Any]) -> dict[str, Any]:
    """The headline of a replicate-engine run (randomized training): decided above, decided below, undecided.

    Never "holds" while a record is undecided: that verdict is "not established" (pdtp exited 1).
    """
    rep = s["replicates"]
    verdict = s.get("verdict")
    gate = s.get("baseline") if isinstance(s.get("baseline"), dict) else {}
    code = 0 if gate.get("verdict", verdict) == "pass" else 1
    head = {"fail": "DTP-1 VIOLATED", "pass": "DTP-1 holds"}.get(str(verdict), "DTP-1 not established")
    label = gate_label(s)
    if verdict == "fail" and label.startswith("pass-with"):
        head += f"; the gate passed only through excused records ({label})"
    elif verdict == "fail" and label == "undecided":
        head += "; after the waivers the gate is not established (records undecided)"
    detail = (
        f"{fmt(s.get('violations'), None)} of {fmt(s.get('n'), None)} records decided above the threshold "
        f"{fmt(s.get('threshold'), 2)} beyond training randomness, {fmt(s.get('decided_below'), None)} decided "
        f"below, {fmt(s.get('undecided'), None)} undecided (max estimate {fmt(s.get('max'))}; "
        f"{round(100 * float(rep.get('confidence') or 0))}% confidence, error control {rep.get('error_control')}; "
        f"replicate engine, {fmt(rep.get('fits'), None)} fits). {rests_on(s)}{gate_sentence(gate)}mptool pdtp "
        f"exited with code {code} ({'finding' if code == 1 else 'pass'})."
    )
    advice = {
        "fail": "The classifier should not be published as is (Long et al., section 5: the DTP-1 rule).",
        "pass": "Every audited record's influence is established below the threshold beyond the training randomness.",
    }.get(str(verdict), "Undecided records could not be checked (fail closed): more replicates (--replicates) "
          "or a --budget may decide them; they are listed with violation = undecided.")
    status = {"fail": "fail", "pass": "pass"}.get(str(verdict), "unknown")
    if partial_pass(s):  # a pass over part of T: what pdtp's verdict line says (not "holds")
        status, head = "unknown", str(partial_pass(s))
    return {"status": status, "headline": head, "detail": detail, "advice": advice, "exit_code": code}


def rests_on(s: dict[str, Any]) -> str:
    """A sentence on what a pdtp verdict rests on and, with ``--fail-fast``, how a replicate run ended, or ''.

    The lines of the JUnit file's evidence (:func:`mptool.outputs.ending.verdict_rests_on`: the release policy,
    a sample, ``--records``, a ``--fail-fast`` stop); without a stop, a ``--fail-fast`` run's ending (a spent
    budget, or complete). Every field read here was checked when the report was loaded
    (:func:`mptool.outputs.report.verify.check_basis`: a damaged one refuses the folder, never a sentence left out).
    """
    said = verdict_rests_on(s)
    rep = s.get("replicates")
    if not s.get("stopped") and isinstance(rep, dict) and isinstance(rep.get("fail_fast_spending"), dict):
        said.append(f"--fail-fast: {ending_words(s)}")
    return f"The verdict rests on: {'; '.join(map(str, said))}. " if said else ""


def fail_fast_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """Summary rows of a replicate run with ``--fail-fast``: the error level spent, the stop, the ending.

    From ``summary.replicates.fail_fast_spending`` of pdtp.json (docs/randomness.md section 4); none
    without it (every other run's report unchanged). Checked when the report was loaded
    (:func:`mptool.outputs.report.verify.check_basis`): a damaged block refuses the folder, never rows left out.
    """
    spend = s["replicates"].get("fail_fast_spending")
    if not isinstance(spend, dict):
        return []
    rows = [
        ("fail-fast: error level of the violations", fail_fast_split(spend)),
        ("fail-fast: error level of the below-threshold decisions", f"{spend['audit_alpha_below']:g}"),
        ("fail-fast: what stopped the run", stop_words(spend) or "nothing (no record decided above)"),
        ("run ended", ending_words(s)),
    ]
    stopped = s.get("stopped")
    if isinstance(stopped, dict):
        rows.append(("records not evaluated (the --fail-fast stop)", fmt(stopped["of"] - stopped["after"], None)))
    return rows


def verdict_block(inputs: ReportInputs) -> dict[str, Any]:
    """Headline of the report: DTP-1 pass/fail with max PDTP, threshold and pdtp's exit code."""
    s = inputs.pdtp_summary
    if s and isinstance(s.get("replicates"), dict) and s.get("verdict") in ("pass", "fail", "undecided"):
        return replicate_verdict(s)
    if s and s.get("verdict") in ("pass", "fail"):
        failed = s["verdict"] == "fail"
        gate = s.get("baseline") if isinstance(s.get("baseline"), dict) else {}
        code = pdtp_exit_code(gate.get("verdict", s["verdict"]))
        label = gate_label(s)  # verified against pdtp.csv when the report was loaded (report.verify)
        head = "DTP-1 VIOLATED" if failed else "DTP-1 holds"
        if failed and label.startswith("pass-with"):
            head += f"; the gate passed only through excused records ({label})"
        partial = partial_pass(s)  # a pass over part of T: what pdtp's verdict line says
        detail = (
            f"max PDTP {fmt(s.get('max'))} {'>' if failed else '≤'} threshold {fmt(s.get('threshold'), 2)}; "
            f"{fmt(s.get('violations'), None)} of {fmt(s.get('n'), None)} records above the threshold. "
            f"{rests_on(s)}{gate_sentence(gate)}mptool pdtp exited with code {code} "
            f"({'finding' if code == 1 else 'pass'})."
        )
        advice = (
            "The classifier should not be published as is (Long et al., section 5: the DTP-1 rule)."
            if failed
            else "No audited record's PDTP exceeds the threshold (PDTP is a lower bound of DTP)."
        )
        return {
            "status": "unknown" if partial else "fail" if failed else "pass",
            "headline": partial or head,
            "detail": detail,
            "advice": advice,
            "exit_code": code,
        }
    red = summary_of(inputs.reduce_doc)
    reached = lookup(red, "reached", "dtp1_reached", "success")
    if inputs.reduce_doc is not None and isinstance(reached, bool):
        return {
            "status": "pass" if reached else "fail",
            "headline": "DTP-1 reachable by removal" if reached else "DTP-1 not reached by removal",
            "detail": "No pdtp.json in this directory; verdict taken from reduce-dtp's result "
            f"(mptool reduce-dtp exited with code {0 if reached else 1}).",
            "advice": "",
            "exit_code": None,
        }
    return {
        "status": "unknown",
        "headline": "No DTP-1 verdict",
        "detail": "No pdtp.json in this directory: run 'mptool pdtp' with --out pointing here for the verdict.",
        "advice": "",
        "exit_code": None,
    }


def target_accuracy_rows(inputs: ReportInputs) -> list[tuple[str, str]]:
    """Train/test accuracy of the target models, one row per source (the models differ).

    ``mptool pdtp`` trains one model on T (train accuracy only); ``mptool attack`` trains
    target models on halves of the candidate set (train and test accuracy, section 5.4).
    """
    rows: list[tuple[str, str]] = []
    s = inputs.pdtp_summary or {}
    train = number(lookup(s, "train_accuracy"))
    test = number(lookup(s, "test_accuracy"))
    if train is not None or test is not None:
        label = "target train / test accuracy" if test is not None else "target train accuracy"
        rows.append((label, " / ".join(fmt(v, 3) for v in (train, test) if v is not None)))
    a = summary_of(inputs.attack_doc)
    holder = lookup(a, "target_model", "target")
    holder = holder if isinstance(holder, dict) else a
    train = number(lookup(holder, "train_accuracy", "target_train_accuracy"))
    test = number(lookup(holder, "test_accuracy", "target_test_accuracy"))
    if inputs.attack_doc is not None and (train is not None or test is not None):
        size = lookup(a, "train_size")
        where = f" (trained on |D|/2 = {fmt(size, None)})" if size is not None else ""
        rows.append((f"attack target models: train / test accuracy{where}", f"{fmt(train, 3)} / {fmt(test, 3)}"))
    return rows


def dtp_rows(s: dict[str, Any], table: pd.DataFrame | None) -> list[tuple[str, str]]:
    """Rows on DTP beyond PDTP: the upper bound of section 6 (``dtp_upper``) and a query-set estimate.

    Reads ``summary.dtp.upper_bound`` / ``summary.dtp.queries`` as ``mptool pdtp`` writes them,
    or a plain ``dtp_upper`` number, or the maximum of the ``dtp_upper`` column.
    """
    rows: list[tuple[str, str]] = []
    dtp = lookup(s, "dtp") if isinstance(lookup(s, "dtp"), dict) else {}
    bound = lookup(dtp, "upper_bound")
    upper = number(lookup(bound, "max")) if isinstance(bound, dict) else number(lookup(s, "dtp_upper"))
    if upper is None and table is not None and "dtp_upper" in table:
        upper = number(pd.to_numeric(table["dtp_upper"], errors="coerce").max())
    why = ""
    if isinstance(bound, dict):
        kind, reason = lookup(bound, "kind"), lookup(bound, "why")
        why = "; ".join(str(p) for p in (kind, reason) if p)
    if upper is not None:
        rows.append(("DTP upper bound (max dtp_upper, raw probabilities)", fmt(upper) + (f" ({why})" if why else "")))
        extra = _bound_spread(bound) if isinstance(bound, dict) else None
        if extra:
            rows.append(("DTP upper bound: median, records vacuous", extra))
    elif why:
        rows.append(("DTP upper bound", f"none applies ({why})"))
    queries = lookup(dtp, "queries")
    if isinstance(queries, dict) and number(lookup(queries, "max")) is not None:
        label = lookup(queries, "set")
        rows.append((f"DTP on the query set{f' ({label})' if label else ''}", fmt(lookup(queries, "max"))))
    return rows


def _bound_spread(bound: dict[str, Any]) -> str | None:
    """'median M; V of N at or above the binning cap C' from ``summary.dtp.upper_bound``, if given."""
    median, cap = number(lookup(bound, "median")), number(lookup(bound, "vacuous_at"))
    vacuous = lookup(bound, "n_vacuous")
    if median is None or vacuous is None or cap is None:
        return None
    return f"median {fmt(median)}; {vacuous} at or above the binning cap {fmt(cap)} (vacuous)"


def honesty_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """Gate, bin-edge violations and the noise floor (issue 18 items 4-5), when pdtp.json has them."""
    rows: list[tuple[str, str]] = []
    if "violations_bin_edge" in s:
        rows += [
            ("verdict scale (--gate)", str(s.get("gate", "binned"))),
            ("violations only a bin-edge step (raw PDTP ≤ threshold)", fmt(s.get("violations_bin_edge"), None)),
            ("violations on the raw PDTP", fmt(s.get("violations_raw"), None)),
        ]
    floor = s.get("noise_floor")
    if isinstance(floor, dict) and floor.get("records"):
        rows.append(
            (
                f"noise floor p95 ({fmt(floor.get('records'), None)} records refitted with their row moved)",
                f"{fmt(floor.get('p95'))}; {fmt(floor.get('records_above_p95'), None)} records above it",
            )
        )
    elif isinstance(floor, dict) and floor.get("order_dependent") is False:
        rows.append(("noise floor", "none: A(T) and A(T minus t) are exactly paired"))
    return rows


def summary_rows(inputs: ReportInputs) -> list[tuple[str, str]]:
    """Label/value rows of the summary table."""
    s = inputs.pdtp_summary or {}
    rows: list[tuple[str, str]] = []
    if s:
        n, n_train = s.get("n"), s.get("n_train")
        audited = fmt(n, None) + (f" (of |T| = {fmt(n_train, None)})" if n_train is not None else "")
        rows += [
            ("records audited", audited),
            ("max PDTP", fmt(s.get("max"))),
            ("mean PDTP", fmt(s.get("mean"))),
            ("median PDTP", fmt(s.get("median"))),
            ("95th percentile PDTP", fmt(s.get("p95"))),
            ("violations (PDTP > threshold)", fmt(s.get("violations"), None)),
            ("threshold", fmt(s.get("threshold"), 2)),
        ]
        if isinstance(s.get("replicates"), dict):  # randomized training: decisions beyond the randomness
            rep = s["replicates"]
            rows[-2] = ("violations (decided above the threshold beyond training randomness)",
                        fmt(s.get("violations"), None))
            rows += [
                ("records decided below the threshold", fmt(s.get("decided_below"), None)),
                ("records undecided (not established; violation = undecided in pdtp.csv)",
                 fmt(s.get("undecided"), None)),
                ("error control", f"{rep.get('error_control')}: {rep.get('error_control_means')}"),
                ("replicates per record", f"{rep.get('replicates_min')}-{rep.get('replicates_max')}; "
                 f"{fmt(rep.get('fits'), None)} fits{', budget spent' if replicate_ending(s) == BUDGET else ''}"),
                *fail_fast_rows(s),
            ]
        rows += honesty_rows(s)
    rows += dtp_rows(s, inputs.pdtp_table)
    if s:
        rows += [("engine", str(s.get("engine", "—"))), ("estimator", str(s.get("estimator", "—")))]
    rows += target_accuracy_rows(inputs)
    timings = s.get("timings")
    if isinstance(timings, dict) and number(timings.get("total_s")) is not None:
        rows.append(("pdtp wall time", f"{number(timings['total_s']):.2f} s"))
    return rows


# --------------------------------------------------------------------------------------
# records


#: Rows of the undecided-records table at most (the rest are counted; every one is in pdtp.csv).
UNDECIDED_ROWS = 500


def undecided_records(inputs: ReportInputs, show_values: bool = False) -> dict[str, Any] | None:
    """Every record a replicate run left undecided (``violation`` = undecided in pdtp.csv), highest estimate
    first (ties by row), with its bounds and replicates: neither shown safe nor shown to violate DTP-1
    (docs/randomness.md section 3). At most :data:`UNDECIDED_ROWS` rows; ``more`` counts the rest. The id only
    with ``show_values``. None for other runs or when no record is undecided."""
    t = inputs.pdtp_table
    if not isinstance((inputs.pdtp_summary or {}).get("replicates"), dict) or t is None or "violation" not in t:
        return None
    u = t[t["violation"].astype(str).str.strip().str.lower() == "undecided"]  # as verify_pdtp counts them
    if u.empty or "row" not in u:
        return None
    u = u.sort_values(["pdtp", "row"], ascending=[False, True])
    cols = [c for c in ("row", "id", "pdtp", "pdtp_low", "pdtp_high", "replicates", "sd_full")
            if c in u and (show_values or c not in VALUE_COLUMNS)]
    shown = u.head(UNDECIDED_ROWS)
    rows = [[data_cell(r[c]) if c in DATA_COLUMNS else fmt(r[c], None if c in ("row", "replicates") else 4)
             for c in cols] for _, r in shown.iterrows()]
    out = _table(cols, rows, {c for c in cols if c != "id"})
    out["total"] = len(u)
    out["more"] = len(u) - len(shown)
    return out


def top_records(inputs: ReportInputs, top: int, show_values: bool = False) -> dict[str, Any] | None:
    """The ``top`` riskiest records of pdtp.csv with probabilities and attack accuracies;
    with ``show_values`` also their ids, labels and worst classes (from pdtp.csv; the labels from
    ``inputs.labels`` when pdtp.csv has none) and feature values (from ``inputs.features``).

    Bounds come with the PDTP on their scale: ``pdtp_raw`` <= ``dtp_upper`` (raw probabilities),
    ``pdtp`` <= ``dtp_upper_binned`` (binned)."""
    t = inputs.pdtp_table
    if t is None or "row" not in t:
        return None
    replicate_run = isinstance((inputs.pdtp_summary or {}).get("replicates"), dict)
    t = t.sort_values(["pdtp", "row"], ascending=[False, True]).head(top)
    if show_values and "label" not in t and inputs.labels is not None:  # pdtp.csv without labels: from the data
        t = t.assign(label=t["row"].map(lambda r: inputs.labels.get(int(r))))
    core = [
        c
        for c in (
            "row", "id", "label", "pdtp", "pdtp_raw", "dtp_upper", "dtp_upper_binned", "dtp_queries", "worst_class",
            "p_full", "p_loo", *(REPLICATE_RECORD_COLUMNS if replicate_run else ()),
        )
        if c in t and t[c].notna().any() and (show_values or c not in VALUE_COLUMNS)
    ]
    acc_cols = attack_accuracy_columns(inputs.attack_table)
    attack_by_row: dict[int, pd.Series] = {}
    if acc_cols and "row" in inputs.attack_table:
        attack_by_row = {int(r["row"]): r for _, r in inputs.attack_table.iterrows()}
    extra = [f"{a} acc." for a in acc_cols] if any(int(r) in attack_by_row for r in t["row"]) else []
    feats = inputs.features if show_values else None
    feat_cols = list(feats.columns) if feats is not None else []
    rows = []
    for _, r in t.iterrows():
        cells = []
        for c in core:
            digits = 3 if c in ("p_full", "p_loo") else 4
            cells.append(data_cell(r[c]) if c in DATA_COLUMNS else fmt(r[c], None if c == "row" else digits))
        if extra:
            a = attack_by_row.get(int(r["row"]))
            cells += [fmt(a[col], 3) if a is not None else "—" for col in acc_cols.values()]
        if feat_cols:
            fr = feats.loc[int(r["row"])] if int(r["row"]) in feats.index else None
            cells += [data_cell(fr[c]) if fr is not None else "—" for c in feat_cols]
        rows.append(cells)
    numeric = {"row", "pdtp", "pdtp_raw", "dtp_upper", "dtp_upper_binned", "dtp_queries", "p_full", "p_loo",
               "pdtp_low", "pdtp_high", "replicates", *extra}
    numeric |= {c for c in feat_cols if pd.api.types.is_numeric_dtype(feats[c])}
    out = _table(core + extra + feat_cols, rows, numeric)
    out["n_core"] = len(core) + len(extra)
    out["feature_columns"] = feat_cols
    return out


def attack_targets(inputs: ReportInputs, top: int, show_values: bool = False) -> dict[str, Any] | None:
    """The ``top`` attack targets with the highest maximum per-target accuracy (attack.csv);
    the id column only with ``show_values``."""
    t = inputs.attack_table
    if t is None or "row" not in t:
        return None
    key = "max_accuracy" if "max_accuracy" in t else ("pdtp_mean" if "pdtp_mean" in t else None)
    if key is None:
        return None
    t = t.sort_values([key, "row"], ascending=[False, True]).head(top)
    acc_cols = attack_accuracy_columns(t)
    cols = [
        c
        for c in ("row", "id", "label", "pdtp_mean", "pdtp_decision", *acc_cols.values(), "max_accuracy", "lira_score",
                  "kl_leakage")
        if c in t and (show_values or c not in VALUE_COLUMNS)
    ]
    rows = []
    for _, r in t.iterrows():
        rows.append(
            [
                data_cell(r[c])
                if c in DATA_COLUMNS
                else (str(r[c]) if r[c] in formats.PDTP_DECISIONS else "")  # what mptool writes, nothing else shown
                if c == "pdtp_decision"
                else fmt(r[c], None if c == "row" else 4 if c in ("pdtp_mean", "kl_leakage") else 3)
                for c in cols
            ]
        )
    out = _table(cols, rows, {c for c in cols if c not in ("id", "label", "pdtp_decision")})
    out["columns"] = [c.replace("_accuracy", " acc.") if c in acc_cols.values() else c for c in cols]
    return out


def attack_metrics(attacks: list[AttackResult]) -> dict[str, Any] | None:
    """One row per attack with the paper's metrics (Tables 1-2); other scalar values as notes.

    Columns absent from every attack are left out; any other scalar an attack entry holds
    (e.g. the threshold attack's loss threshold) is listed under the table, so nothing
    written is hidden.
    """
    if not attacks:
        return None
    shown = [
        (label, keys) for label, keys in ATTACK_METRICS if any(lookup(a.metrics, *keys) is not None for a in attacks)
    ]
    known = {norm_key(k) for _, keys in ATTACK_METRICS for k in keys} | _NOT_METRICS | {"nattacks"}
    columns = ["attack", *(label for label, _ in shown), "Pearson ρ (p)", "Spearman ρ (p)", "n"]
    rows, extras = [], []
    for a in attacks:
        cells = [a.name, *(fmt(lookup(a.metrics, *keys), 3) for _, keys in shown)]
        cells.append("—" if a.pearson is None else f"{a.pearson:.3f} ({fmt_p(a.pearson_p)})")
        cells.append("—" if a.spearman is None else f"{a.spearman:.3f} ({fmt_p(a.spearman_p)})")
        cells.append(fmt(lookup(a.metrics, "n_attacks"), None))
        rows.append(cells)
        other = [
            f"{k} = {fmt(v, 4) if isinstance(v, float) else fmt(v, None)}"
            for k, v in a.entry.items()
            if norm_key(k) not in known and (v is None or isinstance(v, str | bool | int | float))
        ]
        if other:
            extras.append((a.name, ", ".join(other)))
    out = _table(columns, rows, set(columns[1:]))
    out["extras"] = extras
    return out


def strongest_attack(inputs: ReportInputs) -> str | None:
    """One sentence naming attack.json's strongest attack (highest TPR at 1% FPR, Carlini et al.) with
    its TPR at 1% FPR, the bootstrap interval over targets when written, its AUC and non-member attempts."""
    best = lookup(summary_of(inputs.attack_doc), "strongest_attack")
    tpr = number(lookup(best, "tpr_at_1pct_fpr"))
    if not isinstance(best, dict) or lookup(best, "name") is None or tpr is None:
        return None
    text = f"Strongest attack: {ui.excerpt(lookup(best, 'name'), 40)}, TPR {fmt(tpr, 3)} at 1% FPR"
    ci = lookup(best, "tpr_at_1pct_fpr_interval")
    low, high = number(lookup(ci, "low")), number(lookup(ci, "high"))
    if low is not None and high is not None and lookup(ci, "estimable") is not False:
        level = number(lookup(ci, "confidence", "level"))
        resamples = number(lookup(ci, "resamples"))
        text += f" ({fmt(100 * level, 0) + '% ' if level is not None else ''}interval {fmt(low, 3)}–{fmt(high, 3)}"
        text += f", bootstrap over targets, {fmt(resamples, None)} resamples)" if resamples is not None else ")"
    elif isinstance(ci, dict):
        text += " (interval not estimable: fewer than 100 non-member attempts)"
    extra = [f"AUC {fmt(number(lookup(best, 'auc')), 3)}"] if number(lookup(best, "auc")) is not None else []
    attempts = number(lookup(best, "nonmember_attempts"))
    if attempts is not None:
        extra.append(f"{fmt(attempts, None)} non-member attempts")
    return text + (f"; {'; '.join(extra)}." if extra else ".")


def attack_pdtp_note(inputs: ReportInputs) -> str | None:
    """What the attack's ``pdtp_mean`` is when attack.json says no record is decided (randomized training).

    ``summary.pdtp_basis`` with ``decided: false`` (the refit engine on a training that depends on the
    seed or the row order, docs/randomness.md section 8): each value counts the training randomness
    as influence. None otherwise (exact engines, a deterministic training): their reports are unchanged.
    """
    summary = summary_of(inputs.attack_doc)
    replicates = lookup(summary, "pdtp_replicates")
    if isinstance(replicates, dict):
        got = lookup(summary, "pdtp_decisions")
        n = [lookup(got, d) if isinstance(got, dict) else None for d in formats.PDTP_DECISIONS]
        whole = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in n)  # counts, as mptool writes
        counts = (", ".join(f"{v} {d}" for d, v in zip(formats.PDTP_DECISIONS, n, strict=True)) if whole
                  else "attack.json's counts are not readable")
        return (f"pdtp_mean and pdtp_decision come from the replicate engine (--engine replicates): each target "
                f"decided beyond the training randomness ({counts}); an undecided target is neither shown safe nor "
                "shown to violate DTP-1.")
    basis = lookup(summary, "pdtp_basis")
    if not isinstance(basis, dict) or basis.get("decided") is not False:
        return None
    sources = basis.get("sources")
    said = f" (the training depends on {ui.excerpt(str(sources), 40)})" if sources else ""
    return (f"pdtp_mean is a single-refit estimate per iteration{said}: it counts the training randomness as "
            "the record's influence, and no target record is decided above or below the threshold. mptool pdtp "
            "(replicate engine) decides which records violate DTP-1 beyond the randomness; its decisions are in "
            "the PDTP section when pdtp.json is in this folder.")


def attack_gate(inputs: ReportInputs) -> str | None:
    """One sentence on ``mptool attack``'s gate (--max-accuracy / --max-auc) and the exit code it gave."""
    gate = lookup(summary_of(inputs.attack_doc), "gate")
    if not isinstance(gate, dict):
        return None
    limits = [
        f"--{flag} {fmt(lookup(gate, key), None)}"
        for flag, key in (("max-accuracy", "max_accuracy"), ("max-auc", "max_auc"))
        if number(lookup(gate, key)) is not None
    ]
    exceeded = lookup(gate, "exceeded") or []
    if not limits:
        return "No gate given (--max-accuracy / --max-auc): mptool attack exited with code 0."
    if exceeded:
        return f"Gate {', '.join(limits)} exceeded: {'; '.join(map(str, exceeded))}. mptool attack exited with code 1."
    undecided = lookup(gate, "undecided") or []
    if undecided:
        return (f"Gate {', '.join(limits)} cannot decide: {'; '.join(map(str, undecided))}. "
                "The gate fails closed: mptool attack exited with code 1.")
    return f"Gate {', '.join(limits)} not exceeded: mptool attack exited with code 0."


# --------------------------------------------------------------------------------------
# reduce-dtp


def best_prefix(doc: dict[str, Any] | None) -> tuple[int | None, list[Any]]:
    """(number of removals, removed rows) of reduce.json's best prefix, in the layouts we accept."""
    s = summary_of(doc)
    step = number(lookup(s, "best_step"))
    value = lookup(s, "best_prefix", "best", "prefix", "removal_set")
    rows: list[Any] = []
    length: int | None = None
    if isinstance(value, list):
        rows = [lookup(v, "row") if isinstance(v, dict) else v for v in value]
        length = len(rows)
    elif isinstance(value, dict):
        listed = lookup(value, "rows", "removed", "removals", "records")
        if isinstance(listed, list):
            rows = [lookup(v, "row") if isinstance(v, dict) else v for v in listed]
        n = number(lookup(value, "length", "size", "steps", "k", "n", "removals_count"))
        length = int(n) if n is not None else (len(rows) if isinstance(listed, list) else None)
    elif number(value) is not None:
        length = int(number(value))
    if step is not None:
        length = int(step)
    return length, rows


def _trace_cell(column: str, value: Any) -> str:
    """One cell of the reduce-dtp trace: PDTP with 4 decimals, ids as data excerpts, the rest as is."""
    if column in ("pdtp_before", "max_pdtp_after"):
        return fmt(value, 4)
    return data_cell(value) if column in DATA_COLUMNS else fmt(value, None)


def reduce_block(inputs: ReportInputs, show_values: bool = False) -> dict[str, Any] | None:
    """Summary rows and step-by-step trace of a reduce-dtp run (the id column only with ``show_values``)."""
    if inputs.reduce_doc is None and inputs.reduce_table is None:
        return None
    s = summary_of(inputs.reduce_doc)
    length, rows = best_prefix(inputs.reduce_doc)
    reached = lookup(s, "reached", "dtp1_reached", "success")
    items = [
        ("strategy", str(lookup(s, "strategy") or "—")),
        ("engine", str(lookup(s, "engine") or "—")),
        ("threshold", fmt(lookup(s, "threshold"), 2)),
        ("DTP-1 reached", fmt(reached) if isinstance(reached, bool) else "—"),
        ("best prefix (removals)", "—" if length is None else str(length)),
        ("removed rows (best prefix)", ", ".join(str(r) for r in rows) if rows else ("none" if length == 0 else "—")),
    ]
    for label, keys in (
        ("max PDTP before any removal", ("initial_max",)),
        ("max PDTP after the best prefix", ("best_max",)),
        ("max PDTP after the last step", ("final_max",)),
    ):
        if number(lookup(s, *keys)) is not None:
            items.append((label, fmt(lookup(s, *keys))))
    for label, key in (("steps taken", "steps"), ("stopped because", "stop_reason"), ("recomputes", "recomputes")):
        if lookup(s, key) is not None:
            items.append((label, fmt(lookup(s, key), None)))
    cmp = lookup(s, "greedy_comparison")
    if isinstance(cmp, dict):
        text = ", ".join(
            f"{k} = {fmt(v, 4) if isinstance(v, float) else fmt(v, None)}"
            for k, v in cmp.items()
            if not isinstance(v, dict | list) or k.endswith("prefix")
        )
        items.append(("compared with greedy", text))
    if isinstance(reached, bool):
        items.append(("mptool reduce-dtp exit code", "0 (a prefix reaches DTP-1)" if reached else "1 (none does)"))
    timings = lookup(s, "timings")
    if isinstance(timings, dict):
        total = number(lookup(timings, "total_s", "total"))
        if total is not None:
            items.append(("reduce-dtp wall time", f"{total:.2f} s"))
    trace = None
    t = inputs.reduce_table
    if t is not None:
        cols = [
            c
            for c in ("step", "row", "id", "pdtp_before", "max_pdtp_after", "violations_after", "records_left")
            if c in t and t[c].notna().any() and (show_values or c not in VALUE_COLUMNS)
        ]
        trace_rows = [[_trace_cell(c, r[c]) for c in cols] for _, r in t.iterrows()]
        trace = _table(cols, trace_rows, {c for c in cols if c != "id"})
        if length is not None and "step" in t:
            trace["highlight"] = [number(s_) == length for s_ in t["step"]]
    return {"items": items, "trace": trace}


# --------------------------------------------------------------------------------------
# manifest


def _spec_yaml(spec: Any) -> str:
    if not isinstance(spec, dict) or not spec:
        return ""
    return yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, default_flow_style=None, width=100)


def manifest_blocks(inputs: ReportInputs) -> list[dict[str, Any]]:
    """One manifest per result JSON: versions, spec (YAML), hashes, seed, engine, timings, command."""
    blocks = []
    sources = [("pdtp", inputs.pdtp_summary), ("attack", inputs.attack_doc), ("reduce", inputs.reduce_doc)]
    for kind, doc in sources:
        if not doc:
            continue
        s = summary_of(doc)
        m = lookup(s, "manifest") or lookup(doc, "manifest") or {}
        if not isinstance(m, dict):
            m = {}
        items = [
            ("command", str(m.get("command", "—"))),
            ("started", str(m.get("started", "—"))),
            ("data", str(m.get("data", "—"))),
            ("data digest (keyed)", str(m.get("data_hmac") or "— (none without MPTOOL_FINGERPRINT_KEY)")),
            ("spec SHA-256", str(m.get("spec_sha256", "—"))),
            ("seed", fmt(m.get("seed", lookup(s, "seed")), None)),
            ("engine", str(lookup(s, "engine") or "—")),
        ]
        timings = lookup(s, "timings") or lookup(doc, "timings")
        timing_items = []
        if isinstance(timings, dict):
            timing_items = [
                (str(k), f"{number(v):.3f} s" if number(v) is not None else str(v)) for k, v in timings.items()
            ]
        versions = m.get("versions") if isinstance(m.get("versions"), dict) else {}
        spec = lookup(s, "spec") or lookup(doc, "spec")
        blocks.append(
            {
                "source": f"{RESULT_FILES[kind][1]} ({PRODUCER[kind]})",
                "items": items,
                "timings": timing_items,
                "versions": [(str(k), str(v)) for k, v in versions.items()],
                "spec_yaml": _spec_yaml(spec),
            }
        )
    return blocks


def build_context(inputs: ReportInputs, top: int = 20, show_values: bool = False) -> dict[str, Any]:
    """Everything both templates show, as formatted strings.

    ``show_values`` adds the riskiest records' feature values and ids (HTML report with
    ``--show-values`` only; the Markdown summary always passes False).
    """
    missing_commands = [
        PRODUCER[kind] for kind, names in RESULT_FILES.items() if all(n in inputs.missing for n in names)
    ]
    spec = spec_of(inputs)
    label = spec.get("data", {}).get("label") if isinstance(spec, dict) else None
    return {
        "title": f"mptool privacy audit: {inputs.results_dir.name or inputs.results_dir}",
        "results_dir": str(inputs.results_dir),
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "mptool_version": __version__,
        "present": inputs.present,
        "missing": inputs.missing,
        "missing_commands": missing_commands,
        "notes": inputs.notes,
        "verdict": verdict_block(inputs),
        "summary": summary_rows(inputs),
        "top": top_records(inputs, top, show_values),
        "undecided": undecided_records(inputs, show_values),
        "show_values": show_values,
        "top_n": top,
        "label_column": label,
        "attack_metrics": attack_metrics(inputs.attacks),
        "attack_targets": attack_targets(inputs, top, show_values),
        "attack_gate": attack_gate(inputs),
        "attack_pdtp_note": attack_pdtp_note(inputs),
        "strongest_attack": strongest_attack(inputs),
        "attribute": attribute_block(inputs),
        "reduce": reduce_block(inputs, show_values),
        "mitigation": mitigation_block(inputs.mitigate_table, inputs.mitigate_doc),
        "manifests": manifest_blocks(inputs),
    }
