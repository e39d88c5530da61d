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

Why keyed. A plain SHA-256 of a record's values published in pdtp.csv would let anyone who
guesses a record (few columns, few values each: a dictionary of the whole domain is cheap)
test whether it is a training record -- a membership test handed out for free, and for
low-entropy data the values themselves. So the fingerprint is HMAC-SHA-256 under a key that
is not in any result file, truncated to :data:`FINGERPRINT_HEX` hex digits (64 bits: no
accidental collision among a billion records is expected; the truncation does not make
guessing easier or harder, the key does):

- ``MPTOOL_FINGERPRINT_KEY`` (environment; a CI secret): fingerprints stay comparable
  across runs whatever happens to the data; without the key nobody can test a guess;
- otherwise a key derived from the *content* of the whole usable data (the sorted record
  digests, under a domain-separation prefix): a reordered file gives the same key, but
  adding, removing or changing any record changes every fingerprint. The key is not the
  published ``data_sha256`` and cannot be computed from it; whoever holds the data file
  can compute it, but can also rerun the audit.

Every result records the key's id (a hash of the key, :func:`key_id`), so runs made under
different keys are refused as a baseline instead of showing every record as new.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mptool.inputs.data import Records
from mptool.runtime.errors import InputError

#: Hex digits kept of each HMAC-SHA-256 fingerprint (64 bits).
FINGERPRINT_HEX = 16
#: Environment variable holding a secret fingerprint key (e.g. a CI secret).
KEY_ENV = "MPTOOL_FINGERPRINT_KEY"
#: Version of the canonical form; part of every key, so a change of form changes the key id.
SCHEME = "hmac-sha256-v1"
_DATA_KEY_PREFIX = b"mptool fingerprint key from data content v1\0"
_KEY_ID_PREFIX = b"mptool fingerprint key id v1\0"


@dataclass(frozen=True)
class FingerprintKey:
    """The HMAC key of a run, where it came from (``env`` or ``data``) and its public id."""

    key: bytes
    source: str

    @property
    def id(self) -> str:
        return key_id(self.key)


def key_id(key: bytes) -> str:
    """Public id of a key: 16 hex digits of SHA-256(prefix + key); says whether two runs share a key."""
    return hashlib.sha256(_KEY_ID_PREFIX + key).hexdigest()[:16]


def _cell_text(value: object, numeric: bool) -> str:
    if numeric:
        return "n" + repr(float(value))  # the shortest repr: 1 and 1.0 are one value; a missing number is nnan
    text = str(value)
    return f"s{len(text)}:{text}"


def _column_text(values: pd.Series | np.ndarray) -> list[str]:
    """Each cell of one column in the canonical form (module docstring); each distinct value formatted once."""
    arr = np.asarray(values)
    numeric = arr.dtype.kind in "iuf"
    codes, uniques = pd.factorize(arr.astype(float) + 0.0 if numeric else arr, use_na_sentinel=False)  # -0.0 -> 0.0
    texts = np.array([_cell_text(v, numeric) for v in uniques], dtype=object)
    return texts[codes].tolist()


def canonical_rows(records: Records) -> tuple[bytes, list[bytes]]:
    """(header, one canonical byte string per record) of ``records``: features by name, then the label."""
    names = sorted(records.X.columns)
    header = "\x1f".join(["features", *names, "label", records.schema.label]).encode()
    columns = [_column_text(records.X[name].to_numpy()) for name in names]
    columns.append(_column_text(records.y))
    return header, ["|".join(cells).encode("utf-8", "surrogatepass") for cells in zip(*columns, strict=True)]


def key_from_env() -> FingerprintKey | None:
    """The key of ``MPTOOL_FINGERPRINT_KEY``, None when unset; InputError when set but empty (checked before work)."""
    secret = os.environ.get(KEY_ENV)
    if secret is None:
        return None
    if not secret.strip():
        raise InputError(f"{KEY_ENV} is set but empty; set it to a secret (e.g. 32 random hex bytes) or unset it")
    return FingerprintKey(secret.encode("utf-8", "surrogatepass"), "env")


def run_key(population: Records) -> FingerprintKey:
    """The run's key: ``MPTOOL_FINGERPRINT_KEY`` if set, else one derived from the data's content (sorted)."""
    secret = key_from_env()
    if secret is not None:
        return secret
    header, rows = canonical_rows(population)
    digests = sorted(hashlib.sha256(r).digest() for r in rows)
    h = hashlib.sha256(_DATA_KEY_PREFIX + SCHEME.encode() + b"\0" + header + b"\0")
    for d in digests:
        h.update(d)
    return FingerprintKey(h.digest(), "data")


def fingerprints(records: Records, key: FingerprintKey) -> np.ndarray:
    """HMAC-SHA-256 fingerprint of each record (:data:`FINGERPRINT_HEX` hex digits), in record order."""
    header, rows = canonical_rows(records)
    base = hmac.new(key.key, SCHEME.encode() + b"\0" + header + b"\0", hashlib.sha256)
    out = []
    for row in rows:
        h = base.copy()
        h.update(row)
        out.append(h.hexdigest()[:FINGERPRINT_HEX])
    return np.array(out, dtype=object)


def identity(records: Records, key: FingerprintKey, bin_size: float) -> dict[str, object]:
    """What makes two runs' records comparable, recorded in pdtp.json as ``summary.identity``.

    The label and id columns, the feature columns, the bin width (PDTP's scale) and the
    fingerprint scheme and key id. A baseline or diff with a different identity is refused.
    """
    return {
        "label": records.schema.label,
        "id": records.schema.id,
        "features": sorted(records.X.columns),
        "bin_size": bin_size,
        "fingerprint": {"scheme": SCHEME, "key": key.source, "key_id": key.id, "hex_digits": FINGERPRINT_HEX},
    }
