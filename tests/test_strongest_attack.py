"""The strongest attack's TPR at 1% FPR with its bootstrap interval over targets (issue 21 item 4):
in attack.json, on the terminal and in the HTML/Markdown report."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from conftest import numeric_csv_file

from mptool.attacks.intervals import TAG_BOOTSTRAP, bootstrap_intervals
from mptool.attacks.protocol import AttackOptions, run_attack, strongest_line, summary_lines
from mptool.attacks.shadows import rng_for
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import parse_spec


@contextlib.contextmanager
def _quiet(total: int, label: str):
    yield lambda n: None


@pytest.fixture(scope="module")
def numeric_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return numeric_csv_file(tmp_path_factory.mktemp("num") / "numeric.csv", 600, 4)


def _spec(seed: int):
    return parse_spec(
        {
            "data": {"label": "label", "train_size": None},
            "model": {"estimator": "gaussian_nb", "params": {}, "preprocess": "none"},
            "output": {"bin_size": 0.01},
            "seed": seed,
        }
    )


OPTIONS = dict(candidates=120, targets=40, iterations=3, shadow_pool=16, pdtp_iterations=0, jobs=1)


def test_interval_contains_the_point_and_is_deterministic_for_a_seed(numeric_csv: Path) -> None:
    runs = [run_attack(prepare(numeric_csv, _spec(seed)), AttackOptions(**OPTIONS), _quiet) for seed in (4, 4, 9)]
    best = runs[0].summary["strongest_attack"]
    ci = best["tpr_at_1pct_fpr_interval"]
    own = runs[0].attacks[best["name"]]["intervals"]
    assert ci == {**own["tpr_at_1pct_fpr"], **{k: own[k] for k in ("confidence", "resamples", "targets", "method")}}
    assert ci["estimable"] is True and ci["confidence"] == 0.95 and ci["resamples"] == 1000 and ci["targets"] == 40
    assert 0.0 <= ci["low"] <= best["tpr_at_1pct_fpr"] <= ci["high"] <= 1.0
    assert ci["low"] < ci["high"]  # 40 targets: the draw of targets matters
    assert runs[1].summary["strongest_attack"] == best  # same seed, same interval
    assert runs[2].summary["strongest_attack"]["tpr_at_1pct_fpr_interval"] != ci  # the seed draws it
    # the interval is the bootstrap of the attempts in attempts.csv, drawn from the documented generator
    a = runs[0].attempts
    a = a[a["attack"] == best["name"]]
    shape = (OPTIONS["iterations"], 2, OPTIONS["targets"])
    member, score = a["member"].to_numpy().reshape(shape) == 1, a["score"].to_numpy().reshape(shape)
    decision = a["decision"].to_numpy().reshape(shape) == 1
    names = list(runs[0].attacks)
    again = bootstrap_intervals(member, decision, score, rng_for(4, TAG_BOOTSTRAP, names.index(best["name"])))
    assert again["tpr_at_1pct_fpr"] == own["tpr_at_1pct_fpr"]


def test_not_estimable_below_one_hundred_nonmember_attempts(numeric_csv: Path) -> None:
    small = {**OPTIONS, "targets": 20, "iterations": 2}  # 40 non-member attempts: 1% FPR cannot be observed
    outcome = run_attack(prepare(numeric_csv, _spec(4)), AttackOptions(**small), _quiet)
    best = outcome.summary["strongest_attack"]
    assert best["tpr_at_1pct_fpr_interval"]["estimable"] is False
    line = [x for x in summary_lines(outcome) if x.startswith("strongest attack")]
    assert line == [
        f"strongest attack: {best['name']}, TPR {best['tpr_at_1pct_fpr']:.3f} [interval not estimable: fewer than "
        f"100 non-member attempts] at 1% FPR (AUC {best['auc']:.3f}; 40 non-member attempts)"
    ]


def test_terminal_attack_json_and_report_name_the_strongest_attack(cli, numeric_csv: Path, tmp_path: Path) -> None:
    spec = tmp_path / "nb.yaml"
    spec.write_text("data: {label: label}\nmodel: {estimator: gaussian_nb, preprocess: none}\nseed: 4\n")
    out = tmp_path / "res"
    args = ["--candidates", 120, "--targets", 40, "--iterations", 3, "--shadow-pool", 16, "--pdtp-iterations", 0]
    r = cli("attack", numeric_csv, "--model", spec, *args, "-j", 1, "-q", "--out", out)
    assert r.code == 0, r.stderr
    best = json.loads((out / "attack.json").read_text())["summary"]["strongest_attack"]
    ci = best["tpr_at_1pct_fpr_interval"]
    line = (
        f"strongest attack: {best['name']}, TPR {best['tpr_at_1pct_fpr']:.3f} "
        f"[95% interval {ci['low']:.3f}-{ci['high']:.3f}] at 1% FPR"
    )
    assert line in r.stdout
    r = cli("report", out, "--format", "both")
    assert r.code == 0, r.stderr
    sentence = (
        f"Strongest attack: {best['name']}, TPR {best['tpr_at_1pct_fpr']:.3f} at 1% FPR "
        f"(95% interval {ci['low']:.3f}–{ci['high']:.3f}, bootstrap over targets, 1000 resamples)"
    )
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    assert sentence in html
    assert sentence.replace("_", "\\_") in md  # lira_offline is escaped in Markdown


def test_report_without_an_interval_and_with_a_hostile_name(cli, tmp_path: Path) -> None:
    """An attack.json from before the interval still names the attack; a name from the file is escaped."""
    out = tmp_path / "res"
    out.mkdir()
    entry = {"accuracy": 0.6, "auc": 0.65, "tpr_at_1pct_fpr": 0.05, "n_attacks": 40}
    best = {"name": "<b>x</b>", "tpr_at_1pct_fpr": 0.05, "auc": 0.65, "nonmember_attempts": 20}
    doc = {"summary": {"strongest_attack": best}, "attacks": {"<b>x</b>": entry}}
    (out / "attack.json").write_text(json.dumps(doc))
    r = cli("report", out, "--format", "both")
    assert r.code == 0, r.stderr
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    assert "Strongest attack: &lt;b&gt;x&lt;/b&gt;, TPR 0.050 at 1% FPR; AUC 0.650; 20 non-member attempts." in html
    assert "Strongest attack: &lt;b&gt;x&lt;/b&gt;, TPR 0.050 at 1% FPR; AUC 0.650; 20 non-member attempts." in md
    assert "<b>x" not in html and "interval" not in md.split("Strongest attack")[1].split("\n")[0]


def test_terminal_line_without_an_interval() -> None:
    best = {"name": "lira", "tpr_at_1pct_fpr": 0.1, "auc": 0.7, "nonmember_attempts": 200}
    assert strongest_line(best) == "strongest attack: lira, TPR 0.100 at 1% FPR (AUC 0.700; 200 non-member attempts)"
