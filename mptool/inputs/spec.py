"""The YAML model spec: a strict YAML reader, pydantic models, overrides and hashing.

A spec describes the training algorithm A (estimator, parameters, preprocessing) and how
the training set T is drawn from the CSV. It is read so that what a reviewer sees in the
file is what runs (issue 12):

- at most ``MAX_SPEC_BYTES`` are read; nesting deeper than ``MAX_DEPTH`` is refused;
- a key that appears twice is refused, naming the key and both lines;
- anchors, aliases and tags other than ``!!str`` are refused (no expansion, no objects);
- plain scalars follow the YAML 1.2 core schema (``1e-9``, ``1E5`` and ``.5`` are floats,
  ``2024-01-01`` is text, only ``true``/``false`` are booleans), and a plain scalar that
  YAML 1.1 reads as a different boolean or number (``yes``, ``no``, ``on``, ``off``,
  ``y``, ``n``, ``010``, ``1_000``, ``0b11``, ``1:30``) is refused with the quoted form
  to write instead; ``.inf``/``.nan`` are refused (every number is finite);
- keys are text (a plain whole number such as ``41`` is the text ``"41"``: a column name, as a
  headerless file's columns are named); unknown keys are errors that name the key and the
  closest valid one;
- column names given as values (``label: 41``, ``drop: [0, 3]``) may be plain whole numbers
  too; a plain decimal number (``4.5``) must be quoted, since ``4.50`` would name ``"4.5"``.
"""

from __future__ import annotations

import codecs
import difflib
import hashlib
import json
import math
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from mptool.inputs.options import bin_size_problem, seed_problem
from mptool.runtime import ui
from mptool.runtime.errors import InputError

#: Specs larger than this are refused before they are read (a spec is a few hundred bytes).
MAX_SPEC_BYTES = 1_000_000
#: Deepest nesting of mappings and lists accepted (a spec needs 4).
MAX_DEPTH = 32
#: Most fixed bin edges per column (as many as categories a column may have).
MAX_BIN_EDGES = 1000
#: Most missing-value markers, and the longest one.
MAX_MARKERS, MAX_MARKER_CHARS = 100, 100

