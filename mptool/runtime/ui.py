"""Terminal output: progress on long work and messages on stderr.

A rich progress bar with ETA when stderr is a terminal; plain timestamped log lines
(about every 10%) otherwise, so cron and CI logs stay readable.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def info(message: str, quiet: bool = False) -> None:
    """A one-line note on stderr (suppressed by --quiet)."""
    if not quiet:
        err_console.print(message, markup=False)


def warn(message: str) -> None:
    """A warning on stderr (never suppressed)."""
    print(f"mptool: warning: {message}", file=sys.stderr)


@contextmanager
def progress(total: int, description: str, quiet: bool = False) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``; shows a bar on a terminal, log lines otherwise, nothing when quiet."""
    if quiet or total <= 0:
        yield lambda n: None
        return
    if sys.stderr.isatty():
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=err_console, transient=False) as bar:
            task = bar.add_task(description, total=total)
            yield lambda n: bar.advance(task, n)
        return
    start = time.monotonic()
    state = {"done": 0, "next": 0.1}

    def advance(n: int) -> None:
        state["done"] += n
        frac = state["done"] / total
        if frac >= state["next"] or state["done"] == total:
            elapsed = time.monotonic() - start
            eta = elapsed / frac - elapsed if frac > 0 else 0.0
            print(
                f"[mptool] {description}: {state['done']}/{total} ({frac:.0%}), "
                f"{elapsed:.1f}s elapsed, ETA {eta:.1f}s",
                file=sys.stderr,
                flush=True,
            )
            while state["next"] <= frac:
                state["next"] += 0.1

    yield advance
