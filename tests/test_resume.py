"""Interrupted runs lose no finished work: kill -9 or Ctrl-C a real `mptool pdtp`, then --resume.

The resumed run must give byte-identical pdtp.csv to an uninterrupted run, reuse the
chunks saved before the interruption, and remove its checkpoint once the results are
written. No wall-clock assumptions: the test waits for the first saved chunk, then kills.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import mixed_frame, run_cli, write_spec

N = 40


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, bytes]:
    """A CSV, a random-forest spec (slow enough to interrupt), and the uninterrupted pdtp.csv bytes."""
    d = tmp_path_factory.mktemp("resume")
    csv = d / "d.csv"
    mixed_frame(N, seed=2).to_csv(csv, index=False)
    spec = write_spec(d / "rf.yaml", "random_forest", model={"params": {"n_estimators": 10}})
    res = run_cli("pdtp", csv, "--model", spec, "--out", d / "ref", "--engine", "refit", "--jobs", "1", "--quiet")
    assert res.code in (0, 1), res.stderr
    return csv, spec, (d / "ref" / "pdtp.csv").read_bytes()


def start(csv: Path, spec: Path, out: Path, jobs: int, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "mptool", "pdtp", str(csv), "--model", str(spec), "--out", str(out)]
    return subprocess.Popen(
        [*cmd, "--engine", "refit", "--jobs", str(jobs), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a shell may start background jobs with SIGINT ignored; the test wants Python's default handler
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def wait_for_first_chunk(proc: subprocess.Popen, out: Path, timeout: float = 240.0) -> None:
    ckpt = out / ".checkpoint"
    deadline = time.monotonic() + timeout
    while not list(ckpt.glob("loo-*.npz")):
        if proc.poll() is not None:
            pytest.fail(f"mptool ended (exit {proc.returncode}) before its first chunk: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("no checkpoint chunk appeared")
        time.sleep(0.02)


def resume(csv: Path, spec: Path, out: Path) -> tuple[str, bytes]:
    res = run_cli("pdtp", csv, "--model", spec, "--out", out, "--engine", "refit", "--jobs", "1", "--resume")
    assert res.code in (0, 1), res.stderr
    assert not (out / ".checkpoint").exists(), "the checkpoint must be removed once results are written"
    return res.stderr, (out / "pdtp.csv").read_bytes()


def reused(stderr: str) -> int:
    line = next(ln for ln in stderr.splitlines() if ln.startswith("resumed: "))
    return int(line.split()[1])


def test_sigkill_then_resume_gives_identical_results(tmp_path: Path, inputs) -> None:
    csv, spec, reference = inputs
    out = tmp_path / "out"
    proc = start(csv, spec, out, 1, "--quiet")  # 8 chunks in turn: 7 are left when the first is saved
    wait_for_first_chunk(proc, out)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "pdtp.csv").exists() and not (out / "pdtp.json").exists()

    # a plain rerun must not silently discard or continue the interrupted run
    plain = run_cli("pdtp", csv, "--model", spec, "--out", out, "--engine", "refit", "--quiet")
    assert plain.code == 2 and "--resume" in plain.stderr
    # --resume refuses a checkpoint made with another spec or other value-changing options
    res = run_cli("pdtp", csv, "--model", spec, "--out", out, "--engine", "refit", "--resume", "--seed", "7")
    assert res.code == 2 and "cannot resume" in res.stderr and "different spec" in res.stderr
    res = run_cli("pdtp", csv, "--model", spec, "--out", out, "--engine", "refit", "--resume", "--sample", "5")
    assert res.code == 2 and "run options (sample: None then, 5 now)" in res.stderr

    stderr, got = resume(csv, spec, out)
    assert 0 < reused(stderr) < N
    assert got == reference
    summary = json.loads((out / "pdtp.json").read_text())["summary"]
    assert summary["n"] == N


def test_ctrl_c_exits_130_after_saving_then_resumes(tmp_path: Path, inputs) -> None:
    csv, spec, reference = inputs
    out = tmp_path / "out"
    proc = start(csv, spec, out, 2)  # loky workers: Ctrl-C must stop them too
    wait_for_first_chunk(proc, out)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    note = [ln for ln in stderr.splitlines() if ln.startswith("mptool: interrupted")]
    assert len(note) == 1 and "--resume" in note[0] and ".checkpoint" in note[0]
    saved = int(note[0].split("; ")[1].split()[0])
    assert saved > 0
    assert not (out / "pdtp.csv").exists()

    stderr, got = resume(csv, spec, out)
    assert reused(stderr) >= saved
    assert got == reference
