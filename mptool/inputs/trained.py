"""The shipped model: load a scikit-learn model saved with skops, and check it is A(T) of the spec.

``--trained MODEL.skops`` audits the artefact that is published, not only the spec's recipe.
PDTP needs the recipe too (A(T∖{t}) is trained from the spec), so the artefact is first
checked to predict like A(T) on every record of T; then its probabilities stand for
p_{A(T)}(y|x_t) in the PDTP of each record (Long et al., Definition 4.3).

Never pickle: unpickling runs whatever code the file names (``__reduce__``), so a model file
from a colleague, a registry or a pull request could run anything on the auditor's machine.
skops reads a zip of JSON and arrays and builds only types it is told to trust; mptool trusts
scikit-learn's and its own types, and classes defined in modules named with ``--allow-import``,
each only at the exact path where it is defined (never a function, nor a name a trusted module
imports from elsewhere). Any other type in the file is refused, named, before anything is built.

``--trained MODEL.onnx`` loads an ONNX graph instead (:mod:`mptool.inputs.onnx_model`: standard
operators only, no external data, bounded size), compared with A(T) within its float32 tolerance.
"""

from __future__ import annotations

import hashlib
import re
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mptool.inputs.fingerprint import keyed_digest
from mptool.runtime import ui
from mptool.runtime.errors import InputError

#: mptool's own types a fitted pipeline holds (besides scikit-learn's).
MPTOOL_TYPES = (
    "mptool.inputs.models.DomainEncoder",
    "mptool.inputs.neighbors.TieStableKNeighborsClassifier",
    "mptool.inputs.neighbors._Distances",
)
#: Module prefixes whose types are trusted without --allow-import.
TRUSTED_PREFIXES = ("sklearn.",)
#: Largest uncompressed size of a skops archive's members together (a zip bomb is refused before it is read).
MAX_TRAINED_BYTES = 4 << 30
#: Largest uncompressed schema.json (read whole into memory as JSON by skops).
MAX_SCHEMA_BYTES = 256 << 20
#: Largest |p_artefact - p_A(T)| over T and classes accepted as "the same model" (refits agree to ~1e-12).
TRAINED_TOLERANCE = 1e-6


@dataclass(frozen=True)
class TrainedModel:
    """A loaded artefact: the model, its file and the file's SHA-256."""

    model: Any
    path: str
    sha256: str
    tolerance: float = 1e-6  # TRAINED_TOLERANCE; an ONNX graph computes in float32 (onnx_model.ONNX_TOLERANCE)


def _class_defined_at(name: str, prefix: str) -> bool:
    """Whether ``name`` is a class defined at exactly that path, inside the package ``prefix``.

    The skops file names each type as module and attribute, and skops resolves it with
    ``getattr(import_module(module), attribute)``; a prefix test alone would trust
    ``sklearn.utils._testing.check_output`` (subprocess's function, imported there),
    ``lightgbm.basic.getsize`` (``os.path.getsize``) or any other object a trusted module
    imports. Only a class whose own module and qualified name are ``name``, with that module
    ``prefix`` or under it, is trusted; functions, modules and re-exported objects are not.
    Nothing outside ``prefix`` is imported.
    """
    import importlib

    module, _, attr = name.rpartition(".")
    if not module or not attr or not (module == prefix or module.startswith(prefix + ".")):
        return False
    if any(part in ("tests", "conftest") or part.startswith("test_") for part in module.split(".")):
        return False  # test modules are never part of a model, and importing them runs test setup
    try:
        obj = getattr(importlib.import_module(module), attr, None)
    except Exception:  # noqa: BLE001 - a forged module path fails to import in many ways
        return False
    if not isinstance(obj, type) or f"{obj.__module__}.{obj.__qualname__}" != name:
        return False
    return obj.__module__ == prefix or obj.__module__.startswith(prefix + ".")


def _sklearn_class(name: str) -> bool:
    """Whether ``name`` is a class defined in scikit-learn at exactly that path (see :func:`_class_defined_at`)."""
    return any(_class_defined_at(name, prefix.rstrip(".")) for prefix in TRUSTED_PREFIXES)


def _trusted(name: str, allow_imports: tuple[str, ...]) -> bool:
    """Whether the skops type ``name`` may be built: mptool's own types, and classes defined in sklearn or in
    a module named with ``--allow-import`` (or under it) at exactly that path, never a name such a module imports."""
    if name in MPTOOL_TYPES or _sklearn_class(name):
        return True
    return any(_class_defined_at(name, m) for m in allow_imports)


