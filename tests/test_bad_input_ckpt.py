"""Hostile checkpoints and output folders (issue 12, items 2 and 3): exit 2, one line, nothing written.

A checkpoint folder is something a pull request can change, so ``--resume`` must never run
code from it nor load a chunk that is not this run's own: planted pickles, a forged
``meta.json``, a chunk of another spec, malformed or renamed chunks, a correctly signed
chunk with an unknown type tag, ``.checkpoint`` as a file or a symlink. Output folders
hold one run at a time (a lock; stale locks explained), nothing existing is overwritten
without ``--force`` and a run's inputs never, even with it. docs/bad-input.md lists every
case under "Checkpoints and output folders" with the line it prints.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import pickle
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, run_cli, write_spec
from test_bad_input import assert_refused, snapshot

from mptool.runtime import chunkfile
from mptool.runtime.checkpoint import Checkpoint, checkpoint_key, run_key
from mptool.runtime.lock import LOCK_NAME

Case = Callable[[Path], tuple[list[str], list[str]]]
START_OVER = "rerun with --force and without --resume"


@pytest.fixture(autouse=True)
def _checkpoint_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test signs with a known key (never the user's own key file)."""
    monkeypatch.setenv("MPTOOL_CHECKPOINT_KEY", "test-key-" + "k" * 40)


class Marker:
    """A pickle that, if ever unpickled, creates the file ``path`` (it must never exist)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def interrupted(base: Path, command: str, seed: int, stop_at: int) -> Path:
    """A real interrupted run (Ctrl-C at the ``stop_at``-th leave-one-out chunk) in ``base``; its argv."""
    import mptool.loo.refit as refit

    base.mkdir(parents=True, exist_ok=True)
    mixed_frame(30, seed=5).to_csv(base / "d.csv", index=False)
    write_spec(base / "s.yaml", "gaussian_nb", seed=seed)
    real, calls = refit.loo_chunk, []

    @functools.wraps(real)  # same name: the resumed run's task fingerprints match
    def stop(*a):
        calls.append(1)
        if len(calls) == stop_at:
            raise KeyboardInterrupt
        return real(*a)

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MPTOOL_CHECKPOINT_KEY", "test-key-" + "k" * 40)
        mp.setattr(refit, "loo_chunk", stop)
        res = run_cli(*argv(base, command))
    assert res.code == 130, res.stderr
    assert (base / "out" / ".checkpoint" / "meta.json").is_file()
    assert not (base / "out" / LOCK_NAME).exists()
    return base


def argv(d: Path, command: str, *extra: str) -> list[str]:
    args = [command, str(d / "d.csv"), "--model", str(d / "s.yaml"), "--out", str(d / "out"), "--jobs", "1"]
    if command == "reduce-dtp":
        args += ["--max-removals", "2"]
    return [*args, "--engine", "refit", "-q", *extra]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Interrupted runs: pdtp (stage chunks) and reduce-dtp (task chunks), and pdtp of another spec."""
    base = tmp_path_factory.mktemp("ckpt")
    return {
        "pdtp": interrupted(base / "pdtp", "pdtp", 0, 3),
        "reduce": interrupted(base / "reduce", "reduce-dtp", 0, 3),
        "other": interrupted(base / "other", "pdtp", 1, 3),
    }


def copy_run(saved: dict[str, Path], kind: str, d: Path) -> Path:
    shutil.copytree(saved[kind], d, dirs_exist_ok=True)
    return d / "out" / ".checkpoint"


def chunks(ckpt: Path, pattern: str = "*.npz") -> list[Path]:
    found = sorted(ckpt.glob(pattern))
    assert found, f"no {pattern} in {ckpt}"
    return found


# --- the cases: each returns (argv, fragments the one error line must contain) ---


