"""Issue 29: ``--trained MODEL.onnx`` -- a shipped model from any framework that exports ONNX, run with
onnxruntime, checked against its skops twin; hostile ONNX files refused (docs/bad-input.md, onnx-N).

Models are exported in the tests: skl2onnx for the spec's scikit-learn pipeline (one input per
column, a ZipMap of probabilities), onnxmltools for LightGBM (ZipMap) and XGBoost (a probability
tensor) on numeric data with ``preprocess: none`` (one matrix input).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, run_cli, write_spec
from test_bad_input import assert_refused

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("skl2onnx")

from mptool.inputs import onnx_model  # noqa: E402
from mptool.inputs.prepare import fit_checked, prepare  # noqa: E402
from mptool.inputs.spec import load_spec  # noqa: E402

#: ONNX graphs compute in float32: 1 ulp of 1.0 is 1.2e-7, and the exported models below agree with the
#: double-precision model within a few of them. The issue asks for 1e-6; the gate itself allows 1e-5.
FLOAT32_TOLERANCE = 1e-6
#: A float64 probability this close to a bin edge (a multiple of output.bin_size) may be binned on either side
#: by its float32 twin, on another CPU or onnxruntime build: the twins are asserted within FLOAT32_TOLERANCE of
#: each other, and bin_probabilities rounds p/b to 9 decimals (1e-11 of p at b = 0.01), so twice the tolerance
#: covers both. Farther from every edge, both twins fall in the same bin on any machine.
EDGE_MARGIN = 2 * FLOAT32_TOLERANCE
BIN = 0.01  # output.bin_size of write_spec
ATTACK = ["--candidates", "40", "--iterations", "2", "--targets", "10", "--shadows", "2", "--pairs", "1",
          "--pdtp-iterations", "1", "--attacks", "threshold", "--jobs", "1", "-q"]


def _sklearn_onnx(model, X: pd.DataFrame):
    """skl2onnx export of a fitted pipeline on a DataFrame: one [None, 1] input per column (strings, float32)."""
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType

    types = [(c, FloatTensorType([None, 1]) if pd.api.types.is_numeric_dtype(X[c]) else StringTensorType([None, 1]))
             for c in X.columns]
    return to_onnx(model, initial_types=types)


def _numeric_frame(n: int, seed: int, int_labels: bool = False) -> pd.DataFrame:
    """Numeric features (3 decimals: float32 keeps them on the same side of every split) and a binary label."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)).round(3)
    y = (X[:, 0] + 0.7 * X[:, 1] + rng.normal(size=n) > 0)
    return pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2],
                         "label": y.astype(int) if int_labels else np.where(y, "yes", "no")})


def _twins(tmp: Path, csv: Path, spec: Path, convert) -> tuple[Path, Path]:
    """A(T) of the spec saved with skops and exported to ONNX by ``convert(model, X)``."""
    import skops.io as sio

    prep = prepare(csv, load_spec(spec))
    model = fit_checked(prep.template, prep.train)
    sio.dump(model, tmp / "model.skops")
    (tmp / "model.onnx").write_bytes(convert(model, prep.train.X).SerializeToString())
    return tmp / "model.skops", tmp / "model.onnx"


def _lightgbm(model, X: pd.DataFrame):
    from onnxmltools import convert_lightgbm
    from onnxmltools.convert.common.data_types import FloatTensorType

    return convert_lightgbm(model.steps[-1][1], initial_types=[("input", FloatTensorType([None, X.shape[1]]))],
                            zipmap=True)


def _xgboost(model, X: pd.DataFrame):
    import copy

    from onnxmltools import convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType

    clf = copy.deepcopy(model.steps[-1][1])
    clf.get_booster().feature_names = None  # onnxmltools reads features as f0, f1, ... (the input's columns)
    return convert_xgboost(clf, initial_types=[("input", FloatTensorType([None, X.shape[1]]))])


def _case(tmp: Path, framework: str) -> tuple[Path, Path, list[str]]:
    """(data, spec, extra flags) of one framework's twin test."""
    csv = tmp / "d.csv"
    if framework == "sklearn":
        mixed_frame(120, seed=9).to_csv(csv, index=False)
        return csv, write_spec(tmp / "s.yaml", "logistic_regression",
                               data={"categorical": ["x2"], "train_size": 40}), []
    pytest.importorskip(framework)
    pytest.importorskip("onnxmltools")
    _numeric_frame(120, 4, int_labels=framework == "xgboost").to_csv(csv, index=False)
    params = ({"n_jobs": 1, "n_estimators": 5, "min_child_samples": 3} if framework == "lightgbm"
              else {"n_jobs": 1, "n_estimators": 5, "max_depth": 3})
    est = {"lightgbm": "lightgbm.LGBMClassifier", "xgboost": "xgboost.XGBClassifier"}[framework]
    spec = write_spec(tmp / "s.yaml", est, model={"params": params, "preprocess": "none"},
                      data={"train_size": 40})
    # a LightGBM skops file holds collections.OrderedDict, trusted only when named (tests/test_gate_readers.py)
    more = ["--allow-import", "collections"] if framework == "lightgbm" else []
    return csv, spec, ["--allow-import", framework, *more]


