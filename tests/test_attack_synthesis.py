"""``--shadow-data synthesize``: Shokri et al. V-C, Algorithm 1 (mptool.attacks.synthesis).

Known answers: a threshold rule whose confident region is known (synthesised records of
class c land in c's region, above conf_min); a model that ignores its input (never strictly
confident: every record fails, each after exactly the query budget). The lock-step batch is
checked record by record against the plain one-record procedure, the parallel runner across
--jobs, and the CLI end to end.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, run_cli, write_spec

from mptool.attacks.shadows import parse_source
from mptool.attacks.synthesis import (
    Domain,
    SynthesisParams,
    paper_params,
    perturb,
    schema_domain,
    synthesize_batch,
    synthesize_record,
    synthesize_records,
)
from mptool.inputs.models import fit
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import parse_spec

LEVELS = 10


def grid_domain(m: int = 5) -> Domain:
    """m numeric features, each over 0..9."""
    return Domain(tuple(f"x{j}" for j in range(m)), tuple(np.arange(LEVELS, dtype=float) for _ in range(m)),
                  tuple(np.dtype(float) for _ in range(m)))  # fmt: skip


def threshold_rule(X: pd.DataFrame) -> np.ndarray:
    """P(class 1) = sigmoid(2 (x0 - 4.5)): class 1 iff x0 >= 5, more confident further from the edge."""
    p1 = 1.0 / (1.0 + np.exp(-2.0 * (X["x0"].to_numpy(dtype=float) - 4.5)))
    return np.column_stack([1.0 - p1, p1])


def ignores_input(X: pd.DataFrame) -> np.ndarray:
    """Every record gets (0.5, 0.5): no class is ever strictly the argmax."""
    return np.full((len(X), 2), 0.5)


def params(max_queries: int = 200, conf_min: float = 0.9) -> SynthesisParams:
    return SynthesisParams(k_max=3, k_min=1, rej_max=10, conf_min=conf_min, max_queries=max_queries)


def rngs(n: int, seed: int = 7) -> list[np.random.Generator]:
    return [np.random.default_rng([seed, i]) for i in range(n)]


def test_threshold_rule_records_land_in_their_class_region() -> None:
    dom, n = grid_domain(), 60
    labels = np.arange(n) % 2
    out = synthesize_batch(threshold_rule, dom, labels, rngs(n), params())
    assert out.ok.all()
    x0 = out.codes[:, 0]  # code == value on this grid
    conf = threshold_rule(dom.decode(out.codes))[np.arange(n), labels]
    assert np.all(x0[labels == 1] >= 5) and np.all(x0[labels == 0] <= 4)
    assert np.all(conf > 0.9) and np.allclose(conf, out.confidence)
    # conf_min 0.9 needs |x0 - 4.5| >= 1.5: class 1 at 6..9, class 0 at 0..3
    assert np.all(x0[labels == 1] >= 6) and np.all(x0[labels == 0] <= 3)


def test_batch_equals_the_one_record_procedure() -> None:
    """Lock-step batching changes nothing: each record as Algorithm 1 alone with the same generator."""
    dom, n = grid_domain(), 24
    labels = np.arange(n) % 2
    batch = synthesize_batch(threshold_rule, dom, labels, rngs(n), params(max_queries=15, conf_min=0.97))
    for i, rng in enumerate(rngs(n)):
        x, q, conf = synthesize_record(threshold_rule, dom, int(labels[i]), rng,
                                       params(max_queries=15, conf_min=0.97))  # fmt: skip
        assert q == batch.queries[i] and conf == batch.confidence[i] and (x is not None) == batch.ok[i]
        if x is not None:
            assert np.array_equal(x, batch.codes[i])
    assert batch.ok.any() and not batch.ok.all()  # both outcomes are exercised


def test_query_budget_is_respected_and_failures_counted() -> None:
    dom, n = grid_domain(), 10
    out = synthesize_batch(ignores_input, dom, np.arange(n) % 2, rngs(n), params(max_queries=37))
    assert not out.ok.any()
    assert np.all(out.queries == 37) and out.total_queries == 37 * n
    tight = synthesize_batch(threshold_rule, dom, np.arange(n) % 2, rngs(n), params(max_queries=2))
    assert tight.queries.max() <= 2


def test_perturb_changes_exactly_k_features_of_variable_domains() -> None:
    sizes = np.array([2, 1, 5, 3, 2, 4])
    rng = np.random.default_rng(0)
    x = rng.integers(0, sizes)
    for k in (1, 2, 5, 9):
        y = perturb(x, k, sizes, rng)
        changed = np.flatnonzero(x != y)
        assert len(changed) == min(k, int((sizes > 1).sum())) and 1 not in changed
        assert np.all(y < sizes)


def test_paper_params_scale_with_the_features() -> None:
    assert paper_params(600, 50) == SynthesisParams(128, 4, 10, 0.2, 50)  # Shokri et al. VI-E
    small = paper_params(14, 50)
    assert 1 <= small.k_min <= small.k_max <= 14


def test_parse_source_synthesize() -> None:
    assert parse_source("synthesize") == ("synthesize", 1000.0)
    assert parse_source("synthesize:25") == ("synthesize", 25.0)


def mixed_setup(tmp_path: Path) -> tuple[Path, Path]:
    csv = tmp_path / "d.csv"
    mixed_frame(240, seed=3).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "logistic_regression", model={"params": {"C": 10.0}})
    return csv, spec


def test_schema_domain_and_parallel_runner_do_not_depend_on_jobs(tmp_path: Path) -> None:
    csv, _ = mixed_setup(tmp_path)
    spec = parse_spec({"data": {"label": "label", "train_size": None}, "model": {"estimator": "logistic_regression"},
                       "seed": 0})  # fmt: skip
    prep = prepare(csv, spec)
    D = prep.population
    dom = schema_domain(D.schema, D.X)
    assert list(dom.values[0]) == sorted(set(D.X["color"]))  # categories as they are
    assert len(dom.values[2]) == 20 and dom.values[2].min() == D.X["x1"].min()  # x1: 20 points over its range
    assert set(dom.values[3]) == set(D.X["x2"])  # x2: 5 distinct values, kept
    classes = np.array(sorted(set(D.y)), dtype=object)
    model = fit(prep.template, D.X, D.y)
    args = (model, classes, 0.01, dom, 300, 5, paper_params(4, 60))
    one = synthesize_records(*args, jobs=1)
    two = synthesize_records(*args, jobs=2)
    for a, b in zip((one.codes, one.ok, one.queries, one.confidence), (two.codes, two.ok, two.queries,
                                                                       two.confidence), strict=True):  # fmt: skip
        assert np.array_equal(a, b)
    assert one.ok.sum() > 100


def attack_argv(csv: Path, spec: Path, out: Path, *extra: str) -> list[str]:
    return ["attack", str(csv), "--model", str(spec), "--out", str(out), "--candidates", "120", "--targets", "30",
            "--iterations", "2", "--pdtp-iterations", "0", "--shadows", "3", "--attacks", "untargeted,threshold",
            "--shadow-data", "synthesize:200", *extra]  # fmt: skip


@pytest.fixture(scope="module")
def jobs1_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, object]:
    """The synthesising attack of :func:`attack_argv` at --jobs 1, run once for the module (two tests read it):
    the data, the spec, the output folder and run_cli's result."""
    d = tmp_path_factory.mktemp("synth-j1")
    csv, spec = mixed_setup(d)
    return csv, spec, d / "j1", run_cli(*attack_argv(csv, spec, d / "j1", "--jobs", "1"))