def planted_pickle_file(d: Path):
    ckpt = copy_run(SAVED, "reduce", d)
    (ckpt / "task-00000-000099-0123456789abcdef.pkl").write_bytes(pickle.dumps(Marker(d / "MARKER")))
    return argv(d, "reduce-dtp", "--resume"), ["task-00000-000099", "never loads pickles", START_OVER]


def pickle_named_as_chunk(d: Path):
    ckpt = copy_run(SAVED, "reduce", d)
    target = chunks(ckpt, "task-*.npz")[0]
    target.write_bytes(pickle.dumps(Marker(d / "MARKER")))
    return argv(d, "reduce-dtp", "--resume"), [target.name, "not a checkpoint chunk", START_OVER]


def npz_with_pickled_object_array(d: Path):
    ckpt = copy_run(SAVED, "pdtp", d)
    target = chunks(ckpt, "loo-*.npz")[0]
    evil = np.empty(1, dtype=object)
    evil[0] = Marker(d / "MARKER")
    with open(target, "wb") as fh:
        np.savez(fh, ids=np.arange(3), a_p_loo=evil)  # np.load(allow_pickle=True) would run it
    return argv(d, "pdtp", "--resume"), [target.name, "not a checkpoint chunk", "member names"]


def _meta_with_mac(d: Path, mac: str):
    """This run's checkpoint with meta.json's MAC replaced by ``mac``: resumed, it must not verify."""
    ckpt = copy_run(SAVED, "pdtp", d)
    meta = json.loads((ckpt / "meta.json").read_text())
    meta["hmac_sha256"] = mac
    (ckpt / "meta.json").write_text(json.dumps(meta))
    return argv(d, "pdtp", "--resume"), ["meta.json", "does not verify", START_OVER]


def forged_meta(d: Path):
    return _meta_with_mac(d, "0" * 64)


def meta_mac_with_non_ascii_text(d: Path):
    """ckpt-25 (red7): hmac.compare_digest raised TypeError on a non-ASCII str: exit 3, not a refusal."""
    return _meta_with_mac(d, "\u00e9" * 64)


def meta_of_the_pickle_format(d: Path):
    ckpt = copy_run(SAVED, "pdtp", d)
    meta = json.loads((ckpt / "meta.json").read_text())
    (ckpt / "meta.json").write_text(json.dumps({"format": 1, "key": meta["key"]}))
    return argv(d, "pdtp", "--resume"), ["meta.json", "older mptool", "pickles", START_OVER]


def foreign_chunk_of_another_spec(d: Path):
    ckpt = copy_run(SAVED, "pdtp", d)
    other = chunks(SAVED["other"] / "out" / ".checkpoint", "loo-*.npz")[-1]
    shutil.copy(other, ckpt / other.name)  # same work items, same name: it replaces this run's chunk
    return argv(d, "pdtp", "--resume"), [other.name, "another run", "different spec", START_OVER]


def chunk_signed_with_another_key(d: Path):
    ckpt = copy_run(SAVED, "pdtp", d)
    meta = json.loads((ckpt / "meta.json").read_text())
    forged = Checkpoint(d / "elsewhere", meta["key"])  # the right run key, another machine's key
    forged._secret = b"another-machine-" + b"x" * 40
    path = forged.save("loo", np.array([0, 1, 2]), p_loo=np.full((3, 2), 0.5))
    shutil.copy(path, ckpt / path.name)
    return argv(d, "pdtp", "--resume"), ["does not verify", "MPTOOL_CHECKPOINT_KEY", START_OVER]


def truncated_chunk(d: Path):
    ckpt = copy_run(SAVED, "reduce", d)
    target = chunks(ckpt, "task-*.npz")[0]
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    return argv(d, "reduce-dtp", "--resume"), [target.name, "not a checkpoint chunk", START_OVER]


