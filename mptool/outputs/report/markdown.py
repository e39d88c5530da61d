"""The Markdown summary: verdict, summary table and riskiest records as GitHub-flavoured Markdown.

Meant for ``$GITHUB_STEP_SUMMARY`` (``mptool report DIR --format md --out - >> "$GITHUB_STEP_SUMMARY"``)
and pull-request comments: pipe tables, ``> [!NOTE]`` alerts, no images (plots are in the
HTML report). It never holds a record's feature values or id, with or without
``--show-values``: CI logs and step summaries are read by everyone with access to the
pipeline. Every value printed is escaped by :func:`cell` (the template environment's
``finalize``), so notes, folder names, the command line and class labels cannot inject
Markdown or HTML; tables are built here from escaped cells.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from mptool.outputs.report.context import build_context
from mptool.outputs.report.loader import ReportInputs
from mptool.outputs.report.templating import Raw, environment
from mptool.runtime import ui

#: Longest value printed in the Markdown summary (longer ones lose their middle).
MD_LIMIT = 500
#: Characters with a meaning in GitHub Markdown inline text, escaped with a backslash.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]#|~$])")
#: What starts a GitHub autolink: the ':' of a scheme, the '.' after www (escaped by :func:`cell`).
_AUTOLINK = re.compile(r"(?i)(?:[a-z][a-z0-9+.-]*:(?=//)|\b(?:mailto|xmpp):|\bwww\.)")
_LIST_START = re.compile(r"^(\d{1,9})([.)])(?=\s|$)")


def cell(value: Any) -> str:
    """Text safe anywhere in GitHub Markdown, a table cell included, on one line.

    Line breaks become spaces; control and invisible characters visible escapes
    (``\\x1b``); ``& < >`` HTML entities (no tag or entity reaches the page); the
    characters of emphasis, code spans, links and images (brackets), headings, tables,
    strikethrough and math backslash-escaped; a leading list marker escaped; at most :data:`MD_LIMIT` characters.
    GitHub's autolinks are broken where they start, rendered the same but never a live link (issue 26):
    a backslash before the ``:`` of ``https://`` or ``mailto:`` and the ``.`` of ``www.``, and each ``@``
    written as the fullwidth ``＠`` (U+FF20): GitHub links ``user@host`` through any backslash or entity,
    and a cell holds no markup of its own.
    """
    text = re.sub(r"\r\n|\r|\n", " ", str(value))
    text = ui.safe_line(text, MD_LIMIT)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    text = _AUTOLINK.sub(lambda m: m.group(0)[:-1] + "\\" + m.group(0)[-1], text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("@", "\uff20")  # the fullwidth at sign: the same to a reader, never an e-mail link
    text = _LIST_START.sub(r"\1\\\2", text)
    return "\\" + text if re.match(r"[-+](\s|$)", text) else text


def _finalize(value: Any) -> Any:
    return value if isinstance(value, Raw) else cell(value)


def md_table(t: dict[str, Any], cols: Sequence[int] | None = None) -> Raw:
    """A pipe table of a context table dict (columns ``cols``, default all), cells escaped."""
    idx = list(cols) if cols is not None else list(range(len(t["columns"])))
    lines = ["| " + " | ".join(cell(t["columns"][i]) for i in idx) + " |"]
    lines.append("|" + "".join(" ---: |" if t["numeric"][i] else " --- |" for i in idx))
    lines += ["| " + " | ".join(cell(row[i]) for i in idx) + " |" for row in t["rows"]]
    return Raw("\n".join(lines) + "\n")


def md_kv(items: Sequence[tuple[Any, Any]]) -> Raw:
    """A two-column label/value pipe table, cells escaped."""
    lines = ["| | value |", "| --- | ---: |"]
    lines += [f"| {cell(label)} | {cell(value)} |" for label, value in items]
    return Raw("\n".join(lines) + "\n")


def render_markdown(inputs: ReportInputs, top: int = 20) -> str:
    """The Markdown summary as one string (never with feature values: ``show_values`` is off)."""
    env = environment(autoescape=False, finalize=_finalize)
    env.globals.update(md_table=md_table, md_kv=md_kv)
    context = build_context(inputs, top, show_values=False)
    text = env.get_template("report.md.j2").render(**context)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.strip() + "\n"
