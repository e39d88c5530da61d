"""SIGINT and SIGTERM end a run with the checkpoint saved, exit 130/143, a resume hint, and no half-trained result.

scikit-learn's MLPClassifier catches KeyboardInterrupt in its training loop and returns the
half-trained model; a Ctrl-C at --jobs 1 used to let the run go on (exit 1, one record's
PDTP from that model). The subprocess tests send real signals to a real mptool while an MLP
fit is under way: the spec's MLP (``held_estimators.HeldMLP``, scikit-learn's MLPClassifier)
prints one line per epoch (``verbose``), and once the first chunk is saved, every fit that
reaches epoch ``HOLD_AT`` of ``EPOCHS`` waits there until the test has sent its signal, so
the signal always lands inside a fit, however loaded the machine; at --jobs 1 the test then
checks that this fit never finished and no fit started after it. Each run is resumed and
compared byte for byte with an uninterrupted one. No wall-clock assumptions.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import mixed_frame, run_cli, write_spec
from held_estimators import HOLD_AT, hold_env, wait_for_hold

from mptool.runtime import signals
from mptool.runtime.lock import LOCK_NAME

N = 30
SAMPLE = "6"  # 6 leave-one-out refits (+ the fit on T) per pdtp run
EPOCHS = 60  # three times HOLD_AT: a fit held at HOLD_AT is far from its end (was 200: 3x the CPU per fit)
SLOW_MLP = {  # the paper's network (mptool's `mlp`); every fit runs all its epochs and prints each one
    "hidden_layer_sizes": [64],
    "activation": "tanh",
    "learning_rate_init": 0.01,
    "solver": "sgd",
    "max_iter": EPOCHS,
    "tol": 0.0,
    "n_iter_no_change": 100000,
    "verbose": True,
}
LEAK_WORDS = ("resource_tracker", "leaked", "Traceback", "warning")
EPOCH_LINE = re.compile(r"^Iteration (\d+), loss")


@pytest.fixture(autouse=True)
def python_sigint_handler():
    """Each test starts with Python's own SIGINT handler, as under a terminal.

    A shell starts background jobs (``pytest &``, ``nohup``) with SIGINT ignored, and mptool
    rightly keeps an ignored signal ignored; the tests here are about the handled case.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="module")
def mlp_inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, bytes]:
    """A CSV, a slow-MLP spec and the pdtp.csv bytes of an uninterrupted run."""
    d = tmp_path_factory.mktemp("signals")
    csv = d / "d.csv"
    mixed_frame(N, seed=4).to_csv(csv, index=False)
    spec = write_spec(d / "mlp.yaml", "held_estimators.HeldMLP", model={"params": SLOW_MLP})
    res = run_cli(*pdtp_args(csv, spec, d / "ref", 1))
    assert res.code in (0, 1), res.stderr
    return csv, spec, (d / "ref" / "pdtp.csv").read_bytes()


def pdtp_args(csv: Path, spec: Path, out: Path, jobs: int) -> list[str]:
    return [
        "pdtp",
        str(csv),
        "--model",
        str(spec),
        "--out",
        str(out),
        "--engine",
        "refit",
        "--sample",
        SAMPLE,
        "--jobs",
        str(jobs),
        "--quiet",
        "--noise-floor",  # the noise-floor phase still runs after the resumed refits, on 2 records (default: 6)
        "2",
        "--allow-import",
        "held_estimators",
    ]


class Run:
    """``python -m mptool ARGS`` in its own process group (as a shell job), its output read as it comes.

    Its fits hold (``held_estimators``) once a checkpoint file matching ``hold_after`` exists.
    """

    def __init__(self, args: list[str], out: Path, hold_after: str) -> None:
        self.out, self.mark = out, out.parent / f"{out.name}-held"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mptool", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**hold_env(out / ".checkpoint" / hold_after, self.mark), "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
            # a shell may start background jobs with SIGINT ignored; mptool keeps an ignored signal ignored
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.lines: list[str] = []
        self.stderr: list[str] = []
        self.readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.lines), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr), daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    @staticmethod
    def _read(stream, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))

    def wait_inside_fit(self) -> None:
        """Wait until a fit holds at epoch HOLD_AT (after the first saved chunk)."""
        try:
            wait_for_hold(self.mark, lambda: self.proc.poll() is None)
        except AssertionError as exc:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
            pytest.fail(f"{exc} (exit {self.proc.returncode}): {self.stderr}")

    def finish(self, expected: int) -> str:
        """Wait for the end; the output pipes must close, so a worker or tracker outliving mptool fails the test."""
        for reader in self.readers:
            reader.join(timeout=600)
        if any(reader.is_alive() for reader in self.readers):
            os.killpg(self.proc.pid, signal.SIGKILL)
            pytest.fail("output stayed open: a worker or resource tracker outlived the interrupted run")
        self.proc.wait(timeout=60)
        stderr = "\n".join(self.stderr)
        assert self.proc.returncode == expected, stderr
        assert_no_process_left(self.proc.pid)
        for word in LEAK_WORDS:
            assert word not in stderr, stderr
        return stderr

    def last_fit_epochs(self) -> list[int]:
        """The epoch numbers printed by the last fit that started (from its last "Iteration 1")."""
        epochs = [int(m.group(1)) for ln in self.lines if (m := EPOCH_LINE.match(ln))]
        start = max((i for i, e in enumerate(epochs) if e == 1), default=0)
        return epochs[start:]