_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_PLAIN = "tag:mptool,2024:plain"  # a plain (unquoted, untagged) scalar, typed by _plain
_INT_12 = re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$")
_NAME_INT = re.compile(r"^(?:0|[1-9][0-9]*)$")  # a plain whole number read as a column name
_LEADING_ZERO = re.compile(r"^[-+]?0[0-9]+$")
_HEX = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT_12 = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_NONFINITE = re.compile(r"^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
_NULL = ("", "~", "null", "Null", "NULL")
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_BOOL_11_EXTRA = {"y": True, "Y": True, "n": False, "N": False}  # YAML 1.1 booleans PyYAML leaves as text


class _SpecYamlError(Exception):
    """A refusal found while reading the YAML: the line (1-based) and what to fix."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line, self.message = line, message


@dataclass(frozen=True)
class _Refused:
    """Placeholder for a scalar that is refused; reported with its dotted key once the tree is built."""

    line: int
    message: str


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1 if node.start_mark is not None else 0


_YAML_11 = yaml.constructor.SafeConstructor()  # builds YAML 1.1 readings for comparison, never a document


def _reading_11(node: yaml.ScalarNode) -> Any:
    """What YAML 1.1 (PyYAML's safe_load) makes of a plain scalar: a bool, int or float, else None."""
    text = node.value
    if text in _BOOL_11_EXTRA:
        return _BOOL_11_EXTRA[text]
    resolvers = yaml.SafeLoader.yaml_implicit_resolvers
    for tag, regexp in resolvers.get(text[:1], []) + resolvers.get(None, []):
        if regexp.match(text):
            kind = tag.rsplit(":", 1)[-1]
            if kind in ("bool", "int", "float"):
                return getattr(_YAML_11, f"construct_yaml_{kind}")(node)
            return None
    return None


def _reading_12(text: str) -> Any:
    """A plain scalar under the YAML 1.2 core schema (hexadecimal ints too): None, bool, int, float or text."""
    if text in _NULL:
        return None
    if text in _BOOL:
        return _BOOL[text]
    if _INT_12.match(text):
        return int(text)
    if _HEX.match(text):
        return int(text, 16)
    if _FLOAT_12.match(text):
        return float(text)
    return text


def _plain(node: yaml.ScalarNode) -> Any:
    """A plain scalar's value, or :class:`_Refused` where YAML 1.1 and 1.2 disagree or it is not finite."""
    text = node.value
    if _NONFINITE.match(text):
        return _Refused(_line(node), f"{text} is not a finite number; every number in a spec must be finite")
    v12, v11 = _reading_12(text), _reading_11(node)
    if isinstance(v12, float) and not math.isfinite(v12):  # 1e999 overflows to inf
        return _Refused(_line(node), f"{text} is not a finite number (too large); every number must be finite")
    if _LEADING_ZERO.match(text):
        v12 = int(text)  # YAML 1.2 reads 010 as 10, YAML 1.1 as octal 8 (and 09 as text): refused below
        v11 = "text" if v11 is None else v11
    if v11 is None or (type(v11) is type(v12) and v11 == v12):
        return v12
    if isinstance(v11, bool):
        word = "true" if v11 else "false"
        return _Refused(
            _line(node),
            f"{text} is read as the boolean {word} by YAML 1.1; quote it: '{text}' (or write {word} for a boolean)",
        )
    as11 = "text" if v11 == "text" else repr(v11)
    as12 = "text" if isinstance(v12, str) else repr(v12)
    return _Refused(
        _line(node),
        f"{text} is read as {as11} by YAML 1.1 and as {as12} by YAML 1.2; write the number without "
        f"leading zeros, '_' or ':', or quote it for text: '{text}'",
    )


class _StrictResolver(yaml.resolver.BaseResolver):
    """No implicit types: a plain scalar gets the private tag ``_PLAIN`` (typed by :func:`_plain`), others text."""

    def resolve(self, kind: type, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode:
            return _PLAIN if implicit[0] else _STR
        return _SEQ if kind is yaml.SequenceNode else _MAP


class _StrictConstructor(yaml.constructor.SafeConstructor):
    """Builds dicts (text keys, each once), lists, typed plain scalars and text; nothing else."""

    yaml_constructors: dict = {}

    def construct_plain(self, node: yaml.ScalarNode) -> Any:
        return _plain(node)

    def construct_text(self, node: yaml.ScalarNode) -> str:
        return node.value

    def construct_list(self, node: yaml.SequenceNode) -> list[Any]:
        return [self.construct_object(child, deep=True) for child in node.value]

    def construct_dict(self, node: yaml.MappingNode) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True) if isinstance(key_node, yaml.ScalarNode) else None
            if isinstance(key, int) and not isinstance(key, bool) and _NAME_INT.match(key_node.value):
                key = key_node.value  # a column name such as 41 (headerless files name columns 0, 1, ...)
            if isinstance(key, _Refused):
                raise _SpecYamlError(key.line, f"key {key.message}")
            if not isinstance(key, str):
                if not isinstance(key_node, yaml.ScalarNode) or not key_node.value:
                    raise _SpecYamlError(_line(key_node), "a key must be a name (text)")
                shown = key_node.value
                raise _SpecYamlError(_line(key_node), f"key {shown} is not text; quote it: '{shown}'")
            if key in first:
                raise _SpecYamlError(
                    _line(key_node), f"key '{key}' appears twice (first at line {first[key]}); keep one"
                )
            first[key] = _line(key_node)
            out[key] = self.construct_object(value_node, deep=True)
        return out


_StrictConstructor.add_constructor(_PLAIN, _StrictConstructor.construct_plain)
_StrictConstructor.add_constructor(_STR, _StrictConstructor.construct_text)
_StrictConstructor.add_constructor(_SEQ, _StrictConstructor.construct_list)
_StrictConstructor.add_constructor(_MAP, _StrictConstructor.construct_dict)


class _PyLoader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    _StrictConstructor,
    _StrictResolver,
):
    """The strict loader on PyYAML's pure-Python parser (used when libyaml is missing)."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _StrictConstructor.__init__(self)
        _StrictResolver.__init__(self)


_Loader: type = _PyLoader
if getattr(yaml, "__with_libyaml__", False):
    from yaml.cyaml import CParser

    class _CLoader(CParser, _StrictConstructor, _StrictResolver):
        """The strict loader on libyaml's C parser: a 1 MB spec is read in well under a second."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _StrictConstructor.__init__(self)
            _StrictResolver.__init__(self)

    _Loader = _CLoader


def _check_events(text: str) -> None:
    """Walk the parser's events (no tree is built): refuse anchors, aliases, tags and deep nesting early."""
    loader = _Loader(text)
    depth = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            line = event.start_mark.line + 1 if event.start_mark is not None else 0
            if isinstance(event, yaml.AliasEvent):
                raise _SpecYamlError(line, f"alias *{event.anchor} is not allowed in a spec; write the value out")
            if getattr(event, "anchor", None) is not None:
                raise _SpecYamlError(line, f"anchor &{event.anchor} is not allowed in a spec; write values out")
            tag = getattr(event, "tag", None)
            if tag is not None and not (tag == _STR and isinstance(event, yaml.ScalarEvent)):
                shown = tag.replace("tag:yaml.org,2002:", "!!")
                raise _SpecYamlError(line, f"tag {shown} is not allowed in a spec; write a plain or quoted value")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _SpecYamlError(line, f"nesting deeper than {MAX_DEPTH} levels; a spec needs 4")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    finally:
        loader.dispose()


def _first_refused(value: Any, path: str = "") -> tuple[str, _Refused] | None:
    """The first :class:`_Refused` placeholder in document order, with its dotted key."""
    if isinstance(value, _Refused):
        return path or "(top level)", value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        sub = f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))
        found = _first_refused(child, sub)
        if found:
            return found
    return None


