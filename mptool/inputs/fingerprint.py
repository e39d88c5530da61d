"""Record fingerprints: a keyed hash that finds a training record again in another run.

A baseline, a waiver or ``mptool diff`` must match a record of one run with the same record
of another run although the CSV may have been reordered (row numbers change). Records match
by the spec's ``data.id`` where it is set; otherwise by this fingerprint of the record's
values (features and label), never by row number alone.

Canonical form. The feature columns in name order, then the label; each cell written
unambiguously: a number as ``n`` + the shortest repr of its float (``1``, ``1.0`` are one
value, so are ``-0.0`` and ``0``; a missing number is ``nnan``), a text cell as ``s`` + its length + ``:`` + its text
(so no cell can fake a separator). The header (column names) is hashed once before the
rows, so renaming a column changes every fingerprint.

Why keyed, and why never without a key. A plain SHA-256 of a record's values published in
pdtp.csv would let anyone who guesses a record (few columns, few values each: a dictionary of
the whole domain is cheap) test whether it is a training record -- a membership test handed
out for free, and for low-entropy data the values themselves. The same holds for any unkeyed
hash of the data set, a row or a column: an adversary who knows every record but one tries
each candidate for the last one, and the candidate whose hash matches is the true record (the
adversary DTP is defined against; issue 26). So:

- the fingerprint is HMAC-SHA-256 under ``MPTOOL_FINGERPRINT_KEY`` (environment; a CI
  secret, the same on every run that is compared), truncated to :data:`FINGERPRINT_HEX` hex
  digits (64 bits: no accidental collision among a billion records is expected; the
  truncation does not make guessing easier or harder, the key does);
- without the key there are no fingerprints at all (the column is empty and pdtp.json's
  ``identity.fingerprint`` says why): records are then matched only by the spec's
  ``data.id``, and ``--baseline``, ``--waivers`` and ``mptool diff`` refuse a run that has
  neither (exit 2), rather than derive a key from the data (a hash of the data in disguise);
- every other digest of the data in a result (the data file's, in the manifest) is keyed the
  same way (:func:`keyed_digest`) or left out.

Every result records the key's id (:func:`key_id`, a MAC of a constant under the key: it
says whether two runs share a key and nothing about the data), so runs made under different
keys are refused as a baseline instead of showing every record as new.

Cost. Each distinct record is written out and MAC-ed once (a data set of 1.41 M rows with
1,646 distinct ones makes 1,646 MACs); the rows get theirs by index (issue 28).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mptool.inputs.data import Records
from mptool.inputs.memo import factorized
from mptool.runtime.errors import InputError

#: Hex digits kept of each HMAC-SHA-256 fingerprint (64 bits).
FINGERPRINT_HEX = 16
#: Environment variable holding a secret fingerprint key (e.g. a CI secret).
KEY_ENV = "MPTOOL_FINGERPRINT_KEY"
#: Version of the canonical form; part of every key, so a change of form changes the key id.
SCHEME = "hmac-sha256-v1"
_KEY_ID_PREFIX = b"mptool fingerprint key id v2\0"
#: What pdtp.json says when there is no key (issue 26).
NO_KEY_NOTE = (
    f"no fingerprints: {KEY_ENV} is not set, and an unkeyed hash of a record or of the data would let anyone "
    "who knows all records but one test candidates for the last one; records are matched by data.id only. "
    f"Set {KEY_ENV} to one secret for every run to match records across runs without data.id"
)


@dataclass(frozen=True)
class FingerprintKey:
    """The HMAC key of a run (from ``MPTOOL_FINGERPRINT_KEY``) and its public id."""

    key: bytes
    source: str = "env"

    @property
    def id(self) -> str:
        return key_id(self.key)


def key_id(key: bytes) -> str:
    """Public id of a key: 16 hex digits of HMAC-SHA-256(key, a constant); says whether two runs share a key."""
    return hmac.new(key, _KEY_ID_PREFIX, hashlib.sha256).hexdigest()[:16]


def _cell_text(value: object, numeric: bool) -> str:
    if numeric:
        return "n" + repr(float(value))  # the shortest repr: 1 and 1.0 are one value; a missing number is nnan
    text = str(value)
    return f"s{len(text)}:{text}"


def _column_codes(values: pd.Series | np.ndarray) -> tuple[np.ndarray, list[str]]:
    """(code per cell, canonical text per code) of one column (module docstring); each distinct value once."""
    if isinstance(values, pd.Series) and isinstance(values.dtype, pd.StringDtype):  # text: no Python str per cell
        codes, uniques = factorized(values)  # kept while the column lives (mptool.inputs.memo); no copy of T
        if (codes < 0).any():
            codes, uniques = pd.factorize(values, use_na_sentinel=False)
        return np.asarray(codes, dtype=np.int64), [_cell_text(v, False) for v in uniques.tolist()]
    arr = np.asarray(values)
    numeric = arr.dtype.kind in "iuf"
    if arr.dtype == object:  # e.g. the labels: their kept codes where nothing is missing (mptool.inputs.memo)
        codes, uniques = factorized(arr)
        if not (codes < 0).any():
            return np.asarray(codes, dtype=np.int64), [_cell_text(v, False) for v in uniques]
    codes, uniques = pd.factorize(arr.astype(float) + 0.0 if numeric else arr, use_na_sentinel=False)  # -0.0 -> 0.0
    return np.asarray(codes, dtype=np.int64), [_cell_text(v, numeric) for v in uniques]


def distinct_rows(records: Records) -> tuple[bytes, np.ndarray, list[bytes]]:
    """(header, index of each record's distinct row, one canonical byte string per distinct row).

    Features by name, then the label (module docstring). Records with equal cells share one
    canonical string, so it is built (and MAC-ed) once per distinct record.
    """
    names = sorted(records.X.columns)
    header = "\x1f".join(["features", *names, "label", records.schema.label]).encode()
    columns = [_column_codes(records.X[name]) for name in names]
    columns.append(_column_codes(records.y))
    # the row's distinct id, one column at a time: (id so far) * (column's size) + code, renumbered by a hash
    # factorisation each step, so it stays below the row count (never overflows) and costs O(rows) per column
    inverse = np.zeros(len(records.y), dtype=np.int64)
    for codes, texts in columns:
        inverse, _ = pd.factorize(inverse * len(texts) + codes)
        inverse = np.asarray(inverse, dtype=np.int64)
    first = np.full(int(inverse.max()) + 1 if inverse.size else 0, -1, dtype=np.int64)
    first[inverse[::-1]] = np.arange(len(inverse) - 1, -1, -1)  # the first record of each distinct row
    rows = ["|".join(texts[codes[i]] for codes, texts in columns).encode("utf-8", "surrogatepass")
            for i in first.tolist()]
    return header, inverse, rows


def canonical_rows(records: Records) -> tuple[bytes, list[bytes]]:
    """(header, one canonical byte string per record) of ``records``: features by name, then the label."""
    header, inverse, rows = distinct_rows(records)
    return header, [rows[i] for i in inverse.tolist()]


def key_from_env() -> FingerprintKey | None:
    """The key of ``MPTOOL_FINGERPRINT_KEY``, None when unset; InputError when set but empty (checked before work)."""
    secret = os.environ.get(KEY_ENV)
    if secret is None:
        return None
    if not secret.strip():
        raise InputError(f"{KEY_ENV} is set but empty; set it to a secret (e.g. 32 random hex bytes) or unset it")
    return FingerprintKey(secret.encode("utf-8", "surrogatepass"), "env")


def run_key(population: Records | None = None) -> FingerprintKey | None:
    """The run's key: ``MPTOOL_FINGERPRINT_KEY``, else None (no fingerprints; never a key made from the data).

    ``population`` is no longer read (kept so callers need not change).
    """
    return key_from_env()


def fingerprints(records: Records, key: FingerprintKey | None) -> np.ndarray:
    """HMAC-SHA-256 fingerprint of each record (:data:`FINGERPRINT_HEX` hex digits), in record order.

    One MAC per distinct record. Without a key, None for every record (no fingerprint at all).
    """
    if key is None:
        return np.full(len(records.y), None, dtype=object)
    header, inverse, rows = distinct_rows(records)
    base = hmac.new(key.key, SCHEME.encode() + b"\0" + header + b"\0", hashlib.sha256)
    out = []
    for row in rows:
        h = base.copy()
        h.update(row)
        out.append(h.hexdigest()[:FINGERPRINT_HEX])
    return np.array(out, dtype=object)[inverse] if out else np.empty(0, dtype=object)


def keyed_digest(what: str, sha256_hex: str, key: FingerprintKey | None = None) -> str | None:
    """A published stand-in for the SHA-256 of a file (``what``: "data", "model"): HMAC under the key, else None.

    The plain SHA-256 of the data file would let an adversary who knows all records but one
    test candidates for the last one (module docstring); keyed, only holders of the key can
    recompute it. Reads ``MPTOOL_FINGERPRINT_KEY`` when ``key`` is not given.
    """
    key = key if key is not None else key_from_env()
    if key is None or not sha256_hex:
        return None
    msg = b"mptool keyed digest v1\0" + what.encode() + b"\0" + sha256_hex.encode()
    return hmac.new(key.key, msg, hashlib.sha256).hexdigest()


def identity(records: Records, key: FingerprintKey | None, bin_size: float) -> dict[str, object]:
    """What makes two runs' records comparable, recorded in pdtp.json as ``summary.identity``.

    The label and id columns, the feature columns, the bin width (PDTP's scale) and the
    fingerprint scheme and key id (``key`` "none" and a note when there is no key). A baseline
    or diff with a different identity is refused. Nothing in it is computed from the records.
    """
    if key is None:
        fingerprint: dict[str, object] = {"scheme": SCHEME, "key": "none", "key_id": None,
                                          "hex_digits": FINGERPRINT_HEX, "note": NO_KEY_NOTE}
    else:
        fingerprint = {"scheme": SCHEME, "key": key.source, "key_id": key.id, "hex_digits": FINGERPRINT_HEX}
    return {
        "label": records.schema.label,
        "id": records.schema.id,
        "features": sorted(records.X.columns),
        "bin_size": bin_size,
        "fingerprint": fingerprint,
    }
