"""Writing results: output directories, atomic files, and the run manifest (formats: :mod:`.formats`).

Every file is written under a temporary name in the target directory and renamed into
place, so a reader never sees a half-written result. The rules of what a run may write
live here, checked before any work starts (exit 2 otherwise):

- one run per output folder: :func:`prepare_out_dir` takes the folder's lock
  (:mod:`mptool.runtime.lock`);
- existing results, reports and cleaned CSVs are never overwritten unless ``force`` is set;
- a run's own input files (data, spec, query CSV; for a report, the result files and the
  data and spec its manifest names) are never an output path, even with ``force``;
- one output of a run is never another (``--write-clean`` onto the trace);
- a failed run leaves no folder it created behind (:func:`release_out_dirs`).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from mptool.runtime import lock as run_lock
from mptool.runtime.errors import InputError, NoSpaceError, is_no_space
from mptool.runtime.lock import LOCK_NAME
from mptool.runtime.version import __version__

#: Libraries whose versions go into every manifest.
TRACKED_PACKAGES = ("numpy", "pandas", "scikit-learn", "scipy", "joblib", "pydantic", "typer")

_UMASK = os.umask(0)
os.umask(_UMASK)

#: Name of the checkpoint folder inside an output folder (see mptool.runtime.checkpoint).
CHECKPOINT_DIR = ".checkpoint"

#: Output folders this process is writing (as given) -> their result file names.
_folders: dict[Path, list[str]] = {}
#: Folders :func:`prepare_out_dir` created, outermost first: removed at the end if empty.
_created: list[Path] = []


def default_out_dir(command: str) -> Path:
    """A new timestamped directory name, e.g. ``mptool-out/pdtp-20261122-104512``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path("mptool-out") / f"{command}-{stamp}"
    out, k = base, 1
    while out.exists():
        k += 1
        out = base.with_name(f"{base.name}-{k}")
    return out


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same resolved path, or the same inode (links)."""
    try:
        if Path(a).resolve() == Path(b).resolve():
            return True
        return os.path.samefile(a, b)
    except (OSError, RuntimeError):
        return False


def _inside(path: Path, folder: Path) -> bool:
    try:
        return Path(path).resolve().is_relative_to(Path(folder).resolve())
    except (OSError, RuntimeError):
        return False


#: A run's input files: role -> path, or (role, path) pairs.
Inputs = Mapping[str, Any] | Iterable[tuple[str, Any]] | None


def _input_files(inputs: Inputs) -> list[tuple[str, Path]]:
    """The (role, path) of each input that names an existing file (``--queries self`` names none)."""
    out = []
    pairs = inputs.items() if isinstance(inputs, Mapping) else (inputs or ())
    for role, value in pairs:
        if value is not None and str(value) and Path(value).is_file():
            out.append((role, Path(value)))
    return out


def refuse_inputs(targets: Iterable[Path], inputs: Inputs, flag: str) -> None:
    """InputError if a target path is one of the run's input files (``inputs``: role -> path), force or not."""
    for target in targets:
        for role, path in _input_files(inputs):
            if _same_file(target, path):
                raise InputError(
                    f"{target}: {flag} would overwrite {role} {path}; mptool never overwrites the files a run "
                    "reads, even with --force: choose another path"
                )


def _make_dirs(out: Path) -> None:
    """``mkdir -p out``, remembering which folders did not exist (to remove them if left empty)."""
    missing = [p for p in (out, *out.parents) if not p.exists()]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{out}: cannot create the output directory ({exc.strerror})") from None
    _created.extend(reversed(missing))


