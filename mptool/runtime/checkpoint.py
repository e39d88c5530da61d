"""Checkpoints of long runs: finished chunks saved in ``DIR/.checkpoint/`` so ``--resume`` skips them.

A checkpoint belongs to one run *key*: the subcommand, the spec hash, the data hash (written
into the checkpoint only as its HMAC under the checkpoint key: no unkeyed hash of the data on
disk, issue 26), the mptool version and the run options that change computed values (``--records``,
``--sample``, ``--engine``...; not ``--jobs``, ``--backend`` or ``--threshold``). Each
finished chunk (the result of one ``run_tasks`` task, or a stage chunk of work items) is
one file, written atomically (temporary name + rename), so a run killed at any moment
(Ctrl-C or ``kill -9``) leaves only whole chunks behind.

Chunks hold data only (:mod:`mptool.runtime.chunkfile`: a typed JSON structure and
``.npy`` arrays read with ``allow_pickle=False``): loading one cannot run code. Each chunk
and ``meta.json`` carry an HMAC-SHA-256 under the user's *checkpoint key* over the run key
and their content, so a chunk of another run (another spec, data, options or version, or
another task), a file changed after mptool wrote it, or one planted by someone without the
key is refused with exit 2 before any work starts, never loaded. The key is
``$MPTOOL_CHECKPOINT_KEY`` if set (to resume on another machine, set the same secret on
both), else a random key kept in ``$XDG_STATE_HOME/mptool/checkpoint.key`` (default
``~/.local/state``), created on first use with mode 0600.

``--resume`` verifies every file of the checkpoint, computes only the rest and gives the
same bytes as an uninterrupted run, because every item is computed independently and
seeded from the spec.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac as _hmac
import json
import os
import re
import secrets
import shlex
import shutil
import stat
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from mptool.outputs.results import CHECKPOINT_DIR, write_atomic
from mptool.runtime import chunkfile, signals, ui
from mptool.runtime.chunkfile import ChunkError, canonical
from mptool.runtime.errors import InputError, NoSpaceError
from mptool.runtime.version import __version__

#: Run options that only change how (not what) is computed: ignored in the key.
EXECUTION_ONLY = frozenset({"jobs", "backend", "scheduler", "threshold", "quiet", "force", "resume"})
#: Environment variable holding the checkpoint key (a secret text); else a key file is used.
KEY_ENV = "MPTOOL_CHECKPOINT_KEY"
_META = "meta.json"
_FORMAT = 2
_MAX_META_BYTES = 1 << 20
_TASK = re.compile(r"task-([0-9]{5})-([0-9]{6})-([0-9a-f]{16})\.npz")
_STAGE = re.compile(r"([a-z][a-z_]*)-([0-9]{9,19})-([0-9a-f]{16})\.npz")
_NOT_A_CHUNK = "not a checkpoint chunk as mptool writes it"
_START_OVER = "mptool will not load it: rerun with --force and without --resume to start over"


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
        "data_hmac": "data file",
        "mptool_version": "mptool version",
        "options": "run options",
    }
    for field, label in labels.items():
        if old.get(field) != new.get(field):
            if field == "options":
                a, b = old.get(field) or {}, new.get(field) or {}
                keys = sorted(k for k in {*a, *b} if a.get(k) != b.get(k))
                return f"run options ({', '.join(f'{k}: {a.get(k)!r} then, {b.get(k)!r} now' for k in keys)})"
            if field.endswith(("sha256", "hmac")):
                return f"{label} (sha256 {str(old.get(field))[:12]} then, {str(new.get(field))[:12]} now)"
            return f"{label} ({old.get(field)} then, {new.get(field)} now)"
    return "format"


def options_dict(options: Any) -> dict[str, Any]:
    """A subcommand's run options (a dataclass or a mapping) as a plain dict for :func:`run_key`."""
    if dataclasses.is_dataclass(options) and not isinstance(options, type):
        return dataclasses.asdict(options)
    return dict(options)


def _key_file() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "mptool" / "checkpoint.key"


