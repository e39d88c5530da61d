"""mptool's command line: a thin typer layer over :mod:`mptool.api.operations`.

``app.py`` holds the typer app and shared options, one module per subcommand registers its
command on it, ``main.py`` maps outcomes to exit codes.
"""

from mptool.cli.app import app
from mptool.cli.main import main

__all__ = ["app", "main"]
