"""Tests of ``mptool report``: reading results directories, the HTML report and the Markdown summary.

The pdtp and reduce-dtp results are produced by the real commands (in-process, on a small
mixed dataset with the exact naive Bayes engine); the attack results are written here in
the layout ``mptool attack`` writes (``{"summary", "attacks", "records"}``), because a real
attack run takes too long for a unit test.
"""

from __future__ import annotations

import base64
import html as html_lib
import json
import re
import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import CliResult, mixed_frame, run_cli, write_spec

from mptool.outputs.report import load_results, render
from mptool.outputs.report.context import build_context, fmt
from mptool.outputs.report.loader import parse_attacks
from mptool.outputs.report.markdown import cell
from mptool.outputs.report.templating import environment

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
URL_ATTRS = {"src", "href", "action", "formaction", "poster", "data", "srcset", "xlink:href", "background"}
ATTACKS = ("untargeted", "distance", "lira")


class HtmlChecker(HTMLParser):
    """Well-formedness checks: every non-void element closed in order, no stray end tags."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, tuple[int, int]]] = []
        self.errors: list[str] = []
        self.urls: list[str] = []
        self.ids: list[str] = []
        self.tags: list[str] = []
        self.doctype = False

    def handle_decl(self, decl: str) -> None:
        self.doctype = self.doctype or decl.lower() == "doctype html"

    def _attrs(self, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in URL_ATTRS:
                self.urls.append(value or "")
            if key == "id":
                self.ids.append(value or "")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._attrs(attrs)
        self.tags.append(tag)
        if tag not in VOID:
            self.stack.append((tag, self.getpos()))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._attrs(attrs)
        self.tags.append(tag)
        if tag not in VOID:
            self.errors.append(f"self-closing non-void <{tag}/> at {self.getpos()}")

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            self.errors.append(f"end tag of void element </{tag}> at {self.getpos()}")
        elif not self.stack or self.stack[-1][0] != tag:
            open_tag = self.stack[-1] if self.stack else None
            self.errors.append(f"</{tag}> at {self.getpos()} does not close {open_tag}")
        else:
            self.stack.pop()


def check_html(text: str) -> HtmlChecker:
    checker = HtmlChecker()
    checker.feed(text)
    checker.close()
    assert checker.doctype, "no <!DOCTYPE html>"
    assert not checker.errors, checker.errors[:5]
    assert not checker.stack, f"unclosed elements: {checker.stack[:5]}"
    for tag in ("html", "head", "body", "title", "main"):
        assert checker.tags.count(tag) == 1, tag
    assert len(checker.ids) == len(set(checker.ids)), "duplicate ids"
    return checker


def embedded_svgs(text: str) -> dict[str, str]:
    """Plot id -> decoded SVG text of every figure in the report."""
    out = {}
    pattern = r'<figure id="([^"]+)"[^>]*>.*?<img src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"'
    for plot_id, payload in re.findall(pattern, text, flags=re.S):
        out[plot_id] = base64.b64decode(payload).decode("utf-8")
    return out


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r by its definition (independent of numpy/pandas/scipy helpers)."""
    dx, dy = x - x.mean(), y - y.mean()
    return float((dx * dy).sum() / np.sqrt((dx * dx).sum() * (dy * dy).sum()))