def check_key_file(path: Path | None = None) -> None:
    """InputError unless the key file (if it exists) is a regular file of this user that no one else may read or
    write (mode 0600 or stricter), as ssh demands of a private key: a key others can read lets them sign a
    checkpoint mptool then loads, one others can write lets them choose the key."""
    path = path or _key_file()
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InputError(f"{path}: cannot check the checkpoint key file ({exc.strerror}); set {KEY_ENV}") from None
    fix = f"fix it (chmod 600 {shlex.quote(str(path))}, owned by you), delete it, or set {KEY_ENV}"
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{path}: the checkpoint key file is not a regular file (a link, folder or device); {fix}")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise InputError(f"{path}: the checkpoint key file belongs to another user; {fix}")
    if info.st_mode & 0o077:
        raise InputError(
            f"{path}: the checkpoint key file may be read or written by others (mode "
            f"{stat.S_IMODE(info.st_mode):04o}); {fix}"
        )


def _read_key(path: Path) -> bytes:
    check_key_file(path)
    key = _read_regular(path, 4096).strip()
    if len(key) < 32:
        raise OSError("the key file is damaged: delete it (checkpoints signed with it are lost)")
    return key


def checkpoint_key() -> bytes:
    """The secret that signs checkpoints: ``$MPTOOL_CHECKPOINT_KEY``, else this user's key file.

    The key file is created on first use (random, mode 0600; the first of two racing runs
    wins). One that others may read or write, or that another user owns, is refused
    (InputError, :func:`check_key_file`; checked before any work by :meth:`Checkpoint.open`).
    When it cannot be read or stored, the run gets a key of its own, with a warning: its
    checkpoint can then not be resumed.
    """
    text = os.environ.get(KEY_ENV)
    if text:
        return text.encode("utf-8")
    path = Path("~/.local/state/mptool/checkpoint.key")
    try:
        path = _key_file()
        if not path.exists():
            _create_key(path)
        check_key_file(path)  # an unsafe key file stops the run (not caught below)
    except (OSError, RuntimeError) as exc:
        _warn_no_key(path, exc)
        return secrets.token_hex(32).encode()
    try:
        return _read_key(path)
    except (OSError, RuntimeError) as exc:
        _warn_no_key(path, exc)
        return secrets.token_hex(32).encode()


def _warn_no_key(path: Path, exc: BaseException) -> None:
    """The warning of a run whose checkpoint key file cannot be used (its checkpoint cannot be resumed)."""
    ui.warn(
        f"cannot use the checkpoint key {path} ({getattr(exc, 'strerror', None) or exc}); this run's "
        f"checkpoint cannot be resumed: set {KEY_ENV} to a secret to make it resumable"
    )


def _create_key(path: Path) -> None:
    """Write a random key to ``path`` unless it exists (atomically: a racing run's key is kept)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_hex(32) + "\n")
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)


def _open_regular(path: Path, cap: int) -> tuple[int, int]:
    """(fd, size) of ``path`` opened read-only: a regular file, not a symlink, at most ``cap`` bytes."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > cap:
        os.close(fd)
        why = "not a regular file" if not stat.S_ISREG(info.st_mode) else f"larger than {cap} bytes"
        raise InputError(f"{path}: {why}; {_START_OVER}")
    return fd, info.st_size


def _read_regular(path: Path, cap: int) -> bytes:
    fd, _ = _open_regular(path, cap)
    with os.fdopen(fd, "rb") as fh:
        return fh.read(cap + 1)


def public_run_key(secret: bytes, key: Mapping[str, Any]) -> dict[str, Any]:
    """``key`` with ``data_sha256`` replaced by ``data_hmac``: HMAC-SHA-256 of it under the checkpoint key."""
    out = dict(key)
    if "data_sha256" in out:
        digest = str(out.pop("data_sha256")).encode()
        out["data_hmac"] = _hmac.new(secret, b"mptool-checkpoint-data\x00" + digest, hashlib.sha256).hexdigest()
    return out


def _meta_mac(secret: bytes, key: Mapping[str, Any]) -> str:
    """HMAC-SHA-256 of meta.json's run key under the checkpoint key."""
    return _hmac.new(secret, b"mptool-checkpoint-meta\x00" + canonical(key), hashlib.sha256).hexdigest()


