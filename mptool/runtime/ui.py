"""Terminal output: progress on long work, messages on stderr, and the one safe-echo rule.

Everything mptool echoes to a terminal goes through :func:`safe_line` (whole lines) or
:func:`excerpt` (one value from the data): control characters (C0, C1, DEL, hence ANSI
escape sequences), bidirectional overrides, zero-width and other invisible format
characters are shown as visible escapes (``\\x1b``, ``\\u202e``), a value is cut to a
short excerpt and a whole line to :data:`LINE_LIMIT` characters. Data from the user's CSV
or spec therefore can neither move the cursor, recolour or hide the verdict line, nor fill
a CI log with a multi-megabyte cell. Rich markup is off on every console, so a value like
``[red]`` is printed as written.

A rich progress bar with ETA when stderr is a terminal; plain timestamped log lines
(about every 10%) otherwise, so cron and CI logs stay readable.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

#: Longest line mptool echoes (an error, warning or note); longer ones lose their middle.
LINE_LIMIT = 500
#: Longest excerpt of one value from the data (a cell, a class label, an id).
EXCERPT_LIMIT = 40

# Unicode categories Cc (C0, DEL, C1), Cf (bidi controls U+202A-U+202E and U+2066-U+2069,
# zero-width U+200B-U+200F and U+2060-U+2064, BOM, soft hyphen, ...), Zl/Zp (U+2028/U+2029)
# and Cs (lone surrogates, as Python decodes undecodable bytes), as code-point ranges; and the
# noncharacters U+FFFE and U+FFFF, which XML 1.0 cannot hold (a data id with one made junit.xml
# unreadable, red3-7). tests/test_no_raw_values.py checks this list against unicodedata, character by character.
_UNSAFE_RANGES = (
    (0x0000, 0x001F), (0x007F, 0x009F), (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C),
    (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E),
    (0x200B, 0x200F), (0x2028, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xD800, 0xDFFF),
    (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0xFFFE, 0xFFFF), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
    (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)  # fmt: skip
_UNSAFE = re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in _UNSAFE_RANGES) + "]")
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

_CONSOLES: dict[str, Console] = {}


def console(stderr: bool = False) -> Console:
    """The rich console on stdout (or stderr), made on first use so that ``--help`` never imports rich."""
    name = "err_console" if stderr else "out_console"
    if name not in _CONSOLES:
        from rich.console import Console

        _CONSOLES[name] = Console(stderr=stderr, highlight=False, soft_wrap=True, markup=False, emoji=False)
    return _CONSOLES[name]


def __getattr__(name: str) -> Any:
    """``ui.out_console`` and ``ui.err_console``: the consoles of :func:`console`."""
    if name in ("out_console", "err_console"):
        return console(stderr=name == "err_console")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _escape_char(ch: str) -> str:
    if ch in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def escape_controls(text: str, keep_newlines: bool = False) -> str:
    """``text`` with every control or invisible format character written as a visible escape.

    ``keep_newlines`` leaves ``\\n`` and ``\\t`` as they are (multi-line blocks such as a
    report's spec listing); everything echoed as one line escapes them too.
    """

    def repl(m: re.Match[str]) -> str:
        ch = m.group(0)
        return ch if keep_newlines and ch in "\n\t" else _escape_char(ch)

    return _UNSAFE.sub(repl, text)


def _take(text: str, budget: int, from_end: bool = False) -> tuple[str, int]:
    """The longest escaped prefix (or suffix) of ``text`` of at most ``budget`` characters, and
    how many characters of ``text`` it shows. An escape is never split."""
    pieces: list[str] = []
    used = taken = 0
    chars = reversed(text) if from_end else iter(text)
    for ch in chars:
        piece = _escape_char(ch) if _UNSAFE.match(ch) else ch
        if used + len(piece) > budget:
            break
        pieces.append(piece)
        used += len(piece)
        taken += 1
    return "".join(reversed(pieces) if from_end else pieces), taken


def has_unsafe(text: str) -> bool:
    """Whether ``text`` holds a character :func:`escape_controls` would escape."""
    return _UNSAFE.search(text) is not None


def excerpt(value: Any, limit: int = EXCERPT_LIMIT) -> str:
    """One value from the data, safe to echo: escaped, and cut to ``limit`` characters plus
    ``…(N chars)`` (N the length of the whole value) when longer."""
    text = str(value)
    shown, taken = _take(text[: limit + 1], limit)
    return shown if taken == len(text) else f"{shown}…({len(text)} chars)"


def quoted(value: Any, limit: int = EXCERPT_LIMIT) -> str:
    """:func:`excerpt` in single quotes, for naming a value inside a message."""
    return f"'{excerpt(value, limit)}'"


def listing(values: Any, most: int = 5, quote: bool = True, limit: int = EXCERPT_LIMIT) -> str:
    """Up to ``most`` values from the data as (quoted) excerpts, comma-separated, and how many more."""
    values = list(values)
    shown = ", ".join(quoted(v, limit) if quote else excerpt(v, limit) for v in values[:most])
    return shown + (f" and {len(values) - most} more" if len(values) > most else "")


def safe_line(text: Any, limit: int | None = LINE_LIMIT) -> str:
    """A whole line safe to echo: escaped (line breaks included, so it stays one line) and at
    most about ``limit`` characters; a longer one keeps its head and its tail (where mptool's
    messages say what to do) and names the number of characters cut from the middle.
    ``limit=None`` only escapes (verdict lines, which hold no data and must stay whole)."""
    text = str(text)
    if limit is None:
        return escape_controls(text)
    if len(text) <= limit:
        out = escape_controls(text)
        if len(out) <= limit:
            return out
    tail_budget = limit // 4
    marker_budget = 24
    head, n_head = _take(text[:limit], limit - tail_budget - marker_budget)
    tail, n_tail = _take(text[max(n_head, len(text) - limit) :], tail_budget, from_end=True)
    cut = len(text) - n_head - n_tail
    return f"{head} …({cut} chars cut)… {tail}"


def cell(value: Any, limit: int = EXCERPT_LIMIT) -> Text:
    """A rich table cell from the data: the :func:`excerpt`, never read as markup."""
    from rich.text import Text

    return Text(excerpt(value, limit))


def echo(text: Any, file: TextIO | None = None, limit: int | None = LINE_LIMIT) -> None:
    """Print one line (stdout unless ``file``) through :func:`safe_line`."""
    print(safe_line(text, limit), file=file or sys.stdout, flush=file is sys.stderr)


def error_line(message: Any, kind: str = "error") -> str:
    """The one stderr line of a failed run: ``mptool: error: MESSAGE``, safe to echo."""
    return f"mptool: {kind}: {safe_line(message)}"


def info(message: str, quiet: bool = False) -> None:
    """A one-line note on stderr (suppressed by --quiet)."""
    if not quiet:
        console(stderr=True).print(safe_line(message), markup=False, emoji=False, highlight=False)


def warn(message: str) -> None:
    """A warning on stderr (never suppressed)."""
    print(error_line(message, "warning"), file=sys.stderr)


#: Seconds after a phase starts by which its first progress line is printed (a log line at each 10 % may
#: come later: digits' leave-one-out printed its first after 44.5 s).
FIRST_LINE_S = 5.0


@contextmanager
def progress(total: int, description: str, quiet: bool = False, steps: bool = True) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``; shows a bar on a terminal, log lines otherwise (one at each 10 %, and one
    after :data:`FIRST_LINE_S` seconds when none came by then), nothing when quiet.

    ``steps=False``: a phase that may still end in a refusal (the randomness check, whose result decides
    which flags and baselines are valid) prints nothing until :data:`FIRST_LINE_S` has passed, then its
    first line and its 10 % steps: a short phase leaves a refusal its one line.
    """
    if quiet or total <= 0:
        yield lambda n: None
        return
    description = safe_line(description, 80)
    if sys.stderr.isatty() and steps:  # (steps=False: log lines on a terminal too, from the first one)
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns = (
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=console(stderr=True), transient=False) as bar:
            task = bar.add_task(description, total=total)
            yield lambda n: bar.advance(task, n)
        return
    start = time.monotonic()
    state = {"done": 0, "next": 0.1, "lines": 0}
    lock = threading.Lock()
    out = sys.stderr  # the stream at the start (a test's capture stays the target of the timer's line)

    def first_line() -> None:
        """The phase's first line when no 10 % step has printed one within FIRST_LINE_S seconds."""
        with lock:
            if state["lines"] == 0 and state["done"] < total:
                state["lines"] += 1
                print(f"[mptool] {description}: {state['done']}/{total} ({state['done'] / total:.0%}), "
                      f"{time.monotonic() - start:.1f}s elapsed, running", file=out, flush=True)

    timer = threading.Timer(FIRST_LINE_S, first_line)
    timer.daemon = True
    timer.start()

    def advance(n: int) -> None:
        with lock:
            state["done"] += n
            frac = state["done"] / total
            if (steps or state["lines"]) and (frac >= state["next"] or state["done"] == total):
                elapsed = time.monotonic() - start
                eta = elapsed / frac - elapsed if frac > 0 else 0.0
                state["lines"] += 1
                print(
                    f"[mptool] {description}: {state['done']}/{total} ({frac:.0%}), "
                    f"{elapsed:.1f}s elapsed, ETA {eta:.1f}s",
                    file=out,
                    flush=True,
                )
                while state["next"] <= frac:
                    state["next"] += 0.1

    try:
        yield advance
    finally:
        timer.cancel()
