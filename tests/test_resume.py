"""Interrupted runs lose no finished work: kill -9 a real `mptool pdtp`, then --resume.

The resumed run must give byte-identical pdtp.csv to an uninterrupted run, reuse the
chunks saved before the interruption, and remove its checkpoint once the results are
written. No wall-clock assumptions: once the first chunk is saved, the run's next fit waits
(``held_estimators.HeldForest``, scikit-learn's random forest) until the test has signalled it,
so the signal always comes mid-run, however loaded the machine.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import mixed_frame, run_cli, write_spec
from held_estimators import hold_env, wait_for_hold

from mptool.runtime.lock import LOCK_NAME

N = 20  # 8 chunks of 2 or 3 refits at --jobs 1 (was 40: twice the random-forest refits per run)
# the noise floor (the forest may depend on row order) on 2 records, not the default 20: the phase still runs
HELD = ("--allow-import", "held_estimators", "--noise-floor", "2")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, bytes]:
    """A CSV, a random-forest spec (held inside a fit for the interrupting tests), and the uninterrupted pdtp.csv."""
    d = tmp_path_factory.mktemp("resume")
    csv = d / "d.csv"
    mixed_frame(N, seed=2).to_csv(csv, index=False)
    spec = write_spec(d / "rf.yaml", "held_estimators.HeldForest", model={"params": {"n_estimators": 10, "n_jobs": 1}})
    res = run_cli("pdtp", csv, "--model", spec, "--out", d / "ref", "--engine", "refit", "--jobs", "1", "--quiet",
                  *HELD)
    assert res.code in (0, 1), res.stderr
    return csv, spec, (d / "ref" / "pdtp.csv").read_bytes()


def start(csv: Path, spec: Path, out: Path, jobs: int, *extra: str) -> subprocess.Popen:
    """The run; its fits hold (``held_estimators``) once the first chunk is saved."""
    cmd = [sys.executable, "-m", "mptool", "pdtp", str(csv), "--model", str(spec), "--out", str(out), *HELD]
    return subprocess.Popen(
        [*cmd, "--engine", "refit", "--jobs", str(jobs), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=hold_env(out / ".checkpoint" / "loo-*.npz", held_mark(out)),
        # a shell may start background jobs with SIGINT ignored; the test wants Python's default handler
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def held_mark(out: Path) -> Path:
    return out.parent / f"{out.name}-held"


def wait_for_first_chunk(proc: subprocess.Popen, out: Path) -> None:
    """Wait until the first chunk is saved and a later fit holds."""
    try:
        wait_for_hold(held_mark(out), lambda: proc.poll() is None)
    except AssertionError as exc:
        if proc.poll() is None:
            proc.kill()
        pytest.fail(f"{exc} (exit {proc.returncode}): {proc.stderr.read()}")


def resume(csv: Path, spec: Path, out: Path) -> tuple[str, bytes]:
    res = run_cli("pdtp", csv, "--model", spec, "--out", out, "--engine", "refit", "--jobs", "1", "--resume", *HELD)
    assert res.code in (0, 1), res.stderr
    assert not (out / ".checkpoint").exists(), "the checkpoint must be removed once results are written"
    return res.stderr, (out / "pdtp.csv").read_bytes()


def reused(stderr: str) -> int:
    line = next(ln for ln in stderr.splitlines() if ln.startswith("resumed: "))
    return int(line.split()[1])


def test_sigkill_then_resume_gives_identical_results(tmp_path: Path, inputs) -> None:
    """kill -9 a real run while a second run is refused by its lock; the stale lock; the resume checks; resume exact.

    The one subprocess test of the --out lock between two real processes (ckpt-15 and ckpt-16 of
    docs/bad-input.md end to end; test_bad_input_ckpt tests each refusal in-process): the first run
    holds the lock inside a fit, a second run into the same folder is refused while it lives, and after
    kill -9 (the kernel drops its flock) its lock is stale: explained without --resume, taken over with it.
    """
    csv, spec, reference = inputs
    out = tmp_path / "out"
    proc = start(csv, spec, out, 1, "--quiet")  # 8 chunks in turn: 7 are left when the first is saved
    wait_for_first_chunk(proc, out)
    # a second run while the first lives and holds its lock: refused, whatever its options
    second = run_cli("pdtp", csv, "--model", spec, "--out", out, "--engine", "refit", "--jobs", "1", "--quiet",
                     "--resume", *HELD)
    assert second.code == 2, second.stderr
    assert f"another mptool run (pid {proc.pid}, started " in second.stderr and "wait for it" in second.stderr
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "pdtp.csv").exists() and not (out / "pdtp.json").exists()

    # a plain rerun must not silently discard or continue the interrupted run (its lock is stale now)
    plain = run_cli("pdtp", csv, "--model", spec, "--out", out, "--engine", "refit", "--quiet", *HELD)
    assert plain.code == 2 and "--resume" in plain.stderr
    assert "no longer running" in plain.stderr and f"pid {proc.pid}" in plain.stderr
    # --resume refuses a checkpoint made with another spec or other value-changing options
    res = run_cli("pdtp", csv, "--model", spec, "--out", out, "--engine", "refit", "--resume", "--seed", "7", *HELD)
    assert res.code == 2 and "cannot resume" in res.stderr and "different spec" in res.stderr
    assert "taking over the stale lock" in res.stderr  # --resume takes the dead run's lock over (then refuses)
    res = run_cli("pdtp", csv, "--model", spec, "--out", out, "--engine", "refit", "--resume", "--sample", "5",
                  *HELD)
    assert res.code == 2 and "run options (sample: None then, 5 now)" in res.stderr

    stderr, got = resume(csv, spec, out)
    assert 0 < reused(stderr) < N
    assert got == reference
    summary = json.loads((out / "pdtp.json").read_text())["summary"]
    assert summary["n"] == N
    assert not (out / LOCK_NAME).exists()


# The interrupt of a run on --jobs 2 (Ctrl-C to the whole process group, SIGTERM to mptool alone), its workers
# stopped, and a resume that reuses the saved chunks: tests/test_signals.py::test_signal_with_loky_workers.


# --- checkpoints of any run_tasks work (attack shadows, reduce-dtp steps) ---

RAN: list[int] = []
STOP_AT = {"k": -1}


def square_or_stop(k: int, offset: int) -> int:
    RAN.append(k)
    if k == STOP_AT["k"]:
        raise KeyboardInterrupt
    return k * k + offset


def test_run_tasks_checkpoint_skips_finished_tasks(tmp_path: Path) -> None:
    from mptool.runtime.checkpoint import Checkpoint, run_key
    from mptool.runtime.parallel import checkpointing, run_tasks

    key = run_key("test", "s" * 64, "d" * 64, {})
    first = Checkpoint.open(tmp_path, key, resume=False)
    RAN.clear()
    STOP_AT["k"] = 5
    with checkpointing(first), pytest.raises(KeyboardInterrupt):
        run_tasks(square_or_stop, [(k, 0) for k in range(4)], jobs=1)  # call 0 finishes
        run_tasks(square_or_stop, [(k, 0) for k in range(8)], jobs=1)  # call 1 stops at task 5
    assert RAN == [0, 1, 2, 3, 0, 1, 2, 3, 4, 5]

    again = Checkpoint.open(tmp_path, key, resume=True)
    RAN.clear()
    STOP_AT["k"] = -1
    with checkpointing(again):
        a = run_tasks(square_or_stop, [(k, 0) for k in range(4)], jobs=1)
        b = run_tasks(square_or_stop, [(k, 0) for k in range(8)], jobs=1)
        c = run_tasks(square_or_stop, [(k, 1) for k in range(3)], jobs=1)  # new call: runs
    assert a == [0, 1, 4, 9] and b == [k * k for k in range(8)] and c == [1, 2, 5]
    assert RAN == [5, 6, 7, 0, 1, 2]  # only unfinished tasks ran
    assert again.reused == {"task-00000": 4, "task-00001": 5}

    other = Checkpoint.open(tmp_path / "x", key, resume=False)
    with checkpointing(other):
        run_tasks(square_or_stop, [(k, 0) for k in range(3)], jobs=1)
    RAN.clear()
    with checkpointing(Checkpoint.open(tmp_path / "x", key, resume=True)):
        assert run_tasks(square_or_stop, [(k, 7) for k in range(3)], jobs=1) == [7, 8, 11]
    assert RAN == [0, 1, 2]  # same call number, other arguments: nothing reused


def test_reduce_dtp_interrupted_then_resumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C in the middle of reduce-dtp's refits, then --resume: same reduce.csv as a clean run."""
    import mptool.loo.refit as refit

    csv = tmp_path / "d.csv"
    mixed_frame(16, seed=8).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "dt.yaml", "decision_tree", model={"params": {"max_depth": 3}})
    # 1 removal: 2 passes of 8 chunks (16 loo_chunk calls), the 10th inside the second pass (was 2: 24 calls)
    args = ["reduce-dtp", csv, "--model", spec, "--engine", "refit", "--max-removals", "1", "--jobs", "1", "-q"]
    clean = run_cli(*args, "--out", tmp_path / "clean")
    assert clean.code in (0, 1), clean.stderr

    real, calls = refit.loo_chunk, []

    def stop_later(*a):
        calls.append(1)
        if len(calls) == 10:
            raise KeyboardInterrupt
        return real(*a)

    monkeypatch.setattr(refit, "loo_chunk", stop_later)
    out = tmp_path / "out"
    stopped = run_cli(*args, "--out", out)
    assert stopped.code == 130 and "--resume" in stopped.stderr
    assert not (out / "reduce.csv").exists()
    monkeypatch.setattr(refit, "loo_chunk", real)
    resumed = run_cli(*args, "--out", out, "--resume")
    assert resumed.code == clean.code, resumed.stderr
    assert (out / "reduce.csv").read_bytes() == (tmp_path / "clean" / "reduce.csv").read_bytes()
    assert not (out / ".checkpoint").exists()