@pytest.mark.parametrize("jobs", ["2"])
def test_cli_end_to_end_and_same_result_across_jobs(tmp_path: Path, jobs: str, jobs1_run) -> None:
    csv, spec, j1, one = jobs1_run
    assert one.code == 0, one.stderr
    assert "model-based shadow data (Shokri V-C)" in one.stderr and "queries of A(D1)" in one.stderr
    assert "model-based shadow data:" in one.stdout
    many = run_cli(*attack_argv(csv, spec, tmp_path / "jn", "--jobs", jobs))
    assert many.code == 0, many.stderr
    a = json.loads((j1 / "attack.json").read_text())
    b = json.loads((tmp_path / "jn" / "attack.json").read_text())
    syn = a["summary"]["synthesis"]
    assert syn == b["summary"]["synthesis"]
    assert syn["requested"] == 120 and syn["synthesized"] + syn["failed"] == 120 and syn["queries"] > 0
    assert syn["queries"] <= 120 * 200
    assert sum(v["requested"] for v in syn["per_class"].values()) == 120
    assert a["summary"]["fits"]["synthesis_model"] == 1 and a["summary"]["fits"]["shadow_synthetic"] == 3
    assert sum(a["summary"]["plan"]["fits"].values()) == a["summary"]["fits"]["total"]
    assert a["attacks"]["untargeted"]["shadow_data"] == "synthesize:200"
    assert a["attacks"] == b["attacks"]
    assert (j1 / "attempts.csv").read_text() == (tmp_path / "jn" / "attempts.csv").read_text()