def assert_no_process_left(pgid: int) -> None:
    """Every process of the run's group (workers, resource trackers) has ended."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.killpg(pgid, signal.SIGKILL)
    pytest.fail("processes of the interrupted run are still alive")


def hint(stderr: str, signame: str, out: Path) -> int:
    """The one 'interrupted' line: names the signal, how to resume; returns the count of saved items."""
    lines = [ln for ln in stderr.splitlines() if "interrupted" in ln]
    assert len(lines) == 1, stderr
    line = lines[0]
    assert line.startswith(f"mptool: interrupted by {signame}; "), line
    assert f" are saved in {out / '.checkpoint'}; " in line, line
    assert line.endswith(f"rerun the same command with --resume --out {out} to continue"), line
    return int(line.split("; ")[1].split()[0])


def resume_pdtp(csv: Path, spec: Path, out: Path, saved: int | None = None) -> bytes:
    """``--resume`` the interrupted run (in-process); with ``saved``, it must reuse at least the items saved."""
    args = pdtp_args(csv, spec, out, 1)
    if saved is not None:
        args.remove("--quiet")  # the "resumed: N finished ..." line is an info line
    res = run_cli(*args, "--resume")
    assert res.code in (0, 1), res.stderr
    assert not (out / ".checkpoint").exists()
    if saved is not None:
        line = next(ln for ln in res.stderr.splitlines() if ln.startswith("resumed: "))
        assert int(line.split()[1]) >= saved, line
    return (out / "pdtp.csv").read_bytes()


def interrupt_pair(tmp_path: Path, csv: Path, spec: Path, jobs: int, how: dict[int, str]) -> dict[int, Run]:
    """One run per signal, each signalled inside a fit (to the process or to its whole group).

    The next run starts once the previous one is signalled (so it cannot finish unobserved)
    and starts up while the previous one shuts down.
    """
    runs = {}
    for sig, where in how.items():
        out = tmp_path / signal.Signals(sig).name
        run = Run(pdtp_args(csv, spec, out, jobs), out, "loo-*")
        run.wait_inside_fit()
        if where == "group":  # a Ctrl-C in a terminal: the workers get it too
            os.killpg(run.proc.pid, sig)
        else:  # kill PID, as CI runners and cron do
            run.proc.send_signal(sig)
        runs[sig] = run
    return runs


# ------------------------------------------------------------------ real signals, real runs


def test_signal_during_mlp_fit_at_jobs_1(tmp_path: Path, mlp_inputs) -> None:
    """Ctrl-C (SIGINT, which scikit-learn's MLP swallows) inside an MLP fit at --jobs 1: exit 130, hint, nothing
    written, lock released, resume exact.

    SIGTERM inside an MLP fit at --jobs 1 (mptool's own process, the same handler) is
    test_sigterm_during_attack_shadow_training; with loky workers, both signals: test_signal_with_loky_workers.
    """
    csv, spec, reference = mlp_inputs
    runs = interrupt_pair(tmp_path, csv, spec, 1, {signal.SIGINT: "group"})
    for sig, run in runs.items():
        stderr = run.finish(128 + sig)
        saved = hint(stderr, signal.Signals(sig).name, run.out)
        assert 0 < saved < int(SAMPLE)
        # the fit the signal hit did not run to its end (EPOCHS), and no fit started after it
        assert run.last_fit_epochs() == list(range(1, HOLD_AT + 1))
        assert not (run.out / "pdtp.csv").exists() and not (run.out / "pdtp.json").exists()
        assert not [p.name for p in run.out.rglob(".*.tmp")], "a temporary file was left behind"
        assert not (run.out / LOCK_NAME).exists(), "the --out lock must be released"
    for run in runs.values():
        assert resume_pdtp(csv, spec, run.out) == reference


def test_signal_with_loky_workers(tmp_path: Path, mlp_inputs) -> None:
    """--jobs 2: Ctrl-C to the whole process group (workers too) and SIGTERM to mptool; workers stopped, no leaks."""
    csv, spec, reference = mlp_inputs
    runs = interrupt_pair(tmp_path, csv, spec, 2, {signal.SIGINT: "group", signal.SIGTERM: "process"})
    saved = {}
    for sig, run in runs.items():
        stderr = run.finish(128 + sig)
        saved[sig] = hint(stderr, signal.Signals(sig).name, run.out)
        assert saved[sig] > 0
        assert not (run.out / "pdtp.csv").exists()
        assert not (run.out / LOCK_NAME).exists()
    for sig, run in runs.items():  # the chunks saved before the signal are reused, not refitted
        assert resume_pdtp(csv, spec, run.out, saved=saved[sig]) == reference


def test_sigterm_during_attack_shadow_training(tmp_path: Path, mlp_inputs) -> None:
    """attack: SIGTERM while an MLP shadow model trains at --jobs 1: exit 143, hint, nothing written, lock released;
    then --resume gives the clean run's bytes."""
    csv, spec, _ = mlp_inputs
    args = [
        "attack",
        str(csv),
        "--model",
        str(spec),
        "--attacks",
        "threshold",
        "--iterations",
        "2",
        "--shadows",
        "4",
        "--pdtp-iterations",
        "0",
        "--candidates",
        "20",
        "--targets",
        "4",
        "--jobs",
        "1",
        "--quiet",
        "--allow-import",
        "held_estimators",
    ]
    clean = run_cli(*args, "--out", tmp_path / "clean")
    assert clean.code in (0, 1), clean.stderr
    out = tmp_path / "out"
    run = Run([*args, "--out", str(out)], out, "task-*")
    run.wait_inside_fit()  # target models saved; a shadow model holds inside its training
    run.proc.send_signal(signal.SIGTERM)
    stderr = run.finish(143)
    assert hint(stderr, "SIGTERM", out) > 0
    assert run.last_fit_epochs() == list(range(1, HOLD_AT + 1))
    assert not (out / "attack.csv").exists() and not (out / "attack.json").exists()
    assert not [p.name for p in out.rglob(".*.tmp")], "a temporary file was left behind"
    assert not (out / LOCK_NAME).exists(), "the --out lock must be released"
    resumed = run_cli(*args, "--out", out, "--resume")
    assert resumed.code == clean.code, resumed.stderr
    assert (out / "attack.csv").read_bytes() == (tmp_path / "clean" / "attack.csv").read_bytes()


# ------------------------------------------------------------------ the swallowing code path, in-process


def _interrupt_on_epoch(monkeypatch: pytest.MonkeyPatch, epoch: int) -> list[int]:
    """Make MLPClassifier's training loop meet a KeyboardInterrupt at ``epoch`` (inside sklearn's try block)."""
    from sklearn.neural_network import MLPClassifier

    real = MLPClassifier._update_no_improvement_count
    seen: list[int] = []

    def interrupted_at(self, *args, **kwargs):
        seen.append(1)
        if len(seen) == epoch:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(MLPClassifier, "_update_no_improvement_count", interrupted_at)
    return seen


def test_swallowed_interrupt_raises_instead_of_returning_a_half_trained_model(monkeypatch) -> None:
    from sklearn.neural_network import MLPClassifier

    from mptool.attacks.untargeted import train_untargeted
    from mptool.inputs.models import fit

    X = np.random.default_rng(0).normal(size=(40, 3))
    y = (X[:, 0] > 0).astype(int)
    seen = _interrupt_on_epoch(monkeypatch, 3)
    plain = MLPClassifier(max_iter=50, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plain.fit(X, y)  # scikit-learn itself: the interrupt is swallowed, a 3-epoch model comes back
    assert plain.n_iter_ == 3 and any("Training interrupted by user" in str(w.message) for w in caught)

    seen.clear()
    with pytest.raises(signals.Interrupted) as info:
        fit(MLPClassifier(max_iter=50, random_state=0), X, y)
    assert info.value.exit_code == 130 and len(seen) == 3
    assert not isinstance(info.value, KeyboardInterrupt | Exception)

    seen.clear()
    with pytest.raises(signals.Interrupted):
        # the untargeted attack's own MLP (Long et al. Algorithm 1)
        train_untargeted(X, y, np.full((40, 2), 0.5), y.astype(bool), n_classes=2, seed=0, per_class=False)
    seen.clear()
    fit(MLPClassifier(max_iter=2, random_state=0), X, y)  # no interrupt: fits as before


def test_interrupted_in_process_refit_exits_130_and_resumes(tmp_path: Path, monkeypatch, mlp_inputs) -> None:
    """The whole CLI path in-process: an MLP refit meets a KeyboardInterrupt sklearn swallows -> 130, not exit 1."""
    csv, spec, reference = mlp_inputs
    inside_4th = 3 * EPOCHS + EPOCHS // 2  # inside the 4th fit (EPOCHS epochs each)
    seen = _interrupt_on_epoch(monkeypatch, inside_4th)
    out = tmp_path / "out"
    res = run_cli(*pdtp_args(csv, spec, out, 1))
    assert len(seen) == inside_4th
    assert res.code == 130, res.stderr
    hint(res.stderr, "SIGINT", out)
    assert not (out / "pdtp.csv").exists()
    monkeypatch.undo()
    assert resume_pdtp(csv, spec, out) == reference


# ------------------------------------------------------------------ the signals module


def test_handlers_turn_signals_into_interrupted_and_are_restored() -> None:
    before = {s: signal.getsignal(s) for s in signals.SIGNALS}
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        with pytest.raises(signals.Interrupted) as info, signals.handling_interrupts():
            signal.raise_signal(sig)
            time.sleep(1)  # not reached: the handler raises at once
        assert info.value.exit_code == code and info.value.signum == sig
        assert signals.received() is None  # reset once the command is over
    assert {s: signal.getsignal(s) for s in signals.SIGNALS} == before
    assert not issubclass(signals.Interrupted, KeyboardInterrupt | Exception)


def test_deferred_check_and_shield() -> None:
    with signals.handling_interrupts():
        with pytest.raises(signals.Interrupted), signals.deferred():
            signal.raise_signal(signal.SIGTERM)
            done = True  # the critical section runs to its end
        assert done and signals.received() == signal.SIGTERM
        with pytest.raises(signals.Interrupted):
            signals.check()  # the flag stays set: nothing after the signal is accepted
    with signals.handling_interrupts():
        signals.shield()
        signal.raise_signal(signal.SIGINT)  # after the work is done: noted, not raised
        assert signals.received() == signal.SIGINT and signals.shielded()
        signals.check()


def test_ignored_signal_stays_ignored() -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with signals.handling_interrupts():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)


def swallow_then_return(k: int) -> int:
    """A task that catches the interrupt, as a careless library would, and returns a result anyway."""
    if k == 1:
        try:
            signal.raise_signal(signal.SIGINT)
            time.sleep(1)
        except signals.Interrupted:
            pass
    return k


def test_run_tasks_drops_results_after_a_signal(tmp_path: Path) -> None:
    from mptool.runtime.checkpoint import Checkpoint, run_key
    from mptool.runtime.parallel import checkpointing, run_tasks

    ckpt = Checkpoint.open(tmp_path, run_key("test", "s" * 64, "d" * 64, {}), resume=False)
    got: list[int] = []
    with signals.handling_interrupts(), checkpointing(ckpt), pytest.raises(signals.Interrupted):
        run_tasks(swallow_then_return, [(k,) for k in range(4)], jobs=1, on_done=lambda i, r: got.append(r))
    assert got == [0]  # task 1 finished after the signal: neither used nor saved
    assert ckpt.saved_items() == 1


def test_second_signal_stops_at_once() -> None:
    """While the first interrupt is being handled, a second one goes to the caller's own handler."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("needs Python's default SIGINT handler")
    with signals.handling_interrupts():
        with pytest.raises(signals.Interrupted):
            signal.raise_signal(signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
            time.sleep(1)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_signal_after_the_work_is_done_keeps_the_results(tmp_path: Path, monkeypatch) -> None:
    """SIGTERM while the result files are written: they are written in full, the verdict's exit code stays."""
    import mptool.outputs.results as results

    csv = tmp_path / "d.csv"
    mixed_frame(30, seed=1).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "dt.yaml", "decision_tree", model={"params": {"max_depth": 2}})
    real = results.write_atomic

    def signalled(path, data):
        if path.name == "pdtp.csv":
            signal.raise_signal(signal.SIGTERM)
        return real(path, data)

    monkeypatch.setattr(results, "write_atomic", signalled)
    out = tmp_path / "out"
    res = run_cli("pdtp", csv, "--model", spec, "--out", out, "--engine", "refit", "--jobs", "1", "--quiet")
    assert res.code in (0, 1), res.stderr
    assert "SIGTERM arrived after the results were complete; they are written in full" in res.stderr
    assert (out / "pdtp.csv").exists() and (out / "pdtp.json").exists()
    assert not (out / ".checkpoint").exists()
