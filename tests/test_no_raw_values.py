"""Nothing raw reaches a terminal or a report (issue 12, item 5).

A hostile CSV (labels, ids and feature cells with ANSI escape sequences, bidi overrides,
zero-width characters and rich markup; a 5 MB cell), hostile folder names and a hostile
command line are run through ``mptool pdtp``, ``reduce-dtp`` and ``report``. Checked: no
raw ESC or invisible control character in any stdout, stderr or report; the verdict line
present and whole; error lines short; report.html and report.md free of every feature value
and id by default (a unique marker planted in the riskiest record), the HTML holding them
only with ``--show-values`` and the Markdown never; Markdown and HTML injection escaped.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
from conftest import CliResult, mixed_frame, run_cli, write_spec
from hypothesis import given, settings
from hypothesis import strategies as st
from test_bad_input import snapshot
from test_report import check_html, embedded_svgs, gfm_tables

from mptool.outputs.report import load_results, render
from mptool.outputs.report.markdown import cell
from mptool.runtime import ui

ANSI = "\x1b[2J\x1b[Hall good"  # clear screen, cursor home, then a reassuring word
BIDI = "\u202eon\u2066\u200b"  # right-to-left override, isolate, zero-width space
MARKUP = "[red]x[/red]"  # rich markup: must print as written
MARKER = "SECRET-FEATURE-7f3a9c"  # a feature value that must not reach a report by default
ID_MARKER = "SECRET-ID-"
HOSTILE_DIR = "res <script>alert(1) <img src=x onerror=alert(1)> ](javascript:alert(1)) |x| *b* `code` # \x1b[2J"
INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
VERDICT = re.compile(
    r"DTP-1 (VIOLATED|holds): max PDTP \d+\.\d{4} \(threshold [0-9.]+\), \d+ of \d+ records above"
    r"( \(\d+ only a bin-edge step: raw ratio <= [0-9.]+\))?"  # issue 18: violations binning alone makes
    r"; engine [a-z-]+, \d+\.\d{2}s"
)


def hostile_frame() -> pd.DataFrame:
    """mixed_frame with hostile labels, ids and category cells; row 7 holds MARKER as a unique category."""
    df = mixed_frame(60, seed=1)
    df["label"] = df["label"].map({"yes": ANSI, "no": BIDI + MARKUP})
    df["color"] = df["color"].replace({"red": "\x1b[31mred\x1b[0m", "blue": "bl\u202eue"})
    df.loc[7, "size"] = MARKER  # a category of its own: record 7 is among the riskiest
    df.insert(0, "rid", [f"{ID_MARKER}{i}\x1b[8m" for i in range(len(df))])
    return df


def assert_clean(*texts: str) -> None:
    """No raw ESC, C0/C1 control (other than newline and tab) or invisible format character."""
    for text in texts:
        assert "\x1b" not in text
        found = INVISIBLE.search(text)
        assert found is None, (found, text[max(0, found.start() - 60) : found.end() + 60])


@contextmanager
def wide_console() -> Iterator[None]:
    """Table cells on one line each (no wrapping at 80 columns), so assertions can read them."""
    width = ui.out_console._width
    ui.out_console.width = 250
    try:
        yield
    finally:
        ui.out_console._width = width


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A pdtp run on the hostile CSV into a hostile folder, with a hostile command line recorded."""
    base = tmp_path_factory.mktemp("leak")
    csv = base / "d.csv"
    hostile_frame().to_csv(csv, index=False)
    spec = write_spec(base / "s.yaml", "categorical_nb", data={"id": "rid"})
    out = base / HOSTILE_DIR
    argv = ["pdtp", str(csv), "--model", str(spec), "--out", str(out), "--threshold", "0.5", "--jobs", "1",
            "--show-values"]  # the hostile labels in the terminal table and pdtp.csv (the reports never show them)
    saved = sys.argv
    sys.argv = ["mptool", *argv]
    try:  # the manifest records sys.argv as the command line, as the console script would
        with wide_console():
            r = run_cli(*argv)
    finally:
        sys.argv = saved
    assert r.code in (0, 1), r.stderr
    return {"base": base, "csv": csv, "spec": spec, "out": out, "pdtp": r}


# --------------------------------------------------------------------------------------
# the safe-echo functions


