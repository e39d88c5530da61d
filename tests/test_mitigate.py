"""``output.release`` and ``mptool mitigate`` (issue 14).

- release policies: known answers of the pure function (Shokri et al. VIII-A) and of PDTP under them;
- the release sweep from the stored p_{A(T)}, p_{A(T\\{t})} arrays (no refit) equals ``mptool pdtp``
  run with each policy in the spec, record by record;
- ``mptool pdtp`` on recommended-spec.yaml re-audits to exactly the claimed max PDTP;
- the decision (known-answer table), exit codes 0/1, determinism across --jobs, the DP family
  skipped with a note (diffprivlib missing) and scored with its DTP <= eps bound (a stand-in).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, run_cli, write_spec
from sklearn.naive_bayes import GaussianNB

import mptool
import mptool.api.mitigate as api
from mptool.api.mitigate import MitigateOptions, decide, train_and_loo, with_changes
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import load_spec
from mptool.privacy.dtp import pdtp_of
from mptool.privacy.release import ReleasedClassifier, apply_policy, measured, release

P = np.array([[0.7, 0.2, 0.1], [0.4, 0.4, 0.2], [0.0, 0.25, 0.75]])


def test_release_known_answers() -> None:
    np.testing.assert_array_equal(release(P, label_only=True), [[1, 0, 0], [1, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(release(P, top_k=1), [[0.7, 0, 0], [0.4, 0, 0], [0, 0, 0.75]])
    np.testing.assert_array_equal(release(P, top_k=2), [[0.7, 0.2, 0], [0.4, 0.4, 0], [0, 0.25, 0.75]])
    np.testing.assert_array_equal(release(P, round=0), [[1, 0, 0], [0, 0, 0], [0, 0, 1]])
    t = release(P, temperature=2.0)
    expect = np.sqrt(P) / np.sqrt(P).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(t, expect, rtol=1e-12)
    assert t[2, 0] == 0.0  # a probability of 0 stays 0
    np.testing.assert_array_equal(release(P, temperature=1.0), P)
    np.testing.assert_array_equal(apply_policy(P, None), P)


def test_label_only_pdtp_is_zero_or_the_binning_cap() -> None:
    """Label-only: PDTP 0 when removing t keeps the label, ln(0.995/0.005) when it flips it (bin 0.01)."""
    full = np.array([[0.6, 0.4], [0.6, 0.4]])
    loo = np.array([[0.55, 0.45], [0.45, 0.55]])
    got = pdtp_of(release(full, label_only=True), release(loo, label_only=True), 0.01).pdtp
    np.testing.assert_allclose(got, [0.0, np.log(0.995 / 0.005)], rtol=1e-12)


def test_released_classifier_releases_what_the_model_says(mixed_csv: Path) -> None:
    X = mixed_frame(40)[["x1", "x2"]]
    y = mixed_frame(40)["label"].to_numpy()
    base = GaussianNB().fit(X, y)
    from sklearn.base import clone

    wrapped = clone(ReleasedClassifier(GaussianNB(), {"round": 1})).fit(X, y)
    np.testing.assert_array_equal(wrapped.predict_proba(X), release(base.predict_proba(X), round=1))


def learnable_frame(n: int = 60, seed: int = 3) -> pd.DataFrame:
    """:func:`mixed_frame` with a label the features predict well (issue 30: a recommendation must beat
    always predicting the majority class by more than MAJORITY_MARGIN on the rows outside T)."""
    df = mixed_frame(n, seed=seed)
    noise = np.random.default_rng(seed + 1).normal(scale=0.4, size=n)
    df["label"] = np.where(2.0 * df["x1"] + (df["color"] == "red") + noise > 0.5, "yes", "no")
    return df


def small(tmp_path: Path, estimator: str = "gaussian_nb", n: int = 60, train_size: int = 40,
          **model) -> tuple[Path, Path]:
    csv = tmp_path / "d.csv"
    learnable_frame(n).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", estimator, data={"train_size": train_size}, model={"params": model})
    return csv, spec


POLICIES = [{"top_k": 1}, {"round": 1}, {"round": 2}, {"temperature": 5.0}, {"label_only": True}]


@pytest.mark.parametrize("estimator", ["gaussian_nb", "logistic_regression"])
def test_release_sweep_from_stored_outputs_equals_pdtp_per_policy(tmp_path: Path, estimator: str) -> None:
    """No refit: one leave-one-out, then each policy applied to the stored arrays == `mptool pdtp` with it
    (both as the gate measures the release: a temperature and a top-k of all classes but one are undone)."""
    csv, spec_path = small(tmp_path, estimator)
    spec = load_spec(spec_path)
    prep = prepare(csv, spec)
    stored = train_and_loo(prep, np.arange(prep.train.n), MitigateOptions(jobs=1), api._quiet, "baseline")
    result = mptool.api.mitigate.mitigate(csv, spec, defences="release", jobs=1)
    rows = result.table.set_index("setting")
    for policy in POLICIES:
        p, q = measured(stored.p_full, policy), measured(stored.p_loo, policy)
        swept = pdtp_of(p, q, spec.output.bin_size).pdtp
        audited = mptool.pdtp(csv, with_changes(spec, release=policy), jobs=1)
        np.testing.assert_array_equal(swept, audited.table["pdtp"].to_numpy())
        name = api.describe(policy)
        assert rows.loc[name, "max_pdtp"] == audited.summary["max"]
        assert rows.loc[name, "mean_pdtp"] == audited.summary["mean"]
        assert rows.loc[name, "above_target"] == audited.summary["violations"]
        assert rows.loc[name, "fits"] == 0
    assert (result.table["family"] == "release").sum() == len(api.release_settings(spec, 2))


def cli_mitigate(tmp_path: Path, csv: Path, spec: Path, name: str, *extra: str):
    out = tmp_path / name
    res = run_cli("mitigate", csv, "--model", spec, "--out", out, *extra)
    return res, out


CASES = {
    "nb-all-families": ("gaussian_nb", {}, ()),
    "lr-sample": ("logistic_regression", {"C": 100.0}, ("--sample", "15", "--defences", "release,regularise")),
    "nb-gate-raw": ("gaussian_nb", {}, ("--gate", "raw", "--defences", "release,regularise")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_recommended_spec_reaudits_to_the_claimed_max(tmp_path: Path, case: str) -> None:
    estimator, params, extra = CASES[case]
    csv, spec = small(tmp_path, estimator, **params)
    res, out = cli_mitigate(tmp_path, csv, spec, "m", "--jobs", "1", *extra)
    assert res.code == 0, res.stderr
    claim = json.loads((out / "mitigate.json").read_text())
    rec = claim["recommended"]
    assert (out / "recommended-spec.yaml").exists() and rec["spec_file"] == "recommended-spec.yaml"
    gate = list(extra[:2]) if extra[:1] == ("--gate",) else []
    # the re-audit command carries --gate raw; never --sample: a sampled choice with an exact engine is
    # confirmed by a full audit of T (issue 26), and the command audits every record, as the gate will
    assert " ".join(gate) in rec["command"] and "--sample" not in rec["command"]
    again = run_cli("pdtp", csv, "--model", out / "recommended-spec.yaml", "--out", tmp_path / "re", "--jobs", "1",
                    *gate)
    audited = json.loads((tmp_path / "re" / "pdtp.json").read_text())["summary"]
    assert again.code == 0 and audited["max"] == rec["max_pdtp"] <= claim["target"]
    assert audited["n"] == rec["n_audited"] == claim["n_train"]
    if "--sample" in extra:
        assert claim["evidence"]["basis"] == "confirmed" and "confirmed by a full audit" in claim["sentence"]
    families = set(pd.read_csv(out / "mitigate.csv")["family"])
    assert families >= ({"baseline", "release", "regularise"} | ({"removal"} if not extra else set()))
    assert "plan:" in res.stderr and claim["sentence"] in res.stdout


def test_exit_1_when_no_setting_passes(tmp_path: Path) -> None:
    csv, spec = small(tmp_path, "decision_tree")
    res, out = cli_mitigate(tmp_path, csv, spec, "m", "--jobs", "1", "--defences", "release", "--target", "1e-9")
    assert res.code == 1, res.stderr
    summary = json.loads((out / "mitigate.json").read_text())
    assert summary["verdict"] == "fail" and summary["recommended"] is None
    assert not (out / "recommended-spec.yaml").exists()
    assert summary["sentence"].startswith("No setting keeps max PDTP within the target")
    again, _ = cli_mitigate(tmp_path, csv, spec, "m", "--jobs", "1", "--defences", "release")
    assert again.code == 2 and "--force" in again.stderr  # results are not overwritten without --force


def test_same_table_for_any_jobs(tmp_path: Path) -> None:
    csv, spec = small(tmp_path, "decision_tree")
    tables = []
    for jobs in ("1", "2"):
        res, out = cli_mitigate(tmp_path, csv, spec, f"m{jobs}", "--jobs", jobs, "--defences", "release",
                                  "--sample", "8")
        assert res.code in (0, 1), res.stderr
        tables.append(pd.read_csv(out / "mitigate.csv").drop(columns="seconds"))
    pd.testing.assert_frame_equal(tables[0], tables[1])


def test_decision_known_answer() -> None:
    """Most accurate passing recommendable setting; removal passes but is not a spec; runner-up per family."""
    table = pd.DataFrame({
        "setting": ["baseline", "round=2", "temperature=5", "alpha=3", "remove 4"],
        "family": ["baseline", "release", "release", "regularise", "removal"],
        "max_pdtp": [2.0, 0.9, 0.3, 0.8, 0.5],
        "accuracy": [0.85, 0.84, 0.84, 0.80, 0.86],
        "log_loss": [0.3, 0.35, 0.32, 0.4, 0.3],
        "passes": [False, True, True, True, True],
        "recommendable": [True, True, True, True, False],
    })
    best, runners = decide(table, 1.0)
    assert table.loc[best, "setting"] == "temperature=5"
    assert runners == {"release": "round=2", "regularise": "alpha=3", "removal": "remove 4"}


def test_a_temperature_alone_is_invertible_and_never_recommended(tmp_path: Path) -> None:
    """q = softmax(ln p / t) gives p back as q^t renormalised: nothing is hidden, so mitigate lists it
    (it does lower PDTP) but does not recommend it; rounding and top-k are not invertible."""
    from mptool.privacy.release import is_invertible

    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(4), size=200)
    q = apply_policy(p, {"temperature": 5.0})
    back = q**5.0 / (q**5.0).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(back, p, rtol=1e-9, atol=1e-12)
    assert is_invertible({"temperature": 5.0})
    assert not is_invertible({"temperature": 5.0, "round": 2}) and not is_invertible({"top_k": 1})
    assert not is_invertible(None) and not is_invertible({"label_only": True})
    csv, spec = small(tmp_path, "gaussian_nb")
    table = api.mitigate(csv, spec, defences="release", jobs=1).table
    temps = table[table["setting"].str.startswith("temperature")]
    assert len(temps) == 3 and not temps["recommendable"].any()
    assert table[table["setting"] == "round=2"]["recommendable"].all()


def test_dp_family_skipped_with_a_note_when_diffprivlib_is_missing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(api, "diffprivlib_problem", lambda: "diffprivlib cannot be imported (test)")
    csv, spec = small(tmp_path, "gaussian_nb")
    result = api.mitigate(csv, spec, defences="dp", jobs=1)
    assert list(result.table["family"]) == ["baseline"]
    assert any(n.startswith("dp: skipped: diffprivlib cannot be imported") for n in result.notes)


class _StandInGNB(GaussianNB):
    """Stands in for diffprivlib's GaussianNB (which does not import with this scikit-learn)."""

    def __init__(self, epsilon: float = 1.0, bounds=None, random_state=None) -> None:
        super().__init__()
        self.epsilon, self.bounds, self.random_state = epsilon, bounds, random_state


