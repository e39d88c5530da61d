"""mptool's command line: a thin typer layer over :mod:`mptool.api`."""

from mptool.cli.app import app, main

__all__ = ["app", "main"]