def prepare_out_dir(
    out: Path, filenames: list[str], force: bool, *, resume: bool = False, inputs: Inputs = None
) -> Path:
    """Create ``out`` if needed, take its lock, and check it holds none of ``filenames`` (unless force).

    ``inputs`` (role -> path: the data, the spec...) may not be any of the run's outputs,
    even with ``force``; ``resume`` or ``force`` take over a stale lock. Called before any
    long work so a bad --out fails fast with exit 2; :func:`release_out_dirs` undoes it.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: --out exists and is not a directory")
    refuse_inputs([out / f for f in (*filenames, LOCK_NAME)], inputs, "--out")
    for role, path in _input_files(inputs):
        if _inside(path, out / CHECKPOINT_DIR):
            raise InputError(f"{path}: {role} is inside {out / CHECKPOINT_DIR}, which --force clears; move it")
    _make_dirs(out)
    if not os.access(out, os.W_OK | os.X_OK):
        raise InputError(f"{out}: the output directory is not writable; choose another --out")
    try:
        run_lock.acquire(out, takeover=resume or force)
    except OSError as exc:
        raise InputError(f"{out}: cannot create the lock file {LOCK_NAME} ({exc.strerror or exc})") from None
    _folders[out] = list(filenames)
    clash = [f for f in filenames if (out / f).exists()]
    if clash and not force:
        raise InputError(f"{out}: already holds {', '.join(clash)}; pass --force to overwrite or choose another --out")
    return out


def check_output_file(path: Path, force: bool, flag: str, inputs: Inputs = None) -> Path:
    """Check a file a run writes outside its folder's result names (``report --out``, ``--write-clean``).

    Refused always: an input file, one of the results or the lock or checkpoint of a folder
    this process is writing; refused without ``force``: an existing file.
    """
    path = Path(path)
    if path.is_dir() or not path.parent.is_dir():
        what = "is a folder" if path.is_dir() else "its folder does not exist"
        raise InputError(f"{path}: {flag} {what}; give a file in an existing folder")
    refuse_inputs([path], inputs, flag)
    for folder, names in _folders.items():
        if any(_same_file(path, folder / name) for name in (*names, LOCK_NAME)) or _inside(
            path, folder / CHECKPOINT_DIR
        ):
            raise InputError(f"{path}: {flag} would overwrite an output of this run in {folder}; choose another path")
    if path.exists() and not force:
        raise InputError(f"{path}: {flag} exists; pass --force to overwrite or choose another path")
    return path


def release_out_dirs() -> None:
    """Release this process's output-folder locks and remove the folders it created that are empty.

    Called on every exit path of a command (the CLI's ``finally``); a failed run thus leaves
    no empty ``--out`` folder behind, while results and a checkpoint keep theirs.
    """
    run_lock.release_all()
    for folder in reversed(_created):
        try:
            folder.rmdir()
        except OSError:
            pass  # not empty, or not ours any more
    _created.clear()
    _folders.clear()


def no_space(folder: Path, what: str) -> NoSpaceError:
    """The one line for a full disk or quota while writing ``what`` into ``folder`` (exit 2, not a bug)."""
    return NoSpaceError(
        f"{folder}: no space left on the device (or the disk quota is used up) while writing {what}; nothing was "
        "half-written: free space there or choose another folder, then run again"
    )


def write_atomic(path: Path, data: str | bytes | bytearray) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory and an atomic rename.

    A full disk or quota (ENOSPC, EDQUOT) removes the temporary file, leaves ``path`` as it
    was and raises :class:`NoSpaceError` (exit 2) naming the folder.
    """
    path = Path(path)
    mode = "wb" if isinstance(data, bytes | bytearray) else "w"
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        if is_no_space(exc):
            raise no_space(path.parent, path.name) from None
        raise
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; results get the usual permissions
        with os.fdopen(fd, mode, **({} if mode == "wb" else {"encoding": "utf-8", "newline": ""})) as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if is_no_space(exc):
            raise no_space(path.parent, path.name) from None
        raise


def check_free_space(folder: Path, sizes: Iterable[int], what: str) -> None:
    """NoSpaceError before anything is written when ``folder``'s disk has less free space than ``sizes`` together.

    Each file is replaced atomically on its own; checking the total first keeps a full disk from
    replacing some of a run's result files and not the others. (A quota is not seen here;
    :func:`write_atomic` still stops cleanly on one.)
    """
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return  # cannot tell: each write still stops cleanly
    if free < sum(sizes) + (1 << 20):
        raise no_space(folder, what)


def versions() -> dict[str, str]:
    """mptool, Python and library versions for the manifest (a fresh dict each call)."""
    return dict(_versions())


@cache
def _versions() -> dict[str, str]:
    """:func:`versions`, looked up once per process: each ``importlib.metadata.version`` scans the installed
    distributions (about 12 CPU ms for the tracked packages, on every command run through the API or
    in-process); the libraries a process has loaded do not change while it runs."""
    import platform
    from importlib import metadata  # imported here: it costs more than the rest of --help

    out = {"mptool": __version__, "python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def manifest(spec_sha256: str, data_sha256: str, seed: int, data_path: str) -> dict[str, Any]:
    """The run manifest recorded in every JSON result: versions, the spec's hash, seed, command line.

    The data file is named by its path and, under ``MPTOOL_FINGERPRINT_KEY``, by a keyed digest
    of its SHA-256 (``data_hmac``, :func:`mptool.inputs.fingerprint.keyed_digest`); never by its
    plain SHA-256, which would let whoever knows all records but one test candidates for the
    last one (issue 26). Without the key ``data_hmac`` is null.
    """
    from mptool.inputs.fingerprint import keyed_digest

    return {
        "mptool_version": __version__,
        "versions": versions(),
        "spec_sha256": spec_sha256,
        "data_hmac": keyed_digest("data", data_sha256),
        "data": data_path,
        "seed": seed,
        "command": " ".join(["mptool", *sys.argv[1:]]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