class Checkpoint:
    """Finished chunks of one run in ``out_dir/.checkpoint``; see the module docstring."""

    def __init__(self, directory: Path, key: dict[str, Any]) -> None:
        self.directory = Path(directory)
        self._run_key = key
        self._public: dict[str, Any] | None = None
        #: Items taken from the checkpoint by :meth:`load` / :meth:`load_tasks`, per stage or call.
        self.reused: dict[str, int] = {}
        self._secret: bytes | None = None
        self._tasks: dict[int, dict[tuple[int, str], Any]] = {}
        self._stages: dict[str, dict[int, dict[str, np.ndarray]]] = {}
        self._items = 0  # work items on disk: verified at open plus saved since

    @property
    def key(self) -> dict[str, Any]:
        """The run key as written into the checkpoint: the data file's SHA-256 replaced by ``data_hmac``, its
        HMAC under the checkpoint key (no unkeyed hash of the data on disk, issue 26). Needs the key: read
        only when a file is written or verified."""
        if self._public is None:
            self._public = public_run_key(self.secret, self._run_key)
        return self._public

    @property
    def _binding(self) -> bytes:
        return canonical(self.key)

    @property
    def secret(self) -> bytes:
        """The checkpoint key (read once per run)."""
        if self._secret is None:
            self._secret = checkpoint_key()
        return self._secret

    @classmethod
    def open(cls, out_dir: Path, key: dict[str, Any], resume: bool, force: bool = False) -> Checkpoint:
        """The checkpoint of ``out_dir`` for ``key``.

        With ``resume`` every file of an existing checkpoint is verified now (meta.json and
        each chunk: run key, HMAC, format; InputError on the first that fails, nothing is
        loaded); without it a leftover checkpoint is refused unless ``force`` clears it, so
        an interrupted run is never silently thrown away or silently continued. A
        ``.checkpoint`` that is a symlink or not a folder is refused either way.
        """
        if not os.environ.get(KEY_ENV):
            check_key_file()  # an unsafe key file is refused before any work, not when the first chunk is saved
        ckpt = cls(Path(out_dir) / CHECKPOINT_DIR, key)
        directory = ckpt.directory
        if not _existing_folder(directory):
            return ckpt
        if _only_leftovers(directory):
            shutil.rmtree(directory)  # killed before the first chunk was saved: nothing to keep
            return ckpt
        if resume:
            ckpt._verify_meta()
            ckpt._read_chunks()
            return ckpt
        if not force:
            raise InputError(
                f"{out_dir}: holds the checkpoint of an interrupted run; pass --resume to continue it "
                "or --force to start over"
            )
        shutil.rmtree(directory)
        return ckpt

    def _verify_meta(self) -> None:
        """meta.json names this run's key, in this format, signed with this user's checkpoint key."""
        meta = self.directory / _META
        try:
            saved = json.loads(_read_regular(meta, _MAX_META_BYTES).decode("utf-8"))
            if type(saved) is not dict:
                raise ValueError
        except (OSError, ValueError, RecursionError):
            raise InputError(
                f"{self.directory}: the checkpoint has no readable {_META}; rerun with --force "
                "(without --resume) to start over"
            ) from None
        if canonical(saved.get("key")) != self._binding:
            why = _describe_difference(saved.get("key") if isinstance(saved.get("key"), dict) else {}, self.key)
            raise InputError(
                f"{self.directory}: cannot resume: the checkpoint was made with a different {why}; "
                "rerun with the original inputs, or with --force and without --resume to start over"
            )
        if saved.get("format") != _FORMAT:
            raise InputError(f"{meta}: a checkpoint of an older mptool (it may hold pickles); {_START_OVER}")
        mac = saved.get("hmac_sha256")
        # compared as bytes: compare_digest raises on a str with non-ASCII characters (an edited meta file)
        if not isinstance(mac, str) or not _hmac.compare_digest(mac.encode("utf-8", "surrogatepass"),
                                                                 _meta_mac(self.secret, self.key).encode("ascii")):
            raise InputError(f"{meta}: {_UNVERIFIED}; {_START_OVER}")

    def _read_chunks(self) -> None:
        """Verify and decode every chunk (InputError on the first bad entry; leftover temp files are removed)."""
        for entry in sorted(os.scandir(self.directory), key=lambda e: e.name):
            path = Path(entry.path)
            if entry.name == _META:
                continue
            if _is_leftover(entry.name):
                path.unlink(missing_ok=True)  # a write cut short by kill -9
                continue
            task, stage = _TASK.fullmatch(entry.name), _STAGE.fullmatch(entry.name)
            if entry.is_symlink() or not entry.is_file(follow_symlinks=False) or not (task or stage):
                hint = " (a pickle: mptool never loads pickles)" if entry.name.endswith((".pkl", ".pickle")) else ""
                raise InputError(f"{path}: not a file mptool writes in a checkpoint{hint}; {_START_OVER}")
            header, value = self._read_chunk(path)
            if task:
                self._add_task(path, header, value, (int(task[1]), int(task[2]), task[3]))
            else:
                self._add_stage(path, header, value, stage[1])

    def _read_chunk(self, path: Path) -> tuple[dict[str, Any], Any]:
        fd, size = _open_regular(path, chunkfile.MAX_CHUNK_BYTES)
        try:
            with os.fdopen(fd, "rb") as fh:
                header, value = chunkfile.read(fh, size, self.secret, self._binding)
        except ChunkError as exc:
            if exc.kind == "foreign":
                key = exc.header.get("key") if exc.header else None
                why = _describe_difference(key if isinstance(key, dict) else {}, self.key)
                raise InputError(f"{path}: a chunk of another run (different {why}); {_START_OVER}") from None
            if exc.kind == "unverified":
                raise InputError(f"{path}: {_UNVERIFIED}; {_START_OVER}") from None
            raise InputError(f"{path}: {_NOT_A_CHUNK} ({exc}); {_START_OVER}") from None
        if header.get("format") != _FORMAT:
            raise InputError(f"{path}: {_NOT_A_CHUNK} (format); {_START_OVER}")
        return header, value

    def _add_task(self, path: Path, header: dict[str, Any], value: Any, name: tuple[int, int, str]) -> None:
        if header.get("task") != list(name):
            raise InputError(f"{path}: {_NOT_A_CHUNK} (name and content differ); {_START_OVER}")
        self._tasks.setdefault(name[0], {})[(name[1], name[2])] = value
        self._items += 1

    def _add_stage(self, path: Path, header: dict[str, Any], value: Any, stage: str) -> None:
        ok = header.get("stage") == stage and type(value) is dict and set(value) == {"ids", "arrays"}
        ids, arrays = (value["ids"], value["arrays"]) if ok else (None, None)
        ok = ok and type(ids) is np.ndarray and ids.dtype == np.int64 and ids.ndim == 1 and type(arrays) is dict
        ok = ok and all(type(a) is np.ndarray and a.ndim >= 1 and len(a) == len(ids) for a in arrays.values())
        if not ok or path.name != _stage_name(stage, ids):
            raise InputError(f"{path}: {_NOT_A_CHUNK} (stage content); {_START_OVER}")
        done = self._stages.setdefault(stage, {})
        for j, item in enumerate(ids.tolist()):
            done[int(item)] = {k: v[j] for k, v in arrays.items()}
        self._items += len(ids)

    def _create(self) -> None:
        """Write the directory and its signed key file on the first save (nothing is left behind before)."""
        meta = self.directory / _META
        if meta.exists():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        doc = {"format": _FORMAT, "key": self.key, "hmac_sha256": _meta_mac(self.secret, self.key)}
        write_atomic(meta, json.dumps(doc, indent=2, default=str) + "\n")

    def _write(self, name: str, header: dict[str, Any], value: Any) -> Path | None:
        """Write one chunk atomically; a chunk too large to be read back is not saved (it is recomputed)."""
        self._create()
        data = chunkfile.pack(value, {"format": _FORMAT, "key": self.key, **header}, self.secret, self._binding)
        if len(data) > chunkfile.MAX_CHUNK_BYTES:
            return None
        path = self.directory / name
        write_atomic(path, data)
        return path

    def save(self, stage: str, ids: np.ndarray, **arrays: np.ndarray) -> Path | None:
        """Save one finished chunk: work-item ``ids`` and their result ``arrays`` (first axis = ids)."""
        ids = np.asarray(ids, dtype=np.int64)
        for name, values in arrays.items():
            if len(values) != len(ids):
                raise ValueError(f"checkpoint array {name} has {len(values)} rows for {len(ids)} ids")
        value = {"ids": ids, "arrays": {k: np.asarray(v) for k, v in arrays.items()}}
        path = self._write(_stage_name(stage, ids), {"stage": stage}, value)
        self._items += len(ids) if path else 0
        return path

    def load(self, stage: str) -> dict[int, dict[str, np.ndarray]]:
        """Every saved item of ``stage`` (verified at :meth:`open`): id -> {array name: that item's row}."""
        done = dict(self._stages.get(stage, {}))
        if done:
            self.reused[stage] = len(done)
        return done

    def saved_items(self) -> int:
        """How many work items the checkpoint holds (all stages and tasks)."""
        return self._items

    def task_mac(self, fingerprint: str) -> str:
        """A task's fingerprint as chunk names and chunks hold it: its HMAC-SHA-256 under the checkpoint key (16
        hex digits). The fingerprint hashes the task's arguments, small arrays whole (an attack's labels of D), so
        written as is it was an unkeyed hash of training data on disk (red3-4)."""
        mac = _hmac.new(self.secret, b"mptool-checkpoint-task\x00" + fingerprint.encode(), hashlib.sha256)
        return mac.hexdigest()[:16]

    def save_task(self, call: int, index: int, fingerprint: str, result: Any) -> Path | None:
        """Save the result of task ``index`` of the ``call``-th ``run_tasks`` call (data only, signed)."""
        name = f"task-{call:05d}-{index:06d}-{fingerprint}.npz"
        path = self._write(name, {"task": [call, index, fingerprint]}, result)
        self._items += 1 if path else 0
        return path

    def load_tasks(self, call: int) -> dict[tuple[int, str], Any]:
        """Saved results of the ``call``-th ``run_tasks`` call (verified at open): (index, fingerprint) -> result."""
        return dict(self._tasks.get(call, {}))

    def clear(self) -> None:
        """Remove the checkpoint (after the run's results are written)."""
        if not self.directory.is_symlink():
            shutil.rmtree(self.directory, ignore_errors=True)


