"""Reading a results directory: the output files of ``pdtp``, ``attack`` and ``reduce-dtp``.

``mptool report`` reads only result files (never reruns anything). Each command writes a
per-record CSV and a JSON document; whichever pairs are present are loaded, and the
missing ones are listed so the report can say what it could not show. The JSON layouts
of ``attack`` and ``reduce-dtp`` are read tolerantly (a few key spellings are accepted),
so a small change in those writers degrades a section of the report instead of failing it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mptool.inputs.data import file_sha256, read_csv
from mptool.inputs.fingerprint import KEY_ENV, keyed_digest
from mptool.outputs.report.values import number
from mptool.runtime.errors import InputError

#: The result files a report can use, per producing command.
RESULT_FILES = {
    "pdtp": ("pdtp.csv", "pdtp.json"),
    "attack": ("attack.csv", "attack.json"),
    "reduce": ("reduce.csv", "reduce.json"),
}

#: The command that writes each pair of files (for "missing" messages).
PRODUCER = {"pdtp": "mptool pdtp", "attack": "mptool attack", "reduce": "mptool reduce-dtp"}


@dataclass
class AttackResult:
    """Aggregate results of one membership attack (one entry of attack.json)."""

    name: str
    metrics: dict[str, float]  # scalar metrics, as written (accuracy, auc, advantage, ...)
    pearson: float | None = None
    pearson_p: float | None = None
    spearman: float | None = None
    spearman_p: float | None = None
    roc_fpr: np.ndarray | None = None
    roc_tpr: np.ndarray | None = None
    entry: dict[str, Any] = field(default_factory=dict)  # the attack's JSON entry as written


@dataclass
class ReportInputs:
    """Everything the report shows, read from one results directory."""

    results_dir: Path
    pdtp_table: pd.DataFrame | None = None
    pdtp_summary: dict[str, Any] | None = None
    attack_table: pd.DataFrame | None = None
    attack_doc: dict[str, Any] | None = None
    attacks: list[AttackResult] = field(default_factory=list)
    reduce_table: pd.DataFrame | None = None
    reduce_doc: dict[str, Any] | None = None
    mitigate_table: pd.DataFrame | None = None  # mptool mitigate (report.mitigation), only when present
    mitigate_doc: dict[str, Any] | None = None
    features: pd.DataFrame | None = None  # feature values of the top records (only with show_values), by row
    labels: pd.Series | None = None  # their labels from the audited CSV (show_values, pdtp.csv without them), by row
    missing: list[str] = field(default_factory=list)  # file names not found
    notes: list[str] = field(default_factory=list)  # problems worth telling the reader

    @property
    def present(self) -> list[str]:
        """Commands whose results were found."""
        out = []
        if self.pdtp_table is not None or self.pdtp_summary is not None:
            out.append("pdtp")
        if self.attack_table is not None or self.attack_doc is not None:
            out.append("attack")
        if self.reduce_table is not None or self.reduce_doc is not None:
            out.append("reduce")
        if self.mitigate_table is not None:
            out.append("mitigate")
        return out


# --------------------------------------------------------------------------------------
# small tolerant accessors


def norm_key(key: str) -> str:
    """Key spelling without case and punctuation: 'TPR@1%FPR' -> 'tpr1fpr'."""
    return "".join(ch for ch in str(key).lower() if ch.isalnum())


def lookup(doc: Any, *names: str) -> Any:
    """The value of the first key (in order of ``names``) found in dict ``doc``, matched loosely."""
    if not isinstance(doc, dict):
        return None
    by_norm = {norm_key(k): v for k, v in doc.items()}
    for name in names:
        if norm_key(name) in by_norm:
            return by_norm[norm_key(name)]
    return None


def summary_of(doc: dict[str, Any] | None) -> dict[str, Any]:
    """The summary part of a result JSON (``doc['summary']`` if there is one, else the doc)."""
    if not isinstance(doc, dict):
        return {}
    inner = doc.get("summary")
    return inner if isinstance(inner, dict) else doc


# --------------------------------------------------------------------------------------
# files


def _read_json(path: Path, notes: list[str]) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:  # deep nesting: RecursionError
        notes.append(f"{path.name}: cannot be read as JSON ({exc.__class__.__name__}); skipped")
        return None
    if not isinstance(doc, dict):
        notes.append(f"{path.name}: expected a JSON object at the top; skipped")
        return None
    return doc


def _read_table(path: Path, notes: list[str]) -> pd.DataFrame | None:
    try:
        return read_csv(path)
    except InputError as exc:
        notes.append(f"{path.name}: {str(exc).removeprefix(str(path) + ': ')}; skipped")
        return None


def _load_pair(results_dir: Path, kind: str, inputs: ReportInputs) -> tuple[pd.DataFrame | None, dict | None]:
    csv_name, json_name = RESULT_FILES[kind]
    table = doc = None
    for name in (csv_name, json_name):
        if not (results_dir / name).is_file():
            inputs.missing.append(name)
    if (results_dir / json_name).is_file():
        doc = _read_json(results_dir / json_name, inputs.notes)
    if (results_dir / csv_name).is_file():
        table = _read_table(results_dir / csv_name, inputs.notes)
    if table is None and doc is not None:
        records = doc.get("records", doc.get("trace"))
        if isinstance(records, list) and records and all(isinstance(r, dict) for r in records):
            table = pd.DataFrame(records)
            inputs.notes.append(f"{csv_name} not readable; per-record values taken from {json_name}")
    return table, doc


def load_results(results_dir: str | Path, top: int = 20, show_values: bool = False) -> ReportInputs:
    """Read every result file present in ``results_dir``; InputError if there is none at all.

    The audited CSV (for the feature values of the ``top`` riskiest records) is read only
    with ``show_values``; otherwise ``features`` stays None and no training value is loaded.
    """
    results_dir = Path(results_dir)
    if not results_dir.exists():
        raise InputError(f"{results_dir}: results directory not found; pass the --out directory of a run")
    if not results_dir.is_dir():
        raise InputError(f"{results_dir}: not a directory; pass the --out directory of an mptool run")
    inputs = ReportInputs(results_dir=results_dir)
    pdtp_table, pdtp_doc = _load_pair(results_dir, "pdtp", inputs)
    inputs.pdtp_table = pdtp_table
    inputs.pdtp_summary = summary_of(pdtp_doc) if pdtp_doc is not None else None
    from mptool.outputs.report.verify import verify_pdtp

    inputs.notes += verify_pdtp(pdtp_table, inputs.pdtp_summary, str(results_dir / "pdtp.json"))  # exit 2 if edited
    if pdtp_doc is not None:  # a signed result that does not verify under this key: exit 2, nothing written
        from mptool.inputs.signature import check_report_signature

        check_report_signature(pdtp_doc, results_dir / "pdtp.csv", str(results_dir / "pdtp.json"))
    inputs.attack_table, inputs.attack_doc = _load_pair(results_dir, "attack", inputs)
    inputs.reduce_table, inputs.reduce_doc = _load_pair(results_dir, "reduce", inputs)
    from mptool.outputs.report.mitigation import load_mitigation

    inputs.mitigate_table, inputs.mitigate_doc = load_mitigation(results_dir, inputs.notes)
    if not inputs.present:
        raise InputError(
            f"{results_dir}: holds no mptool results (none of "
            f"{', '.join(n for pair in RESULT_FILES.values() for n in pair)}); "
            "pass the --out directory of 'mptool pdtp', 'mptool attack' or 'mptool reduce-dtp'"
        )
    if inputs.pdtp_table is not None and "pdtp" not in inputs.pdtp_table:
        inputs.notes.append("pdtp.csv has no 'pdtp' column; per-record PDTP not shown")
        inputs.pdtp_table = None
    if inputs.attack_doc is not None:
        inputs.attacks = parse_attacks(inputs.attack_doc, inputs.attack_table)
    hashes = {m.get("data_hmac") for m in _manifests(inputs) if m.get("data_hmac")}
    if len(hashes) > 1:
        inputs.notes.append("the results in this directory come from different data files (keyed data digests differ)")
    if show_values:
        inputs.features = load_features(inputs, top)
    return inputs


# --------------------------------------------------------------------------------------
# attack.json


def _attack_entries(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Attack name -> its metrics dict, from any of the layouts attack.json may use."""
    for holder in (doc, summary_of(doc)):
        value = lookup(holder, "attacks", "results", "metrics", "per_attack")
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            return {str(k): v for k, v in value.items()}
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            out = {}
            for i, entry in enumerate(value):
                name = lookup(entry, "attack", "name") or f"attack{i + 1}"
                out[str(name)] = entry
            return out
    # fallback: top-level entries that look like attack metrics
    return {
        str(k): v
        for k, v in summary_of(doc).items()
        if isinstance(v, dict) and lookup(v, "accuracy", "auc", "roc_auc") is not None
    }