def chunk_with_a_changed_byte(d: Path):
    """One value changed, the archive otherwise valid (fresh CRCs): only the HMAC tells."""
    ckpt = copy_run(SAVED, "reduce", d)
    target = chunks(ckpt, "task-*.npz")[0]
    with zipfile.ZipFile(target) as zf:
        members = {n: bytearray(zf.read(n)) for n in zf.namelist()}
    members["a0.npy"][-1] ^= 0x01
    with zipfile.ZipFile(target, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, bytes(data))
    return argv(d, "reduce-dtp", "--resume"), [target.name, "does not verify", START_OVER]


def signed_chunk_with_unknown_type_tag(d: Path):
    """Even a chunk signed with the right key cannot name code: an unknown tag is refused."""
    ckpt = copy_run(SAVED, "reduce", d)
    target = chunks(ckpt, "task-*.npz")[0]
    meta = json.loads((ckpt / "meta.json").read_text())
    _, call, index, fp = target.stem.split("-")
    header = {"format": 2, "key": meta["key"], "task": [int(call), int(index), fp]}
    real = chunkfile.encode
    chunkfile.encode = lambda value, arrays, depth=0: {"t": "callable", "v": "os.system"}
    try:
        data = chunkfile.pack(None, header, checkpoint_key(), chunkfile.canonical(meta["key"]))
    finally:
        chunkfile.encode = real
    target.write_bytes(data)
    return argv(d, "reduce-dtp", "--resume"), [target.name, "unknown type tag 'callable'", START_OVER]


def renamed_chunk(d: Path):
    ckpt = copy_run(SAVED, "reduce", d)
    first = chunks(ckpt, "task-*.npz")[0]
    _, call, index, fp = first.stem.split("-")
    first.rename(ckpt / f"task-{call}-{int(index) + 50:06d}-{fp}.npz")
    return argv(d, "reduce-dtp", "--resume"), ["name and content differ", START_OVER]


def stranger_file_in_checkpoint(d: Path):
    ckpt = copy_run(SAVED, "pdtp", d)
    (ckpt / "notes.txt").write_text("hello")
    return argv(d, "pdtp", "--resume"), ["notes.txt", "not a file mptool writes", START_OVER]


def checkpoint_is_a_file(d: Path):
    copy_run(SAVED, "pdtp", d)
    shutil.rmtree(d / "out" / ".checkpoint")
    (d / "out" / ".checkpoint").write_text("not a folder")
    return argv(d, "pdtp", "--resume", "--force"), [".checkpoint", "is not a folder", "delete it yourself"]


def checkpoint_is_a_symlink(d: Path):
    ckpt = copy_run(SAVED, "pdtp", d)
    shutil.move(ckpt, d / "elsewhere")
    (d / "out" / ".checkpoint").symlink_to(d / "elsewhere")
    return argv(d, "pdtp", "--force"), [".checkpoint", "symbolic link", "neither read nor remove"]


def concurrent_run_holds_the_lock(d: Path):
    copy_run(SAVED, "pdtp", d)
    fd = os.open(d / "out" / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, json.dumps({"pid": os.getpid(), "host": os.uname().nodename, "started": "now"}).encode())
    fcntl.flock(fd, fcntl.LOCK_EX)  # a live holder (another open file, as another process's would be)
    HELD.append(fd)
    return argv(d, "pdtp", "--resume"), [f"another mptool run (pid {os.getpid()}, started now)", "wait for it"]


def stale_lock(d: Path):
    copy_run(SAVED, "pdtp", d)
    info = {"pid": dead_pid(), "host": os.uname().nodename, "started": "2026-01-01T00:00:00"}
    (d / "out" / LOCK_NAME).write_text(json.dumps(info))
    return argv(d, "pdtp"), ["no longer running", f"pid {info['pid']}", "--resume", "--force"]


def lock_is_a_symlink(d: Path):
    copy_run(SAVED, "pdtp", d)
    (d / "victim").write_text("keep me")
    (d / "out" / LOCK_NAME).symlink_to(d / "victim")
    return argv(d, "pdtp", "--force"), [LOCK_NAME, "not an mptool lock file"]


