"""mptool's command line: a thin typer layer over :mod:`mptool.api.operations`.

``app.py`` holds the typer app and shared options, one module per subcommand registers its
command on it, ``main.py`` maps outcomes to exit codes.

Start-up (issue 28): ``mptool`` and ``mptool --help`` print the root help from
``root_help.txt``, typer's own rendering of it stored by ``scripts/render_help.py``, without
importing typer, when three things hold: the terminal is at least 80 columns wide (typer then
renders 78 columns, as stored), and the digest of the sources it was rendered from (every
``mptool/cli/*.py`` and typer's ``__init__.py``) is the stored one. Otherwise typer renders it.
tests/test_startup_output.py checks that the stored text is current and equal to typer's.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path
from typing import Any

HELP_FILE = Path(__file__).with_name("root_help.txt")


def sources_digest() -> str | None:
    """Digest of the sources the root help is rendered from: SHA-256 of ``mptool/cli/*.py``, a space, and
    SHA-256 of typer's ``__init__.py`` (its version); None when typer cannot be found."""
    import importlib.util

    spec = importlib.util.find_spec("typer")
    if spec is None or spec.origin is None:
        return None
    parts = []
    for paths in (sorted(Path(__file__).parent.glob("*.py")), [Path(spec.origin)]):
        h = hashlib.sha256()
        for path in paths:
            data = path.read_bytes()
            h.update(path.name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
        parts.append(h.hexdigest())
    return " ".join(parts)


def stored_help() -> str | None:
    """The stored root help when it may stand for typer's rendering here and now (module docstring), else None."""
    if shutil.get_terminal_size().columns < 80:
        return None
    try:
        digest, text = HELP_FILE.read_text(encoding="utf-8").split("\n", 1)
    except (OSError, ValueError):
        return None
    return text if digest == sources_digest() else None


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (:func:`mptool.cli.main.main`); the root help without typer when it can.

    Without ``argv`` (the console script) the garbage collector is held back while the command's modules
    load (:func:`mptool.runtime.startup.hold`) and OpenBLAS gets one thread unless ``OPENBLAS_NUM_THREADS``
    is set (:func:`mptool.runtime.startup.one_blas_thread`); in-process callers pass ``argv`` and keep both
    as they are.
    """
    args = sys.argv[1:] if argv is None else argv
    if args in ([], ["--help"]) and (text := stored_help()) is not None:
        sys.stdout.write(text)
        sys.stdout.flush()
        raise SystemExit(0)
    if argv is None:  # a process of its own (console script, python -m mptool): see mptool.runtime.startup
        from mptool.runtime import startup

        startup.hold()
        startup.one_blas_thread()
    from mptool.cli.main import main as run

    run(argv)


def __getattr__(name: str) -> Any:
    """``mptool.cli.app`` (the typer app), imported on first use."""
    if name == "app":
        from mptool.cli.app import app

        return app
    raise AttributeError(f"module 'mptool.cli' has no attribute {name!r}")


__all__ = ["app", "main"]
