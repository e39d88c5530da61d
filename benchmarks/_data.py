"""Where the benchmarks find the data sets that are not bundled with mptool (military.csv.gz, grants.csv.gz).

One place for every script: the folder named by ``MPTOOL_DATASETS``, else ``shared/datasets`` beside
the repository's folder (``/work/shared/datasets`` for a checkout in ``/work``). A missing file stops
the script with one line naming the variable, before any work starts.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The environment variable naming the folder of the data sets.
ENV = "MPTOOL_DATASETS"
#: The folder used when ``MPTOOL_DATASETS`` is not set: shared/datasets beside the repository.
DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def dataset(name: str) -> Path:
    """The path of data set file ``name`` (e.g. ``military.csv.gz``); SystemExit with one line if it is missing."""
    folder = Path(os.environ.get(ENV) or DEFAULT)
    path = folder / name
    if not path.is_file():
        raise SystemExit(f"{name} not found in {folder}: set {ENV} to the folder that holds it")
    return path
