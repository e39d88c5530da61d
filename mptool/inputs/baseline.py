"""Reading a previous run (``--baseline``, ``mptool diff``, ``report --history``) and a waiver file.

A previous run is its ``pdtp.json`` (a results folder or the file itself). It may come from
an artifact store or a pull request, so it is read as untrusted input: at most
:data:`MAX_RUN_BYTES`, JSON only (no NaN/Infinity constants, no key twice), and every
record must carry a finite, non-negative ``pdtp`` and its match key (the ``data.id`` value
where the run had an id column, else its ``fingerprint``).

A waiver file is YAML read by the spec's strict reader (:func:`mptool.inputs.spec.read_yaml`:
no duplicate keys, anchors, tags or YAML 1.1 surprises)::

    waivers:
      - record: '3f9a0c2b7d1e4a55'   # a fingerprint from pdtp.csv, or a data.id value
        reason: 'outlier accepted in review #1234'
        who: alice@example.com
        expires: 2026-06-30          # valid through this day

Every waiver ends: ``expires`` may be at most :data:`MAX_WAIVER_DAYS` days after today (a
waiver to 9999-12-31 is refused; renew it instead). In YAML `` #`` after an unquoted value
starts a comment, so ``reason: reviewed in review #1234`` would be read as "reviewed in
review" (and ``record: abc #1`` would waive record "abc"): an unquoted ``record``, ``reason``
or ``who`` followed by a comment on its line is refused; quote the value.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from mptool.inputs.signature import verify
from mptool.inputs.spec import read_yaml
from mptool.runtime import ui
from mptool.runtime.errors import InputError

#: Largest pdtp.json read as a baseline (all 45,222 Adult records make about 30 MB).
MAX_RUN_BYTES = 1_000_000_000
#: Largest waiver file, and most entries in it.
MAX_WAIVER_BYTES = 1_000_000
MAX_WAIVERS = 10_000
#: Longest ``reason`` / ``who`` / ``record`` text of a waiver.
MAX_WAIVER_TEXT = 500
#: Latest expiry a waiver may have, in days after today: a waiver is reviewed at least once a year.
MAX_WAIVER_DAYS = 365
#: Environment variable fixing "today" for waiver expiry (tests, reproducible CI reruns).
TODAY_ENV = "MPTOOL_TODAY"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_WAIVER_KEYS = ("record", "reason", "who", "expires")
_TEXT_KEYS = ("record", "reason", "who")


@dataclass(frozen=True)
class PreviousRun:
    """A previous pdtp run: its summary, its per-record table (with ``key``) and where it was read."""

    path: Path
    summary: dict[str, Any]
    table: pd.DataFrame  # key, row, pdtp, fingerprint [, id]
    identity: dict[str, Any]


@dataclass(frozen=True)
class Waiver:
    """One accepted record: its id or fingerprint, why, who accepted it, and the last day it holds."""

    record: str
    reason: str
    who: str
    expires: dt.date


def key_text(value: Any) -> str:
    """A match key as text: ids read as 17, 17.0 or '17' are one key."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return str(value)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key '{ui.excerpt(key)}' appears twice in one object")
        out[key] = value
    return out


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _read_json(path: Path, flag: str) -> Any:
    try:
        if path.exists() and not path.is_file():  # a pipe blocks the read, a device like /dev/zero never ends
            raise InputError(f"{path}: {flag} is not a regular file (a pipe, device or socket)")
        size = path.stat().st_size
        if size > MAX_RUN_BYTES:
            raise InputError(f"{path}: {flag} is {size:,} bytes; at most {MAX_RUN_BYTES:,} are read")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: {flag} not found; give a results folder of 'mptool pdtp' or its pdtp.json") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read {flag} ({exc.__class__.__name__})") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        first = (str(exc).splitlines() or [exc.__class__.__name__])[0]
        raise InputError(f"{path}: {flag} is not valid JSON ({first})") from None


