"""Allow ``python -m mptool``."""

from mptool.cli import main

main()
