"""Store typer's rendering of ``mptool --help`` in mptool/cli/root_help.txt (issue 28).

``mptool`` and ``mptool --help`` print the stored text without importing typer while the
sources it was rendered from are unchanged (:mod:`mptool.cli`); after editing a command's
help (any ``mptool/cli/*.py``) or upgrading typer, run this again:

    python scripts/render_help.py
"""

from __future__ import annotations

import contextlib
import io
import os

os.environ["COLUMNS"] = "80"  # typer renders 78 columns on any terminal of 80 or more


def rendered() -> str:
    """What ``mptool --help`` prints when typer renders it."""
    from mptool.cli.main import _run

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _run(["--help"])
    return out.getvalue()


def main() -> None:
    from mptool.cli import HELP_FILE, sources_digest

    HELP_FILE.write_text(f"{sources_digest()}\n{rendered()}", encoding="utf-8")
    print(f"wrote {HELP_FILE}")


if __name__ == "__main__":
    main()