def _records_table(records: Any, where: str, id_column: str | None, keyed: bool = True) -> pd.DataFrame:
    """The per-record table of a run, each record checked; ``key`` is the id (if the run had one) or fingerprint.

    ``keyed`` False: a run with neither (no MPTOOL_FINGERPRINT_KEY): every key is empty (history trend only).
    """
    if not isinstance(records, list):
        raise InputError(f"{where}: 'records' must be a list of records")
    keys, rows, values, prints, ids = [], [], [], [], []
    key_field = "id" if id_column else "fingerprint"
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise InputError(f"{where}: record {i} is not an object")
        pdtp, key = rec.get("pdtp"), rec.get(key_field)
        if pdtp is None and str(rec.get("violation")) == "undecided":
            raise InputError(f"{where}: record {i} was left unevaluated by a spent --budget (replicate engine); a run "
                             "with unevaluated records cannot be compared: rerun it with a larger --budget or none")
        if isinstance(pdtp, bool) or not isinstance(pdtp, int | float) or not math.isfinite(pdtp) or pdtp < 0:
            raise InputError(f"{where}: record {i} has no finite, non-negative 'pdtp' (got {ui.excerpt(repr(pdtp))})")
        if not keyed and not id_column:
            key = ""
        elif key is None or isinstance(key, bool | dict | list) or key == "":
            hint = "" if id_column else "; it was written before fingerprints existed: rerun it with this mptool"
            raise InputError(f"{where}: record {i} has no '{key_field}'{hint}")
        keys.append(key_text(key) if key != "" else "")
        rows.append(rec.get("row"))
        values.append(float(pdtp))
        prints.append(rec.get("fingerprint"))
        ids.append(rec.get("id"))
    table = pd.DataFrame({"key": keys, "row": rows, "pdtp": values, "fingerprint": prints})
    if id_column:
        table["id"] = ids
    if records and all(isinstance(r, dict) and "violation" in r for r in records):  # a replicate-engine run
        table["violation"] = [str(r["violation"]) for r in records]
    return table


def _records_beside(file: Path, summary: dict[str, Any], flag: str) -> tuple[list[dict[str, Any]], bytes]:
    """The records of a pdtp.json without them (issue 15): read from the CSV it names, in the same folder;
    and the file's bytes (read once: what is verified is what is parsed).

    Ids and fingerprints are read as text (a fingerprint's leading zeros stay), empty cells as missing.
    """
    name = summary.get("records_file")
    if not isinstance(name, str) or not name or Path(name).name != name:
        shown = ui.excerpt(repr(name))
        raise InputError(f"{file}: {flag}: summary.records_file must name a file beside it (got {shown})")
    csv = file.parent / name
    if not csv.is_file():
        raise InputError(
            f"{file}: {flag}: its records are in {name}, which is not beside it; copy the whole results folder"
        )
    if csv.stat().st_size > MAX_RUN_BYTES:
        raise InputError(f"{csv}: {flag} is larger than {MAX_RUN_BYTES:,} bytes")
    try:
        data = csv.read_bytes()[: MAX_RUN_BYTES + 1]
        frame = pd.read_csv(io.BytesIO(data), dtype={"id": str, "fingerprint": str}, keep_default_na=False,
                            na_values=[""])
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise InputError(f"{csv}: {flag}: cannot read the records ({exc.__class__.__name__})") from None
    frame = frame.astype(object).where(frame.notna(), None)
    return frame.to_dict(orient="records"), data


