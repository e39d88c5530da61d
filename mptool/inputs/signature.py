"""Signed pdtp results: a baseline is used only if mptool wrote it, for this spec, estimator and engine.

A baseline excuses known violations ("unchanged"), so a pull request that could edit one, or
swap in a run of another spec or estimator, could excuse anything (issue 26). So, like a
checkpoint (:mod:`mptool.runtime.checkpoint`), every pdtp result carries an HMAC-SHA-256
(``summary.signature``) under a secret the pull request does not hold, over

- pdtp.json, canonical (keys sorted, compact) with ``summary.signature`` left out: the summary
  with its manifest (spec hash), estimator, engine, identity and the records when they are in
  the JSON; and
- the exact bytes of the records file it names (pdtp.csv), when the records are there.

The secret is ``MPTOOL_FINGERPRINT_KEY``, the one that keys the record fingerprints, under
its own domain prefix. Runs are compared across CI runners and days, so a per-user key file
(as checkpoints have) would not verify on the next runner; one CI secret serves both. Without
the key a result is not signed (``signature.mac`` null, with a note), and ``--baseline`` and
``mptool diff`` refuse it: fail closed, never "could not check, so trust it".

Binding (:func:`check_bound`): a baseline is refused unless it was made with the same spec
(its SHA-256: estimator, parameters, data section, bin size, release policy, seed), the same
estimator and the same leave-one-out engine as this run. Its records may differ (that is
what a baseline compares); its label, id and feature columns are checked by
:func:`mptool.api.baseline.check_comparable`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

from mptool.inputs.fingerprint import KEY_ENV, FingerprintKey, key_from_env
from mptool.runtime import ui
from mptool.runtime.errors import InputError

#: Version of the signed form.
SCHEME = "hmac-sha256-results-v1"
_DOMAIN = b"mptool signed pdtp result v1\0"
NO_KEY_NOTE = (
    f"not signed: {KEY_ENV} is not set; --baseline and mptool diff refuse an unsigned run. Set {KEY_ENV} "
    "to one secret (a CI secret) for every run that is compared"
)


def canonical_doc(doc: dict[str, Any]) -> bytes:
    """pdtp.json's content as signed: canonical JSON with ``summary.signature`` left out."""
    summary = {k: v for k, v in (doc.get("summary") or {}).items() if k != "signature"}
    body = {**doc, "summary": summary}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def result_mac(key: FingerprintKey, doc: dict[str, Any], records: bytes | bytearray | None) -> str:
    """HMAC-SHA-256 under ``key`` of the canonical document and the records file's bytes (each length-prefixed)."""
    body = canonical_doc(doc)
    mac = hmac.new(key.key, _DOMAIN + SCHEME.encode() + b"\0", hashlib.sha256)
    mac.update(len(body).to_bytes(8, "little") + body)
    if records is not None:
        mac.update(b"records\0" + len(records).to_bytes(8, "little"))
        mac.update(records)  # not concatenated: a records file of a few hundred MB is not copied
    return mac.hexdigest()


def same_mac(mac: object, expected: str) -> bool:
    """Whether ``mac`` (read from a result file: any JSON value) is the hex MAC ``expected``, in constant time.

    Compared as bytes: :func:`hmac.compare_digest` raises on a ``str`` with non-ASCII characters (an edited
    file's ``"é" * 64`` ended the command with exit 3 instead of a refusal)."""
    return isinstance(mac, str) and hmac.compare_digest(mac.encode("utf-8", "surrogatepass"), expected.encode("ascii"))


def signature_block(doc: dict[str, Any], records: bytes | bytearray | None) -> dict[str, Any]:
    """``summary.signature`` of a pdtp result: the MAC under ``MPTOOL_FINGERPRINT_KEY``, or null and a note.

    ``doc`` must be as it will be parsed back (plain JSON values: :func:`mptool.outputs.formats.jsonable`).
    """
    key = key_from_env()
    if key is None:
        return {"scheme": SCHEME, "key_id": None, "mac": None, "note": NO_KEY_NOTE}
    return {"scheme": SCHEME, "key_id": key.id, "mac": result_mac(key, doc, records)}


