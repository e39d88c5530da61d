"""Checkpoints of long runs: finished chunks saved in ``DIR/.checkpoint/`` so ``--resume`` skips them.

A checkpoint belongs to one run *key*: the subcommand, the spec hash, the data hash, the
mptool version and the run options that change computed values (``--records``,
``--sample``, ``--engine``...; not ``--jobs``, ``--backend`` or ``--threshold``). Each
finished chunk is one ``.npz`` file holding the ids of its work items (positions in T,
shadow indices...) and their result arrays, written atomically (temporary name + rename),
so a run killed at any moment (Ctrl-C or ``kill -9``) leaves only whole chunks behind.

``--resume`` loads the saved items, computes only the rest and gives the same bytes as an
uninterrupted run, because every item is computed independently and seeded from the spec.
A checkpoint whose key differs from the new run's is refused (exit 2) rather than mixed in.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import pickle
import shutil
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from mptool import __version__
from mptool.outputs.results import to_json, write_atomic
from mptool.runtime import ui
from mptool.runtime.errors import InputError

#: Name of the checkpoint directory inside the output directory.
CHECKPOINT_DIR = ".checkpoint"
#: Run options that only change how (not what) is computed: ignored in the key.
EXECUTION_ONLY = frozenset({"jobs", "backend", "scheduler", "threshold", "quiet", "force", "resume"})
_META = "meta.json"
_FORMAT = 1


def run_key(command: str, spec_sha256: str, data_sha256: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The identity of a run's results: command, spec/data hashes, mptool version, value-changing options."""
    kept = {k: options[k] for k in sorted(options) if k not in EXECUTION_ONLY}
    return {
        "command": command,
        "spec_sha256": spec_sha256,
        "data_sha256": data_sha256,
        "mptool_version": __version__,
        "options": json.loads(json.dumps(kept, default=str)),
    }


def _describe_difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    labels = {
        "command": "subcommand",
        "spec_sha256": "spec",
        "data_sha256": "data file",
        "mptool_version": "mptool version",
        "options": "run options",
    }
    for field, label in labels.items():
        if old.get(field) != new.get(field):
            if field == "options":
                a, b = old.get(field) or {}, new.get(field) or {}
                keys = sorted(k for k in {*a, *b} if a.get(k) != b.get(k))
                return f"run options ({', '.join(f'{k}: {a.get(k)!r} then, {b.get(k)!r} now' for k in keys)})"
            if field.endswith("sha256"):
                return f"{label} (sha256 {str(old.get(field))[:12]} then, {str(new.get(field))[:12]} now)"
            return f"{label} ({old.get(field)} then, {new.get(field)} now)"
    return "format"


def options_dict(options: Any) -> dict[str, Any]:
    """A subcommand's run options (a dataclass or a mapping) as a plain dict for :func:`run_key`."""
    if dataclasses.is_dataclass(options) and not isinstance(options, type):
        return dataclasses.asdict(options)
    return dict(options)