def _allowed(extra: list[str]) -> tuple[str, ...]:
    """The modules named by ``--allow-import`` flags."""
    return tuple(v for v in extra if v != "--allow-import")


CONVERT = {"sklearn": _sklearn_onnx, "lightgbm": _lightgbm, "xgboost": _xgboost}


@pytest.mark.parametrize("framework", ["sklearn", "lightgbm", "xgboost"])
def test_onnx_artefact_predicts_and_is_attacked_like_its_skops_twin(tmp_path: Path, framework: str) -> None:
    csv, spec, extra = _case(tmp_path, framework)
    if extra:
        from mptool.inputs import prepare as prepare_mod

        prep = prepare_mod.prepare(csv, load_spec(spec), _allowed(extra))
        model = fit_checked(prep.template, prep.train)
        import skops.io as sio

        sio.dump(model, tmp_path / "model.skops")
        (tmp_path / "model.onnx").write_bytes(CONVERT[framework](model, prep.train.X).SerializeToString())
        skops_file, onnx_file = tmp_path / "model.skops", tmp_path / "model.onnx"
    else:
        skops_file, onnx_file = _twins(tmp_path, csv, spec, CONVERT[framework])
    # independently: onnxruntime's probabilities on T against the model's own (float32, FLOAT32_TOLERANCE)
    from mptool.inputs.trained import load_trained

    graph = load_trained(onnx_file).model
    twin = load_trained(skops_file, _allowed(extra)).model
    prep = prepare(csv, load_spec(spec), _allowed(extra))
    p_twin = twin.predict_proba(prep.population.X)
    order = [list(map(str, graph.classes_)).index(str(c)) for c in twin.classes_]
    p_graph = graph.predict_proba(prep.population.X)[:, order]
    np.testing.assert_allclose(p_graph, p_twin, rtol=0, atol=FLOAT32_TOLERANCE)
    assert [str(v) for v in graph.predict(prep.population.X)] == [str(v) for v in twin.predict(prep.population.X)]
    # the attack's inputs are the binned probabilities: the same bin exactly wherever the float64 value is farther
    # than EDGE_MARGIN from every bin edge; a neighbouring bin at most where it is that close
    near = np.abs(p_twin / BIN - np.round(p_twin / BIN)) * BIN <= EDGE_MARGIN
    bins_twin, bins_graph = np.floor(np.round(p_twin / BIN, 9)), np.floor(np.round(p_graph / BIN, 9))
    np.testing.assert_array_equal(bins_graph[~near], bins_twin[~near])
    assert (np.abs(bins_graph - bins_twin)[near] <= 1).all()
    runs = {}
    for name, shipped in (("skops", skops_file), ("onnx", onnx_file)):
        res = run_cli("attack", csv, "--model", spec, *ATTACK, *extra, "--out", tmp_path / name, "--trained", shipped)
        assert res.code in (0, 1), res.stderr
        runs[name] = json.loads((tmp_path / name / "attack.json").read_text())["summary"]["artefact"]
    a, b = runs["skops"], runs["onnx"]
    assert (a["members"], a["non_members"]) == (b["members"], b["non_members"])
    if not near.any():
        # every attacked record (T and its non-members are rows of the population) is binned alike: the attack
        # computes the same numbers, so its threshold and every decision are the same, exactly. The data of all
        # three frameworks are here: their float64 probabilities lie 5.6e-6 to 1.5e-4 from the nearest edge.
        for key in ("tau", "accuracy", "precision", "recall", "advantage", "auc"):
            assert a[key] == b[key], key
    # else a record may take either bin on another machine, and the mean-loss threshold with it: only the
    # per-record bins above are compared (exactly off the edges)
    # the file digest is published only keyed (issue 26): null here, where MPTOOL_FINGERPRINT_KEY is unset
    assert a.get("model_hmac") is None and b.get("model_hmac") is None and b["path"].endswith("model.onnx")