def verify(doc: dict[str, Any], records: bytes | None, where: str, flag: str) -> None:
    """InputError unless ``doc`` (a parsed pdtp.json) and its records file verify under ``MPTOOL_FINGERPRINT_KEY``."""
    sig = (doc.get("summary") or {}).get("signature")
    key = key_from_env()
    if key is None:
        raise InputError(
            f"{where}: {flag} cannot be verified: {KEY_ENV} is not set (a baseline is used only when it verifies "
            f"under the secret it was signed with); set {KEY_ENV} to the secret of the run that made it"
        )
    if not isinstance(sig, dict) or not isinstance(sig.get("mac"), str):
        raise InputError(
            f"{where}: {flag} is not signed (made without {KEY_ENV}, or by an older mptool); rerun it with "
            f"{KEY_ENV} set"
        )
    if sig.get("scheme") != SCHEME:
        raise InputError(f"{where}: {flag} is signed in a form this mptool does not know; rerun it")
    if sig.get("key_id") != key.id:
        raise InputError(
            f"{where}: {flag} was signed under another {KEY_ENV} (key id {ui.excerpt(str(sig.get('key_id')))}, "
            f"now {key.id}); set the secret of the run that made it, or remake the baseline"
        )
    if not same_mac(sig["mac"], result_mac(key, doc, records)):
        raise InputError(
            f"{where}: {flag} does not verify under {KEY_ENV}: pdtp.json or its records file changed after "
            "mptool wrote them; use the run's files as written, or remake the baseline"
        )


def check_report_signature(doc: dict[str, Any], records_file: Path, where: str) -> None:
    """InputError when ``MPTOOL_FINGERPRINT_KEY`` is set and ``doc`` (pdtp.json) is signed but does not verify.

    ``mptool report`` publishes a verdict: a signed result whose MAC does not verify under the key of
    this environment over pdtp.json and its records file (``records_file``, when the records are not
    in the JSON) was edited, forged or made under another key, so it is refused. A result whose
    ``mac`` is null (made without a key), or any result without a key here, is read as before.
    """
    key = key_from_env()
    summary = doc.get("summary")
    sig = summary.get("signature") if isinstance(summary, dict) else None
    if key is None or not isinstance(sig, dict) or sig.get("mac") is None:
        return
    records = None
    if "records" not in doc:
        try:
            records = records_file.read_bytes()
        except OSError:
            records = b""  # signed over a records file that is gone: cannot verify, so refused below
    mac = sig.get("mac")
    if not (sig.get("scheme") == SCHEME and sig.get("key_id") == key.id
            and same_mac(mac, result_mac(key, doc, records))):
        raise InputError(
            f"{where}: its signature does not verify under {KEY_ENV}: not results this key's runs wrote"
        )


def check_bound(summary: dict[str, Any], spec_sha256: str, estimator: str, engine: str, where: str,
                flag: str) -> None:
    """InputError unless the run of ``summary`` had this spec (SHA-256), estimator and engine (module docstring)."""
    manifest = summary.get("manifest") if isinstance(summary.get("manifest"), dict) else {}
    then = {"spec": manifest.get("spec_sha256"), "estimator": summary.get("estimator"), "engine": summary.get("engine")}
    now = {"spec": spec_sha256, "estimator": estimator, "engine": engine}
    for what in ("estimator", "engine", "spec"):
        if then[what] != now[what]:
            was, is_ = (ui.excerpt(str(v)[:12] if what == "spec" else str(v), 60) for v in (then[what], now[what]))
            raise InputError(
                f"{where}: {flag} comes from another {what} ({was} then, {is_} now): "
                "its violations cannot excuse this run's; compare runs of one spec, estimator and engine, or "
                "run without a baseline"
            )