def write_attack_results(out: Path, rows: list[int], labels: list[str], data: Path, seed: int = 3) -> None:
    """attack.csv / attack.json in the layout of ``mptool attack`` (see cli.attack's docstring)."""
    rng = np.random.default_rng(seed)
    n = len(rows)
    table = pd.DataFrame({"row": rows, "label": labels, "pdtp_mean": rng.uniform(0, 1.2, n).round(6)})
    for i, name in enumerate(ATTACKS):
        table[f"{name}_accuracy"] = (
            (0.5 + 0.3 * table["pdtp_mean"] * (i + 1) / 3 + rng.normal(0, 0.05, n)).clip(0, 1).round(4)
        )
    table["max_accuracy"] = table[[f"{a}_accuracy" for a in ATTACKS]].max(axis=1)
    table["lira_score"] = rng.normal(size=n).round(4)
    table["kl_leakage"] = rng.uniform(0, 3, n).round(4)
    table["n_attacks"] = 4
    table["pdtp_measurements"] = 2
    attacks = {}
    for i, name in enumerate(ATTACKS):
        fpr = np.array([0.0, 0.001, 0.01, 0.1, 0.5, 1.0])
        tpr = np.minimum(1.0, fpr ** (0.6 - 0.1 * i) + 0.02 * i)
        entry = {
            "n_attacks": 4 * n,
            "accuracy": 0.6 + 0.05 * i,
            "precision": 0.62,
            "recall": 0.58,
            "f1": 0.6,
            "advantage": 0.2 + 0.1 * i,
            "auc": 0.65 + 0.05 * i,
            "tpr_at_1pct_fpr": float(tpr[2]),
            "tpr_at_0.1pct_fpr": float(tpr[1]),
            "roc": {"fpr": fpr.tolist(), "tpr": tpr.tolist()},
            "per_target_accuracy_mean": 0.6,
            "per_target_accuracy_max": 1.0,
            "correlation_with_pdtp": {"pearson": 0.4 + 0.1 * i, "pearson_p": 0.01, "spearman": 0.3, "spearman_p": 0.02},
        }
        if name == "lira":  # correlation not written: the report computes it from attack.csv
            del entry["correlation_with_pdtp"]
            entry["variance"] = "global"
        attacks[name] = entry
    summary = {
        "estimator": "categorical_nb",
        "attacks": list(ATTACKS),
        "engine": "exact-naive-bayes",
        "target_model": {"train_accuracy": 0.9, "test_accuracy": 0.61},
        "max_accuracy": {"mean": float(table["max_accuracy"].mean()), "correlation_with_pdtp": {"pearson": 0.55}},
        "timings": {"target_models_s": 1.0, "total_s": 2.5},
        "gate": {"max_accuracy": 0.65, "max_auc": None, "exceeded": ["lira accuracy 0.7000 > 0.65"]},
        "manifest": {"data": str(data), "seed": 0, "command": "mptool attack ...", "versions": {"mptool": "0.1.0"}},
    }
    table.to_csv(out / "attack.csv", index=False)
    doc = {"summary": summary, "attacks": attacks, "records": table.to_dict(orient="records")}
    (out / "attack.json").write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A pdtp-only results directory and one with pdtp, attack and reduce-dtp results."""
    base = tmp_path_factory.mktemp("report")
    csv = base / "mixed.csv"
    mixed_frame(60, seed=1).to_csv(csv, index=False)
    spec = write_spec(base / "spec.yaml", "categorical_nb")
    only = base / "only-pdtp"
    r = run_cli("pdtp", csv, "--model", spec, "--out", only, "--threshold", "0.5", "-q")
    assert r.code in (0, 1), r.stderr
    full = base / "full"
    r = run_cli("reduce-dtp", csv, "--model", spec, "--out", full, "--threshold", "0.5", "--max-removals", "4", "-q")
    assert r.code in (0, 1), r.stderr
    for name in ("pdtp.csv", "pdtp.json"):
        shutil.copy(only / name, full / name)
    table = pd.read_csv(only / "pdtp.csv")
    picked = table.sort_values("pdtp", ascending=False)["row"].head(3).tolist() + [r for r in range(60)][:9]
    rows = list(dict.fromkeys(int(r) for r in picked))[:10]
    labels = mixed_frame(60, seed=1)["label"].iloc[rows].tolist()
    write_attack_results(full, rows, labels, csv)
    return {"csv": csv, "spec": spec, "only": only, "full": full}


@pytest.fixture(scope="module")
def report_only(runs: dict[str, Path]) -> tuple[CliResult, str]:
    """``mptool report`` on the pdtp-only directory: the CLI result and the HTML it wrote."""
    r = run_cli("report", runs["only"])
    assert r.code == 0, r.stderr
    return r, (runs["only"] / "report.html").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def html_only(report_only: tuple[CliResult, str]) -> str:
    return report_only[1]


@pytest.fixture(scope="module")
def html_full(runs: dict[str, Path]) -> str:
    return render(load_results(runs["full"]), "html")["html"]


# --------------------------------------------------------------------------------------
# HTML


def test_pdtp_only_dir_gives_a_report_that_says_what_is_missing(report_only: tuple[CliResult, str]) -> None:
    r, text = report_only
    check_html(text)
    for name in ("attack.csv", "attack.json", "reduce.csv", "reduce.json"):
        assert name in r.stderr
        assert name in text
    assert set(embedded_svgs(text)) == {"plot-pdtp-histogram"}
    assert "mptool attack" in text and "mptool reduce-dtp" in text


def test_html_is_well_formed_and_self_contained(html_only: str, html_full: str) -> None:
    for text in (html_only, html_full):
        checker = check_html(text)
        assert checker.urls, "expected the plots' src attributes"
        for url in checker.urls:
            assert url.startswith(("data:", "#")), url
            if url.startswith("#"):
                assert url[1:] in checker.ids, f"link to a missing id: {url}"
        assert "@import" not in text and "url(" not in text.replace("data:", "")
        assert "<script" not in text and "<link" not in text
        for svg in embedded_svgs(text).values():
            ET.fromstring(svg)  # each plot is a well-formed SVG document
            hrefs = re.findall(r'href="([^"]*)"', svg)
            assert all(h.startswith("#") for h in hrefs), hrefs[:3]
            assert "<image" not in svg


def test_full_dir_has_every_plot(html_full: str) -> None:
    svgs = embedded_svgs(html_full)
    assert set(svgs) == {
        "plot-pdtp-histogram",
        "plot-attack-accuracy",
        "plot-max-accuracy",
        "plot-roc",
        "plot-reduce-sawtooth",
    }
    assert all(f"{name} " in svgs["plot-attack-accuracy"] or name in svgs["plot-attack-accuracy"] for name in ATTACKS)
    assert "AUC 0.750" in svgs["plot-roc"]  # lira's AUC in the legend
    assert "not drawn" not in html_full


def test_histogram_counts_records_on_each_side_of_the_threshold(runs: dict[str, Path], html_only: str) -> None:
    table = pd.read_csv(runs["only"] / "pdtp.csv")
    above = sum(1 for v in table["pdtp"] if v > 0.5)  # the fixture's --threshold
    svg = html_lib.unescape(embedded_svgs(html_only)["plot-pdtp-histogram"])
    assert f"PDTP > 0.5 ({above})" in svg
    assert f"PDTP ≤ 0.5 ({len(table) - above})" in svg
    assert f"PDTP of {len(table)} records" in svg


def test_html_escapes_values_from_the_data(runs: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "res"
    shutil.copytree(runs["only"], copy)
    table = pd.read_csv(copy / "pdtp.csv")
    table["label"] = "<script>alert(1)</script>"  # as pdtp --show-values writes it: shown with --show-values only
    table.to_csv(copy / "pdtp.csv", index=False)
    context = build_context(load_results(copy), show_values=True)
    text = environment(autoescape=True).get_template("report.html.j2").render(**context, plots=[], plots_skipped=[])
    check_html(text)
    assert "<script>" not in text and "&lt;script&gt;" in text


def test_verdict_and_summary_match_pdtp_json(runs: dict[str, Path], html_only: str) -> None:
    s = json.loads((runs["only"] / "pdtp.json").read_text())["summary"]
    code = 1 if s["verdict"] == "fail" else 0
    assert f"mptool pdtp exited with code {code}" in html_only
    assert ("DTP-1 VIOLATED" if code else "DTP-1 holds") in html_only
    for key in ("max", "mean", "median", "p95"):
        assert f"<td>{s[key]:.4f}</td>" in html_only, key
    assert f"<td>{s['violations']}</td>" in html_only
    assert f"<td>{s['n']} (of |T| = {s['n_train']})</td>" in html_only


def test_top_records_are_the_highest_pdtp_with_their_feature_values(runs: dict[str, Path]) -> None:
    inputs = load_results(runs["only"], top=5, show_values=True)  # feature values only with --show-values
    top = build_context(inputs, top=5, show_values=True)["top"]
    table = pd.read_csv(runs["only"] / "pdtp.csv")
    # naive order: by PDTP descending, ties by row ascending
    expected = sorted(zip(table["pdtp"], table["row"], strict=True), key=lambda p: (-p[0], p[1]))[:5]
    assert [int(r[0]) for r in top["rows"]] == [int(row) for _, row in expected]
    assert [r[top["columns"].index("pdtp")] for r in top["rows"]] == [f"{v:.4f}" for v, _ in expected]
    data = pd.read_csv(runs["csv"])
    assert top["feature_columns"] == ["color", "size", "x1", "x2"]
    for cells in top["rows"]:
        source = data.iloc[int(cells[0])]
        for col in top["feature_columns"]:
            assert cells[top["columns"].index(col)] == fmt(source[col], None)


def test_missing_or_changed_data_file_is_said(runs: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "res"
    shutil.copytree(runs["only"], copy)
    doc = json.loads((copy / "pdtp.json").read_text())
    changed = tmp_path / "changed.csv"
    mixed_frame(60, seed=1).assign(x2=0.0).to_csv(changed, index=False)
    doc["summary"]["manifest"]["data"] = str(changed)
    (copy / "pdtp.json").write_text(json.dumps(doc))
    inputs = load_results(copy, show_values=True)  # the data file is read only with --show-values
    assert any("changed since the run" in n for n in inputs.notes)
    assert inputs.features is not None  # still shown, with the note
    changed.unlink()
    inputs = load_results(copy, show_values=True)
    assert inputs.features is None
    assert any("not found" in n for n in inputs.notes)
    assert "not found; feature values not shown" in render(inputs, "md")["md"]


def test_attack_metrics_and_correlations(runs: dict[str, Path], html_full: str) -> None:
    inputs = load_results(runs["full"])
    by_name = {a.name: a for a in inputs.attacks}
    assert set(by_name) == set(ATTACKS)
    assert by_name["distance"].pearson == pytest.approx(0.5)  # as written in attack.json
    assert by_name["distance"].pearson_p == pytest.approx(0.01)
    table = pd.read_csv(runs["full"] / "attack.csv")  # lira's is computed from attack.csv
    naive = pearson(table["pdtp_mean"].to_numpy(float), table["lira_accuracy"].to_numpy(float))
    assert by_name["lira"].pearson == pytest.approx(naive, rel=1e-9)
    assert by_name["untargeted"].roc_fpr is not None and len(by_name["untargeted"].roc_fpr) == 6
    metrics = build_context(inputs)["attack_metrics"]
    row = metrics["rows"][[r[0] for r in metrics["rows"]].index("distance")]
    assert row[metrics["columns"].index("AUC")] == "0.700"
    assert row[metrics["columns"].index("TPR @1% FPR")] == fmt(float(0.01**0.5 + 0.02), 3)
    assert "<td>0.900 / 0.610</td>" in html_full  # attack.json's target_model train / test accuracy
    assert "variance = global" in html_full  # extra scalar values are listed, not dropped
    assert "Gate --max-accuracy 0.65 exceeded: lira accuracy 0.7000 &gt; 0.65. mptool attack exited with code 1." in (
        html_full
    )


def test_attack_json_alternative_layout() -> None:
    doc = {
        "summary": {
            "attacks": [
                {
                    "name": "a",
                    "accuracy": 0.7,
                    "roc_auc": 0.8,
                    "pearson": {"r": 0.3, "p": 0.2},
                    "roc": [[0, 0], [1, 1]],
                },
                {"name": "b", "accuracy": 0.6, "correlation": {"pearson": 0.1, "pearson_p": 0.5}},
            ]
        }
    }
    attacks = parse_attacks(doc, None)
    assert [a.name for a in attacks] == ["a", "b"]
    assert (attacks[0].pearson, attacks[0].pearson_p) == (0.3, 0.2)
    assert attacks[0].roc_tpr.tolist() == [0.0, 1.0]
    assert (attacks[1].pearson, attacks[1].pearson_p) == (0.1, 0.5)
    assert attacks[1].roc_fpr is None


def test_reduce_section_shows_trace_and_best_prefix(runs: dict[str, Path], html_full: str) -> None:
    doc = json.loads((runs["full"] / "reduce.json").read_text())
    trace = pd.read_csv(runs["full"] / "reduce.csv")
    reduce = build_context(load_results(runs["full"]))["reduce"]
    items = dict(reduce["items"])
    assert items["best prefix (removals)"] == str(doc["best_step"])
    assert items["DTP-1 reached"] == ("yes" if doc["reached"] else "no")
    assert items["max PDTP before any removal"] == f"{doc['initial_max']:.4f}"
    t = reduce["trace"]
    assert len(t["rows"]) == len(trace)
    assert [r[t["columns"].index("max_pdtp_after")] for r in t["rows"]] == [f"{v:.4f}" for v in trace["max_pdtp_after"]]
    assert t["highlight"] == [s == doc["best_step"] for s in trace["step"]]
    assert "id" not in t["columns"]  # an all-empty column is left out
    assert 'class="highlight"' in html_full
    svg = html_lib.unescape(embedded_svgs(html_full)["plot-reduce-sawtooth"])
    label = "best prefix" if doc["reached"] else "lowest maximum (DTP-1 not reached)"
    assert f"{label}: {doc['best_step']} removal" in svg


def test_results_from_different_data_files_are_flagged(runs: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "res"
    shutil.copytree(runs["full"], copy)
    assert not any("different data files" in n for n in load_results(copy).notes)
    for name, digest in (("attack.json", "0" * 64), ("pdtp.json", "1" * 64)):  # keyed digests (issue 26)
        doc = json.loads((copy / name).read_text())
        doc["summary"]["manifest"]["data_hmac"] = digest
        (copy / name).write_text(json.dumps(doc))
    assert any("different data files" in n for n in load_results(copy).notes)


# --------------------------------------------------------------------------------------
# Markdown


def gfm_tables(text: str) -> list[list[list[str]]]:
    """Pipe tables of a Markdown text as lists of cell lists (escaped pipes kept inside cells)."""
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            current.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
        elif current:
            tables.append(current)
            current = []
    return tables


def test_markdown_is_github_flavoured(runs: dict[str, Path]) -> None:
    text = render(load_results(runs["full"]), "md", top=5)["md"]
    s = json.loads((runs["full"] / "pdtp.json").read_text())["summary"]
    first = text.splitlines()[0]
    assert first.startswith("## ") and ("VIOLATED" in first or "holds" in first)
    assert f"max PDTP {s['max']:.4f}" in text
    tables = gfm_tables(text)
    assert len(tables) >= 4  # summary, top records, attacks, reduce (never feature values)
    for table in tables:
        header, sep, *body = table
        assert all(re.fullmatch(r":?-{3,}:?", c) for c in sep), sep
        assert all(len(row) == len(header) for row in [sep, *body])
    assert "<details>" not in text and "Feature values of these records" not in text  # never in the Markdown
    assert "data:image" not in text and "<img" not in text and "<table" not in text
    assert "\n\n\n" not in text


def test_markdown_cells_are_escaped() -> None:
    assert cell("a|b") == "a\\|b"
    assert cell("<=50K\nx") == "&lt;=50K x"
    row = "| " + " | ".join(cell(v) for v in ("a|b", "c")) + " |"
    assert len(gfm_tables(row)[0][0]) == 2


def test_markdown_to_stdout_and_both_formats(runs: dict[str, Path], tmp_path: Path) -> None:
    r = run_cli("report", runs["only"], "--format", "md", "--out", "-", "--top", "3")
    assert r.code == 0, r.stderr
    assert r.stdout.startswith("## ") and "### The 3 riskiest records" in r.stdout
    out = tmp_path / "audit.html"
    r = run_cli("report", runs["only"], "--format", "both", "--out", out, "-q")
    assert r.code == 0, r.stderr
    assert out.is_file() and out.with_suffix(".md").is_file()
    assert out.with_suffix(".md").read_text().startswith("## ")


# --------------------------------------------------------------------------------------
# bad input


def test_bad_input_exits_2(runs: dict[str, Path], tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [
        (empty, []),
        (tmp_path / "nope", []),
        (runs["only"], ["--format", "pdf"]),
        (runs["only"], ["--top", "0"]),
        (runs["only"], ["--format", "both", "--out", "-"]),
        (runs["only"], ["--out", str(tmp_path / "no-such-dir" / "r.html")]),
    ]
    for path, extra in cases:
        r = run_cli("report", path, *extra)
        assert r.code == 2, (path, extra, r.stderr)
        assert r.stderr.startswith("mptool: error:"), r.stderr


def test_unreadable_result_file_is_skipped_with_a_note(runs: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "res"
    shutil.copytree(runs["only"], copy)
    (copy / "attack.json").write_text("{not json")
    inputs = load_results(copy)
    assert inputs.attack_doc is None
    assert any("attack.json" in n and "JSON" in n for n in inputs.notes)
    assert "> [!WARNING]" in render(inputs, "md")["md"]
