"""Console-script entry point: run the typer app and map every outcome to an exit code.

0 pass, 1 finding, 2 bad input or usage (one ``mptool: error:`` line), 3 internal error,
130 interrupted.
"""

from __future__ import annotations

import sys
import traceback

import typer

from mptool.cli import attack, datasets, pdtp, reduce, report  # noqa: F401 - registers the subcommands
from mptool.cli.app import app, state
from mptool.outputs.results import release_out_dirs
from mptool.runtime import ui
from mptool.runtime.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, InputError


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app and map outcomes to exit codes."""
    try:
        code = _run(argv)
    finally:
        release_out_dirs()  # every exit path: the --out lock, and folders a failed run created
    sys.exit(code if isinstance(code, int) else EXIT_OK)


def _run(argv: list[str] | None) -> int | None:
    """Run the app; the exit code it maps to (errors print one line)."""
    try:
        code = app(args=argv, prog_name="mptool", standalone_mode=False)
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.TyperException as exc:  # usage errors from argument parsing
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            print(ctx.get_help())
            code = EXIT_OK
        else:  # one line, like every other bad-input message
            where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            print(ui.error_line(f"{exc.format_message()}{where}"), file=sys.stderr)
            code = EXIT_BAD_INPUT
    except (typer.Abort, KeyboardInterrupt):
        print("mptool: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    except InputError as exc:
        print(ui.error_line(exc), file=sys.stderr)
        code = EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - last-resort mapping to exit 3
        if state["debug"]:
            traceback.print_exc()
        first = (f"{exc.__class__.__name__}: {exc}".splitlines() or [""])[0]
        print(
            ui.error_line(f"{first} (rerun with --debug for a traceback; please report it)", "internal error"),
            file=sys.stderr,
        )
        code = EXIT_INTERNAL
    return code