def test_onnx_pdtp_records_the_float32_tolerance(tmp_path: Path) -> None:
    csv, spec, _ = _case(tmp_path, "sklearn")
    _, onnx_file = _twins(tmp_path, csv, spec, _sklearn_onnx)
    res = run_cli("pdtp", csv, "--model", spec, "--trained", onnx_file, "--out", tmp_path / "o", "--jobs", "1", "-q")
    assert res.code in (0, 1), res.stderr
    trained = json.loads((tmp_path / "o" / "pdtp.json").read_text())["summary"]["trained"]
    assert trained["tolerance"] == onnx_model.ONNX_TOLERANCE
    assert trained["max_abs_difference"] <= FLOAT32_TOLERANCE


def _pdtp(tmp: Path, csv: Path, spec: Path, model: Path):
    return run_cli("pdtp", csv, "--model", spec, "--trained", model, "--out", tmp / "o", "--jobs", "1")


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path, Path, bytes]:
    """(data, spec, onnx file, its bytes) of the scikit-learn twin, shared by the refusal tests."""
    tmp = tmp_path_factory.mktemp("onnx")
    csv, spec, _ = _case(tmp, "sklearn")
    _, onnx_file = _twins(tmp, csv, spec, _sklearn_onnx)
    return csv, spec, onnx_file, onnx_file.read_bytes()


def _edited(exported, tmp: Path, edit) -> Path:
    """The exported graph with ``edit(model)`` applied, saved without the checker."""
    model = onnx.load_model_from_string(exported[3])
    edit(model)
    out = tmp / "edited.onnx"
    out.write_bytes(model.SerializeToString())
    return out


def test_onnx_custom_operator_is_refused(exported, tmp_path: Path) -> None:
    """onnx-1."""
    def edit(model):
        model.graph.node[0].domain = "com.microsoft"
    res = _pdtp(tmp_path, exported[0], exported[1], _edited(exported, tmp_path, edit))
    assert_refused(res, ["non-standard domain", "'com.microsoft'", "custom"])
    assert not (tmp_path / "o").exists()


def test_onnx_external_data_is_refused(exported, tmp_path: Path) -> None:
    """onnx-2."""
    def edit(model):
        t = model.graph.initializer[0]
        t.data_location = onnx.TensorProto.EXTERNAL
        entry = t.external_data.add()
        entry.key, entry.value = "location", "../../etc/passwd"
    res = _pdtp(tmp_path, exported[0], exported[1], _edited(exported, tmp_path, edit))
    assert_refused(res, ["external data", "reads only the file given"])
    assert "passwd" not in res.stderr


def test_onnx_huge_initialiser_is_refused_by_its_declared_shape(exported, tmp_path: Path) -> None:
    """onnx-3: a tensor declaring 2**40 floats in a few bytes (onnxruntime would allocate it)."""
    def edit(model):
        huge = model.graph.initializer.add()
        huge.name, huge.data_type = "huge", onnx.TensorProto.FLOAT
        huge.dims.append(1 << 40)  # no data stored: the declared shape alone says 4 TiB
    res = _pdtp(tmp_path, exported[0], exported[1], _edited(exported, tmp_path, edit))
    assert_refused(res, ["declares tensors of more than", "by their shapes"])


def test_onnx_file_over_the_size_cap_is_refused(exported, tmp_path: Path, monkeypatch) -> None:
    """onnx-4 (the cap lowered to the file's size minus one: no test writes a GiB)."""
    monkeypatch.setattr(onnx_model, "MAX_ONNX_BYTES", len(exported[3]) - 1)
    assert_refused(_pdtp(tmp_path, exported[0], exported[1], exported[2]), ["the ONNX file has", "are read"])