def test_cli_reports_records_that_fail_within_the_budget(tmp_path: Path) -> None:
    csv, spec = mixed_setup(tmp_path)
    res = run_cli(*attack_argv(csv, spec, tmp_path / "o", "--jobs", "1", "--shadow-data", "synthesize:2"))
    assert res.code == 0, res.stderr
    syn = json.loads((tmp_path / "o" / "attack.json").read_text())["summary"]["synthesis"]
    assert syn["failed"] > 0 and syn["queries"] <= 2 * 120
    assert f"{syn['failed']} of 120 records not synthesised within 2 queries each" in res.stderr


def test_decode_gives_the_domain_values_with_the_data_dtypes(tmp_path: Path) -> None:
    csv, _ = mixed_setup(tmp_path)
    spec = parse_spec({"data": {"label": "label", "train_size": None}, "model": {"estimator": "logistic_regression"},
                       "seed": 0})  # fmt: skip
    D = prepare(csv, spec).population
    dom = schema_domain(D.schema, D.X)
    codes = np.random.default_rng(0).integers(0, dom.sizes, (50, len(dom.sizes)))
    X = dom.decode(codes)
    assert list(X.columns) == list(D.X.columns) and list(X.dtypes) == list(D.X.dtypes)
    for j, name in enumerate(dom.names):
        assert list(X[name]) == list(dom.values[j][codes[:, j]])


def test_untargeted_features_auto_drops_the_record_with_synthetic_shadow_data(tmp_path: Path, jobs1_run) -> None:
    """auto: y, q (Shokri) with synthesized data, x, y, q (Long et al.) with population data; xyq forces x back."""
    from mptool.attacks.untargeted import FeatureEncoder, resolve_features

    assert resolve_features("auto", True) == "yq" and resolve_features("auto", False) == "xyq"
    assert resolve_features("xyq", True) == "xyq" and resolve_features("yq", False) == "yq"
    csv, spec = mixed_setup(tmp_path)
    frame = pd.read_csv(csv)
    prep = prepare(csv, parse_spec({"data": {"label": "label"}, "model": {"estimator": "logistic_regression"}}))
    assert FeatureEncoder.fit(frame, prep.population.schema, use_record=False).transform(frame).shape == (240, 0)
    assert FeatureEncoder.fit(frame, prep.population.schema).transform(frame).shape[1] > 0
    runs = {}
    _, _, auto, res = jobs1_run  # auto: the module's --jobs 1 run, no --untargeted-features (same data and spec)
    assert res.code == 0, res.stderr
    runs["auto"] = json.loads((auto / "attack.json").read_text())["attacks"]["untargeted"]
    res = run_cli(*attack_argv(csv, spec, tmp_path / "xyq", "--jobs", "1", "--untargeted-features", "xyq"))
    assert res.code == 0, res.stderr
    runs["xyq"] = json.loads((tmp_path / "xyq" / "attack.json").read_text())["attacks"]["untargeted"]
    assert runs["auto"]["features"].startswith("y, q") and runs["xyq"]["features"].startswith("x, y, q")
    assert runs["auto"]["auc"] != runs["xyq"]["auc"]  # the choice reaches the attack classifier
    pop = run_cli(*[a if a != "synthesize:200" else "population" for a in attack_argv(csv, spec, tmp_path / "p")])
    assert pop.code == 0, pop.stderr
    untargeted = json.loads((tmp_path / "p" / "attack.json").read_text())["attacks"]["untargeted"]
    assert untargeted["features"].startswith("x, y, q")