def _correlation(entry: dict[str, Any], name: str) -> tuple[float | None, float | None]:
    """(coefficient, p-value) of ``name`` ('pearson' or 'spearman') in the layouts we accept."""
    value = lookup(entry, name, f"{name}_r", f"{name}_rho", f"{name}_corr")
    nested = lookup(entry, "correlation_with_pdtp", "correlation", "correlations", "corr")
    if value is None and isinstance(nested, dict):
        value = lookup(nested, name, f"{name}_r", f"{name}_rho")
        if number(value) is not None:
            return number(value), number(lookup(nested, f"{name}_p", f"{name}_pvalue", f"{name}_p_value"))
    if isinstance(value, dict):
        return number(lookup(value, "r", "rho", "coef", "coefficient", "statistic", "value")), number(
            lookup(value, "p", "pvalue", "p_value")
        )
    if isinstance(value, list | tuple) and len(value) == 2:
        return number(value[0]), number(value[1])
    return number(value), number(lookup(entry, f"{name}_p", f"{name}_pvalue", f"{name}_p_value"))


def _roc(entry: dict[str, Any]) -> tuple[np.ndarray | None, np.ndarray | None]:
    """ROC points (fpr, tpr) of an attack entry, or (None, None)."""
    value = lookup(entry, "roc", "roc_curve", "curve")
    fpr = tpr = None
    if isinstance(value, dict):
        fpr, tpr = lookup(value, "fpr"), lookup(value, "tpr")
    elif isinstance(value, list) and value and all(isinstance(p, list | tuple) and len(p) == 2 for p in value):
        fpr, tpr = [p[0] for p in value], [p[1] for p in value]
    elif isinstance(value, list) and value and all(isinstance(p, dict) for p in value):
        fpr, tpr = [lookup(p, "fpr") for p in value], [lookup(p, "tpr") for p in value]
    if fpr is None or tpr is None:
        fpr, tpr = lookup(entry, "roc_fpr", "fpr"), lookup(entry, "roc_tpr", "tpr")
    try:
        f, t = np.asarray(fpr, dtype=float), np.asarray(tpr, dtype=float)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a whole number beyond a float (red3-5)
        return None, None
    if f.ndim != 1 or f.shape != t.shape or f.size < 2 or not (np.isfinite(f).all() and np.isfinite(t).all()):
        return None, None
    return f, t


