"""The shipped model as an ONNX graph: ``--trained MODEL.onnx``, run with onnxruntime, safely.

Any framework that exports ONNX (scikit-learn through skl2onnx, LightGBM and XGBoost through
onnxmltools, PyTorch, Keras) can ship its model as a graph of standard operators: data, no
code. The file is read with the ``onnx`` package first (never executing anything) and refused,
before any onnxruntime session exists, when it

- is larger than :data:`MAX_ONNX_BYTES`, is not a protobuf ``ModelProto``, or fails
  ``onnx.checker`` (a truncated file);
- holds a node of a domain other than the standard ``''`` / ``ai.onnx`` / ``ai.onnx.ml``
  (a custom operator runs a library's code: onnxruntime's ``com.microsoft`` contrib operators
  and any custom-op library), in the main graph or any subgraph;
- names external data (a tensor whose bytes live in another file: a path the auditor did not
  give, read from wherever the file says);
- declares tensors (initialisers and constants, by their shapes, not their stored bytes) of
  more than :data:`MAX_INITIALIZER_BYTES` together.

Then an ``InferenceSession`` is built from the bytes read (not the path) with the
``CPUExecutionProvider`` only, one thread (results do not depend on the machine's cores).

:class:`OnnxClassifier` makes the graph look like a fitted scikit-learn classifier
(``classes_``, ``predict_proba``, ``predict``) so the artefact checks and attacks of
:mod:`mptool.inputs.trained` and :mod:`mptool.attacks.artefact` run as for a skops file.

- **Features** come from the graph's inputs: one input per feature column named as the
  column (skl2onnx's convention for a DataFrame pipeline; string inputs for categorical
  columns, float/double/int64 for numeric ones), or one 2-D numeric input of width equal to
  the number of feature columns, fed the spec's columns in the spec's order (and, where the
  graph's metadata holds ``feature_names``, only if those are the spec's columns in order).
- **Classes** come from the graph: the ``ZipMap`` (skl2onnx and onnxmltools' default: a list
  of {class: probability}) or the classifier node's ``classlabels_*`` attribute, else a
  ``classes`` entry (a JSON list) in the graph's metadata. A graph that names no classes is
  refused: mptool does not guess the order of its columns.
- **Probabilities** are the output ``output_probability`` / ``probabilities`` (or the only
  sequence-of-maps or 2-D float output); the label, where present (``output_label`` /
  ``label``), is what ``predict`` returns, else the argmax.

ONNX classifiers compute in float32: their probabilities differ from the double-precision
model's by a few float32 units (1 ulp of 1.0 is 1.2e-7; 5e-8 to 3e-7 seen in the tests), so an
ONNX artefact is "A(T)" within :data:`ONNX_TOLERANCE` rather than the skops file's 1e-6.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from mptool.runtime import ui
from mptool.runtime.errors import InputError

#: Largest ONNX file read (protobuf itself stops at 2 GiB).
MAX_ONNX_BYTES = 1 << 30
#: Largest total size of the tensors the graph declares (initialisers, constants, by shape x item size).
MAX_INITIALIZER_BYTES = 1 << 30
#: Operator domains that are the ONNX standard (the empty name is ai.onnx).
STANDARD_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml"})
#: Largest |p_onnx - p_A(T)| accepted: the graph computes in float32 (about 84 float32 units of 1.0).
ONNX_TOLERANCE = 1e-5
#: Output names of the probabilities and the label (skl2onnx, onnxmltools), in order of preference.
PROBA_NAMES = ("output_probability", "probabilities", "probability")
LABEL_NAMES = ("output_label", "label")
INSTALL_HINT = "--trained MODEL.onnx needs onnx and onnxruntime: pip install 'mptool[onnx]'"


def is_onnx_path(path: str | Path) -> bool:
    """Whether ``--trained`` names an ONNX file (by its suffix)."""
    return Path(path).suffix.lower() == ".onnx"


def _modules() -> tuple[Any, Any]:
    """``onnx`` and ``onnxruntime``, imported only when an ONNX file is given; InputError when absent."""
    try:
        import onnx
        import onnxruntime
    except ImportError:
        raise InputError(INSTALL_HINT) from None
    return onnx, onnxruntime


def _item_size(onnx: Any, data_type: int) -> int:
    """Bytes per element of an ONNX tensor type (strings: counted as 1 byte each, their stored size is checked too)."""
    try:
        return max(1, int(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(data_type)).itemsize))
    except Exception:  # noqa: BLE001 - an unknown or undefined type: the checker refuses it later
        return 1


def _tensors(graph: Any) -> list[Any]:
    """Every TensorProto of ``graph`` and its subgraphs: initialisers, sparse ones, attribute tensors."""
    out = list(graph.initializer)
    for sparse in graph.sparse_initializer:
        out += [sparse.values, sparse.indices]
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                out.append(attr.t)
            out += list(attr.tensors)
            if attr.HasField("sparse_tensor"):
                out += [attr.sparse_tensor.values, attr.sparse_tensor.indices]
    for sub in _subgraphs(graph):
        out += _tensors(sub)
    return out


def _subgraphs(graph: Any) -> list[Any]:
    """The graphs held by ``graph``'s nodes' attributes (If, Loop, Scan bodies), one level down."""
    out = []
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                out.append(attr.g)
            out += list(attr.graphs)
    return out


def _domains(graph: Any) -> set[str]:
    """Operator domains of every node of ``graph`` and its subgraphs."""
    found = {node.domain for node in graph.node}
    for sub in _subgraphs(graph):
        found |= _domains(sub)
    return found


def check_graph(onnx: Any, model: Any, path: Path) -> None:
    """InputError when the graph has a custom operator, external data or too large tensors (module docstring)."""
    odd = sorted(_domains(model.graph) - STANDARD_DOMAINS)
    if odd:
        raise InputError(
            f"{path}: the ONNX graph uses operator(s) of non-standard domain(s) {ui.listing(odd, 3)}: a custom "
            "operator runs a library's code; mptool runs only the standard ONNX domains ('', ai.onnx, ai.onnx.ml)"
        )
    if len(model.functions):
        raise InputError(f"{path}: the ONNX file defines {len(model.functions)} local function(s); mptool runs only "
                         "graphs of standard operators (export without local functions)")
    total = 0
    for tensor in _tensors(model.graph):
        if tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data):
            raise InputError(
                f"{path}: the ONNX graph keeps tensor data in another file (external data); mptool reads only the "
                "file given: save the model with all tensors inside it (onnx.save(..., save_as_external_data=False))"
            )
        count = int(np.prod([max(int(d), 0) for d in tensor.dims], dtype=object))
        declared = count * _item_size(onnx, tensor.data_type)
        total += max(declared, len(tensor.raw_data), sum(len(s) for s in tensor.string_data))
        if total > MAX_INITIALIZER_BYTES:
            raise InputError(
                f"{path}: the ONNX graph declares tensors of more than {MAX_INITIALIZER_BYTES:,} bytes together "
                "(by their shapes); refused before anything is allocated: is the file forged?"
            )


def _read(path: Path) -> bytes:
    """The file's bytes, refused (InputError) if empty or over :data:`MAX_ONNX_BYTES`."""
    size = path.stat().st_size
    if size > MAX_ONNX_BYTES:
        raise InputError(f"{path}: the ONNX file has {size:,} bytes; at most {MAX_ONNX_BYTES:,} are read")
    if size == 0:
        raise InputError(f"{path}: the ONNX file is empty")
    return path.read_bytes()


