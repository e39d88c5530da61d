"""``mptool report``: a self-contained HTML report and a Markdown summary of a results directory.

Reads the files written by ``mptool pdtp``, ``mptool attack`` and ``mptool reduce-dtp``
(whichever are present) and never reruns an audit. Parts: ``loader`` (files → inputs),
``context`` (inputs → formatted tables), ``plots`` (matplotlib Agg → SVG), ``html`` and
``markdown`` (Jinja2 templates in ``templates/``).
"""

from __future__ import annotations

from pathlib import Path

from mptool.outputs.report.loader import ReportInputs, load_results

__all__ = ["ReportInputs", "load_results", "render", "FORMATS"]

#: Output formats of ``mptool report --format``.
FORMATS = ("html", "md", "both")


def render(
    inputs: ReportInputs, fmt: str, top: int = 20, quiet: bool = True, show_values: bool = False
) -> dict[str, str]:
    """Rendered report text per format: {'html': ..., 'md': ...} as ``fmt`` asks.

    ``show_values`` puts the riskiest records' feature values and ids in the HTML report
    (they must have been loaded with ``load_results(..., show_values=True)``); the
    Markdown summary never holds them.
    """
    out: dict[str, str] = {}
    if fmt in ("html", "both"):
        from mptool.outputs.report.html import render_html

        out["html"] = render_html(inputs, top, quiet, show_values)
    if fmt in ("md", "both"):
        from mptool.outputs.report.markdown import render_markdown

        out["md"] = render_markdown(inputs, top)
    return out


def output_paths(results_dir: Path, out: Path | None, fmt: str) -> dict[str, Path]:
    """Where each format is written: --out for the chosen format (the .md beside it for 'both'),
    default RESULTS_DIR/report.html and RESULTS_DIR/report.md."""
    base = out if out is not None else results_dir / ("report.md" if fmt == "md" else "report.html")
    paths: dict[str, Path] = {}
    if fmt in ("html", "both"):
        paths["html"] = base
    if fmt in ("md", "both"):
        paths["md"] = base if fmt == "md" else base.with_suffix(".md")
    return paths
