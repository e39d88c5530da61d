"""Issue 28: a light start-up (no scikit-learn, scipy or pandas for --help), the same help text
from the lazily built commands, and the columnar CSV writer byte-identical to pandas' renderer."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer.main

from mptool.cli.app import app, click_group

HEAVY = ("sklearn", "scipy", "pandas", "pyarrow", "numpy")

_PROBE = """
import sys
from mptool.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("LOADED", ",".join(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)
"""


def _loaded(*args: str) -> set[str]:
    """The heavy libraries a fresh interpreter has imported after ``mptool ARGS``."""
    done = subprocess.run([sys.executable, "-c", _PROBE.format(heavy=HEAVY), *args], capture_output=True,
                          text=True, check=False)
    line = [x for x in done.stderr.splitlines() if x.startswith("LOADED")][-1]
    return set(filter(None, line.split(" ", 1)[1].split(",")))


def test_help_imports_no_heavy_library() -> None:
    assert _loaded("--help") == set()


@pytest.mark.parametrize("args", [("check", "--jobs", "x"), ("init",), ("pdtp", "--bogus")])
def test_argument_errors_import_no_heavy_library(args: tuple[str, ...]) -> None:
    assert _loaded(*args) == set()


def _help(command: object, path: list[str]) -> str:
    """The help text of ``mptool PATH`` rendered from the click command ``command``."""
    ctx = typer.main._click.Context(command, info_name="mptool", terminal_width=100)  # type: ignore[attr-defined]
    for name in path:
        sub = command.get_command(ctx, name)  # type: ignore[attr-defined]
        ctx = typer.main._click.Context(sub, info_name=name, parent=ctx, terminal_width=100)  # type: ignore[attr-defined]
        command = sub
    return command.get_help(ctx)  # type: ignore[attr-defined]


def test_lazy_commands_give_the_same_help_as_typer() -> None:
    eager = typer.main.get_command(app)
    lazy = click_group()
    names = list(eager.commands)  # type: ignore[attr-defined]
    assert list(lazy.commands) == names
    assert _help(lazy, []) == _help(eager, [])
    assert not lazy.commands.built  # type: ignore[attr-defined]  # the listing built no command
    for name in names:
        assert _help(lazy, [name]) == _help(eager, [name]), name
    assert _help(lazy, ["datasets", "make-purchase"]) == _help(eager, ["datasets", "make-purchase"])
