"""The Markdown summary: verdict, summary table and riskiest records as GitHub-flavoured Markdown.

Meant for ``$GITHUB_STEP_SUMMARY`` (``mptool report DIR --format md --out - >> "$GITHUB_STEP_SUMMARY"``)
and pull-request comments: pipe tables, ``> [!NOTE]`` alerts, a ``<details>`` block for
the feature values, no images (plots are in the HTML report).
"""

from __future__ import annotations

from typing import Any

from mptool.outputs.report.context import build_context
from mptool.outputs.report.loader import ReportInputs
from mptool.outputs.report.templating import environment


def cell(value: Any) -> str:
    """Text safe inside a GFM table cell: pipes escaped, line breaks and HTML brackets neutralised."""
    text = str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")
    return text.replace("<", "&lt;").replace(">", "&gt;")


def render_markdown(inputs: ReportInputs, top: int = 20) -> str:
    """The Markdown summary as one string."""
    env = environment(autoescape=False)
    env.filters["cell"] = cell
    env.globals["list_range"] = lambda a, b: list(range(a, b))
    text = env.get_template("report.md.j2").render(**build_context(inputs, top))
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.strip() + "\n"