def test_unsafe_characters_are_exactly_the_control_and_format_categories() -> None:
    """Every code point of categories Cc, Cf, Zl, Zp and Cs is escaped; letters, CJK and emoji are not."""
    unsafe = {"Cc", "Cf", "Zl", "Zp", "Cs"}
    missed = [
        hex(c)
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in unsafe and not ui.has_unsafe(chr(c))
    ]
    assert missed == []
    for text in ("plain ASCII ~!@#", "café ß Ωμέγα", "日本語テキスト", "emoji 😀", "\\x1b typed literally"):
        assert ui.escape_controls(text) == text
    assert ui.escape_controls("\x1b[2J\u202e\u200b\x85\x7f\n\t") == "\\x1b[2J\\u202e\\u200b\\x85\\x7f\\n\\t"


def test_excerpt_and_line_limits() -> None:
    big = "y" * 5_000_000
    assert ui.excerpt(big) == "y" * 40 + "…(5000000 chars)"
    assert ui.excerpt(ANSI) == "\\x1b[2J\\x1b[Hall good"
    assert ui.excerpt("\x1b" * 100) == "\\x1b" * 10 + "…(100 chars)"  # an escape is never split
    line = ui.safe_line(f"column 'x' holds text (e.g. {big}); set preprocess: auto")
    assert len(line) <= ui.LINE_LIMIT and line.endswith("; set preprocess: auto")
    assert "(4999" in line and "chars cut)" in line
    assert ui.error_line("a\nb").count("\n") == 0


@settings(max_examples=200, deadline=None)
@given(
    st.text(
        alphabet=st.characters(codec="utf-8") | st.sampled_from(list("\x1b\x9b\u202e\u2066\u200b\n\r")), max_size=700
    )
)
def test_any_text_becomes_one_short_clean_line(text: str) -> None:
    for out, limit in ((ui.safe_line(text), ui.LINE_LIMIT), (ui.excerpt(text), ui.EXCERPT_LIMIT + 20)):
        assert not ui.has_unsafe(out)
        assert len(out) <= limit
    md = cell(text)
    assert not ui.has_unsafe(md) and "<" not in md and ">" not in md
    assert re.search(r"(?<!\\)[|`*_\[\]]", md.replace("\\\\", "")) is None


# --------------------------------------------------------------------------------------
# terminal


def verdict_lines(r: CliResult) -> list[str]:
    return [ln for ln in r.stdout.splitlines() if ln.startswith("DTP-1 ")]


def test_pdtp_terminal_output_is_clean_and_the_verdict_intact(hostile: dict[str, object]) -> None:
    r = hostile["pdtp"]
    assert isinstance(r, CliResult)
    assert_clean(r.stdout, r.stderr)
    verdicts = verdict_lines(r)
    assert len(verdicts) == 1 and VERDICT.fullmatch(verdicts[0]), r.stdout
    s = json.loads((Path(hostile["out"]) / "pdtp.json").read_text())["summary"]
    assert f"max PDTP {s['max']:.4f}" in verdicts[0]
    assert r.stdout.rstrip("\n").splitlines()[-1] == verdicts[0]  # the last line, nothing printed over it
    assert "\\x1b[2J\\x1b[Hall good" in r.stdout  # the label, shown escaped in the table
    assert MARKUP in r.stdout  # rich markup printed as written, not interpreted
    assert "\\x1b[2J" in r.stderr  # the folder name in the info lines, escaped


def test_quiet_run_prints_only_the_verdict(hostile: dict[str, object], tmp_path: Path) -> None:
    r = run_cli("pdtp", hostile["csv"], "--model", hostile["spec"], "--out", tmp_path / "q", "--threshold", "0.5", "-q")
    assert r.code in (0, 1), r.stderr
    assert_clean(r.stdout, r.stderr)
    assert len(r.stdout.splitlines()) == 1 and VERDICT.fullmatch(r.stdout.strip()), r.stdout


def test_reduce_trace_ids_are_escaped(hostile: dict[str, object], tmp_path: Path) -> None:
    with wide_console():
        r = run_cli(
            "reduce-dtp", hostile["csv"], "--model", hostile["spec"], "--out", tmp_path / "r", "--threshold", "0.5",
            "--max-removals", "2", "--jobs", "1",
        )  # fmt: skip
    assert r.code in (0, 1), r.stderr
    assert_clean(r.stdout, r.stderr)
    assert f"{ID_MARKER}" in r.stdout and "\\x1b[8m" in r.stdout  # the id, escaped (terminal only)
    last = r.stdout.rstrip("\n").splitlines()[-1]
    assert last.startswith("DTP-1 ") and ", engine " in last