def _check_archive_sizes(path: Path) -> None:
    """InputError when the archive's members would unpack to more than the caps (a zip bomb).

    Python's zip reader stops each member at its recorded size, so the recorded sizes bound
    what skops can unpack.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read it as a skops file ({exc.__class__.__name__})") from None
    total = sum(i.file_size for i in infos)
    schema = sum(i.file_size for i in infos if i.filename == "schema.json")
    if total > MAX_TRAINED_BYTES or schema > MAX_SCHEMA_BYTES:
        raise InputError(
            f"{path}: the skops archive unpacks to {total:,} bytes (schema.json {schema:,}); at most "
            f"{MAX_TRAINED_BYTES:,} (schema.json {MAX_SCHEMA_BYTES:,}) are read: is it a zip bomb?"
        )


def load_trained(path: str | Path, allow_imports: tuple[str, ...] = ()) -> TrainedModel:
    """Load a skops file, trusting only scikit-learn, mptool and ``allow_imports`` types, or an ONNX graph
    (``*.onnx``: :mod:`mptool.inputs.onnx_model`, standard operators only); InputError otherwise."""
    path = Path(path)
    if path.exists() and not path.is_file():  # a pipe blocks the read, a device like /dev/zero never ends
        raise InputError(f"{path}: --trained is not a regular file (a pipe, device, socket or directory)")
    if not path.is_file():
        raise InputError(f"{path}: --trained model file not found; save the model with skops.io.dump")
    from mptool.inputs import onnx_model

    if onnx_model.is_onnx_path(path):
        graph, digest = onnx_model.load_onnx(path)
        return TrainedModel(graph, str(path), digest, onnx_model.ONNX_TOLERANCE)
    try:
        import skops.io as sio
    except ImportError:  # pragma: no cover - skops is a dependency
        raise InputError("--trained needs skops (pip install skops)") from None
    if not zipfile.is_zipfile(path):
        raise InputError(
            f"{path}: not a skops file (a zip archive); mptool never loads pickle or joblib files, "
            "which can run code: save the model with skops.io.dump (or export it to ONNX as MODEL.onnx)"
        )
    _check_archive_sizes(path)
    try:
        untrusted = sio.get_untrusted_types(file=path)
    except Exception as exc:  # noqa: BLE001 - a damaged archive raises many types
        raise InputError(f"{path}: cannot read it as a skops file ({exc.__class__.__name__})") from None
    refused = [t for t in untrusted if not _trusted(t, allow_imports)]
    if refused:
        raise InputError(
            f"{path}: the model file holds type(s) mptool does not trust: {ui.listing(refused, 3)}; "
            "only scikit-learn and mptool types load, and modules named with --allow-import "
            "(only classes defined there, named at their own path)"
        )
    try:
        with warnings.catch_warnings(record=True) as caught:  # one note below, not three lines per estimator
            warnings.simplefilter("always")
            model = sio.load(path, trusted=list(untrusted))
    except Exception as exc:  # noqa: BLE001
        detail = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
        raise InputError(
            f"{path}: cannot load the skops file ({exc.__class__.__name__}: {ui.excerpt(detail, 100)})"
        ) from None
    saved = sorted({str(getattr(w.message, "original_sklearn_version", "")) for w in caught} - {""})
    if saved:
        ui.warn(f"{path}: saved with scikit-learn {', '.join(saved)}, loaded with another version; it is used only "
                "if it predicts like A(T) of the spec (checked next)")
    if not hasattr(model, "predict_proba") or not hasattr(model, "classes_"):
        raise InputError(f"{path}: the model has no predict_proba or is not fitted; PDTP needs class probabilities")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return TrainedModel(model, str(path), digest)


def compare_to_spec(trained: TrainedModel, X: Any, classes: np.ndarray, p_spec: np.ndarray, rows: np.ndarray,
                    numeric: list[str] | None = None) -> dict:
    """How far the artefact is from A(T) on T: InputError beyond its tolerance (``TRAINED_TOLERANCE``; an ONNX
    graph's :data:`~mptool.inputs.onnx_model.ONNX_TOLERANCE`), else the figures.

    ``p_spec`` are A(T)'s probabilities on ``X`` (T's records, CSV ``rows``) in the order of
    ``classes``; the artefact must know the same classes. An ONNX graph's inputs must also be
    the spec's feature columns (``numeric``: those read as numbers). The dict also holds the
    artefact's ``probabilities`` on ``X`` (classes order) and the ``model``, which are not for JSON.
    """
    seen = [str(c) for c in trained.model.classes_]
    if sorted(seen) != sorted(str(c) for c in classes):
        raise InputError(
            f"{trained.path}: the model knows {len(seen)} class(es) ({ui.listing(seen, 5)}) but T has "
            f"{len(classes)} ({ui.listing(classes.tolist(), 5)}); it was not trained on this label"
        )
    if hasattr(trained.model, "check_features"):  # an ONNX graph: its inputs and classes against the spec
        trained.model.check_features([str(c) for c in X.columns], list(X.columns) if numeric is None else numeric)
        trained.model.relabel(classes)
    try:
        with warnings.catch_warnings():  # e.g. "X has feature names, but ... was fitted without": the error says it
            warnings.simplefilter("ignore")
            p = np.asarray(trained.model.predict_proba(X), dtype=float)
        if p.shape != (len(rows), len(seen)):
            raise ValueError(f"predict_proba gave shape {p.shape}, expected {(len(rows), len(seen))}")
    except Exception as exc:  # noqa: BLE001 - a model for other columns fails in many ways
        detail = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
        detail = re.sub(r"\[[^\]]*\]", "[...]", re.sub(r"'[^']*'", "'...'", detail))  # no quoted cell values
        raise InputError(
            f"{trained.path}: the model cannot predict T's records ({exc.__class__.__name__}: "
            f"{ui.excerpt(detail, 100)}); it must take the spec's feature columns"
        ) from None
    order = [seen.index(str(c)) for c in classes]
    p = p[:, order]
    diff = np.abs(p - p_spec).max(axis=1)
    other = int(np.sum(p.argmax(axis=1) != p_spec.argmax(axis=1)))
    worst = float(diff.max()) if diff.size else 0.0
    if not np.isfinite(p).all() or worst > trained.tolerance:
        raise InputError(
            f"{trained.path}: the model does not predict like A(T) of the spec: largest probability difference "
            f"{worst:.3g} on T (CSV row {int(rows[int(diff.argmax())])}), {other} of {len(rows)} records get another "
            "class; it is not the model this spec trains on this data (check the spec, the data and the seed)"
        )
    # the model file's SHA-256 only keyed (issue 26): retraining each candidate for an unknown record and hashing
    # the file would otherwise test the candidates; null without MPTOOL_FINGERPRINT_KEY
    return {"path": trained.path, "model_hmac": keyed_digest("model", trained.sha256), "max_abs_difference": worst,
            "tolerance": trained.tolerance, "probabilities": p, "model": trained.model}