def test_dp_rows_carry_the_epsilon_bound(tmp_path: Path, monkeypatch) -> None:
    """With a DP estimator available, each epsilon is a row with dtp_bound = epsilon (Long et al. 4)."""
    import mptool.inputs.dpmodels as dpm

    monkeypatch.setattr(api, "diffprivlib_problem", lambda: None)
    monkeypatch.setattr(dpm, "_models", lambda: SimpleNamespace(GaussianNB=_StandInGNB))
    # |T| = 16 (was 40): each epsilon refits every record of T, 5 epsilons x 17 fits (was 5 x 41)
    csv, spec = small(tmp_path, "gaussian_nb", n=30, train_size=16)
    table = api.mitigate(csv, spec, defences="dp", jobs=1, backend="threading").table
    dp = table[table["family"] == "dp"]
    assert list(dp["dtp_bound"]) == list(api.DP_EPSILONS)
    assert (dp["fits"] == 16 + 1).all() and (dp["engine"] == "refit").all()


def test_reduce_dtp_and_pdtp_measure_the_released_model(tmp_path: Path) -> None:
    """reduce-dtp's step 0 is pdtp's max under the same release policy; the bound columns are blank under it."""
    csv, spec_path = small(tmp_path, "gaussian_nb")
    spec = with_changes(load_spec(spec_path), release={"round": 1})
    audited = mptool.pdtp(csv, spec, jobs=1)
    reduced = mptool.reduce_dtp(csv, spec, max_removals=1, jobs=1)
    assert reduced.summary["initial_max"] == audited.summary["max"]
    assert audited.summary["release"] == {"round": 1}
    assert audited.table["dtp_upper"].isna().all() and audited.summary["dtp"]["upper_bound"]["kind"] == "none"
    plain = mptool.pdtp(csv, load_spec(spec_path), jobs=1)
    assert plain.summary["release"] == {} and plain.summary["dtp"]["upper_bound"]["kind"] != "none"
    assert load_spec(spec_path).sha256() == mptool.as_spec(spec_path).sha256()  # no release: the hash is unchanged


