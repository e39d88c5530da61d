"""The Jinja2 environment of the report templates (files in ``mptool/outputs/report/templates``).

Every value a template prints passes a ``finalize`` hook, so escaping does not depend on
each template line remembering a filter: the HTML environment escapes control and
invisible characters visibly (then Jinja2's autoescaping escapes HTML), the Markdown one
escapes Markdown and HTML (:func:`mptool.outputs.report.markdown.cell`). Only markup built
by mptool itself (:class:`Raw` text, macro output) is printed as is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from mptool.runtime import ui

#: Where the report templates are installed (package data, see pyproject.toml).
TEMPLATE_DIR = Path(__file__).with_name("templates")


class Raw(str):
    """Markdown built by mptool from already-escaped parts: printed by a template as is."""


def html_finalize(value: Any) -> Any:
    """Every value of an HTML template: control and invisible characters made visible
    (``\\x1b``, ``\\u202e``); line breaks kept for ``<pre>`` blocks. HTML escaping follows."""
    if isinstance(value, Markup) or value is None or isinstance(value, int | float):
        return value
    return ui.escape_controls(str(value), keep_newlines=True)


def environment(autoescape: bool, finalize: Callable[[Any], Any] | None = None) -> jinja2.Environment:
    """A Jinja2 environment over the packaged templates: HTML autoescaping and
    :func:`html_finalize` for HTML, the given ``finalize`` (Markdown escaping) otherwise."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        autoescape=autoescape,
        finalize=finalize or (html_finalize if autoescape else None),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