def _parse(onnx: Any, data: bytes, path: Path) -> Any:
    """The ModelProto of ``data`` (no external data loaded), checked by onnx.checker; InputError otherwise."""
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # noqa: BLE001 - protobuf raises DecodeError and others on garbage
        raise InputError(f"{path}: not an ONNX model (the protobuf does not parse: {exc.__class__.__name__})") from None
    if not len(model.graph.node) or not len(model.graph.output):
        raise InputError(f"{path}: not an ONNX model (no graph: a truncated or foreign file?)")
    return model


def _checked(onnx: Any, model: Any, path: Path) -> None:
    """onnx.checker on the ModelProto (types, opsets, graph structure); InputError on failure."""
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # noqa: BLE001
        detail = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
        raise InputError(f"{path}: the ONNX model is not valid ({ui.excerpt(detail, 100)}); a truncated file?") \
            from None


def _class_labels(model: Any) -> list[Any] | None:
    """The classes, in the order of the probability columns, as the graph names them (module docstring)."""
    for node in [n for n in model.graph.node if n.op_type == "ZipMap"] + list(model.graph.node):
        for attr in node.attribute:
            if attr.name == "classlabels_strings" and len(attr.strings):
                return [s.decode("utf-8", "replace") for s in attr.strings]
            if attr.name in ("classlabels_int64s", "classlabels_ints") and len(attr.ints):
                return [int(v) for v in attr.ints]
    meta = {p.key: p.value for p in model.metadata_props}
    if "classes" in meta:
        try:
            labels = json.loads(meta["classes"])
        except ValueError:
            return None
        if isinstance(labels, list) and all(isinstance(v, str | int) for v in labels):
            return labels
    return None