def _syntax_error(exc: yaml.YAMLError, where: str) -> InputError:
    mark = getattr(exc, "problem_mark", None)
    line = f" line {mark.line + 1}, column {mark.column + 1}:" if mark is not None else ""
    problem = getattr(exc, "problem", None) or "invalid YAML"
    ctx, ctx_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if ctx and ctx_mark is not None and mark is not None and ctx_mark.line != mark.line:
        problem += f" ({ctx} at line {ctx_mark.line + 1}, column {ctx_mark.column + 1})"
    return InputError(f"{where}:{line} YAML syntax error: {problem}")


def read_yaml(text: str, where: str) -> Any:
    """Parse spec text with the strict reader (module docstring); InputError naming ``where`` and the line.

    The events are checked first (anchors, aliases, tags, depth), so a hostile file is
    refused before any node is built; then the single document is built by the strict
    constructor, and the first refused scalar is reported with its dotted key.
    """
    try:
        _check_events(text)
        loader = _Loader(text)
        try:
            raw = loader.get_single_data()
        finally:
            loader.dispose()
    except _SpecYamlError as exc:
        raise InputError(f"{where} line {exc.line}: {exc.message}") from None
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, where) from None
    found = _first_refused(raw)
    if found:
        dotted, refused = found
        raise InputError(f"{where} line {refused.line}: {dotted}: {refused.message}")
    return raw


class _SpecDumper(yaml.SafeDumper):
    """SafeDumper that quotes every string the strict reader would not read back as the same text."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    back = _plain(yaml.ScalarNode(_STR, data)) if "\n" not in data else None
    plain_ok = isinstance(back, str) and back == data
    return dumper.represent_scalar(_STR, data, style=None if plain_ok else "'")


_SpecDumper.add_representer(str, _represent_str)


def dump_yaml(raw: Any) -> str:
    """YAML text of a spec mapping that :func:`read_yaml` reads back to the same values."""
    return yaml.dump(raw, Dumper=_SpecDumper, sort_keys=False, allow_unicode=True)


# --------------------------------------------------------------------------- the schema


def _number(value: Any) -> Any:
    """Numbers only: YAML text or a boolean where a number belongs is refused, not converted."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number (got the boolean {str(value).lower()})")
    if isinstance(value, str):
        raise ValueError(f"expected a number, not text: write numbers without quotes (got {_excerpt(value)})")
    return value


def _seed(value: int) -> int:
    if why := seed_problem(value):
        raise ValueError(why)
    return value


def _bin_size(value: float) -> float:
    if why := bin_size_problem(value):
        raise ValueError(why)
    return value