def load_run(path: str | Path, flag: str = "--baseline", matched: bool = True) -> PreviousRun:
    """A previous pdtp run from its folder or its pdtp.json; InputError (naming ``flag``) if unusable.

    ``matched`` (baselines, diff): its records must be matchable, by data.id or keyed fingerprints,
    and the run must verify under MPTOOL_FINGERPRINT_KEY (:func:`mptool.inputs.signature.verify`);
    False (a history's trend, which gates nothing) also reads a run that has neither, with empty keys.
    """
    path = Path(path)
    file = path / "pdtp.json" if path.is_dir() else path
    if path.is_dir() and not file.is_file():
        raise InputError(f"{path}: {flag} folder holds no pdtp.json; give the --out folder of a 'mptool pdtp' run")
    doc = _read_json(file, flag)
    summary = doc.get("summary") if isinstance(doc, dict) else None
    if not isinstance(summary, dict) or ("records" not in doc and "records_file" not in summary):
        raise InputError(f"{file}: {flag} is not a pdtp.json of 'mptool pdtp' (no 'summary' and 'records')")
    ident = summary.get("identity")
    if not isinstance(ident, dict) or not isinstance(ident.get("fingerprint"), dict):
        raise InputError(
            f"{file}: {flag} has no record identity (summary.identity); it was written before baselines "
            "existed: rerun it with this mptool"
        )
    id_column = ident.get("id")
    keyed = bool(id_column) or bool(ident["fingerprint"].get("key_id"))
    records, data = (doc["records"], None) if "records" in doc else _records_beside(file, summary, flag)
    table = _records_table(records, str(file), id_column if isinstance(id_column, str) else None, keyed)
    if not keyed and matched:
        raise InputError(
            f"{file}: {flag} has neither data.id nor record fingerprints (it was made without "
            "MPTOOL_FINGERPRINT_KEY): its records cannot be matched; set MPTOOL_FINGERPRINT_KEY to one secret "
            "for every run (or data.id in the spec) and rerun it"
        )
    if matched:
        verify(doc, data, str(file), flag)
    dup = table["key"][table["key"].duplicated()]
    if id_column and not dup.empty:
        raise InputError(f"{file}: {flag} has the id column '{ui.excerpt(id_column)}' with a value used twice")
    return PreviousRun(file, summary, table, ident)


# --------------------------------------------------------------------------------------------- waivers


def today(value: dt.date | None = None) -> dt.date:
    """The date waivers are checked against: ``value``, else ``MPTOOL_TODAY`` (YYYY-MM-DD), else the clock."""
    if value is not None:
        return value
    text = os.environ.get(TODAY_ENV)
    if text is None:
        return dt.date.today()
    return parse_date(text, TODAY_ENV)


def parse_date(text: Any, where: str) -> dt.date:
    """A YYYY-MM-DD date, or InputError naming ``where``."""
    if isinstance(text, str) and _DATE.match(text):
        try:
            return dt.date.fromisoformat(text)
        except ValueError:
            pass
    raise InputError(f"{where}: expected a date written YYYY-MM-DD, e.g. 2026-06-30 (got {ui.excerpt(repr(text))})")