def report_out_onto_input_csv(d: Path):
    copy_run(SAVED, "pdtp", d)
    res = run_cli(*argv(d, "pdtp", "--resume"))
    assert res.code in (0, 1), res.stderr
    return ["report", str(d / "out"), "--out", str(d / "d.csv"), "--force"], ["d.csv", "the data file", "even with"]


def report_out_onto_a_result_file(d: Path):
    copy_run(SAVED, "pdtp", d)
    res = run_cli(*argv(d, "pdtp", "--resume"))
    assert res.code in (0, 1), res.stderr
    args = ["report", str(d / "out"), "--format", "md", "--out", str(d / "out" / "pdtp.csv"), "--force"]
    return args, ["pdtp.csv", "the result file", "even with"]


def report_out_exists(d: Path):
    copy_run(SAVED, "pdtp", d)
    res = run_cli(*argv(d, "pdtp", "--resume"))
    assert res.code in (0, 1), res.stderr
    (d / "r.html").write_text("an earlier report")
    return ["report", str(d / "out"), "--out", str(d / "r.html")], ["r.html", "exists", "--force"]


def write_clean_onto_the_trace(d: Path):
    mixed_frame(30, seed=5).to_csv(d / "d.csv", index=False)
    write_spec(d / "s.yaml", "gaussian_nb")
    args = argv(d, "reduce-dtp", "--write-clean", str(d / "out" / "reduce.csv"), "--force")
    return args, ["reduce.csv", "--write-clean", "output of this run"]


def write_clean_onto_the_spec(d: Path):
    mixed_frame(30, seed=5).to_csv(d / "d.csv", index=False)
    write_spec(d / "s.yaml", "gaussian_nb")
    args = argv(d, "reduce-dtp", "--write-clean", str(d / "s.yaml"), "--force")
    return args, ["s.yaml", "the spec", "even with --force"]


def data_is_a_result_file(d: Path):
    (d / "out").mkdir()
    mixed_frame(30, seed=5).to_csv(d / "out" / "pdtp.csv", index=False)
    write_spec(d / "s.yaml", "gaussian_nb")
    args = ["pdtp", str(d / "out" / "pdtp.csv"), "--model", str(d / "s.yaml"), "--out", str(d / "out"), "--force"]
    return args, ["pdtp.csv", "the data file", "even with --force"]


def spec_inside_the_checkpoint(d: Path):
    copy_run(SAVED, "pdtp", d)
    shutil.copy(d / "s.yaml", d / "out" / ".checkpoint" / "s.yaml")
    args = argv(d, "pdtp", "--force")
    args[args.index("--model") + 1] = str(d / "out" / ".checkpoint" / "s.yaml")
    return args, ["s.yaml", "inside", "--force clears"]


CASES: list[Case] = [
    planted_pickle_file,
    pickle_named_as_chunk,
    npz_with_pickled_object_array,
    forged_meta,
    meta_mac_with_non_ascii_text,
    meta_of_the_pickle_format,
    foreign_chunk_of_another_spec,
    chunk_signed_with_another_key,
    truncated_chunk,
    chunk_with_a_changed_byte,
    signed_chunk_with_unknown_type_tag,
    renamed_chunk,
    stranger_file_in_checkpoint,
    checkpoint_is_a_file,
    checkpoint_is_a_symlink,
    concurrent_run_holds_the_lock,
    stale_lock,
    lock_is_a_symlink,
    report_out_onto_input_csv,
    report_out_onto_a_result_file,
    report_out_exists,
    write_clean_onto_the_trace,
    write_clean_onto_the_spec,
    data_is_a_result_file,
    spec_inside_the_checkpoint,
]
SAVED: dict[str, Path] = {}
HELD: list[int] = []


