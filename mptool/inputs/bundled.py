"""Paths of the data and configs shipped inside the package."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
CONFIG_DIR = PACKAGE_DIR / "configs"
#: UCI Adult (Kohavi & Becker 1996, CC BY 4.0), train and test concatenated; see datasets.md.
ADULT_CSV = PACKAGE_DIR / "data" / "adult.csv.gz"
#: The spec the no-argument demo uses.
DEMO_CONFIG = CONFIG_DIR / "adult-nb.yaml"


def config(name: str) -> Path:
    """A bundled config by file name (e.g. ``adult-lr.yaml``)."""
    return CONFIG_DIR / name