_UNVERIFIED = (
    "does not verify under this user's checkpoint key (changed after mptool wrote it, or written by "
    f"another user or machine; set {KEY_ENV} to resume across machines)"
)


def _stage_name(stage: str, ids: np.ndarray) -> str:
    digest = hashlib.sha256(ids.tobytes()).hexdigest()[:16]
    return f"{stage}-{int(ids[0]) if ids.size else 0:09d}-{digest}.npz"


def _is_leftover(name: str) -> bool:
    """A temporary file of :func:`write_atomic` (``.NAME.XXXX.tmp``), left by a run killed mid-write."""
    return name.startswith(".") and name.endswith(".tmp")


def _existing_folder(directory: Path) -> bool:
    """Whether ``.checkpoint`` exists (as a real folder); InputError if it is a symlink or a file."""
    try:
        mode = os.lstat(directory).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
        what = "a symbolic link" if stat.S_ISLNK(mode) else "not a folder"
        raise InputError(
            f"{directory}: is {what}, not a checkpoint mptool wrote; mptool will neither read nor remove it: "
            "delete it yourself or choose another --out"
        )
    return True


def _only_leftovers(directory: Path) -> bool:
    """Whether the checkpoint folder holds nothing but temporary files of interrupted writes."""
    return all(_is_leftover(e.name) and e.is_file(follow_symlinks=False) for e in os.scandir(directory))


