"""The report's plots, drawn with matplotlib's Agg backend and returned as SVG text.

Each function takes plain arrays and returns one self-contained SVG document (text kept
as <text>, no external references), which the HTML report embeds as a data URI. SVG output
is made reproducible: fixed hash salt for element ids and no creation date.

Figures follow Long et al.: PDTP histogram with the DTP-1 threshold (section 5.5),
per-attack per-target accuracy against mean PDTP with Pearson's coefficient (Figure 1),
maximum accuracy across attacks against PDTP (Figure 2), ROC curves as steps on log-scaled
FPR (Carlini et al.'s recommended view), and the reduce-dtp sawtooth (section 8, Figure 6).
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: Colours of the threshold line, violations and the best prefix.
RED = "#c0392b"
BLUE = "#2c6fbb"
GREY = "#7f8c8d"
GREEN = "#1e8449"

_RC = {
    "svg.hashsalt": "mptool-report",
    "svg.fonttype": "none",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": 100,
}


def _pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (imported lazily: it is slow to import)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _to_svg(fig: Any) -> str:
    plt = _pyplot()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": "mptool"})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and DOCTYPE (external DTD reference)


def _figure(nrows: int = 1, ncols: int = 1, size: tuple[float, float] = (9.0, 3.4), **kw: Any) -> tuple[Any, Any]:
    return _pyplot().subplots(nrows, ncols, figsize=size, squeeze=False, **kw)


def _plain_log_ticks(axis: Any) -> None:
    """Label a log axis 1, 10, 100, ... instead of 10^0, 10^1, ... (easier to read as counts)."""
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}" if v >= 1 else f"{v:.3g}"))


def pdtp_histogram(values: Sequence[float], threshold: float) -> str:
    """Histogram of per-record PDTP with log-scaled counts and the DTP-1 threshold line."""
    plt = _pyplot()
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    with plt.rc_context(_RC):
        fig, axes = _figure()
        ax = axes[0, 0]
        top = max(float(v.max()) if v.size else 0.0, threshold) * 1.05 or 1.0
        edges = np.linspace(0.0, top, 51)
        below, above = v[v <= threshold], v[v > threshold]
        ax.hist(below, bins=edges, color=BLUE, label=f"PDTP ≤ {threshold:g} ({below.size})")
        if above.size:
            ax.hist(above, bins=edges, color=RED, label=f"PDTP > {threshold:g} ({above.size})")
        ax.set_yscale("log")
        ax.set_ylim(bottom=0.7)
        _plain_log_ticks(ax.yaxis)
        ax.axvline(threshold, color=RED, linestyle="--", linewidth=1.2, label=f"DTP-1 threshold {threshold:g}")
        ax.set_xlabel("PDTP (log-ratio ε)")
        ax.set_ylabel("records (log scale)")
        ax.set_title(f"PDTP of {v.size} records")
        ax.legend(frameon=False, loc="upper right")
        return _to_svg(fig)


def _scatter_panel(ax: Any, x: np.ndarray, y: np.ndarray, title: str, rho: float | None) -> None:
    ok = np.isfinite(x) & np.isfinite(y)
    ax.scatter(x[ok], y[ok], s=18, alpha=0.45, color=BLUE, edgecolors="none")  # overlaps show darker
    ax.axhline(0.5, color=GREY, linestyle=":", linewidth=1)
    if ok.sum() > 1 and np.ptp(x[ok]) > 0:
        slope, intercept = np.polyfit(x[ok], y[ok], 1)
        xs = np.array([x[ok].min(), x[ok].max()])
        ax.plot(xs, slope * xs + intercept, color=RED, linewidth=1)
    label = title if rho is None else f"{title}  (Pearson ρ = {rho:.2f})"
    ax.set_title(label)


def attack_accuracy_panels(
    pdtp_mean: Sequence[float], accuracy: Mapping[str, Sequence[float]], rho: Mapping[str, float | None]
) -> str:
    """Per-target accuracy of each attack against mean PDTP, one panel per attack (Figure 1)."""
    plt = _pyplot()
    x = np.asarray(pdtp_mean, dtype=float)
    names = list(accuracy)
    ncols = min(3, len(names))
    nrows = math.ceil(len(names) / ncols)
    with plt.rc_context(_RC):
        fig, axes = _figure(nrows, ncols, size=(3.3 * ncols, 2.8 * nrows), sharey=True)
        for i, name in enumerate(names):
            ax = axes[i // ncols, i % ncols]
            _scatter_panel(ax, x, np.asarray(accuracy[name], dtype=float), name, rho.get(name))
            if i % ncols == 0:
                ax.set_ylabel("per-target accuracy")
            if i // ncols == nrows - 1:
                ax.set_xlabel("mean PDTP")
        for j in range(len(names), nrows * ncols):
            axes[j // ncols, j % ncols].set_visible(False)
        fig.tight_layout()
        return _to_svg(fig)


def max_accuracy_plot(pdtp_mean: Sequence[float], max_accuracy: Sequence[float], rho: float | None) -> str:
    """Maximum per-target accuracy across attacks against mean PDTP (Figure 2)."""
    plt = _pyplot()
    with plt.rc_context(_RC):
        fig, axes = _figure(size=(7.0, 4.0))
        ax = axes[0, 0]
        _scatter_panel(ax, np.asarray(pdtp_mean, float), np.asarray(max_accuracy, float), "best attack per target", rho)
        ax.set_xlabel("mean PDTP")
        ax.set_ylabel("max accuracy across attacks")
        return _to_svg(fig)


def roc_curves(curves: Mapping[str, tuple[Sequence[float], Sequence[float], float | None]]) -> str:
    """ROC curve of each attack on a log-scaled false-positive-rate axis, with the chance line.

    ``curves`` maps an attack to (fpr, tpr, auc). Curves are drawn as steps (TPR held until
    the next point's FPR, matplotlib's ``steps-post``): straight segments between ROC points
    would, on a log axis, show TPR that no threshold reaches at low FPR and make weak attacks
    look strong there. FPR values of 0 cannot appear on a log axis; they are drawn at the
    left edge (the smallest positive FPR over all curves / 2).
    """
    plt = _pyplot()
    fprs = [np.asarray(c[0], dtype=float) for c in curves.values()]
    positive = [float(f[f > 0].min()) for f in fprs if np.any(f > 0)]
    left = max(min(positive) / 2 if positive else 1e-3, 1e-5)
    with plt.rc_context(_RC):
        fig, axes = _figure(size=(6.4, 4.4))
        ax = axes[0, 0]
        for name, (fpr, tpr, auc) in curves.items():
            f = np.clip(np.asarray(fpr, float), left, 1.0)
            label = name if auc is None else f"{name} (AUC {auc:.3f})"
            ax.plot(f, np.asarray(tpr, float), drawstyle="steps-post", linewidth=1.3, label=label)
        grid = np.logspace(math.log10(left), 0, 50)
        ax.plot(grid, grid, color=GREY, linestyle=":", linewidth=1, label="chance")
        ax.set_xscale("log")
        ax.set_xlim(left, 1.0)
        _plain_log_ticks(ax.xaxis)
        ax.set_ylim(0, 1.0)
        ax.set_xlabel("false-positive rate (log scale)")
        ax.set_ylabel("true-positive rate")
        ax.legend(frameon=False, loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8)
        return _to_svg(fig)


def reduce_sawtooth(
    steps: Sequence[int],
    max_after: Sequence[float],
    threshold: float,
    best_prefix: int | None,
    initial_max: float | None = None,
    reached: bool = True,
) -> str:
    """Maximum PDTP after each removal (step 0 = before any), the threshold, the best prefix (Figure 6)."""
    plt = _pyplot()
    s = [int(v) for v in steps]
    m = [float(v) for v in max_after]
    if initial_max is not None and 0 not in s:
        s, m = [0, *s], [float(initial_max), *m]
    with plt.rc_context(_RC):
        fig, axes = _figure(size=(9.0, 3.4))
        ax = axes[0, 0]
        ax.plot(s, m, marker="o", markersize=3.5, color=BLUE, linewidth=1.3, label="max PDTP of remaining records")
        ax.axhline(threshold, color=RED, linestyle="--", linewidth=1.2, label=f"threshold {threshold:g}")
        if best_prefix is not None and best_prefix in s:
            y = m[s.index(best_prefix)]
            ax.scatter([best_prefix], [y], s=90, facecolors="none", edgecolors=GREEN, linewidths=2, zorder=3)
            ax.annotate(
                f"{'best prefix' if reached else 'lowest maximum (DTP-1 not reached)'}: "
                f"{best_prefix} removal{'s' if best_prefix != 1 else ''}",
                (best_prefix, y),
                xytext=(10, -22),
                textcoords="offset points",
                color=GREEN,
                bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none", "alpha": 0.9},
                arrowprops={"arrowstyle": "-", "color": GREEN, "linewidth": 0.8},
            )
        ax.set_xlabel("records removed")
        ax.set_ylabel("max PDTP")
        ax.set_ylim(bottom=0)
        if s:
            ax.set_xlim(min(s) - 0.5, max(s) + 0.5)
        ax.legend(frameon=False, loc="upper right")
        return _to_svg(fig)


def trend_plot(
    labels: Sequence[str], max_pdtp: Sequence[float], mean_pdtp: Sequence[float], violations: Sequence[int],
    threshold: float,
) -> str:
    """Max and mean PDTP per run with the threshold (top), violations per run (bottom): ``report --history``."""
    plt = _pyplot()
    x = np.arange(len(labels))
    with plt.rc_context(_RC):
        fig, axes = _figure(2, 1, size=(9.0, 5.2), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
        top, bottom = axes[0, 0], axes[1, 0]
        top.plot(x, np.asarray(max_pdtp, float), marker="o", markersize=3.5, color=RED, linewidth=1.3, label="max PDTP")
        top.plot(x, np.asarray(mean_pdtp, float), marker="o", markersize=3.5, color=BLUE, linewidth=1.3,
                 label="mean PDTP")
        top.axhline(threshold, color=RED, linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
        top.set_ylabel("PDTP (log-ratio ε)")
        top.set_ylim(bottom=0)
        top.legend(frameon=False, loc="best", fontsize=8)
        bottom.bar(x, np.asarray(violations, float), color=GREY, width=0.6)
        bottom.set_ylabel("violations")
        bottom.set_xticks(x)
        bottom.set_xticklabels([str(label).replace("$", r"\$") for label in labels], rotation=30, ha="right")
        bottom.set_xlabel("run (start time)")
        fig.tight_layout()
        return _to_svg(fig)


#: Marker per mitigation family in :func:`tradeoff_plot`.
_FAMILY_MARKERS = {"baseline": "s", "release": "o", "regularise": "^", "removal": "D", "dp": "P"}


def padded_limits(x: np.ndarray, y: np.ndarray, target: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """Axis limits of :func:`tradeoff_plot` that keep every point (and the recommended point's ring, 160 pt^2)
    off the frame: x padded by 8 % of its range (at least 0.01), y from 0 to 15 % above the highest of the
    points and the target."""
    fx, fy = x[np.isfinite(x)], y[np.isfinite(y)]
    lo, hi = (float(fx.min()), float(fx.max())) if fx.size else (0.0, 1.0)
    pad = max(0.08 * (hi - lo), 0.01)
    top = max(float(fy.max()) if fy.size else 0.0, float(target))
    return (lo - pad, hi + pad), (0.0, top * 1.15 if top > 0 else 1.0)


def tradeoff_plot(
    accuracy: Sequence[float],
    max_pdtp: Sequence[float],
    families: Sequence[str],
    settings: Sequence[str],
    front: Sequence[bool],
    target: float,
    recommended: str | None,
    usable: Sequence[bool] | None = None,
) -> str:
    """Privacy-utility trade-off of ``mptool mitigate``: max PDTP against accuracy, Pareto front, target line.

    Settings that are not ``usable`` (a temperature alone, removal) are drawn hollow: they are
    shown, but they are not on the front and are never recommended.
    """
    plt = _pyplot()
    x, y, on = np.asarray(accuracy, float), np.asarray(max_pdtp, float), np.asarray(front, bool)
    ok = np.ones(len(x), bool) if usable is None else np.asarray(usable, bool)
    with plt.rc_context(_RC):
        fig, axes = _figure(size=(9.0, 4.2))
        ax = axes[0, 0]
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for k, fam in enumerate(dict.fromkeys(families)):
            idx = np.array([i for i, f in enumerate(families) if f == fam])
            marker, color = _FAMILY_MARKERS.get(fam, "o"), colors[k % len(colors)]
            filled, hollow = idx[ok[idx]], idx[~ok[idx]]
            if len(filled):
                ax.scatter(x[filled], y[filled], marker=marker, s=40, alpha=0.85, color=color, label=fam)
            if len(hollow):
                ax.scatter(x[hollow], y[hollow], marker=marker, s=40, facecolors="none", edgecolors=color,
                           label=None if len(filled) else fam)
        if not ok.all():
            ax.scatter([], [], marker="o", s=40, facecolors="none", edgecolors=GREY,
                       label="hollow: not recommendable (mitigate.csv's why_not)")
        order = np.argsort(x[on])
        ax.plot(x[on][order], y[on][order], color=GREY, linewidth=1.0, linestyle=":", label="Pareto front")
        ax.axhline(target, color=RED, linestyle="--", linewidth=1.2, label=f"target {target:g} (DTP-1 at 1)")
        (x_lo, x_hi), (_, y_hi) = padded_limits(x, y, target)
        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(0, y_hi)
        if recommended in settings:
            i = list(settings).index(recommended)
            ax.scatter([x[i]], [y[i]], s=160, facecolors="none", edgecolors=GREEN, linewidths=2, zorder=3,
                       clip_on=False)
            left = np.isfinite(x[i]) and x[i] < (x_lo + x_hi) / 2  # the label runs into the plot, not off it
            ax.annotate(f"recommended: {recommended}", (x[i], y[i]), xytext=(14 if left else -14, 12),
                        textcoords="offset points", color=GREEN, ha="left" if left else "right")
        ax.set_xlabel("accuracy on rows outside T")
        ax.set_ylabel("max PDTP")
        ax.legend(frameon=False, loc="best", fontsize=8)
        return _to_svg(fig)
