"""Issue 15, a new user's first hour: reading real data files, init, check, estimators, lean pdtp.json.

The done-when of the issue: a UCI-census-style file (headerless, ', ' separated, '?' for
missing, the label in column 41) audits with the spec ``mptool init`` writes; a semicolon
file (decimal commas) and a Parquet file audit to the same numbers as the CSV.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, run_cli, write_spec

from mptool.inputs.bundled import ADULT_CSV
from mptool.inputs.spec import load_spec, read_yaml

PDTP_NUMBERS = ["row", "label", "pdtp", "pdtp_raw", "worst_class", "p_full", "p_loo", "violation"]


def adult_slice(n: int = 400) -> pd.DataFrame:
    """The first ``n`` rows of the bundled Adult data, as read with every cell as text (empty = missing)."""
    return pd.read_csv(ADULT_CSV, nrows=n, dtype=str, keep_default_na=False)


def census_file(path: Path, n: int = 400) -> pd.DataFrame:
    """A headerless ', '-separated file with '?' for missing and the label in column 41 (as UCI census-income).

    The 14 Adult features come first, then 27 seeded code columns (0..4), then the label.
    Returns the frame as written (column names 0..41).
    """
    adult = adult_slice(n)
    features = adult.drop(columns=["income"]).replace("", "?")
    rng = np.random.default_rng(3)
    codes = pd.DataFrame({f"c{j}": rng.integers(0, 5, size=n).astype(str) for j in range(27)})
    frame = pd.concat([features, codes, adult["income"]], axis=1)
    frame.columns = [str(i) for i in range(frame.shape[1])]
    assert frame.shape[1] == 42 and (frame == "?").to_numpy().any()
    path.write_text("\n".join(", ".join(row) for row in frame.to_numpy().tolist()) + "\n")
    return frame


def pdtp_run(tmp: Path, data: Path, spec: Path, out: str, *extra: str, fingerprint: bool = False):
    """pdtp.csv of a run; without the ``fingerprint`` column unless asked (it hashes the values as the spec reads
    them, so e.g. data.categorical changes it while the numbers stay). With ``--show-values``: the label and
    worst_class columns (how each reader reads the label) are compared too."""
    res = run_cli("pdtp", data, "--model", spec, "--out", tmp / out, "--jobs", "1", "--quiet", "--force",
                  "--show-values", *extra)
    assert res.code in (0, 1), res.stderr
    table = pd.read_csv(tmp / out / "pdtp.csv")
    return table if fingerprint else table.drop(columns=["fingerprint"], errors="ignore")


def test_census_style_file_audits_with_the_spec_init_writes(tmp_path: Path) -> None:
    data = tmp_path / "census-income.data"
    census_file(data)
    res = run_cli("init", data)
    assert res.code == 0, res.stderr
    assert "next: mptool init" in res.stderr and "mptool pdtp" in res.stderr
    raw = read_yaml(res.stdout, "init")
    assert raw["data"]["label"] == "41"  # the last column, guessed
    assert raw["data"]["read"] == {"separator": ",", "header": False, "encoding": "utf-8", "decimal": ".",
                                   "skip_spaces": True}
    assert "?" in raw["data"]["missing_values"]
    spec = tmp_path / "spec.yaml"
    spec.write_text(res.stdout)
    table = pdtp_run(tmp_path, data, spec, "out")
    assert len(table) > 100 and table["pdtp"].notna().all()
    # the same with the label named on the command line, and written unquoted in the spec
    by_flag = run_cli("init", data, "--label", "41")
    assert by_flag.code == 0 and by_flag.stdout.replace("given by --label", "") != ""
    unquoted = tmp_path / "unquoted.yaml"
    unquoted.write_text(res.stdout.replace("label: '41'", "label: 41"))
    assert "label: 41 " in unquoted.read_text()
    pd.testing.assert_frame_equal(pdtp_run(tmp_path, data, unquoted, "out2"), table)


def _three_formats(tmp: Path) -> dict[str, tuple[Path, dict]]:
    frame = mixed_frame(80, seed=11)
    frame.loc[[3, 17], "x2"] = np.nan  # empty cells, dropped the same way in each format
    csv, semi, parquet = tmp / "d.csv", tmp / "d-semi.csv", tmp / "d.parquet"
    frame.to_csv(csv, index=False)
    frame.to_csv(semi, index=False, sep=";", decimal=",")
    frame.to_parquet(parquet, index=False)
    assert "," in semi.read_text().splitlines()[1]  # decimal commas really written
    return {
        "csv": (csv, {}),
        "semicolon": (semi, {"read": {"separator": ";", "decimal": ","}}),
        "parquet": (parquet, {}),
    }


@pytest.mark.parametrize("estimator", ["gaussian_nb", "logistic_regression"])
def test_semicolon_and_parquet_files_audit_to_the_same_numbers_as_the_csv(tmp_path: Path, estimator: str) -> None:
    tables = {}
    for name, (path, data) in _three_formats(tmp_path).items():
        spec = write_spec(tmp_path / f"{name}.yaml", estimator, data=data)
        tables[name] = pdtp_run(tmp_path, path, spec, name, fingerprint=True)[[*PDTP_NUMBERS, "fingerprint"]]
    assert len(tables["csv"]) == 78
    pd.testing.assert_frame_equal(tables["semicolon"], tables["csv"])
    pd.testing.assert_frame_equal(tables["parquet"], tables["csv"])


def test_tab_separated_file_with_latin1_names_and_a_header_list(tmp_path: Path) -> None:
    frame = mixed_frame(40, seed=2)
    frame["color"] = frame["color"].replace({"red": "rouge é"})
    path = tmp_path / "d.tsv"
    path.write_bytes(frame.to_csv(index=False, header=False, sep="\t").encode("latin-1"))
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb", data={"read": {
        "separator": "\t", "encoding": "latin-1", "header": ["color", "size", "x1", "x2", "label"]}})
    table = pdtp_run(tmp_path, path, spec, "out")
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    pd.testing.assert_frame_equal(table, pdtp_run(tmp_path, csv, write_spec(tmp_path / "c.yaml", "gaussian_nb"), "o2"))
    sniffed = run_cli("init", path)
    assert sniffed.code == 0, sniffed.stderr
    read = read_yaml(sniffed.stdout, "init")["data"]["read"]
    assert read["separator"] == "\t" and read["encoding"] == "latin-1" and read["header"] is False


def test_numeric_column_names_are_accepted_unquoted(tmp_path: Path) -> None:
    frame = mixed_frame(40, seed=4)
    frame.columns = ["0", "1", "2", "3", "41"]
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False, header=False)
    text = ("data:\n  label: 41\n  drop: [1]\n  read: {header: [0, 1, 2, 3, 41]}\n"
            "model:\n  estimator: gaussian_nb\n  bins: {3: [1.5, 2.5]}\n")
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    loaded = load_spec(spec)
    assert loaded.data.label == "41" and loaded.data.drop == ["1"] and list(loaded.model.bins) == ["3"]
    res = run_cli("check", csv, "--model", spec)
    assert res.code == 0, res.stderr
    assert "label '41'" in res.stdout and "binned" in res.stdout


def test_continuous_label_is_cut_by_label_bins(tmp_path: Path) -> None:
    frame = mixed_frame(60, seed=1)
    frame["label"] = np.round(np.random.default_rng(0).normal(50, 10, size=60), 2)
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    refused = run_cli("check", csv, "--model", write_spec(tmp_path / "a.yaml", "gaussian_nb"))
    assert refused.code == 2 and "looks continuous" in refused.stderr and "data.label_bins" in refused.stderr
    spec = write_spec(tmp_path / "b.yaml", "gaussian_nb", data={"label_bins": [45, 55]})
    table = pdtp_run(tmp_path, csv, spec, "out")
    assert set(table["label"]) == {"<45", "[45, 55)", ">=55"}


def test_categorical_nb_value_categories_are_shown_and_overridable(tmp_path: Path) -> None:
    csv = tmp_path / "d.csv"
    mixed_frame(60, seed=5).to_csv(csv, index=False)
    silent = write_spec(tmp_path / "a.yaml", "categorical_nb", model={"bins": {"x1": [0.0]}})
    res = run_cli("check", csv, "--model", silent)
    assert res.code == 0, res.stderr
    assert "categorical_nb uses numeric column(s) 'x2' as categories" in res.stderr
    assert any("x2" in ln and "value categories" in ln for ln in res.stdout.splitlines())
    confirmed = write_spec(tmp_path / "b.yaml", "categorical_nb", model={"bins": {"x1": [0.0]}},
                           data={"categorical": ["x2"]})
    res2 = run_cli("check", csv, "--model", confirmed)
    assert res2.code == 0 and "categorical_nb uses" not in res2.stderr, res2.stderr
    assert any("x2" in ln and "data.categorical" in ln for ln in res2.stdout.splitlines())
    # the same model either way: each value of x2 a category
    pd.testing.assert_frame_equal(pdtp_run(tmp_path, csv, silent, "o1"), pdtp_run(tmp_path, csv, confirmed, "o2"))


def test_data_numeric_parses_a_text_column(tmp_path: Path) -> None:
    frame = mixed_frame(50, seed=6)
    text = frame.assign(x1=frame["x1"].map(str))
    path = tmp_path / "d.parquet"
    text.to_parquet(path, index=False)  # x1 stored as text: categories unless data.numeric says otherwise
    res = run_cli("check", path, "--model", write_spec(tmp_path / "a.yaml", "gaussian_nb"))
    assert any(ln.split()[:2] == ["x1", "categories"] for ln in res.stdout.splitlines()), res.stdout
    spec = write_spec(tmp_path / "b.yaml", "gaussian_nb", data={"numeric": ["x1"]})
    res = run_cli("check", path, "--model", spec)
    assert res.code == 0 and any(ln.split()[:2] == ["x1", "numbers"] for ln in res.stdout.splitlines()), res.stdout
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    plain = write_spec(tmp_path / "c.yaml", "gaussian_nb")
    pd.testing.assert_frame_equal(pdtp_run(tmp_path, path, spec, "o1"), pdtp_run(tmp_path, csv, plain, "o2"))


def test_check_prints_the_plan_and_writes_nothing(tmp_path: Path) -> None:
    csv = tmp_path / "d.csv"
    mixed_frame(60).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "logistic_regression")
    before = sorted(p.name for p in tmp_path.iterdir())
    res = run_cli("check", csv, "--model", spec, "--jobs", "1")
    assert res.code == 0, res.stderr
    out = res.stdout
    for fragment in ("T: 60 records", "2 classes in T", "engine: exact-newton-logistic", "accepts the spec",
                     "exact-naive-bayes: no, LogisticRegression is not", "DTP upper bound: lipschitz",
                     "pdtp        engine exact-newton-logistic, 1 fit(s)", "reduce-dtp", "attack"):
        assert fragment in out, (fragment, out)
    refit = run_cli("check", csv, "--model", spec, "--engine", "refit", "--jobs", "1")
    assert refit.code == 0 and "61 fit(s)" in refit.stdout, refit.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_init_chooses_logistic_regression_for_numeric_data_and_the_spec_runs(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    frame = pd.DataFrame(rng.normal(size=(80, 4)).round(3), columns=["a", "b", "c", "d"])
    frame["target"] = np.where(frame["a"] + rng.normal(size=80) > 0, "pos", "neg")
    frame = frame[["target", "a", "b", "c", "d"]]  # label not last: found by its name
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    res = run_cli("init", csv)
    assert res.code == 0, res.stderr
    raw = read_yaml(res.stdout, "init")
    assert raw["data"]["label"] == "target" and raw["model"]["estimator"] == "logistic_regression"
    spec = tmp_path / "spec.yaml"
    spec.write_text(res.stdout)
    assert run_cli("check", csv, "--model", spec).code == 0
    assert len(pdtp_run(tmp_path, csv, spec, "out")) == 80


def test_pdtp_json_holds_the_summary_and_records_only_when_asked(tmp_path: Path) -> None:
    csv = tmp_path / "d.csv"
    mixed_frame(40).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb")
    pdtp_run(tmp_path, csv, spec, "lean")
    doc = json.loads((tmp_path / "lean" / "pdtp.json").read_text())
    assert "records" not in doc and doc["summary"]["n"] == 40 and "manifest" in doc["summary"]
    assert doc["summary"]["records_file"] == "pdtp.csv"
    pdtp_run(tmp_path, csv, spec, "full", "--json-records")
    full = json.loads((tmp_path / "full" / "pdtp.json").read_text())
    assert len(full["records"]) == 40
    report = run_cli("report", tmp_path / "lean", "--out", tmp_path / "r.md")
    assert report.code == 0, report.stderr


def test_estimators_lists_every_short_name_with_its_engine_and_bound() -> None:
    from mptool.inputs.models import SHORT_NAMES

    res = run_cli("estimators")
    assert res.code == 0, res.stderr
    lines = res.stdout.splitlines()
    for name in SHORT_NAMES:
        assert any(ln.startswith(f"{name} ") for ln in lines), name
    expected = {"categorical_nb": "exact-naive-bayes", "gaussian_nb": "exact-naive-bayes",
                "logistic_regression": "exact-newton-logistic", "random_forest": "refit", "mlp": "refit"}
    for name, engine in expected.items():
        row = next(ln for ln in lines if ln.startswith(f"{name} "))
        assert engine in row, row
    assert "--allow-import" in res.stdout and "lightgbm.LGBMClassifier" in res.stdout


def test_lightgbm_through_a_dotted_path_is_seeded_and_independent_of_jobs(tmp_path: Path) -> None:
    pytest.importorskip("lightgbm")
    csv = tmp_path / "d.csv"
    mixed_frame(16, seed=3).to_csv(csv, index=False)  # 16 chunks of one refit at --jobs 2 (was 30 records)
    params = {"n_jobs": 1, "n_estimators": 5, "min_child_samples": 3}
    spec = write_spec(tmp_path / "s.yaml", "lightgbm.LGBMClassifier", model={"params": params})
    refused = run_cli("pdtp", csv, "--model", spec, "--out", tmp_path / "x", "--jobs", "1")
    assert refused.code == 2 and "--allow-import lightgbm" in refused.stderr
    # the noise floor on 5 records, not the default 20 (a third of the CPU), still in both runs and compared
    one = pdtp_run(tmp_path, csv, spec, "one", "--allow-import", "lightgbm", "--noise-floor", "5", fingerprint=True)
    two = run_cli("pdtp", csv, "--model", spec, "--out", tmp_path / "two", "--jobs", "2", "--quiet",
                  "--allow-import", "lightgbm", "--noise-floor", "5", "--show-values")
    assert two.code in (0, 1), two.stderr
    pd.testing.assert_frame_equal(one, pd.read_csv(tmp_path / "two" / "pdtp.csv"))
    doc = json.loads((tmp_path / "one" / "pdtp.json").read_text())
    assert doc["summary"]["engine"] == "refit" and doc["summary"]["spec"]["seed"] == 0


def _shipped(tmp: Path, csv: Path, spec: Path, name: str = "model.skops", **params) -> Path:
    """A(T) of ``spec`` on ``csv`` (optionally other params), saved with skops as a user would ship it."""
    import skops.io as sio

    from mptool.inputs.prepare import fit_checked, prepare

    loaded = load_spec(spec, {f"model.params.{k}": v for k, v in params.items()})
    prep = prepare(csv, loaded)
    path = tmp / name
    sio.dump(fit_checked(prep.template, prep.train), path)
    return path


@pytest.mark.parametrize("estimator", ["logistic_regression", "categorical_nb", "random_forest"])
def test_trained_model_saved_with_skops_is_checked_and_audited(tmp_path: Path, estimator: str) -> None:
    csv = tmp_path / "d.csv"
    # the forest (refit engine: a fit per record, twice) on 20 records, the exact engines on 40
    mixed_frame(20 if estimator == "random_forest" else 40, seed=9).to_csv(csv, index=False)
    model = {"bins": {"x1": [0.0]}, "params": {"n_estimators": 5}} if estimator != "logistic_regression" else {}
    if estimator == "categorical_nb":
        model = {"bins": {"x1": [0.0]}}
    spec = write_spec(tmp_path / "s.yaml", estimator, model=model, data={"categorical": ["x2"]})
    shipped = _shipped(tmp_path, csv, spec)
    # a randomized A refuses --trained; its noise floor on 5 records, not the default 20 (a third of the CPU),
    # is still measured in both runs and compared
    refit = ["--engine", "refit", "--noise-floor", "5"] if estimator == "random_forest" else []
    plain = pdtp_run(tmp_path, csv, spec, "plain", *refit)
    audited = pdtp_run(tmp_path, csv, spec, "shipped", "--trained", shipped, *refit)
    trained = json.loads((tmp_path / "shipped" / "pdtp.json").read_text())["summary"]["trained"]
    assert trained["max_abs_difference"] <= trained["tolerance"] and "model_hmac" in trained  # keyed only (issue 26)
    # p_full is the artefact's own probability (binned), computed here independently of mptool's run
    import skops.io as sio

    from mptool.privacy.calibration import bin_probabilities

    model = sio.load(shipped, trusted=sio.get_untrusted_types(file=shipped))
    frame = pd.read_csv(csv)
    X = frame.drop(columns=["label"]).assign(x2=frame["x2"].map(lambda v: str(int(v))))
    p = bin_probabilities(model.predict_proba(X), 0.01)
    col = {c: j for j, c in enumerate(model.classes_)}
    expected = [p[r, col[c]] for r, c in zip(audited["row"], audited["worst_class"], strict=True)]
    np.testing.assert_allclose(audited["p_full"], expected, rtol=0, atol=1e-12)
    if estimator == "logistic_regression":
        # the exact engine's A(T) is the exact optimum, the artefact lbfgs's: equal within 1e-6, which a
        # 0.01-wide bin edge can still split -- the audit reports the artefact's (published) probabilities
        assert (np.abs(audited["pdtp"] - plain["pdtp"]) < 1e-9).mean() >= 0.9
    else:
        pd.testing.assert_frame_equal(audited, plain)


def test_trained_model_that_is_not_the_spec_is_refused_with_the_distance(tmp_path: Path) -> None:
    csv = tmp_path / "d.csv"
    mixed_frame(40, seed=9).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "logistic_regression")
    other = _shipped(tmp_path, csv, spec, "other.skops", C=0.01)
    res = run_cli("pdtp", csv, "--model", spec, "--trained", other, "--out", tmp_path / "o", "--jobs", "1")
    assert res.code == 2, res.stderr
    assert "does not predict like A(T) of the spec: largest probability difference" in res.stderr
    assert not (tmp_path / "o").exists()


def test_trained_refuses_pickle_and_untrusted_types(tmp_path: Path) -> None:
    import pickle

    import skops.io as sio

    csv = tmp_path / "d.csv"
    mixed_frame(40, seed=9).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb")
    pkl = tmp_path / "model.pkl"
    pkl.write_bytes(pickle.dumps({"not": "loaded"}))
    res = run_cli("pdtp", csv, "--model", spec, "--trained", pkl, "--out", tmp_path / "o", "--jobs", "1")
    assert res.code == 2 and "never loads pickle" in res.stderr, res.stderr
    odd = tmp_path / "odd.skops"
    sio.dump({"f": Path("x")}, odd)  # a pathlib type: not scikit-learn, not mptool
    res = run_cli("pdtp", csv, "--model", spec, "--trained", odd, "--out", tmp_path / "o", "--jobs", "1")
    assert res.code == 2 and "does not trust" in res.stderr, res.stderr


@pytest.mark.parametrize("fmt", ["semicolon", "census", "parquet"])
def test_write_clean_of_another_format_reproduces_the_best_max(tmp_path: Path, fmt: str) -> None:
    if fmt == "census":
        data = tmp_path / "census.data"
        census_file(data, 120)
        spec = tmp_path / "s.yaml"
        spec.write_text(run_cli("init", data).stdout.replace("train_size: null", "train_size: 40"))
    else:
        data, extra = _three_formats(tmp_path)[fmt]
        spec = write_spec(tmp_path / "s.yaml", "gaussian_nb", data={**extra, "train_size": 40})
    clean = tmp_path / "clean.csv"
    r = run_cli("reduce-dtp", data, "--model", spec, "--max-removals", "2", "--jobs", "1", "--out", tmp_path / "o",
                "--write-clean", clean, "-q")
    assert r.code in (0, 1), r.stderr
    doc = json.loads((tmp_path / "o" / "reduce.json").read_text())
    check = run_cli("pdtp", clean, "--model", tmp_path / "o" / "clean-spec.yaml", "--jobs", "1",
                    "--out", tmp_path / "chk", "-q")
    assert check.code in (0, 1), check.stderr
    summary = json.loads((tmp_path / "chk" / "pdtp.json").read_text())["summary"]
    assert summary["n"] == doc["clean"]["records"]
    # gaussian_nb does not use the numeric domains; categorical_nb's are pinned by the clean spec
    assert summary["max"] == pytest.approx(doc["best_max"], abs=1e-12)


def test_attack_targets_the_trained_artefact_too(tmp_path: Path) -> None:
    csv = tmp_path / "d.csv"
    mixed_frame(120, seed=9).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb", data={"train_size": 40})
    shipped = _shipped(tmp_path, csv, spec)
    args = ["attack", csv, "--model", spec, "--candidates", "40", "--iterations", "2", "--targets", "10",
            "--shadows", "2", "--pairs", "1", "--pdtp-iterations", "1", "--attacks", "threshold", "--jobs", "1", "-q"]
    res = run_cli(*args, "--out", tmp_path / "o", "--trained", shipped)
    assert res.code in (0, 1), res.stderr
    art = json.loads((tmp_path / "o" / "attack.json").read_text())["summary"]["artefact"]
    assert art["members"] == 40 and art["non_members"] == 40 and 0.0 <= art["accuracy"] <= 1.0
    assert "model_hmac" in art and "artefact (--trained): threshold attack on 40 members" in res.stdout
    # independently: the artefact's loss on T and on 40 rows outside T, threshold at its mean training loss
    import skops.io as sio

    from mptool.attacks.threshold import cross_entropy
    from mptool.inputs.prepare import prepare
    from mptool.privacy.calibration import bin_probabilities

    prep = prepare(csv, load_spec(spec))
    model = sio.load(shipped, trusted=sio.get_untrusted_types(file=shipped))
    y_idx = {c: i for i, c in enumerate(model.classes_)}
    losses_in = cross_entropy(bin_probabilities(model.predict_proba(prep.train.X), 0.01),
                              np.array([y_idx[v] for v in prep.train.y]))
    assert art["tau"] == pytest.approx(losses_in.mean(), abs=1e-12)
    gated = run_cli(*args, "--out", tmp_path / "g", "--trained", shipped, "--max-accuracy", "0.0")
    assert gated.code == 1 and "artefact threshold accuracy" in gated.stdout, gated.stdout