def test_a_5mb_cell_in_an_error_is_a_short_excerpt(tmp_path: Path) -> None:
    frame = mixed_frame(30, seed=5)
    frame["color"] = frame["color"].astype(object)
    frame.loc[0, "color"] = ANSI + "z" * 5_000_000
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb", model={"preprocess": "none"})
    before = snapshot(tmp_path)
    r = run_cli("pdtp", csv, "--model", spec, "--out", tmp_path / "out")
    lines = r.stderr.splitlines()
    assert r.code == 2 and len(lines) == 1, r.stderr[:500]
    assert len(r.stderr) < 600, len(r.stderr)
    assert lines[0].startswith("mptool: error:") and "column 'color' holds text" in lines[0]
    assert "'\\x1b[2J\\x1b[Hall goodzzz" in lines[0] and f"…({len(ANSI) + 5_000_000} chars)'" in lines[0]
    assert lines[0].endswith("add the column to data.drop")
    assert_clean(r.stdout, r.stderr)
    assert snapshot(tmp_path) == before


def test_a_5mb_single_class_label_is_a_short_excerpt(tmp_path: Path) -> None:
    frame = mixed_frame(3, seed=5)  # 3 rows of one 5 MB label (was 30: a 150 MB file for the same refusal)
    frame["label"] = BIDI + "z" * 5_000_000
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    r = run_cli("pdtp", csv, "--model", write_spec(tmp_path / "s.yaml", "gaussian_nb"), "--out", tmp_path / "out")
    assert r.code == 2 and len(r.stderr.splitlines()) == 1 and len(r.stderr) < 600, r.stderr[:500]
    assert "single class ('\\u202eon\\u2066\\u200bzzz" in r.stderr and "chars)')" in r.stderr
    assert_clean(r.stderr)
    assert not (tmp_path / "out" / "pdtp.csv").exists()