def _pick_output(outputs: list[Any], names: tuple[str, ...], kinds: tuple[str, ...]) -> Any | None:
    """The output named first in ``names``, else the only output whose type is one of ``kinds``."""
    by_name = {o.name: o for o in outputs}
    for name in names:
        if name in by_name:
            return by_name[name]
    typed = [o for o in outputs if o.type.WhichOneof("value") in kinds]
    return typed[0] if len(typed) == 1 else None


class OnnxClassifier:
    """An ONNX graph as a fitted classifier: ``classes_``, ``predict_proba``, ``predict`` (module docstring)."""

    def __init__(self, data: bytes, path: str, classes: list[Any], proba: str, label: str | None,
                 inputs: list[tuple[str, str, list[Any]]], feature_names: list[str] | None) -> None:
        self._data, self.path = data, path
        self.classes_ = np.asarray(classes, dtype=object)
        self._labels = list(classes)  # as the graph names them (its ZipMap keys)
        self._proba, self._label, self.inputs, self.feature_names = proba, label, inputs, feature_names
        self._session = _session(data)

    def __getstate__(self) -> dict[str, Any]:  # the session is rebuilt from the checked bytes
        return {k: v for k, v in self.__dict__.items() if k != "_session"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._session = _session(self._data)

    def relabel(self, classes: np.ndarray) -> None:
        """Name the graph's classes by the spec's values that print the same (an int64 1 and the label '1')."""
        spec = {str(c): c for c in classes.tolist()}
        self.classes_ = np.asarray([spec.get(str(c), c) for c in self.classes_.tolist()], dtype=object)

    def check_features(self, columns: list[str], numeric: list[str]) -> None:
        """InputError unless the graph's inputs are the spec's feature ``columns`` (``numeric``: the numeric ones)."""
        if len(self.inputs) == 1 and len(self.inputs[0][2]) == 2:
            name, kind, shape = self.inputs[0]
            width = shape[1]
            if kind == "string":
                raise InputError(f"{self.path}: the ONNX graph's one input '{ui.excerpt(name, 40)}' is a string "
                                 "matrix; give one input per feature column (skl2onnx's DataFrame inputs)")
            if isinstance(width, int) and width != len(columns):
                raise InputError(
                    f"{self.path}: the ONNX graph takes {width} features in its input '{ui.excerpt(name, 40)}' but the "
                    f"spec has {len(columns)} feature columns; it was not exported for this spec's columns"
                )
            if self.feature_names is not None and self.feature_names != columns:
                raise InputError(
                    f"{self.path}: the ONNX graph's feature_names ({ui.listing(self.feature_names, 4)}) are not the "
                    f"spec's feature columns in order ({ui.listing(columns, 4)})"
                )
            text = [c for c in columns if c not in numeric]
            if text:
                raise InputError(
                    f"{self.path}: the ONNX graph takes one numeric matrix but the spec's column(s) "
                    f"{ui.listing(text, 3)} are categorical; export one input per column, or list them in data.numeric"
                )
            return
        names = [i[0] for i in self.inputs]
        missing = [c for c in columns if c not in names]
        extra = [n for n in names if n not in columns]
        if missing or extra:
            raise InputError(
                f"{self.path}: the ONNX graph's inputs are not the spec's feature columns: "
                + "; ".join(part for part in (
                    f"missing {ui.listing(missing, 4)}" if missing else "",
                    f"not in the spec {ui.listing(extra, 4)}" if extra else "") if part)
                + " (name one input per feature column, as skl2onnx does for a DataFrame)"
            )
        for name, kind, _shape in self.inputs:
            if kind != "string" and name not in numeric:
                raise InputError(f"{self.path}: the ONNX input '{ui.excerpt(name, 40)}' is numeric but the spec "
                                 "reads that column as categories; export it as a string input")

    def _feed(self, X: Any) -> dict[str, np.ndarray]:
        """onnxruntime's inputs for the records of the DataFrame ``X`` (spec's feature columns)."""
        if len(self.inputs) == 1 and len(self.inputs[0][2]) == 2:
            name, kind, _ = self.inputs[0]
            return {name: X.to_numpy(dtype=_NP[kind])}
        feed = {}
        for name, kind, _ in self.inputs:
            col = X[name]
            values = col.astype(str).to_numpy(dtype=object) if kind == "string" else col.to_numpy(dtype=_NP[kind])
            feed[name] = values.reshape(-1, 1)
        return feed

    def _run(self, X: Any) -> tuple[np.ndarray, np.ndarray | None]:
        """(probabilities in the order of classes_, labels or None) of the records of ``X``."""
        wanted = [self._proba] + ([self._label] if self._label else [])
        out = self._session.run(wanted, self._feed(X))
        raw = out[0]
        if isinstance(raw, list):  # ZipMap: one {class: probability} per record
            p = np.array([[row[c] for c in self._keys] for row in raw], dtype=float).reshape(len(raw), len(self._keys))
        else:
            p = np.asarray(raw, dtype=float)
        if p.ndim != 2 or p.shape[1] != len(self.classes_):
            raise ValueError(f"the graph gave probabilities of shape {p.shape}, expected (n, {len(self.classes_)})")
        return p, (np.asarray(out[1]).reshape(-1) if self._label else None)

    @property
    def _keys(self) -> list[Any]:
        return [int(c) if isinstance(c, int | np.integer) else str(c) for c in self._labels]

    def predict_proba(self, X: Any) -> np.ndarray:
        """The graph's class probabilities (float32 computed, returned as float64) in the order of ``classes_``."""
        return self._run(X)[0]

    def predict(self, X: Any) -> np.ndarray:
        """The graph's label output mapped onto ``classes_`` (the argmax where the graph has none)."""
        p, labels = self._run(X)
        if labels is None:
            return self.classes_[np.argmax(p, axis=1)]
        pos = {str(c): i for i, c in enumerate(self._labels)}
        return self.classes_[np.array([pos[str(v.decode() if isinstance(v, bytes) else v)] for v in labels])]


_NP = {"float": np.float32, "double": np.float64, "int64": np.int64, "int32": np.int32, "string": object}
_KINDS = {1: "float", 11: "double", 7: "int64", 6: "int32", 8: "string"}


def _session(data: bytes) -> Any:
    """An onnxruntime session of the checked bytes: CPU provider only, one thread, warnings muted."""
    _, ort = _modules()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(data, sess_options=options, providers=["CPUExecutionProvider"])


def load_onnx(path: Path) -> tuple[OnnxClassifier, str]:
    """Read, check and open an ONNX classifier (module docstring); (the adapter, the file's SHA-256)."""
    onnx, _ = _modules()
    data = _read(path)
    model = _parse(onnx, data, path)
    check_graph(onnx, model, path)  # before the checker: it would follow external-data paths
    _checked(onnx, model, path)
    init = {t.name for t in model.graph.initializer}
    inputs = []
    for i in model.graph.input:
        if i.name in init:
            continue
        tensor = i.type.tensor_type if i.type.WhichOneof("value") == "tensor_type" else None
        kind = _KINDS.get(tensor.elem_type) if tensor is not None else None
        if kind is None:
            raise InputError(f"{path}: the ONNX input '{ui.excerpt(i.name, 40)}' is not a float, double, integer or "
                             "string tensor")
        shape = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        inputs.append((i.name, kind, shape))
    outputs = list(model.graph.output)
    proba = _pick_output(outputs, PROBA_NAMES, ("sequence_type",))
    if proba is None:
        floats = [o for o in outputs if o.type.WhichOneof("value") == "tensor_type"
                  and o.type.tensor_type.elem_type in (1, 11) and len(o.type.tensor_type.shape.dim) == 2]
        proba = floats[0] if len(floats) == 1 else None
    if proba is None:
        raise InputError(f"{path}: the ONNX graph has no probability output (named output_probability or "
                         "probabilities, or one 2-D float output); PDTP needs class probabilities")
    label = _pick_output([o for o in outputs if o is not proba], LABEL_NAMES, ())
    classes = _class_labels(model)
    if classes is None or len(set(map(str, classes))) != len(classes):
        raise InputError(f"{path}: the ONNX graph does not name its classes (a ZipMap, a classifier's classlabels, "
                         "or a 'classes' JSON list in its metadata); mptool does not guess the column order")
    meta = {p.key: p.value for p in model.metadata_props}
    features = None
    if "feature_names" in meta:
        try:
            parsed = json.loads(meta["feature_names"])
            features = [str(v) for v in parsed] if isinstance(parsed, list) else None
        except ValueError:
            features = [v.strip() for v in meta["feature_names"].split(",")]
    try:
        clf = OnnxClassifier(data, str(path), classes, proba.name, None if label is None else label.name,
                             inputs, features)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - onnxruntime refuses a graph in many ways
        detail = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
        raise InputError(f"{path}: onnxruntime cannot run the graph ({ui.excerpt(detail, 100)})") from None
    return clf, hashlib.sha256(data).hexdigest()
