"""Exception types that map to mptool's exit codes.

Exit codes (also in README and ``--help``):
0 pass, 1 finding, 2 bad input or usage (also a full disk: :class:`NoSpaceError`), 3 internal
error, 129 hung up (SIGHUP: the terminal closed), 130 interrupted (SIGINT, Ctrl-C), 143
terminated (SIGTERM). The interrupt itself is ``mptool.runtime.signals.Interrupted``.
"""

from __future__ import annotations

import errno

EXIT_OK = 0
EXIT_FINDING = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_HANGUP = 129  # 128 + SIGHUP
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_TERMINATED = 143  # 128 + SIGTERM


class MptoolError(Exception):
    """Base of mptool's own errors; carries the exit code it maps to."""

    exit_code = EXIT_INTERNAL


class InputError(MptoolError):
    """Bad input or usage: a one-line message that says what to fix (exit 2)."""

    exit_code = EXIT_BAD_INPUT


#: errno values of a full disk and of an exhausted disk quota.
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})


class NoSpaceError(InputError):
    """A write found the disk or the quota full: not a bug, the folder is named and space is to be freed (exit 2)."""


def is_no_space(exc: BaseException) -> bool:
    """Whether ``exc`` is an OSError saying the disk or the quota is full."""
    return isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS
