"""The Jinja2 environment of the report templates (files in ``mptool/outputs/report/templates``)."""

from __future__ import annotations

from pathlib import Path

import jinja2

#: Where the report templates are installed (package data, see pyproject.toml).
TEMPLATE_DIR = Path(__file__).with_name("templates")


def environment(autoescape: bool) -> jinja2.Environment:
    """A Jinja2 environment over the packaged templates; HTML escaping on for HTML, off for Markdown."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
