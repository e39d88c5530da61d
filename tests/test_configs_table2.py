"""The bundled configs: every one reads strictly, and adult-nn-paper.yaml is the paper's network (issue 18 item 8)."""

from __future__ import annotations

import pytest

from mptool.inputs.bundled import CONFIG_DIR
from mptool.inputs.models import resolve_estimator
from mptool.inputs.spec import load_spec

CONFIGS = sorted(p.name for p in CONFIG_DIR.glob("*.yaml"))


def test_adult_nn_paper_is_bundled() -> None:
    assert "adult-nn-paper.yaml" in CONFIGS


@pytest.mark.parametrize("name", CONFIGS)
def test_bundled_config_reads_and_resolves(name: str) -> None:
    spec = load_spec(CONFIG_DIR / name)
    choice = resolve_estimator(spec.model, spec.seed)
    assert hasattr(choice.make(), "predict_proba")


def test_adult_nn_paper_has_the_papers_architecture_and_schedule() -> None:
    """Long et al. 5.2: 64 tanh units, learning rate 0.01, 100 epochs; here plain minibatch SGD."""
    spec = load_spec(CONFIG_DIR / "adult-nn-paper.yaml")
    est = resolve_estimator(spec.model, spec.seed).make()
    assert type(est).__name__ == "MLPClassifier"
    p = est.get_params()
    assert p["hidden_layer_sizes"] == (64,)
    assert p["activation"] == "tanh"
    assert p["solver"] == "sgd"
    assert p["learning_rate_init"] == 0.01
    assert p["max_iter"] == 100
    assert p["random_state"] == spec.seed
    assert spec.data.train_size == 1000 and spec.data.drop == ["fnlwgt"] and spec.output.bin_size == 0.01


def test_paper_configs_do_not_claim_to_be_the_papers_models() -> None:
    """The LR and adam-NN configs say what they are not (Table 2 is not reproduced by them)."""
    for name in ("adult-lr.yaml", "adult-nn.yaml", "adult-nb.yaml"):
        text = (CONFIG_DIR / name).read_text()
        assert "bench_table2.py" in text, name
        assert "the paper's LR setting" not in text and "The paper's neural network" not in text, name


def test_bench_table2_quick_runs_every_section(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/bench_table2.py --quick (issue 26): the table, the 100-target spread and every sensitivity line
    print (the sensitivity section used to crash on a dropped column that still had model.bins)."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_table2.py"  # the repo, not site-packages
    spec = importlib.util.spec_from_file_location("bench_table2_quick", path)
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up
    try:
        spec.loader.exec_module(bench)
    finally:
        sys.modules.pop(spec.name, None)
    bench.main(["--quick", "--jobs", "1"])
    out = capsys.readouterr().out
    assert "NB  Weka-style (benchmark only)" in out and "NN rows: skipped (--quick)" in out
    assert out.count("avg PDTP") >= 5 + 1  # the header and five sensitivity lines (--quick: C = 1 only)
    assert "NB, categorical columns only" in out and "LR, C = 1, rows with '?' kept (impute)" in out
    assert "table2_pdtp:" in out and "--quick" in out