def _marker(value: Any) -> Any:
    if not isinstance(value, str):
        shown = "null" if value is None else repr(value)
        raise ValueError(f"a marker is the text of a cell: quote it ('{shown}'), and write '' for the empty cell")
    return value


def _name(value: Any) -> Any:
    """A column name: text, or a plain whole number (``label: 41`` names column "41")."""
    if isinstance(value, bool) or value is None:
        shown = "null" if value is None else str(value).lower()
        raise ValueError(f"expected a column name (got {shown}); quote it if the column is named '{shown}'")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        raise ValueError(f"a column name that is a decimal number must be quoted: '{value}' (got {value})")
    return value


def _separator(value: str) -> str:
    if len(value) != 1 or value in "\"\r\n" or value.isalnum():
        raise ValueError(
            "the separator is one character that is not a letter, digit, quote or line break, "
            "e.g. ',' ';' '|' or \"\\t\" for tab"
        )
    return value


def _encoding(value: str) -> str:
    try:
        return codecs.lookup(value).name
    except LookupError:
        raise ValueError(f"unknown text encoding '{ui.excerpt(value, 40)}' (e.g. utf-8, latin-1, cp1252)") from None


def _header(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, list):
        return [_name(v) for v in value]
    raise ValueError("header is true (the first line names the columns), false (no header row) or a list of names")


Name = Annotated[str, BeforeValidator(_name)]
Int = Annotated[int, BeforeValidator(_number)]
Float = Annotated[float, BeforeValidator(_number)]
Seed = Annotated[int, BeforeValidator(_number), AfterValidator(_seed)]
_SCALAR = (type(None), bool, int, float, str)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


#: Most columns a ``data.read.header`` list or a ``data.categorical``/``data.numeric`` list may name.
MAX_NAMES = 100_000
#: Most label bin edges.
MAX_LABEL_EDGES = 100


class ReadSpec(_Strict):
    """How the data file is read (CSV options; a Parquet file carries its own names and types)."""

    separator: Annotated[str, AfterValidator(_separator)] = Field(default=",", description="cell separator")
    header: Annotated[bool | list[str] | None, BeforeValidator(_header)] = Field(
        default=None,
        description="true: the first line names the columns; false: no header row, columns named 0, 1, 2, ...; "
        "a list: no header row, these names; unset: true, refused when the first line looks like data",
    )
    encoding: Annotated[str, AfterValidator(_encoding)] = Field(default="utf-8", description="text encoding")
    decimal: Literal[".", ","] = Field(default=".", description="decimal mark of numbers")
    skip_spaces: bool = Field(default=False, description="ignore spaces after each separator (UCI files)")

    @field_validator("skip_spaces", mode="before")
    @classmethod
    def _bool_only(cls, v: Any) -> Any:
        if not isinstance(v, bool):
            raise ValueError("expected true or false")
        return v

    @field_validator("decimal")
    @classmethod
    def _decimal_not_separator(cls, v: str, info: Any) -> str:
        if v == info.data.get("separator"):
            raise ValueError(f"the decimal mark {v!r} is also the separator; a file with decimal commas is "
                             "separated by something else, e.g. separator: ';'")
        return v

    @field_validator("header")
    @classmethod
    def _names(cls, v: Any) -> Any:
        if isinstance(v, list):
            if not v or len(v) > MAX_NAMES:
                raise ValueError(f"a header list names between 1 and {MAX_NAMES:,} columns")
            dups = sorted({n for n in v if v.count(n) > 1})
            if dups:
                raise ValueError(f"the header list names {ui.quoted(dups[0])} twice")
        return v


