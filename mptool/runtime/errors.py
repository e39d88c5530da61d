"""Exception types that map to mptool's exit codes.

Exit codes (also in README and ``--help``):
0 pass, 1 finding, 2 bad input or usage, 3 internal error, 130 interrupted (SIGINT, Ctrl-C),
143 terminated (SIGTERM). The interrupt itself is ``mptool.runtime.signals.Interrupted``.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDING = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_TERMINATED = 143  # 128 + SIGTERM


class MptoolError(Exception):
    """Base of mptool's own errors; carries the exit code it maps to."""

    exit_code = EXIT_INTERNAL


class InputError(MptoolError):
    """Bad input or usage: a one-line message that says what to fix (exit 2)."""

    exit_code = EXIT_BAD_INPUT