def _text(entry: dict[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if key == "record" and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # a numeric id written without quotes
    if not isinstance(value, str) or not value.strip():
        hint = "; quote fingerprints and ids: record: '3f9a0c2b7d1e4a55'" if key == "record" else ""
        raise InputError(f"{where}: '{key}' must be non-empty text{hint} (got {ui.excerpt(repr(value))})")
    if len(value) > MAX_WAIVER_TEXT or ui.has_unsafe(value):
        raise InputError(
            f"{where}: '{key}' must be one line of at most {MAX_WAIVER_TEXT} characters, no control characters"
        )
    return value


def _cut_by_comment(text: str, where: str) -> None:
    """InputError if an unquoted ``record``/``reason``/``who`` value is followed by `` #`` on its line.

    YAML reads `` #...`` after a plain value as a comment, silently cutting the value (the
    docs' own ``reason: reviewed in review #1234`` lost ``#1234``). Found from the scanner's
    tokens and the raw text, so a quoted value (where ``#`` is text) is never refused.
    """
    try:
        tokens = list(yaml.scan(text))
    except yaml.YAMLError:
        return  # read_yaml reports the syntax error with its line
    for i in range(3, len(tokens)):
        key, value = tokens[i - 2], tokens[i]
        if not (isinstance(tokens[i - 3], yaml.KeyToken) and isinstance(key, yaml.ScalarToken)
                and isinstance(tokens[i - 1], yaml.ValueToken) and isinstance(value, yaml.ScalarToken)):
            continue
        if key.value not in _TEXT_KEYS or not value.plain:
            continue
        end = value.end_mark.index
        rest = text[end:].split("\n", 1)[0]
        if re.match(r"[ \t]+#", rest):
            raise InputError(
                f"{where} line {value.start_mark.line + 1}: '{key.value}': the text after ' #' is a YAML comment, "
                f"not part of the {key.value}; quote the value, e.g. reason: 'reviewed in review #1234'"
            )


def _bounded(expires: dt.date, on: dt.date, where: str) -> dt.date:
    """``expires`` unless it is more than :data:`MAX_WAIVER_DAYS` days after ``on`` (InputError)."""
    last = on + dt.timedelta(days=MAX_WAIVER_DAYS)
    if expires > last:
        raise InputError(
            f"{where}: 'expires' {expires.isoformat()} is more than {MAX_WAIVER_DAYS} days after today "
            f"({on.isoformat()}); a waiver must end by {last.isoformat()} (renew it when it expires)"
        )
    return expires


def _waiver(entry: Any, where: str, on: dt.date | None = None) -> Waiver:
    if not isinstance(entry, dict):
        raise InputError(f"{where}: each waiver is a mapping with keys {', '.join(_WAIVER_KEYS)}")
    unknown = [k for k in entry if k not in _WAIVER_KEYS]
    if unknown:
        raise InputError(f"{where}: unknown key '{ui.excerpt(unknown[0])}' (valid keys: {', '.join(_WAIVER_KEYS)})")
    missing = [k for k in _WAIVER_KEYS if k not in entry]
    if missing:
        raise InputError(f"{where}: required key '{missing[0]}' is missing")
    expires = _bounded(parse_date(entry["expires"], f"{where}: 'expires'"), on or today(), where)
    return Waiver(_text(entry, "record", where), _text(entry, "reason", where), _text(entry, "who", where), expires)


def load_waivers(path: str | Path, on: dt.date | None = None) -> list[Waiver]:
    """The waivers of a YAML file (module docstring); InputError naming the file and entry if not clearly valid.

    ``on``: today (:func:`today` when None), which bounds every expiry (:data:`MAX_WAIVER_DAYS`).
    """
    path = Path(path)
    try:
        if path.exists() and not path.is_file():  # a pipe blocks the read, a device like /dev/zero never ends
            raise InputError(f"{path}: the waiver file is not a regular file (a directory, pipe, device or socket)")
        size = path.stat().st_size
        if size > MAX_WAIVER_BYTES:
            raise InputError(f"{path}: the waiver file is {size:,} bytes; at most {MAX_WAIVER_BYTES:,}")
        text = path.read_bytes()[: MAX_WAIVER_BYTES + 1].decode("utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: waiver file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the waiver file ({exc.__class__.__name__})") from None
    raw = read_yaml(text, str(path))
    _cut_by_comment(text, str(path))
    if not isinstance(raw, dict) or set(raw) != {"waivers"} or not isinstance(raw["waivers"], list):
        raise InputError(f"{path}: a waiver file is a mapping with one key, 'waivers', holding a list")
    if len(raw["waivers"]) > MAX_WAIVERS:
        raise InputError(f"{path}: {len(raw['waivers']):,} waivers; at most {MAX_WAIVERS:,}")
    out: list[Waiver] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(raw["waivers"]):
        waiver = _waiver(entry, f"{path}: waivers[{i}]", on)
        if waiver.record in seen:
            first = seen[waiver.record]
            raise InputError(f"{path}: waivers[{i}]: record is already waived by waivers[{first}]; keep one")
        seen[waiver.record] = i
        out.append(waiver)
    return out
