"""Console-script entry point: run the typer app and map every outcome to an exit code.

0 pass, 1 finding, 2 bad input or usage (one ``mptool: error:`` line; also a full disk), 3 internal
error, 129 hung up (SIGHUP), 130 interrupted (SIGINT, Ctrl-C), 143 terminated (SIGTERM); see
``mptool.runtime.signals``.
"""

from __future__ import annotations

import os
import sys
import traceback

import typer

from mptool.cli import (  # noqa: F401 - registers the subcommands
    attack,
    check,
    datasets,
    diff,
    estimators,
    init,
    mitigate,
    pdtp,
    reduce,
    report,
)
from mptool.cli.app import click_group, state
from mptool.outputs.results import release_out_dirs
from mptool.runtime import signals, ui
from mptool.runtime.errors import (
    EXIT_BAD_INPUT,
    EXIT_FINDING,
    EXIT_HANGUP,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    InputError,
    is_no_space,
)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app and map outcomes to exit codes.

    SIGINT and SIGTERM are handled for the whole command (``runtime.signals``): exit 130 or
    143 after one stderr line. A signal that arrives once the results are complete is noted
    and the run ends with its own code. On every exit path the ``--out`` lock is released
    and folders a failed run created are removed.
    """
    with signals.handling_interrupts():
        try:
            code = _late_signal(_run(argv))
        except signals.Interrupted as exc:
            if not exc.reported:
                print(f"mptool: interrupted by {exc.name}", file=sys.stderr)
            code = exc.exit_code
        finally:
            signals.shield()  # releasing the lock is not cut short by a signal
            _release_prestart()
            release_out_dirs()
    sys.exit(code)


def _release_prestart() -> None:
    """Stop workers started early (``mptool.runtime.prestart``) for a run that ended before using them.

    Looked up, not imported: a command that never loaded the module (``--help``) started none.
    """
    module = sys.modules.get("mptool.runtime.prestart")
    if module is not None:
        module.release()


def _late_signal(code: int | None) -> int:
    """The exit code once the command has returned ``code``, given a signal it did not raise."""
    code = code if isinstance(code, int) else EXIT_OK
    late = signals.received()
    if late is None or code in (EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_TERMINATED):
        return code
    name = signals.signal_name(late)
    if signals.shielded() and code in (EXIT_OK, EXIT_FINDING):
        print(f"mptool: {name} arrived after the results were complete; they are written in full", file=sys.stderr)
        return code
    print(f"mptool: interrupted by {name}", file=sys.stderr)  # it surfaced as another error: it decides
    return 128 + late


def _run(argv: list[str] | None) -> int | None:
    """Run the app; the exit code it maps to (errors print one line). An interrupt (``signals.Interrupted``) passes."""
    try:
        code = click_group()(args=argv, prog_name="mptool", standalone_mode=False)
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
    except Exception as exc:  # noqa: BLE001 - last-resort mapping to exit 3 (a full disk: exit 2)
        if is_no_space(exc):  # a write outside write_atomic: the environment, not a bug
            name = getattr(exc, "filename", None)
            where = f"{os.path.dirname(os.path.abspath(str(name)))}: " if name else ""
            print(ui.error_line(f"{where}no space left on the device (or the disk quota is used up); free space "
                                "there or choose another folder, then run again"), file=sys.stderr)
            return EXIT_BAD_INPUT
        if state["debug"]:
            traceback.print_exc()
        first = (f"{exc.__class__.__name__}: {exc}".splitlines() or [""])[0]
        print(
            ui.error_line(f"{first} (rerun with --debug for a traceback; please report it)", "internal error"),
            file=sys.stderr,
        )
        code = EXIT_INTERNAL
    return code
