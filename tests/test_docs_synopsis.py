"""The ``mptool pdtp`` synopsis in the docs lists exactly the flags of ``mptool pdtp --help`` (issue 30: docs
that cannot drift; docs/bin-edges-and-noise.md had kept an old synopsis)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

REPO = Path(__file__).resolve().parents[1]


def pdtp_flags() -> set[str]:
    """The long flags of the ``pdtp`` command as its --help lists them (a --x/--no-x pair as --x)."""
    import mptool.cli.pdtp  # noqa: F401 - registers the command
    from mptool.cli.app import app

    command = typer.main.get_command(app).commands["pdtp"]
    return {o for p in command.params for o in p.opts if o.startswith("--")} - {"--help"}


@pytest.mark.parametrize("page", ["docs/pdtp.md", "docs/bin-edges-and-noise.md"])
def test_the_pdtp_synopsis_lists_the_flags_of_its_help(page: str) -> None:
    text = (REPO / page).read_text(encoding="utf-8")
    block = re.search(r"^```\n(mptool pdtp .*?)^```", text, re.S | re.M)
    assert block is not None, f"{page}: no synopsis block"
    shown = set(re.findall(r"--[a-z][a-z-]*", block.group(1)))
    assert shown == pdtp_flags(), f"{page}: missing {pdtp_flags() - shown}, stale {shown - pdtp_flags()}"