def test_report_has_the_mitigation_section_without_record_values(tmp_path: Path) -> None:
    csv, spec = small(tmp_path, "gaussian_nb")
    res, out = cli_mitigate(tmp_path, csv, spec, "m", "--jobs", "1", "--defences", "release,regularise")
    assert res.code in (0, 1), res.stderr
    rep = run_cli("report", out, "--format", "both")
    assert rep.code == 0, rep.stderr
    html, md = (out / "report.html").read_text(), (out / "report.md").read_text()
    sentence = json.loads((out / "mitigate.json").read_text())["sentence"]
    assert 'id="plot-mitigation"' in html and "Mitigation (mptool mitigate)" in md
    assert sentence.replace("_", "\\_") in md  # setting names such as label_only are escaped in Markdown
    assert "(Pareto)" in md
    frame = mixed_frame(60, seed=3)
    for value in frame["x1"].astype(str).head(20):  # no feature value of the data reaches the report
        assert f">{value}<" not in html and f"| {value} |" not in md


def test_pareto_front_known_answer() -> None:
    from mptool.outputs.report.mitigation import pareto_front

    got = pareto_front(np.array([2.0, 0.5, 0.4, 1.0, np.nan]), np.array([0.85, 0.84, 0.80, 0.84, 0.9]))
    assert got.tolist() == [True, True, True, False, False]
