"""``mptool attack``'s PDTP column says what it is for randomized training (issue 27 item 6).

The refit engine's ``pdtp_mean`` is one paired refit per iteration. For a target whose training
is randomized (detected on the first iteration's half, 3-4 fits) attack.json's
``summary.pdtp_basis`` says it is a single-refit estimate with no record decided, and a note says
so; a deterministic training says the paired refit is exact; exact engines get no block.
"""

from __future__ import annotations

import mptool
from mptool.inputs.known_answer import MODULE, known_frame, known_spec

#: A tiny attack: 2 iterations, 6 targets, one PDTP iteration, the distance attack only.
SMALL = {"attacks": "distance", "candidates": 26, "iterations": 2, "targets": 6, "shadows": 2, "pairs": 1,
         "pdtp_iterations": 1, "jobs": 1}


def _attack(**params: float):
    df = known_frame(0)[0]
    return mptool.attack(df, known_spec(0, **params), allow_import=(MODULE,), **SMALL)


def test_randomized_target_pdtp_is_a_single_refit_estimate() -> None:
    r = _attack()
    basis = r.summary["pdtp_basis"]
    assert basis["randomized"] and basis["decided"] is False
    assert basis["basis"].startswith("single-refit estimate") and "seed and row order" in basis["basis"]
    assert any("pdtp_mean is a single-refit estimate" in n for n in r.notes)
    assert basis["fits"] >= 3 and "pdtp_randomness_check" not in r.summary["fits"]  # fits stays the plan's count
    assert list(r.table.columns).count("pdtp_mean") == 1  # attack.csv's columns are unchanged


def test_deterministic_target_says_exact_and_exact_engines_say_nothing() -> None:
    r = _attack(noise=0.0, order_effect=0.0)
    assert r.summary["pdtp_basis"]["decided"] is True and not r.summary["pdtp_basis"]["randomized"]
    assert not any("single-refit" in n for n in r.notes)
    nb = mptool.attack(known_frame(0)[0].assign(x=lambda f: f["x"].astype(int).astype(str)),
                       {"data": {"label": "label"}, "model": {"estimator": "categorical_nb"}, "seed": 0}, **SMALL)
    assert "pdtp_basis" not in nb.summary


def test_estimators_and_check_say_which_engine_auto_picks_and_why(tmp_path) -> None:
    from conftest import run_cli, write_spec

    from mptool.inputs.known_answer import ESTIMATOR

    res = run_cli("estimators")
    assert res.code == 0 and "Randomness detection" in res.stdout and "-> the replicate engine" in res.stdout
    csv = tmp_path / "d.csv"
    known_frame(0)[0].to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", ESTIMATOR, model={"params": {"weight_feature": 1}, "preprocess": "none"})
    res = run_cli("check", csv, "-m", spec, "--allow-import", MODULE)
    assert res.code == 0 and "randomness: this dry run refits the largest timed subset of T" in res.stdout
