"""One run per output folder: a lock file in ``--out``, taken atomically and held until the run ends.

The lock file ``DIR/.mptool.lock`` records the pid, host, start time and command of the run
that holds it. It is written whole under a temporary name, ``flock``-ed, then linked into
place (``link`` fails if the name exists: the same all-or-nothing as ``O_CREAT|O_EXCL``,
without a moment where the file exists but is empty). The kernel drops the ``flock`` when
the process ends, however it ends (``kill -9`` included), so a lock whose file exists but
whose ``flock`` can be taken belongs to a run that is no longer running: a *stale* lock.
Where ``flock`` is unavailable, a lock is stale when its host is this one and its pid is
not alive.

A second run into the same folder stops with exit 2 naming the first run; a stale lock is
explained and taken over only with ``--resume`` or ``--force``. :func:`release_all` runs
at exit (and the CLI calls it in ``finally``), so every exit path releases the lock.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mptool.runtime import ui
from mptool.runtime.errors import InputError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

#: Name of the lock file inside the output folder.
LOCK_NAME = ".mptool.lock"
_MAX_LOCK_BYTES = 64 << 10


@dataclass
class RunLock:
    """A held lock: the file, its open descriptor (holding the flock) and the inode it is."""

    path: Path
    fd: int
    inode: tuple[int, int]

    def release(self) -> None:
        """Remove the lock file (if it is still ours) and drop the flock."""
        if self.fd < 0:
            return
        with contextlib.suppress(OSError):
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self.inode:
                self.path.unlink()
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.fd = -1
        if self in _held:
            _held.remove(self)


_held: list[RunLock] = []


def release_all() -> None:
    """Release every lock this process holds (called at exit and by the CLI on every exit path)."""
    for lock in list(_held):
        lock.release()


atexit.register(release_all)


def _info(command: str | None) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": command if command is not None else " ".join(["mptool", *sys.argv[1:]]),
    }


def _try_flock(fd: int) -> bool | None:
    """True if this process now holds the flock, False if another does, None if flock cannot tell."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return None  # e.g. ENOLCK on a file system without locks
    return True


def _pid_alive(pid: Any) -> bool:
    if type(pid) is not int or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def _describe(info: dict[str, Any]) -> str:
    """``pid N on HOST, started T`` with only printable characters, cut short."""

    def clean(value: Any) -> str:
        return "".join(c if c.isprintable() else "?" for c in str(value))[:64]

    host = info.get("host")
    where = f" on {clean(host)}" if host not in (None, socket.gethostname()) else ""
    return f"pid {clean(info.get('pid', '?'))}{where}, started {clean(info.get('started', '?'))}"


def _read_info(fd: int) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError, RecursionError):
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, _MAX_LOCK_BYTES).decode("utf-8"))
        if isinstance(info, dict):
            return info
    return {}


def _write_info(fd: int, info: dict[str, Any]) -> None:
    data = (json.dumps(info, indent=2) + "\n").encode()
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, data)
    os.fsync(fd)


_EXCL = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


def _create(path: Path, info: dict[str, Any]) -> RunLock | None:
    """Write, flock and link a new lock file at ``path``; None if a lock file exists there already.

    Where the file system has no hard links, the file is created in place with
    ``O_CREAT|O_EXCL`` and then written.
    """
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    fd = os.open(tmp, _EXCL, 0o644)
    try:
        _write_info(fd, info)
        _try_flock(fd)
        os.link(tmp, path)
    except FileExistsError:
        os.close(fd)
        return None
    except OSError:
        os.close(fd)
        fd = _create_in_place(path, info)
        if fd < 0:
            return None
    except BaseException:
        os.close(fd)
        raise
    finally:
        tmp.unlink(missing_ok=True)
    st = os.fstat(fd)
    return RunLock(path, fd, (st.st_dev, st.st_ino))


def _create_in_place(path: Path, info: dict[str, Any]) -> int:
    try:
        fd = os.open(path, _EXCL, 0o644)
    except FileExistsError:
        return -1
    _try_flock(fd)
    _write_info(fd, info)
    return fd


def _open_existing(path: Path) -> int | None:
    """The existing lock file opened for writing (None if it vanished meanwhile); InputError if not a file."""
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError:
        fd = -1
    if fd < 0 or not os.path.isfile(path) or os.path.islink(path):
        if fd >= 0:
            os.close(fd)
        raise InputError(f"{path}: is not an mptool lock file (a symlink or not a regular file); remove it")
    return fd


def acquire(folder: Path, takeover: bool, command: str | None = None) -> RunLock:
    """Take the lock of ``folder`` for this run; see the module docstring for what is refused.

    ``takeover`` (``--resume`` or ``--force``) takes over a stale lock with a warning;
    a lock held by a running process is never taken over.
    """
    path = Path(folder) / LOCK_NAME
    info = _info(command)
    for _ in range(5):  # the holder may release between our attempts: try again
        lock = _create(path, info)
        if lock is not None:
            _held.append(lock)
            return lock
        fd = _open_existing(path)
        if fd is None:
            continue
        old = _read_info(fd)
        held_here = _try_flock(fd)
        live = not held_here if held_here is not None else old.get("host") != info["host"] or _pid_alive(old.get("pid"))
        st = os.fstat(fd)
        try:
            current = os.lstat(path)
        except FileNotFoundError:
            current = None
        if current is None or (current.st_dev, current.st_ino) != (st.st_dev, st.st_ino):
            os.close(fd)  # released and replaced meanwhile
            continue
        if live:
            os.close(fd)
            raise InputError(
                f"another mptool run ({_describe(old)}) is writing to {folder}; wait for it or choose another --out"
            )
        if not takeover:
            os.close(fd)
            raise InputError(
                f"{folder}: holds the lock of an mptool run ({_describe(old)}) that is no longer running; "
                f"pass --resume to continue that run or --force to start over (or delete {path})"
            )
        ui.warn(f"taking over the stale lock of an mptool run ({_describe(old)}) that is no longer running")
        _write_info(fd, info)
        lock = RunLock(path, fd, (st.st_dev, st.st_ino))
        _held.append(lock)
        return lock
    raise InputError(f"{path}: the lock keeps changing: another mptool run is starting there; choose another --out")
