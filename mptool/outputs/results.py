"""Writing results: output directories, atomic CSV/JSON files, and the run manifest.

Every file is written under a temporary name in the target directory and renamed into
place, so a reader never sees a half-written result. Existing results are never
overwritten unless ``force`` is set.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mptool import __version__
from mptool.runtime.errors import InputError

#: Libraries whose versions go into every manifest.
TRACKED_PACKAGES = ("numpy", "pandas", "scikit-learn", "scipy", "joblib", "pydantic", "typer")

_UMASK = os.umask(0)
os.umask(_UMASK)

#: Float format of per-record CSV files (12 significant digits: stable across platforms).
CSV_FLOAT_FORMAT = "%.12g"


def default_out_dir(command: str) -> Path:
    """A new timestamped directory name, e.g. ``mptool-out/pdtp-20261122-104512``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path("mptool-out") / f"{command}-{stamp}"
    out, k = base, 1
    while out.exists():
        k += 1
        out = base.with_name(f"{base.name}-{k}")
    return out


def prepare_out_dir(out: Path, filenames: list[str], force: bool) -> Path:
    """Create ``out`` if needed and check it is writable and holds none of ``filenames`` (unless force).

    Called before any long work so a bad --out fails fast with exit 2.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: --out exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{out}: cannot create the output directory ({exc.strerror})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise InputError(f"{out}: the output directory is not writable; choose another --out")
    clash = [f for f in filenames if (out / f).exists()]
    if clash and not force:
        raise InputError(f"{out}: already holds {', '.join(clash)}; pass --force to overwrite or choose another --out")
    return out


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory and an atomic rename."""
    path = Path(path)
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; results get the usual permissions
        with os.fdopen(fd, mode, **({} if mode == "wb" else {"encoding": "utf-8", "newline": ""})) as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def to_json(obj: Any) -> str:
    """Deterministic JSON text (NaN/inf become null)."""
    return json.dumps(_jsonable(obj), indent=2, sort_keys=False, allow_nan=False) + "\n"


def to_csv(frame: pd.DataFrame) -> str:
    """Per-record CSV text in mptool's float format."""
    return frame.to_csv(index=False, float_format=CSV_FLOAT_FORMAT, lineterminator="\n")


def records_for_json(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of a per-record frame as JSON-ready dicts."""
    return [_jsonable(r) for r in frame.to_dict(orient="records")]


def versions() -> dict[str, str]:
    """mptool, Python and library versions for the manifest."""
    out = {"mptool": __version__, "python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def manifest(spec_sha256: str, data_sha256: str, seed: int, data_path: str) -> dict[str, Any]:
    """The run manifest recorded in every JSON result: versions, hashes, seed, command line."""
    return {
        "mptool_version": __version__,
        "versions": versions(),
        "spec_sha256": spec_sha256,
        "data_sha256": data_sha256,
        "data": data_path,
        "seed": seed,
        "command": " ".join(["mptool", *sys.argv[1:]]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