@contextmanager
def saving_on_interrupt(ckpt: Checkpoint) -> Iterator[None]:
    """On SIGINT/SIGTERM, say in one stderr line what is saved and how to resume, then let the run end (130/143).

    Finished chunks are already on disk (each is saved as it arrives; a signal never cuts a
    save short, see ``signals.deferred``), so nothing else needs saving here. When the block
    ends normally the work is complete: ``signals.shield`` keeps a late signal from stopping
    the writing of the results. A run that stops on bad input (exit 2) cannot be resumed, so
    its checkpoint is removed: a failed run leaves no partial files behind. A full disk
    (:class:`NoSpaceError`) keeps it, and the line says how to resume once space is freed.
    """
    try:
        yield
    except NoSpaceError as exc:  # not the input's fault: the finished chunks stay for --resume once space is freed
        n = ckpt.saved_items() if ckpt.directory.exists() else 0
        if not n:
            raise
        out_dir = shlex.quote(str(ckpt.directory.parent))
        raise NoSpaceError(f"{exc}; {n} finished item(s) are kept in {ckpt.directory}: after freeing space, rerun "
                           f"the same command with --resume --out {out_dir}") from None
    except InputError:
        ckpt.clear()
        raise
    except (KeyboardInterrupt, signals.Interrupted) as exc:
        n = ckpt.saved_items() if ckpt.directory.exists() else 0
        name = exc.name if isinstance(exc, signals.Interrupted) else "SIGINT"
        out_dir = shlex.quote(str(ckpt.directory.parent))
        ui.echo(  # no data in it; paths whole, so the command stays usable
            f"mptool: interrupted by {name}; {n} finished item(s) are saved in {ckpt.directory}; "
            f"rerun the same command with --resume --out {out_dir} to continue",
            file=sys.stderr,
            limit=None,
        )
        if isinstance(exc, signals.Interrupted):
            exc.reported = True
        raise
    signals.shield()