class DataSpec(_Strict):
    """How T is drawn from the data file."""

    label: Name = Field(description="target column")
    drop: list[Name] = Field(default_factory=list, description="columns ignored")
    id: Name | None = Field(default=None, description="id column echoed in per-record output")
    read: ReadSpec = Field(default_factory=ReadSpec, description="how the file is read")
    categorical: list[Name] = Field(default_factory=list, description="columns used as categories, numbers or not")
    numeric: list[Name] = Field(default_factory=list, description="columns that must be numbers, never categories")
    label_bins: list[Float] | None = Field(
        default=None, description="edges that cut a numeric label into classes (bin k = [edge k-1, edge k))"
    )
    train_size: Int | None = Field(default=None, ge=2, description="records drawn as T; null = all")
    missing: Literal["drop", "error", "impute"] = "drop"
    missing_values: list[Annotated[str, BeforeValidator(_marker)]] = Field(
        default_factory=lambda: [""],
        description="cell texts read as missing (exact match); default: the empty cell only",
    )

    @field_validator("label_bins")
    @classmethod
    def _label_edges(cls, v: list[float] | None) -> list[float] | None:
        if v is not None:
            if not v or len(v) > MAX_LABEL_EDGES or any(b <= a for a, b in zip(v, v[1:], strict=False)):
                raise ValueError(f"label_bins is a strictly increasing list of 1 to {MAX_LABEL_EDGES} edges")
        return v

    @field_validator("id")
    @classmethod
    def _id_not_label(cls, v: str | None, info: Any) -> str | None:
        if v is not None and v == info.data.get("label"):
            raise ValueError(
                "data.id names the label column: ids are written to pdtp.csv, the terminal and junit.xml, so "
                "every record's label would be published; set data.id to a key column that holds no training "
                "value, or leave it out"
            )
        return v

    @field_validator("numeric")
    @classmethod
    def _kinds_apart(cls, v: list[str], info: Any) -> list[str]:
        both = sorted(set(v) & set(info.data.get("categorical") or ()))
        if both:
            raise ValueError(f"column {ui.quoted(both[0])} is listed in both data.categorical and data.numeric")
        return v

    @field_validator("missing_values")
    @classmethod
    def _markers(cls, v: list[str]) -> list[str]:
        if len(v) > MAX_MARKERS:
            raise ValueError(f"at most {MAX_MARKERS} missing-value markers")
        for marker in v:
            if len(marker) > MAX_MARKER_CHARS or any(ord(ch) < 32 or ord(ch) == 127 for ch in marker):
                raise ValueError(
                    f"a marker is the text of a cell: at most {MAX_MARKER_CHARS} characters, no control characters"
                )
        return v


