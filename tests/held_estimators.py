"""scikit-learn estimators that wait inside a fit until the test has signalled the process.

Tests that interrupt a real ``mptool`` process need it to be inside a fit when the signal
arrives, whatever the machine's load. Started with ``MPTOOL_TEST_HOLD_WHEN=GLOB`` and
``MPTOOL_TEST_HOLD_MARK=DIR`` in its environment (inherited by loky workers), a fit that
reaches its hold point once a file matches GLOB (e.g. the first saved checkpoint chunk)
writes ``DIR/held-PID`` and waits there: the test waits for that file, then signals, and
the signal ends the wait. Nothing depends on how long anything takes. Without these
variables (the in-process reference runs) they are the scikit-learn estimators they extend.
Used with ``--allow-import held_estimators``.
"""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

from sklearn.ensemble import RandomForestClassifier
from sklearn.neural_network import MLPClassifier

WHEN, MARK = "MPTOOL_TEST_HOLD_WHEN", "MPTOOL_TEST_HOLD_MARK"
#: The epoch at which :class:`HeldMLP` holds (printed as "Iteration HOLD_AT, loss = ..." just before).
HOLD_AT = 20
#: Seconds a held fit waits for its signal before giving up (a test that never signals fails).
HOLD_LIMIT_S = 600


def hold_point() -> None:
    """Wait here for a signal when the hold is armed (see the module docstring); otherwise return at once."""
    pattern, mark = os.environ.get(WHEN), os.environ.get(MARK)
    if not pattern or not mark or not glob.glob(pattern):
        return
    Path(mark, f"held-{os.getpid()}").touch()
    deadline = time.monotonic() + HOLD_LIMIT_S
    while time.monotonic() < deadline:
        time.sleep(0.1)  # the signal's handler raises in here (a signal cuts the sleep short)
    raise RuntimeError("a held fit was never signalled")


def wait_for_hold(mark: Path, alive, timeout: float = 600.0) -> None:
    """Poll until a fit holds (``mark/held-*``); fail if ``alive()`` turns False first or after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not list(mark.glob("held-*")):
        if not alive():
            raise AssertionError("the run ended before any fit reached its hold point")
        if time.monotonic() > deadline:
            raise AssertionError("no fit reached its hold point")
        time.sleep(0.05)  # a check costs ~60 us of CPU: at 5 ms the wait cost ~0.03 CPU s per second


def hold_env(when: Path | str, mark: Path) -> dict[str, str]:
    """The environment of a held run: this one, plus the hold variables and this directory on PYTHONPATH."""
    mark.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join(p for p in (str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, WHEN: str(when), MARK: str(mark), "PYTHONPATH": path}


class HeldMLP(MLPClassifier):
    """MLPClassifier that holds after printing epoch :data:`HOLD_AT` (inside sklearn's training loop)."""

    def _update_no_improvement_count(self, *args, **kwargs):
        if self.n_iter_ == HOLD_AT:
            hold_point()
        return super()._update_no_improvement_count(*args, **kwargs)


class HeldForest(RandomForestClassifier):
    """RandomForestClassifier that holds at the start of a fit."""

    def fit(self, *args, **kwargs):
        hold_point()
        return super().fit(*args, **kwargs)
