"""The YAML model spec: pydantic models, loading, overrides and hashing.

A spec describes the training algorithm A (estimator, parameters, preprocessing) and how
the training set T is drawn from the CSV. Unknown keys are errors that name the key and
the closest valid one, so a typo never silently changes an audit.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mptool.runtime import ui
from mptool.runtime.errors import InputError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DataSpec(_Strict):
    """How T is drawn from the CSV."""

    label: str = Field(description="target column")
    drop: list[str] = Field(default_factory=list, description="columns ignored")
    id: str | None = Field(default=None, description="id column echoed in per-record output")
    train_size: int | None = Field(default=None, ge=2, description="records drawn as T; null = all")
    missing: Literal["drop", "error", "impute"] = "drop"


class ModelSpec(_Strict):
    """The training algorithm A."""

    estimator: str = Field(description="short name or dotted path of a classifier with predict_proba")
    params: dict[str, Any] = Field(default_factory=dict)
    preprocess: Literal["auto", "none"] = "auto"
    bins: dict[str, list[float]] = Field(
        default_factory=dict,
        description="numeric column -> fixed bin edges; the column becomes categorical",
    )

    @field_validator("bins")
    @classmethod
    def _edges_increasing(cls, v: dict[str, list[float]]) -> dict[str, list[float]]:
        for col, edges in v.items():
            if len(edges) < 1 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
                raise ValueError(f"bins for '{col}' must be a non-empty, strictly increasing list")
        return v


class OutputSpec(_Strict):
    """Output post-processing (Long et al., section 5.2)."""

    bin_size: float = Field(default=0.01, ge=0.0, lt=1.0)


class Spec(_Strict):
    """A whole model spec."""

    data: DataSpec
    model: ModelSpec
    output: OutputSpec = Field(default_factory=OutputSpec)
    seed: int = Field(default=0, ge=0)

    def sha256(self) -> str:
        """Hash of the validated spec (canonical JSON), recorded in every result."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()

    def to_yaml(self) -> str:
        """The validated spec rendered back to YAML (for manifests and reports)."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """Valid key names at the parent of ``loc`` in the spec tree."""
    model: type[BaseModel] = Spec
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        ann = getattr(field, "annotation", None) if field else None
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
        else:
            return []
    return list(model.model_fields)


def _describe(err: dict[str, Any], where: str) -> str:
    loc = tuple(err.get("loc", ()))
    dotted = ".".join(str(p) for p in loc) or "(top level)"
    if err.get("type") == "extra_forbidden":
        valid = _fields_at(loc)
        close = difflib.get_close_matches(str(loc[-1]), valid, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"valid keys: {', '.join(valid)}"
        return f"{where}: unknown key '{dotted}' ({hint})"
    if err.get("type") == "missing":
        return f"{where}: required key '{dotted}' is missing"
    got = err.get("input")
    got_txt = f" (got {ui.excerpt(repr(got), 60)})" if not isinstance(got, dict) else ""
    return f"{where}: key '{dotted}': {err.get('msg', 'invalid value')}{got_txt}"


def _apply_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    for dotted, value in overrides.items():
        if value is None:
            continue
        node = raw
        parts = dotted.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[parts[-1]] = value
    return raw


def parse_spec(raw: Any, where: str = "spec", overrides: dict[str, Any] | None = None) -> Spec:
    """Validate a spec given as a mapping (already parsed YAML)."""
    if raw is None:
        raise InputError(f"{where}: the spec is empty; it needs at least data.label and model.estimator")
    if not isinstance(raw, dict):
        raise InputError(f"{where}: the spec must be a YAML mapping with keys data, model, output, seed")
    raw = _apply_overrides(json.loads(json.dumps(raw, default=str)), overrides or {})
    try:
        return Spec.model_validate(raw)
    except ValidationError as exc:
        raise InputError(_describe(exc.errors()[0], where)) from None


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None) -> Spec:
    """Read, parse and validate a YAML spec file; ``overrides`` maps dotted keys to values.

    Every failure is an :class:`InputError` naming the file and, where it applies, the
    line (YAML syntax) or the key (schema).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: spec file not found; pass an existing YAML file to --model") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a YAML spec file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the spec file ({exc.__class__.__name__})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}, column {mark.column + 1}:" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        ctx, ctx_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if ctx and ctx_mark is not None and mark is not None and ctx_mark.line != mark.line:
            problem += f" ({ctx} at line {ctx_mark.line + 1}, column {ctx_mark.column + 1})"
        raise InputError(f"{path}:{line} YAML syntax error: {problem}") from None
    return parse_spec(raw, where=str(path), overrides=overrides)
