"""Benchmark: where the test suite's time goes, per file and per test (issue 25).

Runs each given test file in its own ``pytest`` child process, one after another (no xdist), and
prints per file: wall seconds, CPU seconds of the pytest process itself and of everything it
started (subprocesses, loky workers), the number of tests, and the share of the total. CPU is the
child's user + system time from ``os.wait4``, which includes every descendant the child waited for;
the plugin part of this file (loaded into the child with ``-p bench_suite``) shuts joblib's loky
workers down at the end of the session, so their CPU is counted too.

``--tests N`` also prints the N most expensive tests by CPU (this process, its reaped children and
the CPU its live worker processes used meanwhile), from all files measured.

The suite's goal (issue 25): <= 150 s wall and <= 120 CPU s on an idle 2-core machine. Running every
file costs about as much CPU as the suite: pass the files you care about; ``--all`` runs them all.

Usage: python benchmarks/bench_suite.py tests/test_pdtp.py tests/test_signals.py [--tests 15]
       python benchmarks/bench_suite.py --all
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: Environment variable naming the file where the plugin appends one JSON line per test.
OUT_ENV = "MPTOOL_BENCH_SUITE_OUT"


# --- plugin, loaded into the pytest child with ``-p bench_suite`` -------------------------------
def _live_children_cpu() -> float:
    """CPU seconds used so far by the live descendants of this process (loky workers)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with distributed (the test extra)
        return 0.0
    total = 0.0
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            total += t.user + t.system
    return total


def _cpu_now() -> float:
    """CPU of this process, its reaped children and its live children."""
    self_ = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return self_.ru_utime + self_.ru_stime + kids.ru_utime + kids.ru_stime + _live_children_cpu()


def pytest_runtest_protocol(item: Any, nextitem: Any) -> None:
    item._bench_suite = (_cpu_now(), time.perf_counter())


def pytest_runtest_makereport(item: Any, call: Any) -> None:
    if call.when != "teardown" or not os.environ.get(OUT_ENV):
        return
    cpu0, wall0 = getattr(item, "_bench_suite", (None, None))
    if cpu0 is None:
        return
    with open(os.environ[OUT_ENV], "a") as fh:
        fh.write(json.dumps({"test": item.nodeid, "cpu": _cpu_now() - cpu0,
                             "wall": time.perf_counter() - wall0}) + "\n")


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """Stop joblib's reusable loky workers and wait for them, so that their CPU counts."""
    with contextlib.suppress(Exception):
        from joblib.externals.loky import get_reusable_executor

        get_reusable_executor().shutdown(wait=True, kill_workers=False)


# --- the driver ----------------------------------------------------------------------------------
def run_file(path: str, out: str) -> dict[str, Any]:
    """Run one test file in a pytest child; its wall and CPU (self + waited-for descendants)."""
    env = {**os.environ, OUT_ENV: out,
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-p", "no:cacheprovider", "-p", "bench_suite",
           "-p", "no:xdist", path]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    stdout = proc.stdout.read() if proc.stdout else ""
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    summary = next((ln for ln in reversed(stdout.splitlines()) if " in " in ln and ("passed" in ln or "failed" in ln
                                                                                   or "error" in ln)), "")
    return {"file": path, "wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rc": proc.returncode, "summary": summary}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="test files (paths from the repository root)")
    ap.add_argument("--all", action="store_true", help="every tests/test_*.py (costs about the whole suite)")
    ap.add_argument("--tests", type=int, default=10, help="print the N most expensive tests by CPU (0: none)")
    args = ap.parse_args()
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py")) if args.all else args.files
    if not files:
        ap.error("name test files or pass --all")
    load0 = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "tests.jsonl")
        for f in files:
            row = run_file(f, out)
            rows.append(row)
            print(f"{row['file']}: {row['cpu']:.1f} CPU s, {row['wall']:.1f} s wall, rc {row['rc']}, "
                  f"load {os.getloadavg()[0]:.2f}; {row['summary'].strip('= ')}", flush=True)
        tests = [json.loads(ln) for ln in Path(out).read_text().splitlines()] if os.path.exists(out) else []
    total_cpu, total_wall = sum(r["cpu"] for r in rows), sum(r["wall"] for r in rows)
    print(f"\n{'file':<48} {'CPU s':>7} {'wall s':>7} {'share':>6}")
    for r in sorted(rows, key=lambda r: -r["cpu"]):
        print(f"{r['file']:<48} {r['cpu']:7.1f} {r['wall']:7.1f} {100 * r['cpu'] / max(total_cpu, 1e-9):5.1f}%")
    print(f"{'total (' + str(len(rows)) + ' files, one process each)':<48} {total_cpu:7.1f} {total_wall:7.1f}")
    print(f"load average before {load0:.2f}, after {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    if args.tests and tests:
        print(f"\n{args.tests} most expensive tests (CPU s incl. subprocesses and workers; wall s):")
        for t in sorted(tests, key=lambda t: -t["cpu"])[: args.tests]:
            print(f"{t['cpu']:7.2f} {t['wall']:7.2f}  {t['test']}")


if __name__ == "__main__":
    main()
