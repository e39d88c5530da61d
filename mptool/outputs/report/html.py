"""The self-contained HTML report: inline CSS, plots embedded as SVG data URIs, no network.

Templates live in ``mptool/outputs/report/templates`` (package data) and are rendered with Jinja2
with HTML autoescaping on and control characters made visible; the only markup not escaped is
the base64 plot payloads. Names from the results (attack names) enter the plots as escaped
excerpts with mathtext's ``$`` escaped; matplotlib escapes SVG text itself.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from mptool.outputs.report import plots
from mptool.outputs.report.context import best_prefix, build_context
from mptool.outputs.report.loader import ReportInputs, attack_accuracy_columns, lookup, summary_of
from mptool.outputs.report.mitigation import tradeoff_svg
from mptool.outputs.report.templating import environment
from mptool.outputs.report.values import number
from mptool.runtime import ui


def _data_uri(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def _plot(plot_id: str, title: str, caption: str, draw: Callable[[], str], wide: bool = False) -> dict[str, Any]:
    return {"id": plot_id, "title": title, "caption": caption, "src": _data_uri(draw()), "wide": wide}


def plot_label(name: Any) -> str:
    """A name from the results (an attack's) as a plot label: escaped excerpt, no mathtext."""
    return ui.excerpt(name, 30).replace("$", r"\$")


def _numeric(frame: pd.DataFrame, col: str) -> np.ndarray:
    return pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float)


def _pdtp_plots(inputs: ReportInputs, threshold: float, out: list[dict[str, Any]], skipped: list[str]) -> None:
    if inputs.pdtp_table is None:
        skipped.append("PDTP histogram: needs pdtp.csv (mptool pdtp).")
        return
    values = _numeric(inputs.pdtp_table, "pdtp")
    out.append(
        _plot(
            "plot-pdtp-histogram",
            "PDTP of every audited record",
            "Counts on a log scale; the dashed line is the DTP-1 threshold. Records right of it violate DTP-1.",
            lambda: plots.pdtp_histogram(values, threshold),
        )
    )


def _attack_plots(inputs: ReportInputs, out: list[dict[str, Any]], skipped: list[str]) -> None:
    t = inputs.attack_table
    acc = attack_accuracy_columns(t)
    if t is None or "pdtp_mean" not in t or not acc:
        skipped.append("attack accuracy plots: need attack.csv with pdtp_mean and <attack>_accuracy (mptool attack).")
    else:
        x = _numeric(t, "pdtp_mean")
        rho = {plot_label(a.name): a.pearson for a in inputs.attacks}
        accuracy = {plot_label(name): _numeric(t, col) for name, col in acc.items()}
        out.append(
            _plot(
                "plot-attack-accuracy",
                "Per-target attack accuracy against mean PDTP",
                "One point per target record, one panel per attack; 0.5 (dotted) is guessing. "
                "Pearson's ρ as in Long et al., Figure 1.",
                lambda: plots.attack_accuracy_panels(x, accuracy, rho),
                wide=len(accuracy) > 1,
            )
        )
        if "max_accuracy" not in t:
            skipped.append("maximum-accuracy plot: attack.csv has no max_accuracy column.")
        else:
            y = _numeric(t, "max_accuracy")
            written = lookup(lookup(summary_of(inputs.attack_doc), "max_accuracy"), "correlation_with_pdtp")
            rho_max = number(lookup(written, "pearson"))
            ok = np.isfinite(x) & np.isfinite(y)
            if rho_max is None and ok.sum() > 2 and np.ptp(x[ok]) > 0 and np.ptp(y[ok]) > 0:
                rho_max = float(np.corrcoef(x[ok], y[ok])[0, 1])
            out.append(
                _plot(
                    "plot-max-accuracy",
                    "Best attack per target against mean PDTP",
                    "Maximum per-target accuracy over all attacks (Long et al., Figure 2).",
                    lambda: plots.max_accuracy_plot(x, y, rho_max),
                )
            )
    curves = {
        plot_label(a.name): (a.roc_fpr, a.roc_tpr, number(lookup(a.metrics, "auc", "roc_auc")))
        for a in inputs.attacks
        if a.roc_fpr is not None
    }
    if not curves:
        skipped.append("ROC curves: need ROC points per attack in attack.json (mptool attack).")
        return
    out.append(
        _plot(
            "plot-roc",
            "ROC curves of the attacks",
            "False-positive rate on a log scale, where the strongest attacks separate from chance.",
            lambda: plots.roc_curves(curves),
        )
    )


def _reduce_plots(inputs: ReportInputs, threshold: float, out: list[dict[str, Any]], skipped: list[str]) -> None:
    rt, red = inputs.reduce_table, summary_of(inputs.reduce_doc)
    if rt is None or not {"step", "max_pdtp_after"} <= set(rt.columns) or not len(rt):
        skipped.append("reduce-dtp sawtooth: needs reduce.csv (mptool reduce-dtp).")
        return
    length, _ = best_prefix(inputs.reduce_doc)
    initial = number(lookup(red, "initial_max"))  # drawn at step 0 when the trace lacks that row
    steps, after = _numeric(rt, "step").astype(int), _numeric(rt, "max_pdtp_after")
    reached = lookup(red, "reached") is not False
    red_threshold = number(lookup(red, "threshold")) or threshold
    out.append(
        _plot(
            "plot-reduce-sawtooth",
            "Maximum PDTP while removing the riskiest records",
            "After each removal every remaining record's PDTP is recomputed; the maximum can rise again "
            "because records protect each other (Long et al., section 8, Figure 6).",
            lambda: plots.reduce_sawtooth(steps, after, red_threshold, length, initial, reached),
        )
    )


def build_plots(inputs: ReportInputs) -> tuple[list[dict[str, Any]], list[str]]:
    """Every plot the inputs allow, and one sentence per plot that could not be drawn."""
    out: list[dict[str, Any]] = []
    skipped: list[str] = []
    threshold = number((inputs.pdtp_summary or {}).get("threshold"))
    if threshold is None:
        threshold = number(lookup(summary_of(inputs.reduce_doc), "threshold")) or 1.0
    _pdtp_plots(inputs, threshold, out, skipped)
    _attack_plots(inputs, out, skipped)
    _reduce_plots(inputs, threshold, out, skipped)
    if inputs.mitigate_table is not None and inputs.mitigate_doc is not None:
        table, doc = inputs.mitigate_table, inputs.mitigate_doc
        out.append(_plot("plot-mitigation", "Privacy-utility trade-off of the defences",
                         "Max PDTP (lower is more private) against accuracy on the rows outside T, one point per "
                         "setting; the dotted line joins the Pareto front; the dashed line is the target.",
                         lambda: tradeoff_svg(table, doc)))
    return out, skipped


def render_html(inputs: ReportInputs, top: int = 20, quiet: bool = True, show_values: bool = False) -> str:
    """The whole HTML report as one string; ``show_values`` adds the riskiest records' feature values and ids."""
    context: dict[str, Any] = build_context(inputs, top, show_values)
    ui.info("drawing plots", quiet)
    context["plots"], context["plots_skipped"] = build_plots(inputs)
    return environment(autoescape=True).get_template("report.html.j2").render(**context)