def dead_pid() -> int:
    """The pid of a process that has ended (and was reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_bad_checkpoint_or_output_exits_2_with_one_line(tmp_path: Path, case: Case, saved) -> None:
    SAVED.update(saved)
    try:
        args, fragments = case(tmp_path)
        before = snapshot(tmp_path)
        res = run_cli(*args)
    finally:
        while HELD:
            os.close(HELD.pop())
    assert_refused(res, fragments, tmp_path, before)
    assert not (tmp_path / "MARKER").exists(), "a planted pickle was executed"


def test_marker_pickle_would_run_if_loaded(tmp_path: Path) -> None:
    """The planted pickle is live: unpickling it does create the marker (so its absence above means something)."""
    pickle.loads(pickle.dumps(Marker(tmp_path / "MARKER")))
    assert (tmp_path / "MARKER").exists()


def test_symlinked_checkpoint_target_is_left_intact(tmp_path: Path, saved) -> None:
    SAVED.update(saved)
    checkpoint_is_a_symlink(tmp_path)
    inside = sorted(p.name for p in (tmp_path / "elsewhere").iterdir())
    res = run_cli(*argv(tmp_path, "pdtp", "--force"))
    assert res.code == 2
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == inside


# --- the lock: released on every exit path; stale locks taken over only when asked ---


def small_inputs(d: Path, frame: pd.DataFrame | None = None) -> None:
    (mixed_frame(30, seed=5) if frame is None else frame).to_csv(d / "d.csv", index=False)
    write_spec(d / "s.yaml", "gaussian_nb")


def test_lock_released_after_success_and_after_failure(tmp_path: Path) -> None:
    small_inputs(tmp_path)
    ok = run_cli(*argv(tmp_path, "pdtp"))
    assert ok.code in (0, 1), ok.stderr
    assert (tmp_path / "out" / "pdtp.csv").is_file() and not (tmp_path / "out" / LOCK_NAME).exists()

    one_class = mixed_frame(30, seed=5).assign(label="yes")
    one_class.to_csv(tmp_path / "bad.csv", index=False)
    before = (tmp_path / "out" / "pdtp.csv").read_bytes()
    bad = run_cli("pdtp", tmp_path / "bad.csv", "--model", tmp_path / "s.yaml", "--out", tmp_path / "out", "--force")
    assert bad.code == 2 and "single class" in bad.stderr
    assert not (tmp_path / "out" / LOCK_NAME).exists()
    assert (tmp_path / "out" / "pdtp.csv").read_bytes() == before  # --force replaces only on success

    again = run_cli(*argv(tmp_path, "pdtp", "--force"))  # nothing left over blocks the next run
    assert again.code in (0, 1), again.stderr


def test_failed_run_leaves_no_folder_it_created(tmp_path: Path) -> None:
    mixed_frame(30, seed=5).assign(label="yes").to_csv(tmp_path / "bad.csv", index=False)
    write_spec(tmp_path / "s.yaml", "gaussian_nb")
    out = tmp_path / "new" / "deeper" / "out"
    res = run_cli("pdtp", tmp_path / "bad.csv", "--model", tmp_path / "s.yaml", "--out", out)
    assert res.code == 2
    assert not (tmp_path / "new").exists()
    (tmp_path / "kept").mkdir()  # a folder the user made stays, even empty
    res = run_cli("pdtp", tmp_path / "bad.csv", "--model", tmp_path / "s.yaml", "--out", tmp_path / "kept")
    assert res.code == 2 and (tmp_path / "kept").is_dir()


def test_interrupted_run_releases_the_lock_and_keeps_the_checkpoint(saved) -> None:
    out = saved["pdtp"] / "out"
    assert (out / ".checkpoint" / "meta.json").is_file() and not (out / LOCK_NAME).exists()


def test_stale_lock_is_taken_over_with_resume(tmp_path: Path, saved) -> None:
    copy_run(saved, "pdtp", tmp_path)
    info = {"pid": dead_pid(), "host": os.uname().nodename, "started": "2026-01-01T00:00:00"}
    (tmp_path / "out" / LOCK_NAME).write_text(json.dumps(info))
    res = run_cli(*argv(tmp_path, "pdtp", "--resume"))
    assert res.code in (0, 1), res.stderr
    assert f"taking over the stale lock of an mptool run (pid {info['pid']}" in res.stderr
    assert not (tmp_path / "out" / LOCK_NAME).exists()


def test_report_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    small_inputs(tmp_path)
    assert run_cli(*argv(tmp_path, "pdtp")).code in (0, 1)
    first = run_cli("report", tmp_path / "out", "-q")
    assert first.code == 0, first.stderr
    second = run_cli("report", tmp_path / "out", "-q")
    assert second.code == 2 and "report.html" in second.stderr and "--force" in second.stderr
    assert run_cli("report", tmp_path / "out", "-q", "--force").code == 0


# --- two real processes: the second is refused; after kill -9 the lock is stale; resume is exact ---
# One subprocess test shows it end to end, with the resume checks of a killed run (the same run and reference):
# tests/test_resume.py::test_sigkill_then_resume_gives_identical_results. The refusals (ckpt-15, ckpt-16) are
# tested in-process above.


# --- resume stays exact through the data-only format: task chunks holding DataFrames ---


def test_attack_with_synthetic_shadows_resumes_byte_identical(tmp_path: Path, monkeypatch) -> None:
    """Synthetic shadow chunks hold DataFrames (text and float columns) and object label arrays."""
    import mptool.attacks.shadows as shadows

    small_inputs(tmp_path, mixed_frame(80, seed=3))
    flags = "--candidates 40 --targets 8 --iterations 2 --shadows 4 --attacks untargeted --shadow-data marginals"
    args = ["attack", tmp_path / "d.csv", "--model", tmp_path / "s.yaml", *flags.split(), "--pdtp-iterations", "0"]
    args += ["-j", "1", "-q"]
    clean = run_cli(*args, "--out", tmp_path / "clean")
    assert clean.code in (0, 1), clean.stderr

    real, calls = shadows.synthetic_chunk, []

    @functools.wraps(real)
    def stop(*a):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a)

    monkeypatch.setattr(shadows, "synthetic_chunk", stop)
    out = tmp_path / "out"
    stopped = run_cli(*args, "--out", out)
    assert stopped.code == 130 and "--resume" in stopped.stderr
    assert list((out / ".checkpoint").glob("task-*.npz"))
    monkeypatch.setattr(shadows, "synthetic_chunk", real)
    calls.clear()
    resumed = run_cli(*args, "--out", out, "--resume")
    assert resumed.code == clean.code, resumed.stderr
    assert (out / "attack.csv").read_bytes() == (tmp_path / "clean" / "attack.csv").read_bytes()
    a = json.loads((out / "attack.json").read_text())["attacks"]
    b = json.loads((tmp_path / "clean" / "attack.json").read_text())["attacks"]
    assert a == b


def test_checkpoint_key_file_is_private_and_reused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("MPTOOL_CHECKPOINT_KEY")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    first = checkpoint_key()
    path = tmp_path / "state" / "mptool" / "checkpoint.key"
    assert path.is_file() and (path.stat().st_mode & 0o777) == 0o600
    assert checkpoint_key() == first and len(first) >= 32


def test_run_key_of_saved_chunk_is_recorded(saved) -> None:
    """A chunk records its run key, task and HMAC; numpy opens it without pickles."""
    target = chunks(saved["reduce"] / "out" / ".checkpoint", "task-*.npz")[0]
    with np.load(target, allow_pickle=False) as npz:
        header = json.loads(npz["header"].tobytes())
        assert len(npz["hmac"].tobytes()) == 64
    assert header["format"] == 2 and header["key"]["command"] == "reduce-dtp"
    assert set(header["key"]) == set(run_key("x", "s", "d", {})) - {"data_sha256"} | {"data_hmac"}  # keyed (issue 26)
    assert len(header["key"]["data_hmac"]) == 64
    assert header["task"][2] in target.name
