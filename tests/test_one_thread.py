"""One BLAS thread inside a fit, for any number of threads fitting at once (mptool.runtime.parallel.one_thread).

threadpoolctl's limits hold for the whole process, and each ``threadpool_limits`` block restores the
counts it saw when it began. Two blocks overlapping in two threads (``--backend threading``, Dask's
in-process workers) lifted the limit under the second one's fits and then left the process at one BLAS
thread for good (seen with numpy's OpenBLAS 0.3.31 when the main thread had set no limit before): later
tests in that pytest process ran with other BLAS settings than the earlier ones. threadpoolctl is
replaced by a recorder here (whether a thread's setting takes effect is the BLAS build's business); the
threads step through the overlap with events, no sleeps.
"""

from __future__ import annotations

import threading

import pytest
import threadpoolctl

from mptool.runtime import parallel
from mptool.runtime.parallel import one_thread


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """threadpoolctl.ThreadpoolController replaced (and one_thread's kept controller dropped): each limit
    set and each restore, in order."""
    calls: list[str] = []

    class Recorder:
        def __init__(self, limits: int, user_api: str | None = None) -> None:
            assert limits == 1
            self.user_api = user_api
            calls.append(f"set {user_api}")

        def restore_original_limits(self) -> None:
            calls.append(f"restore {self.user_api}")

    class Controller:
        def limit(self, *, limits: int, user_api: str | None = None) -> Recorder:
            return Recorder(limits, user_api)

    monkeypatch.setattr(threadpoolctl, "ThreadpoolController", Controller)
    monkeypatch.setattr(parallel, "_CONTROLLER", [None, -1])
    return calls


def test_overlapping_blocks_set_once_and_restore_after_the_last(limits: list[str]) -> None:
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, list[str]] = {}

    def first() -> None:
        with one_thread("blas"):
            a_in.set()
            b_in.wait(60)
        a_out.set()  # left while the other thread is still inside

    def second() -> None:
        a_in.wait(60)
        with one_thread("blas"):
            b_in.set()
            a_out.wait(60)
            seen["after the first left"] = list(limits)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert all(not t.is_alive() for t in threads) and a_out.is_set()
    assert seen["after the first left"] == ["set blas"]  # still limited under the second one's fits
    assert limits == ["set blas", "restore blas"]  # the counts from before the first block, restored once


def test_blocks_in_turn_and_nested_blocks_of_every_library(limits: list[str]) -> None:
    """The attack protocol limits every library, its engines BLAS inside; blocks in turn set and restore each."""
    with one_thread(None):
        with one_thread("blas"):
            pass
    with one_thread("blas"):
        pass
    assert limits == ["set None", "set blas", "restore blas", "restore None", "set blas", "restore blas"]


def test_an_error_inside_still_restores(limits: list[str]) -> None:
    with pytest.raises(KeyError), one_thread("blas"):
        raise KeyError("x")
    assert limits == ["set blas", "restore blas"]
    with one_thread("blas"):  # and the next block sets the limit again
        pass
    assert limits[2:] == ["set blas", "restore blas"]


def test_the_controller_is_kept_until_a_module_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    """one_thread reuses threadpoolctl's view of the loaded libraries (reading it costs ~5 CPU ms), and makes
    it again once sys.modules has grown (an import may load another native thread pool)."""
    import sys
    import types

    made: list[object] = []

    class Controller:
        def __init__(self) -> None:
            made.append(self)

    monkeypatch.setattr(threadpoolctl, "ThreadpoolController", Controller)
    monkeypatch.setattr(parallel, "_CONTROLLER", [None, -1])
    first = parallel._controller()
    assert parallel._controller() is first and len(made) == 1
    monkeypatch.setitem(sys.modules, "mptool_test_one_thread_new_module", types.ModuleType("m"))
    assert parallel._controller() is not first and len(made) == 2