@pytest.mark.parametrize("content", ["text", "truncated", "empty"])
def test_onnx_garbage_and_truncated_files_are_refused(exported, tmp_path: Path, content: str) -> None:
    """onnx-5, onnx-6, onnx-7."""
    bad = tmp_path / "bad.onnx"
    half = exported[3][: len(exported[3]) // 2]
    bad.write_bytes({"text": b"this is not a protobuf \xff\xfe\x00 at all", "truncated": half, "empty": b""}[content])
    res = _pdtp(tmp_path, exported[0], exported[1], bad)
    expected = {"text": ["not an ONNX model"], "truncated": ["ONNX"], "empty": ["the ONNX file is empty"]}[content]
    assert_refused(res, expected)


def test_onnx_inputs_that_are_not_the_spec_columns_are_refused(exported, tmp_path: Path) -> None:
    """onnx-8: an input renamed (a model exported for other columns)."""
    def edit(model):
        old = model.graph.input[0].name
        model.graph.input[0].name = "colour"
        for node in model.graph.node:
            for j, name in enumerate(node.input):
                if name == old:
                    node.input[j] = "colour"
    res = _pdtp(tmp_path, exported[0], exported[1], _edited(exported, tmp_path, edit))
    assert_refused(res, ["inputs are not the spec's feature columns", "missing 'color'", "not in the spec 'colour'"])


def test_onnx_classes_that_are_not_the_labels_are_refused(exported, tmp_path: Path) -> None:
    """onnx-9: the graph's class labels renamed (another label column)."""
    def edit(model):
        for node in model.graph.node:
            for attr in node.attribute:
                if attr.name == "classlabels_strings":
                    attr.strings[:] = [b"low", b"high"]
    res = _pdtp(tmp_path, exported[0], exported[1], _edited(exported, tmp_path, edit))
    assert_refused(res, ["the model knows 2 class(es)", "not trained on this label"])


def test_onnx_matrix_width_not_the_spec_is_refused(tmp_path: Path) -> None:
    """onnx-10: a one-matrix graph of another width."""
    pytest.importorskip("lightgbm")
    pytest.importorskip("onnxmltools")
    csv, spec, extra = _case(tmp_path, "lightgbm")
    from lightgbm import LGBMClassifier

    frame = pd.read_csv(csv)
    small = LGBMClassifier(n_estimators=2, min_child_samples=3, verbose=-1).fit(frame[["a", "b"]], frame["label"])
    from onnxmltools import convert_lightgbm
    from onnxmltools.convert.common.data_types import FloatTensorType

    (tmp_path / "two.onnx").write_bytes(
        convert_lightgbm(small, initial_types=[("input", FloatTensorType([None, 2]))]).SerializeToString())
    res = run_cli("pdtp", csv, "--model", spec, *extra, "--trained", tmp_path / "two.onnx", "--out", tmp_path / "o")
    assert_refused(res, ["takes 2 features", "spec has 3 feature columns"])


def test_onnx_without_onnxruntime_says_how_to_install(exported, tmp_path: Path, monkeypatch) -> None:
    """onnx-11."""
    import sys

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime raises ImportError
    assert_refused(_pdtp(tmp_path, exported[0], exported[1], exported[2]), ["pip install 'mptool[onnx]'"])


def test_onnx_adapter_survives_a_worker_round_trip(exported) -> None:
    """The session is rebuilt from the checked bytes when the adapter is sent to a worker process."""
    import cloudpickle

    graph, _ = onnx_model.load_onnx(exported[2])
    again = cloudpickle.loads(cloudpickle.dumps(graph))
    X = pd.read_csv(exported[0]).drop(columns=["label"]).assign(x2=lambda f: f["x2"].map(lambda v: str(int(v))))
    np.testing.assert_array_equal(again.predict_proba(X), graph.predict_proba(X))  # the same graph: bit-equal


# Issue 29, item 2: XGBoost tested like LightGBM (tests/test_first_hour.py): through a dotted path, seeded and
# independent of --jobs; its skops and ONNX artefacts are the twin test above. xgboost-cpu (a 5.6 MB wheel, no
# CUDA) is in the test extra. XGBClassifier needs labels 0..k-1, so the data's label is 0/1.


def test_xgboost_through_a_dotted_path_is_seeded_and_independent_of_jobs(tmp_path: Path) -> None:
    pytest.importorskip("xgboost")
    csv = tmp_path / "d.csv"
    _numeric_frame(16, 3, int_labels=True).to_csv(csv, index=False)
    params = {"n_jobs": 1, "n_estimators": 3, "max_depth": 2}
    spec = write_spec(tmp_path / "s.yaml", "xgboost.XGBClassifier", model={"params": params, "preprocess": "none"})
    refused = run_cli("pdtp", csv, "--model", spec, "--out", tmp_path / "x", "--jobs", "1")
    assert refused.code == 2 and "--allow-import xgboost" in refused.stderr
    tables = []
    for jobs in ("1", "2"):
        res = run_cli("pdtp", csv, "--model", spec, "--out", tmp_path / jobs, "--jobs", jobs, "--quiet",
                      "--allow-import", "xgboost", "--noise-floor", "0")
        assert res.code in (0, 1), res.stderr
        tables.append(pd.read_csv(tmp_path / jobs / "pdtp.csv"))
    pd.testing.assert_frame_equal(tables[0], tables[1])  # exactly: the same fits in any worker
    doc = json.loads((tmp_path / "1" / "pdtp.json").read_text())
    assert doc["summary"]["engine"] == "refit" and doc["summary"]["n"] == 16
    assert np.isfinite(tables[0]["pdtp"]).all()