def parse_attacks(doc: dict[str, Any], table: pd.DataFrame | None) -> list[AttackResult]:
    """Per-attack metrics, correlations and ROC points from attack.json.

    When the JSON lacks a correlation, Pearson's and Spearman's coefficients of per-target
    accuracy with mean PDTP are computed from attack.csv (Long et al., section 5.5, Tables 1-2).
    """
    out = []
    for name, entry in _attack_entries(doc).items():
        metrics = {str(k): number(v) for k, v in entry.items() if number(v) is not None}
        result = AttackResult(name=name, metrics=metrics, entry=entry)
        result.pearson, result.pearson_p = _correlation(entry, "pearson")
        result.spearman, result.spearman_p = _correlation(entry, "spearman")
        result.roc_fpr, result.roc_tpr = _roc(entry)
        col = f"{name}_accuracy"
        if table is not None and "pdtp_mean" in table and col in table:
            pair = table[["pdtp_mean", col]].apply(pd.to_numeric, errors="coerce").dropna()
            if len(pair) > 2 and pair.nunique().min() > 1:
                if result.pearson is None:
                    result.pearson = float(pair.corr(method="pearson").iloc[0, 1])
                if result.spearman is None:
                    result.spearman = float(pair.corr(method="spearman").iloc[0, 1])
        out.append(result)
    return out


def attack_accuracy_columns(table: pd.DataFrame | None) -> dict[str, str]:
    """Attack name -> its per-target accuracy column in attack.csv (``<attack>_accuracy``)."""
    if table is None:
        return {}
    return {c.removesuffix("_accuracy"): c for c in table.columns if c.endswith("_accuracy") and c != "max_accuracy"}


# --------------------------------------------------------------------------------------
# the audited data, for the feature values of the top records


def top_rows(inputs: ReportInputs, top: int) -> list[int]:
    """CSV rows of the ``top`` riskiest records of pdtp.csv: highest PDTP first, ties by row."""
    t = inputs.pdtp_table
    if t is None or "row" not in t:
        return []
    return [int(r) for r in t.sort_values(["pdtp", "row"], ascending=[False, True]).head(top)["row"]]


