"""The replicate engine's checkpoint and ``--resume`` (issue 27, docs/randomness.md section 4).

A replicate run interrupted after k tasks (Ctrl-C raised inside the k-th task, in this process)
exits 130 with its finished fits saved; ``--resume`` takes them and gives pdtp.csv and pdtp.json
(minus timings and the signature over them) byte for byte as an uninterrupted run. A checkpoint
of another spec, data or replicate setting is refused (exit 2, one line) by the checkpoint's
identity check. Known-answer data (26 rows), ``--replicates 4:8``, ``--jobs 1``: fits of a
few microseconds each, every run in-process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli, write_spec
from test_bad_input import assert_refused, snapshot

import mptool.loo.replicates as replicates
from mptool.inputs.known_answer import ESTIMATOR, MODULE, known_frame

#: Fields of pdtp.json that differ between two runs of the same audit: times and what is computed over them.
VARYING = ("timings", "signature", "out")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    d = tmp_path_factory.mktemp("rep-resume")
    known_frame(0)[0].to_csv(d / "d.csv", index=False)
    spec = write_spec(d / "s.yaml", ESTIMATOR, model={"params": {"weight_feature": 1, "noise": 1.0},
                                                      "preprocess": "none"})
    return d, d / "d.csv", spec


def _args(csv: Path, spec: Path, out: Path, *extra: str) -> list:
    return ["pdtp", csv, "-m", spec, "--allow-import", MODULE, "--out", out, "--jobs", "1", "--replicates", "4:8",
            "-q", *extra]


def _stable(out: Path) -> dict:
    """pdtp.json without what differs between runs of one audit (times; the signature over them; --out)."""
    doc = json.loads((out / "pdtp.json").read_text())
    s = doc["summary"]
    for k in VARYING:
        s.pop(k, None)
    s["workers"].pop("fit_s", None)  # the timed fit of A(T) that chose the workers
    s["manifest"].pop("started", None)
    return doc


@pytest.fixture(scope="module")
def reference(data) -> dict[str, tuple[int, bytes, dict]]:
    """Uninterrupted runs: plain, with a budget, with --fail-fast."""
    d, csv, spec = data
    out = {}
    for name, extra in (("plain", ()), ("budget", ("--budget", "90")), ("fail_fast", ("--fail-fast",))):
        res = run_cli(*_args(csv, spec, d / f"ref-{name}", *extra))
        assert res.code in (0, 1), res.stderr
        out[name] = (res.code, (d / f"ref-{name}" / "pdtp.csv").read_bytes(), _stable(d / f"ref-{name}"))
    assert out["plain"][2]["summary"]["engine"] == "replicates"
    return out


def _interrupted(monkeypatch: pytest.MonkeyPatch, args: list, after: int, target: str = "loo_replicates") -> str:
    """Run ``args`` with Ctrl-C raised inside the ``after``-th task of ``target``: exit 130, a resume note."""
    real, calls = getattr(replicates, target), []

    def stop_later(*a):
        calls.append(1)
        if len(calls) == after:
            raise KeyboardInterrupt
        return real(*a)

    monkeypatch.setattr(replicates, target, stop_later)
    res = run_cli(*args)
    monkeypatch.setattr(replicates, target, real)
    assert res.code == 130, res.stderr
    assert "--resume" in res.stderr and "Traceback" not in res.stderr
    return res.stderr


@pytest.mark.parametrize(("name", "extra", "after", "target"), [
    ("plain", (), 3, "loo_replicates"),  # inside the first look
    ("plain", (), 6, "loo_replicates"),  # inside the second look (4 chunks a look with --jobs 1)
    ("plain", (), 6, "full_replicates"),  # inside the second look's replicates of A(T)
    ("budget", ("--budget", "90"), 3, "loo_replicates"),
    ("fail_fast", ("--fail-fast",), 2, "loo_replicates"),
])
def test_interrupted_then_resumed_is_byte_identical(data, reference, monkeypatch, tmp_path, name, extra, after,
                                                    target) -> None:
    d, csv, spec = data
    out = tmp_path / "out"
    _interrupted(monkeypatch, _args(csv, spec, out, *extra), after, target)
    assert not (out / "pdtp.csv").exists() and (out / ".checkpoint").is_dir()
    plain = run_cli(*_args(csv, spec, out, *extra))  # neither silently continued nor silently thrown away
    assert plain.code == 2 and "--resume" in plain.stderr
    calls: list[int] = []
    real = replicates.loo_replicates
    monkeypatch.setattr(replicates, "loo_replicates", lambda *a: calls.append(len(a[-1])) or real(*a))
    res = run_cli(*[a for a in _args(csv, spec, out, *extra, "--resume") if a != "-q"])  # -q hides "resumed:"
    code, csv_bytes, doc = reference[name]
    assert res.code == code, res.stderr
    assert (out / "pdtp.csv").read_bytes() == csv_bytes
    assert _stable(out) == doc
    assert json.dumps(_stable(out), sort_keys=True) == json.dumps(doc, sort_keys=True)
    assert not (out / ".checkpoint").exists()
    line = next(ln for ln in res.stderr.splitlines() if ln.startswith("resumed: "))
    reused = int(line.split()[1])
    assert reused > 0 and "fit(s)" in line
    rep = doc["summary"]["replicates"]
    assert sum(calls) < rep["fits"] - rep["full_replicates"]  # fewer pairs fitted than by an uninterrupted run
    assert sum(calls) + reused <= rep["fits"]  # and none twice


@pytest.fixture(scope="module")
def interrupted(data, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One interrupted run's folder (checkpoint kept): every refusal below leaves it as it was (asserted)."""
    d, csv, spec = data
    out = tmp_path_factory.mktemp("rep-interrupted") / "out"
    with pytest.MonkeyPatch.context() as mp:
        _interrupted(mp, _args(csv, spec, out), 3)
    return out


@pytest.mark.parametrize(("change", "fragments"), [
    (("--replicates", "4:16"), ["cannot resume", "run options (replicates: '4:8' then, '4:16' now)"]),
    (("--budget", "50"), ["cannot resume", "budget: None then, 50 now"]),
    (("--error-control", "holm"), ["cannot resume", "error_control: 'bh' then, 'holm' now"]),
    (("--seed", "7"), ["cannot resume", "different spec"]),
    (("--engine", "refit"), ["cannot resume", "engine: 'auto' then, 'refit' now"]),
])
def test_checkpoint_of_another_setting_is_refused(data, interrupted, change, fragments) -> None:  # rep-4, rep-5
    d, csv, spec = data
    args = _args(csv, spec, interrupted)
    args = [a for a in args if a != "4:8" and a != "--replicates"] if change[0] == "--replicates" else args
    before = snapshot(interrupted.parent)
    res = run_cli(*args, *change, "--resume")
    assert_refused(res, fragments, interrupted.parent, before)


def test_checkpoint_of_other_data_is_refused(data, interrupted, tmp_path) -> None:  # rep-5
    d, csv, spec = data
    other = tmp_path / "other.csv"
    known_frame(1)[0].to_csv(other, index=False)
    before = snapshot(interrupted.parent)
    res = run_cli(*_args(other, spec, interrupted, "--resume"))
    assert_refused(res, ["cannot resume", "data file"], interrupted.parent, before)