def test_a_huge_internal_error_message_is_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit 3 lines are capped too (an exception message may quote a cell)."""
    app = sys.modules["mptool.cli.pdtp"]  # the module whose pdtp command calls resolve_inputs

    def boom(*_a: object, **_k: object) -> None:
        raise ValueError(ANSI + "q" * 1_000_000)

    monkeypatch.setattr(app, "resolve_inputs", boom)
    r = run_cli("pdtp")
    assert r.code == 3 and len(r.stderr.splitlines()) == 1 and len(r.stderr) < 600
    assert r.stderr.startswith("mptool: internal error: ValueError: \\x1b[2J") and "--debug" in r.stderr


# --------------------------------------------------------------------------------------
# reports


def top_rows_of(out: Path, n: int = 20) -> list[int]:
    table = pd.read_csv(out / "pdtp.csv")
    return table.sort_values(["pdtp", "row"], ascending=[False, True]).head(n)["row"].astype(int).tolist()


@pytest.fixture(scope="module")
def reports(hostile: dict[str, object]) -> dict[str, object]:
    """report --format both by default, and --show-values, on the hostile results folder."""
    out = Path(hostile["out"])
    assert 7 in top_rows_of(out), "the marker's record must be among the riskiest for the test to mean something"
    default = run_cli("report", out, "--format", "both")
    assert default.code == 0, default.stderr
    texts = {k: (out / f"report.{k}").read_text(encoding="utf-8") for k in ("html", "md")}
    shown = run_cli("report", out, "--format", "both", "--show-values", "--out", out / "values.html")
    assert shown.code == 0, shown.stderr
    return {
        "default": default,
        "html": texts["html"],
        "md": texts["md"],
        "shown": shown,
        "html_values": (out / "values.html").read_text(encoding="utf-8"),
        "md_values": (out / "values.md").read_text(encoding="utf-8"),
    }


def test_reports_hold_no_feature_value_or_id_by_default(reports: dict[str, object]) -> None:
    for name in ("html", "md"):
        text = reports[name]
        assert isinstance(text, str)
        assert MARKER not in text and ID_MARKER not in text, name
        assert "31mred" not in text and "u202eue" not in text  # hostile category values of the records
        assert "Hall good" not in text  # the hostile label: in pdtp.csv (--show-values), never in a default report
    assert "--show-values" in reports["html"]  # the HTML says how to add them
    assert "never shows the records' labels, worst classes, feature values or ids" in reports["md"]


def test_show_values_puts_them_in_the_html_only(reports: dict[str, object]) -> None:
    html, md = reports["html_values"], reports["md_values"]
    assert MARKER in html and ID_MARKER in html
    assert "\\x1b[31mred\\x1b[0m" in html  # a hostile feature value, escaped
    assert "\\x1b[2J\\x1b[Hall good" in html  # a hostile label (pdtp.csv of --show-values), escaped
    assert MARKER not in md and ID_MARKER not in md and "Hall good" not in md
    shown = reports["shown"]
    assert isinstance(shown, CliResult)
    assert "do not publish it" in shown.stderr


def test_reports_are_clean_and_escaped(reports: dict[str, object]) -> None:
    for key in ("html", "md", "html_values", "md_values"):
        text = reports[key]
        assert isinstance(text, str)
        assert_clean(text)
        assert "<script" not in text and "<img src=x" not in text, key
    for key in ("html", "html_values"):
        check_html(reports[key])
        assert "&lt;script&gt;" in reports[key]
    for key in ("md", "md_values"):
        md = reports[key]
        assert re.search(r"(?<!\\)\]\(", md) is None  # no link can form: every ] is escaped
        assert "&lt;script&gt;alert(1) &lt;img src=x onerror=alert(1)&gt; \\](javascript:alert(1))" in md
        assert "\\|x\\| \\*b\\* \\`code\\` \\# \\\\x1b\\[2J" in md  # folder name; its ESC visible
        for table in gfm_tables(md):  # every row of a table has the header's number of cells
            assert all(len(row) == len(table[0]) for row in table), table


def test_report_terminal_lines_are_clean(reports: dict[str, object]) -> None:
    for key in ("default", "shown"):
        r = reports[key]
        assert isinstance(r, CliResult)
        assert_clean(r.stdout, r.stderr)


def test_markdown_escapes_notes_from_a_hand_edited_manifest(hostile: dict[str, object], tmp_path: Path) -> None:
    copy = tmp_path / "res"
    shutil.copytree(Path(hostile["out"]), copy)
    doc = json.loads((copy / "pdtp.json").read_text())
    doc["summary"]["manifest"]["data"] = "<script>x</script>](javascript:alert(1)) | *y* \x1b[2J.csv"
    doc["summary"]["engine"] = "[x](javascript:alert(1))\u202e"
    (copy / "pdtp.json").write_text(json.dumps(doc))
    inputs = load_results(copy, show_values=True)  # the note names the (missing) data file
    texts = render(inputs, "both", show_values=True)
    assert any("not found" in n for n in inputs.notes)
    md = texts["md"]
    assert "&lt;script&gt;x&lt;/script&gt;\\](javascript:alert(1)) \\| \\*y\\* \\\\x1b\\[2J" in md
    assert "\\[x\\](javascript:alert(1))\\\\u202e" in md
    assert_clean(md, texts["html"])
    check_html(texts["html"])


def test_hostile_attack_names_reach_plots_escaped(hostile: dict[str, object], tmp_path: Path) -> None:
    """An attack name (a key of attack.json) with mathtext, markup and ESC is drawn as an escaped excerpt."""
    copy = tmp_path / "res"
    shutil.copytree(Path(hostile["out"]), copy)
    name = "$\\frac{a}{$ <b>bold</b> \x1b[2J" + "w" * 100
    fpr = [0.0, 0.01, 0.1, 1.0]
    doc = {
        "summary": {"attacks": [name]},
        "attacks": {name: {"accuracy": 0.6, "auc": 0.7, "roc": {"fpr": fpr, "tpr": fpr}}},
    }
    (copy / "attack.json").write_text(json.dumps(doc))
    html = render(load_results(copy), "html")["html"]
    check_html(html)
    assert_clean(html)
    svg = embedded_svgs(html)["plot-roc"]
    assert "\x1b" not in svg and "<b>" not in svg and "…(" in svg
