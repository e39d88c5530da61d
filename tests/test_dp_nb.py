"""mptool's epsilon-DP categorical naive Bayes (mptool.inputs.dp_nb) and its place in ``mptool mitigate``.

- the count noise is Laplace with scale (d + 1) / epsilon (KS test over seeds; a 2x error fails);
- the DP guarantee, brute force on a tiny domain: the density ratio of the noisy count vector
  between neighbours T and T \\ {t} is at most e^epsilon, from the Laplace densities in closed form;
- with a huge epsilon the model is scikit-learn's CategoricalNB (same alpha);
- the same seed gives the same model, and ``mptool pdtp`` gives the same PDTP for any --jobs;
- ``mptool mitigate`` on a categorical NB spec has DP rows (not skipped) with dtp_bound = epsilon.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, run_cli, write_spec
from scipy import stats
from sklearn.naive_bayes import CategoricalNB

import mptool.api.mitigate as api
from mptool.inputs.dp_nb import DPCategoricalNB


def tiny(n: int = 30, d: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    rng = np.random.default_rng(seed)
    sizes = tuple(range(2, 2 + d))
    X = np.column_stack([rng.integers(0, s, n) for s in sizes])
    y = np.where(rng.random(n) < 0.4, "a", "b")
    return X, y, sizes


def exact_counts(X: np.ndarray, y: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """All counts in the estimator's noise order (class counts, then each feature's table), built by loops."""
    classes = ["a", "b"]
    out = [sum(1 for v in y if v == c) for c in classes]
    for j, n in enumerate(sizes):
        out += [sum(1 for i in range(len(y)) if y[i] == c and X[i, j] == v) for c in classes for v in range(n)]
    return np.array(out, dtype=float)


def noisy_counts(m: DPCategoricalNB) -> np.ndarray:
    return np.concatenate([m.noisy_class_count_, *[t.ravel() for t in m.noisy_category_count_]])


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_count_noise_is_laplace_with_scale_d_plus_1_over_epsilon(epsilon: float) -> None:
    X, y, sizes = tiny(d=2)
    truth = exact_counts(X, y, sizes)
    noise = np.concatenate([
        noisy_counts(DPCategoricalNB(epsilon=epsilon, n_categories=sizes, classes=("a", "b"),
                                     random_state=s).fit(X, y)) - truth
        for s in range(300)
    ])
    scale = (len(sizes) + 1) / epsilon
    assert stats.kstest(noise, "laplace", args=(0.0, scale)).pvalue > 1e-3
    for wrong in (scale / 2, scale * 2):  # a sensitivity off by 2x is caught
        assert stats.kstest(noise, "laplace", args=(0.0, wrong)).pvalue < 1e-6


def laplace_log_density(z: np.ndarray, mean: np.ndarray, scale: float) -> np.ndarray:
    return (-np.abs(z - mean) / scale - np.log(2 * scale)).sum(axis=-1)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0])
def test_density_ratio_between_neighbours_is_at_most_e_to_the_epsilon(epsilon: float) -> None:
    """One binary feature, 2 classes: 2 + 2*2 = 6 cells. Output density of the noisy counts under T and
    T \\ {t}, for every t and a grid of outputs, in closed form; the largest log ratio is <= epsilon and
    reaches it (the sensitivity d + 1 = 2 is tight, not just safe)."""
    X = np.array([[0], [1], [1], [0], [1]])
    y = np.array(["a", "a", "b", "b", "b"])
    sizes = (2,)
    m = DPCategoricalNB(epsilon=epsilon, n_categories=sizes, classes=("a", "b"), random_state=0).fit(X, y)
    scale = m.noise_scale_
    assert scale == pytest.approx(2 / epsilon)
    full = exact_counts(X, y, sizes)
    grid = np.linspace(-3, 6, 7)
    points = np.array(list(itertools.product(grid, repeat=6)))
    worst = 0.0
    for t in range(len(y)):
        keep = np.arange(len(y)) != t
        loo = exact_counts(X[keep], y[keep], sizes)
        assert np.abs(full - loo).sum() == 2  # one class cell and one feature cell
        log_ratio = laplace_log_density(points, full, scale) - laplace_log_density(points, loo, scale)
        worst = max(worst, float(np.abs(log_ratio).max()))
    assert worst <= epsilon + 1e-12
    assert worst == pytest.approx(epsilon, rel=1e-9)


def test_huge_epsilon_is_sklearn_categorical_nb() -> None:
    X, y, sizes = tiny(n=200, d=3, seed=1)
    for alpha in (0.5, 1.0, 3.0):
        dp = DPCategoricalNB(epsilon=1e12, alpha=alpha, n_categories=sizes, classes=("a", "b"), random_state=7)
        ref = CategoricalNB(alpha=alpha, min_categories=np.array(sizes)).fit(X, y)
        grid = np.array(list(itertools.product(*[range(s) for s in sizes])))
        np.testing.assert_allclose(dp.fit(X, y).predict_proba(grid), ref.predict_proba(grid), rtol=0, atol=1e-9)


def test_same_seed_same_model_and_other_seed_other_model() -> None:
    X, y, sizes = tiny()

    def fitted(seed: int) -> np.ndarray:
        return DPCategoricalNB(epsilon=1.0, n_categories=sizes, classes=("a", "b"), random_state=seed).fit(X, y) \
            .predict_proba(X)

    np.testing.assert_array_equal(fitted(3), fitted(3))
    assert not np.array_equal(fitted(3), fitted(4))


def test_domain_is_required_and_enforced() -> None:
    X, y, sizes = tiny()
    with pytest.raises(ValueError, match="public domain"):
        DPCategoricalNB(epsilon=1.0).fit(X, y)
    with pytest.raises(ValueError, match="category code"):
        DPCategoricalNB(epsilon=1.0, n_categories=(1, 1), classes=("a", "b")).fit(X, y)
    with pytest.raises(ValueError, match="class set"):
        DPCategoricalNB(epsilon=1.0, n_categories=sizes, classes=("a", "c")).fit(X, y)


def small_nb(tmp_path: Path, n: int = 60, **params: object) -> tuple[Path, Path]:
    csv = tmp_path / "d.csv"
    frame = mixed_frame(n, seed=3).drop(columns=["x1"])
    frame.to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "categorical_nb", data={"train_size": 40, "categorical": ["x2"]},
                      model={"params": params})
    return csv, spec


def test_pdtp_with_dp_categorical_nb_is_deterministic_across_jobs(tmp_path: Path) -> None:
    csv, _ = small_nb(tmp_path)
    spec = write_spec(tmp_path / "dp.yaml", "dp_categorical_nb", data={"train_size": 40, "categorical": ["x2"]},
                      model={"params": {"epsilon": 1.0, "alpha": 1.0}})
    outs = []
    for jobs in ("1", "2"):
        out = tmp_path / f"out{jobs}"
        r = run_cli("pdtp", str(csv), "--model", str(spec), "--out", str(out), "--jobs", jobs, "--quiet")
        assert r.code in (0, 1), r.stderr
        outs.append(pd.read_csv(out / "pdtp.csv"))
        summary = json.loads((out / "pdtp.json").read_text())["summary"]
        assert summary["engine"] == "exact-naive-bayes"  # counts downdated under the same seeded noise
        assert summary["noise_floor"]["order_dependent"] is False  # exactly paired: counts + seeded noise
    pd.testing.assert_frame_equal(outs[0], outs[1])
    assert outs[0]["pdtp"].max() > 0  # the paired seeds do not hide t's own influence on the counts


def test_mitigate_has_dp_rows_for_categorical_nb_without_an_unfounded_epsilon_bound(tmp_path: Path) -> None:
    """The categories and classes are read from the data file (which holds T), so no DTP <= epsilon is
    claimed: dtp_bound is empty and a note says why (issue 26; tests/test_gate_models.py has the declared case)."""
    csv, spec = small_nb(tmp_path, alpha=1.0)
    result = api.mitigate(csv, spec, defences="dp", jobs=1, backend="threading")
    assert not any(n.startswith("dp: skipped") for n in result.notes)
    dp = result.table[result.table["family"] == "dp"]
    assert dp["dtp_bound"].isna().all()
    assert any(n.startswith("dp: no DTP <= epsilon claim") for n in result.notes), result.notes
    assert list(dp["setting"]) == [f"dp_categorical_nb eps={e:g}" for e in api.DP_EPSILONS]
    assert (dp["engine"] == "exact-naive-bayes").all() and (dp["fits"] == 1).all()  # no refit per record
    assert dp["accuracy"].notna().all() and dp["max_pdtp"].notna().all()


def test_mitigate_dp_row_re_audits_with_pdtp(tmp_path: Path) -> None:
    """The DP row's spec run through ``mptool pdtp`` gives the row's max PDTP (paired seeds, same noise)."""
    csv, spec = small_nb(tmp_path, alpha=1.0)
    table = api.mitigate(csv, spec, defences="dp", jobs=1, backend="threading").table
    row = table[table["setting"] == "dp_categorical_nb eps=2"].iloc[0]
    dp_spec = write_spec(tmp_path / "dp2.yaml", "dp_categorical_nb", data={"train_size": 40, "categorical": ["x2"]},
                         model={"params": {"alpha": 1.0, "epsilon": 2.0}})
    out = tmp_path / "re"
    r = run_cli("pdtp", str(csv), "--model", str(dp_spec), "--out", str(out), "--jobs", "1", "--quiet")
    assert r.code in (0, 1), r.stderr
    got = pd.read_csv(out / "pdtp.csv")
    col = next(c for c in got.columns if c in ("pdtp", "pdtp_binned"))
    assert float(got[col].max()) == pytest.approx(float(row["max_pdtp"]), rel=1e-12, abs=1e-12)


def test_fit_depends_on_t_only_as_a_set() -> None:
    """Rows in another order, same seed: the same model (why mptool.privacy.noise needs no floor for it)."""
    X, y, sizes = tiny(n=50)
    order = np.random.default_rng(1).permutation(len(y))
    model = DPCategoricalNB(epsilon=1.0, n_categories=sizes, classes=("a", "b"), random_state=5)
    first = model.fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(first, model.fit(X[order], y[order]).predict_proba(X))


def test_mitigate_skips_dp_with_a_note_when_t_lacks_a_class(tmp_path: Path) -> None:
    """The DP model's class set is the CSV's label values; when T lacks one the family is a note, not a crash."""
    from test_bad_input_dp import LACKS_HEAD, lacking_csv

    csv = lacking_csv(tmp_path)
    spec = tmp_path / "nb.yaml"
    spec.write_text(LACKS_HEAD + "model: {estimator: categorical_nb, params: {alpha: 1.0}}\n")
    result = api.mitigate(csv, spec, defences="dp", jobs=1, backend="threading")
    assert list(result.table["family"]) == ["baseline"]
    assert "dp: skipped: 1 class(es) of the label are not in T (the DP model's class set)" in result.notes
