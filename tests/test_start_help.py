"""Issue 28: ``mptool --help`` without typer -- the stored root help is typer's rendering, and current."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mptool import cli

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "render_help.py"


def test_stored_root_help_is_current_and_typers_rendering(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("COLUMNS", "80")
    digest, text = cli.HELP_FILE.read_text(encoding="utf-8").split("\n", 1)
    ours, theirs = str(cli.sources_digest()).split(" ")
    assert digest.split(" ")[0] == ours, "mptool/cli changed: run python scripts/render_help.py"
    if digest.split(" ")[1] != theirs:  # another typer release than the one it was rendered with: typer renders
        assert cli.stored_help() is None
        pytest.skip("typer differs from the release the stored help was rendered with: run scripts/render_help.py")
    spec = importlib.util.spec_from_file_location("render_help", SCRIPT)
    assert spec is not None and spec.loader is not None
    render = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(render)
    assert text == render.rendered()
    assert cli.stored_help() == text
    monkeypatch.setenv("COLUMNS", "79")  # a narrower terminal: typer renders it
    assert cli.stored_help() is None


def test_help_and_no_arguments_import_no_typer() -> None:
    probe = ("import sys\nfrom mptool.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
             "    code = e.code\nprint('LOADED', code, *sorted(m for m in ('typer', 'click', 'rich', 'pydantic', "
             "'numpy', 'pandas') if m in sys.modules), file=sys.stderr)")
    digest = cli.HELP_FILE.read_text(encoding="utf-8").split("\n", 1)[0]
    ours, theirs = str(cli.sources_digest()).split(" ")
    assert digest.split(" ")[0] == ours, "mptool/cli changed: run python scripts/render_help.py"
    if digest.split(" ")[1] != theirs:  # a newer typer (CI installs the newest): mptool rightly renders with typer
        assert cli.stored_help() is None
        pytest.skip("typer differs from the release the stored help was rendered with: run scripts/render_help.py")
    env = {**os.environ, "COLUMNS": "100"}
    for args in (["--help"], []):
        done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env,
                              check=False)
        assert done.stdout == cli.HELP_FILE.read_text(encoding="utf-8").split("\n", 1)[1]
        assert done.stderr.strip().splitlines()[-1] == "LOADED 0", done.stderr
