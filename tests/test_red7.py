"""Red-team pass over this round's changes (helper red7; docs/bad-input.md "red7-").

A signed result's MAC edited to non-ASCII text made `mptool report`, `mptool diff` and `pdtp --baseline`
end with exit 3 (``hmac.compare_digest`` raises ``TypeError`` on such a str): each must refuse it with
exit 2 and one line, as it refuses any other edited MAC.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

KEY = "red7-signature-key"


@pytest.fixture()
def signed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two signed runs of the bundled demo (200 records), the second with its MAC edited to non-ASCII text."""
    monkeypatch.setenv("MPTOOL_FINGERPRINT_KEY", KEY)
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        res = run_cli("pdtp", "--out", str(out), "--train-size", "200", "-q")
        assert res.code in (0, 1), res.stderr
    seal = json.loads((a / "pdtp.json").read_text())["summary"]["signature"]
    assert isinstance(seal["sign_s"], float) and seal["sign_s"] >= 0  # signing's own time, outside the MAC
    doc = json.loads((b / "pdtp.json").read_text())
    doc["summary"]["signature"]["mac"] = "\u00e9" * 64
    (b / "pdtp.json").write_text(json.dumps(doc))
    return a, b


def _refused(res, *fragments: str) -> None:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.code == 2, res.stderr
    assert lines[-1].startswith("mptool: error:") and "Traceback" not in res.stderr
    assert all(f in lines[-1] for f in fragments), lines[-1]
    assert "\u00e9" not in res.stderr  # the edited value is not echoed


def test_report_refuses_a_non_ascii_mac(signed: tuple[Path, Path], tmp_path: Path) -> None:
    _refused(run_cli("report", str(signed[1]), "--out", str(tmp_path / "r.html")), "does not verify")


def test_diff_refuses_a_non_ascii_mac(signed: tuple[Path, Path]) -> None:
    _refused(run_cli("diff", str(signed[0]), str(signed[1])), "does not verify")


def test_baseline_refuses_a_non_ascii_mac(signed: tuple[Path, Path], tmp_path: Path) -> None:
    res = run_cli("pdtp", "--out", str(tmp_path / "c"), "--train-size", "200", "--baseline", str(signed[1]), "-q")
    _refused(res, "does not verify")


def test_report_reads_a_deeply_nested_pdtp_json_as_unreadable(tmp_path: Path) -> None:
    """5,000 nested lists in pdtp.json ended `mptool report` with RecursionError (exit 3); it is now read as
    any other unreadable JSON: skipped with a warning that names the file, like diff and --baseline refuse it."""
    out = tmp_path / "a"
    assert run_cli("pdtp", "--out", str(out), "--train-size", "200", "-q").code in (0, 1)
    text = (out / "pdtp.json").read_text()
    deep = '"summary": {"x": ' + "[" * 5000 + "]" * 5000 + ", "
    (out / "pdtp.json").write_text(text.replace('"summary": {', deep, 1))
    res = run_cli("report", str(out), "--out", str(tmp_path / "r.html"))
    assert res.code in (0, 2) and "Traceback" not in res.stderr, res.stderr
    assert "pdtp.json: cannot be read as JSON (RecursionError); skipped" in res.stderr


def test_a_threshold_between_a_value_and_its_12_digit_form_is_not_called_an_edit(tmp_path: Path) -> None:
    """ln(0.035/0.025) = 0.33647223662121 is written 0.336472236621: with --threshold 0.3364722366211 the
    records at that value violate (pdtp compared the exact value) but their written values do not, and
    `mptool report` called the genuine run edited (73 violations said, 65 recomputed). Within the file's
    rounding of the threshold the violation cell decides; an edit elsewhere is still refused (red7-3)."""
    out = tmp_path / "a"
    res = run_cli("pdtp", "--out", str(out), "--train-size", "200", "--threshold", "0.3364722366211", "-q")
    assert res.code == 1, res.stderr
    table = (out / "pdtp.csv").read_text()
    assert ",0.336472236621," in table  # the case exists in this run: a value written below the threshold
    assert run_cli("report", str(out), "--out", str(tmp_path / "r.html")).code == 0
    lines = table.splitlines()
    cols = lines[0].split(",")
    i = next(k for k, ln in enumerate(lines[1:], 1) if float(ln.split(",")[cols.index("pdtp")]) < 0.2)  # far below
    cells = lines[i].split(",")
    cells[cols.index("pdtp")] = "2.5"  # an edit far from the threshold
    lines[i] = ",".join(cells)
    (out / "pdtp.csv").write_text("\n".join(lines) + "\n")
    _refused(run_cli("report", str(out), "--out", str(tmp_path / "r2.html")), "a result file was edited")