class ModelSpec(_Strict):
    """The training algorithm A."""

    estimator: str = Field(description="short name or dotted path of a classifier with predict_proba")
    params: dict[str, Any] = Field(default_factory=dict)
    preprocess: Literal["auto", "none"] = "auto"
    bins: dict[str, list[Float]] = Field(
        default_factory=dict,
        description="numeric column -> fixed bin edges; the column becomes categorical",
    )

    @field_validator("params")
    @classmethod
    def _params_plain(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key, value in v.items():
            items = value if isinstance(value, list) else [value]
            for item in items:
                if not isinstance(item, _SCALAR) or (isinstance(item, float) and not math.isfinite(item)):
                    got = item if isinstance(item, float) else type(item).__name__
                    raise ValueError(
                        f"'{key}' must be a finite number, text, true/false, null or a list of those (got {got})"
                    )
        return v

    @field_validator("bins")
    @classmethod
    def _edges_increasing(cls, v: dict[str, list[float]]) -> dict[str, list[float]]:
        for col, edges in v.items():
            if len(edges) < 1 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
                raise ValueError(f"bins for '{col}' must be a non-empty, strictly increasing list")
            if len(edges) > MAX_BIN_EDGES:
                raise ValueError(f"bins for '{col}' has {len(edges)} edges (at most {MAX_BIN_EDGES})")
        return v


def _bool(value: Any) -> Any:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


#: Largest ``output.release.round`` (decimals) and ``temperature`` accepted.
MAX_ROUND, MAX_TEMPERATURE = 15, 1e6


class ReleaseSpec(_Strict):
    """What the deployed model releases of its probability vector (Shokri et al. VIII-A; mptool.privacy.release)."""

    top_k: Int | None = Field(default=None, ge=1, description="release the k largest probabilities, the rest as 0")
    round: Int | None = Field(default=None, ge=0, le=MAX_ROUND, description="round probabilities to d decimals")
    temperature: Float | None = Field(
        default=None, gt=0, le=MAX_TEMPERATURE, description="softmax temperature t: p^(1/t), renormalised"
    )
    label_only: Annotated[bool, BeforeValidator(_bool)] = Field(
        default=False, description="release only the predicted label (one-hot)"
    )

    @field_validator("label_only")
    @classmethod
    def _alone(cls, v: bool, info: Any) -> bool:
        others = [k for k in ("top_k", "round", "temperature") if info.data.get(k) is not None]
        if v and others:
            raise ValueError(f"label_only releases only the label; remove {others[0]} (it would change nothing)")
        return v


class OutputSpec(_Strict):
    """Output post-processing (Long et al., section 5.2) and the release policy (Shokri et al. VIII-A)."""

    bin_size: Annotated[float, BeforeValidator(_number), AfterValidator(_bin_size)] = 0.01
    release: ReleaseSpec | None = Field(default=None, description="release policy; unset: the full vector")


class Spec(_Strict):
    """A whole model spec."""

    data: DataSpec
    model: ModelSpec
    output: OutputSpec = Field(default_factory=OutputSpec)
    seed: Seed = 0

    def dumped(self) -> dict[str, Any]:
        """The spec as a JSON-shaped mapping; ``output.release`` only when set (older specs hash as before)."""
        raw = self.model_dump(mode="json")
        if raw["output"].get("release") is None:
            raw["output"].pop("release", None)
        return raw

    def sha256(self) -> str:
        """Hash of the validated spec (canonical JSON), recorded in every result."""
        blob = json.dumps(self.dumped(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()

    def to_yaml(self) -> str:
        """The validated spec rendered back to YAML (for manifests and reports); it reads back the same."""
        return dump_yaml(self.dumped())


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """Valid key names at the parent of ``loc`` in the spec tree."""
    model: type[BaseModel] = Spec
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        ann = getattr(field, "annotation", None) if field else None
        ann = next((a for a in getattr(ann, "__args__", ()) if isinstance(a, type) and issubclass(a, BaseModel)), ann)
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
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    got_txt = f" (got {_excerpt(got)})" if not isinstance(got, dict | list) and "(got " not in msg else ""
    return f"{where}: key '{dotted}': {msg}{got_txt}"


def _excerpt(value: Any, limit: int = 60) -> str:
    return ui.excerpt(repr(value), limit)


def _copy(raw: Any) -> Any:
    """A copy of a parsed spec tree (mappings and lists of scalars); no aliases, so no expansion."""
    if isinstance(raw, dict):
        return {key: _copy(value) for key, value in raw.items()}
    if isinstance(raw, list):
        return [_copy(value) for value in raw]
    return raw


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
    raw = _apply_overrides(_copy(raw), overrides or {})
    try:
        return Spec.model_validate(raw)
    except ValidationError as exc:
        raise InputError(_describe(exc.errors()[0], where)) from None


def read_spec_text(path: Path) -> str:
    """The text of a spec file, at most ``MAX_SPEC_BYTES`` (checked before reading), or InputError."""
    try:
        info = path.stat()
        if stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode):  # open() would wait for a writer forever
            raise InputError(f"{path}: not a regular file (a pipe or socket); pass a YAML spec file to --model")
        size = info.st_size
        if size > MAX_SPEC_BYTES:
            raise InputError(f"{path}: the spec is {size:,} bytes; a spec may be at most {MAX_SPEC_BYTES:,}")
        with open(path, "rb") as fh:
            blob = fh.read(MAX_SPEC_BYTES + 1)  # a pipe or device reports no size
        if len(blob) > MAX_SPEC_BYTES:
            raise InputError(f"{path}: the spec is larger than {MAX_SPEC_BYTES:,} bytes, the most a spec may be")
        return blob.decode("utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: spec file not found; pass an existing YAML file to --model") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a YAML spec file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the spec file ({exc.__class__.__name__})") from None


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None) -> Spec:
    """Read, parse and validate a YAML spec file; ``overrides`` maps dotted keys to values.

    Every failure is an :class:`InputError` naming the file and, where it applies, the
    line (YAML reading) or the key (schema).
    """
    path = Path(path)
    raw = read_yaml(read_spec_text(path), str(path))
    return parse_spec(raw, where=str(path), overrides=overrides)


def yaml_value(value: Any) -> str:
    """One value as flow-style YAML text that :func:`read_yaml` reads back to the same value (for ``mptool init``)."""
    text = yaml.dump(value, Dumper=_SpecDumper, default_flow_style=True, width=10**6, allow_unicode=True)
    return text.removesuffix("\n").removesuffix("\n...").strip()