class Checkpoint:
    """Finished chunks of one run in ``out_dir/.checkpoint``; see the module docstring."""

    def __init__(self, directory: Path, key: dict[str, Any]) -> None:
        self.directory = Path(directory)
        self.key = key
        #: Items taken from the checkpoint by :meth:`load`, per stage (reported after a resume).
        self.reused: dict[str, int] = {}

    def _create(self) -> None:
        """Write the directory and its key file on the first save (nothing is left behind before)."""
        meta = self.directory / _META
        if meta.exists():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomic(meta, to_json({"format": _FORMAT, "key": self.key}))

    @classmethod
    def open(cls, out_dir: Path, key: dict[str, Any], resume: bool, force: bool = False) -> Checkpoint:
        """The checkpoint of ``out_dir`` for ``key``.

        With ``resume`` an existing checkpoint must have the same key (else InputError);
        without it a leftover checkpoint is refused unless ``force`` clears it, so an
        interrupted run is never silently thrown away or silently continued.
        """
        directory = Path(out_dir) / CHECKPOINT_DIR
        meta = directory / _META
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()  # killed before the first chunk was saved: nothing to keep
        if directory.exists():
            if resume:
                try:
                    saved = json.loads(meta.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    raise InputError(
                        f"{directory}: the checkpoint has no readable {_META}; rerun with --force "
                        "(without --resume) to start over"
                    ) from None
                if saved.get("format") != _FORMAT or saved.get("key") != key:
                    why = _describe_difference(saved.get("key") or {}, key)
                    raise InputError(
                        f"{directory}: cannot resume: the checkpoint was made with a different {why}; "
                        "rerun with the original inputs, or with --force and without --resume to start over"
                    )
                return cls(directory, key)
            if not force:
                raise InputError(
                    f"{out_dir}: holds the checkpoint of an interrupted run; pass --resume to continue it "
                    "or --force to start over"
                )
            shutil.rmtree(directory)
        return cls(directory, key)

    def save(self, stage: str, ids: np.ndarray, **arrays: np.ndarray) -> Path:
        """Save one finished chunk: work-item ``ids`` and their result ``arrays`` (first axis = ids)."""
        self._create()
        ids = np.asarray(ids, dtype=np.int64)
        for name, values in arrays.items():
            if len(values) != len(ids):
                raise ValueError(f"checkpoint array {name} has {len(values)} rows for {len(ids)} ids")
        buf = io.BytesIO()
        np.savez(buf, ids=ids, **{f"a_{k}": np.asarray(v) for k, v in arrays.items()})
        digest = hashlib.sha256(ids.tobytes()).hexdigest()[:16]
        path = self.directory / f"{stage}-{int(ids[0]) if ids.size else 0:09d}-{digest}.npz"
        write_atomic(path, buf.getvalue())
        return path

    def load(self, stage: str) -> dict[int, dict[str, np.ndarray]]:
        """Every saved item of ``stage``: id -> {array name: that item's row}."""
        done: dict[int, dict[str, np.ndarray]] = {}
        for path in sorted(self.directory.glob(f"{stage}-*.npz")):
            try:
                with np.load(path, allow_pickle=False) as npz:
                    ids = npz["ids"]
                    arrays = {k[2:]: npz[k] for k in npz.files if k.startswith("a_")}
            except (OSError, ValueError, KeyError):
                continue  # unreadable: its items are simply computed again
            for j, item in enumerate(ids.tolist()):
                done[int(item)] = {k: v[j] for k, v in arrays.items()}
        if done:
            self.reused[stage] = len(done)
        return done

    def saved_items(self) -> int:
        """How many work items the checkpoint holds (all stages)."""
        total = len(list(self.directory.glob("task-*.pkl")))
        for path in self.directory.glob("*-*.npz"):
            try:
                with np.load(path, allow_pickle=False) as npz:
                    total += len(npz["ids"])
            except (OSError, ValueError, KeyError):
                continue
        return total

    def save_task(self, call: int, index: int, fingerprint: str, result: Any) -> Path:
        """Save the result of task ``index`` of the ``call``-th ``run_tasks`` call (pickled, atomically)."""
        self._create()
        path = self.directory / f"task-{call:05d}-{index:06d}-{fingerprint}.pkl"
        write_atomic(path, pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
        return path

    def load_tasks(self, call: int) -> dict[tuple[int, str], Any]:
        """Saved results of the ``call``-th ``run_tasks`` call: (task index, fingerprint) -> result.

        The files are this run's own output (pickles): a checkpoint directory from an
        untrusted source must not be resumed.
        """
        found: dict[tuple[int, str], Any] = {}
        if not self.directory.is_dir():
            return found
        for path in sorted(self.directory.glob(f"task-{call:05d}-*.pkl")):
            try:
                _, _, index, fingerprint = path.stem.split("-", 3)
                found[(int(index), fingerprint)] = pickle.loads(path.read_bytes())
            except (OSError, ValueError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
                continue  # unreadable: that task simply runs again
        return found

    def clear(self) -> None:
        """Remove the checkpoint (after the run's results are written)."""
        shutil.rmtree(self.directory, ignore_errors=True)


@contextmanager
def saving_on_interrupt(ckpt: Checkpoint) -> Iterator[None]:
    """On Ctrl-C, say on stderr what is saved and how to resume, then let the interrupt end the run (exit 130).

    Finished chunks are already on disk (each is saved as it arrives), so nothing else
    needs saving here. A run that stops on bad input (exit 2) cannot be resumed, so its
    checkpoint is removed: a failed run leaves no partial files behind.
    """
    try:
        yield
    except InputError:
        ckpt.clear()
        raise
    except KeyboardInterrupt:
        n = ckpt.saved_items() if ckpt.directory.exists() else 0
        ui.echo(
            f"mptool: interrupted; {n} finished item(s) are saved in {ckpt.directory}: "
            "rerun the same command with --resume to continue",
            file=sys.stderr,
        )
        raise