def _manifests(inputs: ReportInputs) -> list[dict[str, Any]]:
    """The run manifests of the results present (pdtp, attack, reduce-dtp order)."""
    out = []
    for doc in (inputs.pdtp_summary, inputs.attack_doc, inputs.reduce_doc):
        m = (lookup(summary_of(doc), "manifest") or lookup(doc, "manifest")) if doc else None
        if isinstance(m, dict):
            out.append(m)
    return out


def input_files(inputs: ReportInputs) -> list[tuple[str, Path]]:
    """(role, path) of the files a report must never overwrite: the results it read and the
    data, spec and query CSV named in their manifests.

    Manifest paths are as typed on the run's command line (relative to where it ran), so
    each is taken both as given and relative to the results folder.
    """
    files = [("the result file", inputs.results_dir / n) for pair in RESULT_FILES.values() for n in pair]
    named: list[tuple[str, str]] = []
    for m in _manifests(inputs):
        if isinstance(m.get("data"), str):
            named.append(("the data file", m["data"]))
        words = str(m.get("command", "")).split()
        for flag, role in (("--model", "the spec"), ("-m", "the spec"), ("--queries", "the --queries file")):
            named += [(role, w) for prev, w in zip(words, words[1:], strict=False) if prev == flag]
            named += [(role, w.split("=", 1)[1]) for w in words if w.startswith(flag + "=")]
    for role, text in named:
        files += [(role, Path(text)), (role, inputs.results_dir / text)]
    return files


def load_features(inputs: ReportInputs, top: int) -> pd.DataFrame | None:
    """Feature values of the top records from the audited CSV named in the run manifest.

    Rows are the 0-based data rows of that CSV, so ``iloc`` finds them. The label, the
    spec's dropped columns and its id column are left out (they are shown elsewhere or
    were not used by the model). A pdtp.csv without a ``label`` column (written without
    ``pdtp --show-values``) gets the top records' labels from here, in ``inputs.labels``.
    A changed file (hash differs from the manifest) is still read, with a note.
    """
    rows = top_rows(inputs, top)
    if not rows:
        return None
    manifests = _manifests(inputs)
    data = next((m.get("data") for m in manifests if m.get("data")), None)
    if data is None:
        inputs.notes.append("no data path in the results' manifest; feature values of the top records not shown")
        return None
    path = Path(data)
    if not path.is_absolute() and not path.exists() and (inputs.results_dir / path).exists():
        path = inputs.results_dir / path
    if not path.is_file():
        inputs.notes.append(f"data file {data} (from the run manifest) not found; feature values not shown")
        return None
    try:
        frame = read_csv(path)
    except InputError as exc:
        inputs.notes.append(f"data file not readable ({exc}); feature values not shown")
        return None
    expected = next((m.get("data_hmac") for m in manifests if m.get("data_hmac")), None)
    if expected and keyed_digest("data", file_sha256(path)) not in (None, expected):
        inputs.notes.append(f"{path} changed since the run (keyed digest differs); its feature values may not match")
    elif expected is None or keyed_digest("data", "x") is None:
        inputs.notes.append(f"cannot check that {path} is unchanged since the run (no {KEY_ENV}: no data digest "
                            "is published); its feature values may not match")
    spec = spec_of(inputs)
    data_spec = spec.get("data", {}) if isinstance(spec, dict) else {}
    label = data_spec.get("label")
    hide = {label, data_spec.get("id"), *(data_spec.get("drop") or [])}
    keep = [c for c in frame.columns if c not in hide]
    valid = [r for r in rows if 0 <= r < len(frame)]
    if len(valid) < len(rows):
        inputs.notes.append(f"{len(rows) - len(valid)} top row(s) are beyond the end of {path}; not shown")
    features = frame.iloc[valid][keep].copy()
    features.index = pd.Index(valid, name="row")
    if label in frame.columns and inputs.pdtp_table is not None and "label" not in inputs.pdtp_table:
        inputs.labels = pd.Series(frame[label].iloc[valid].to_numpy(), index=features.index, name="label")
    return features


def spec_of(inputs: ReportInputs) -> dict[str, Any]:
    """The model spec recorded in the results (pdtp first, then attack, then reduce-dtp)."""
    for doc in (inputs.pdtp_summary, summary_of(inputs.attack_doc), summary_of(inputs.reduce_doc)):
        spec = lookup(doc, "spec") if doc else None
        if isinstance(spec, dict):
            return spec
    return {}
