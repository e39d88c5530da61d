"""Issue 30 item 6: the report's Mitigation link, tables that wrap, the recommended point inside the plot,
distinct history labels, ``report --quiet`` silent but for errors, and the cron line that logs its folder.

One pdtp run on 60 rows (categorical NB, in-process) plus hand-written mitigate results; the cron
line of docs/ci-and-cron.md runs under /bin/sh with a stand-in mptool.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, run_cli, write_spec

from mptool.outputs.report.history import trend_labels
from mptool.outputs.report.plots import padded_limits, tradeoff_plot

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pdtp results folder (no attack, no reduce) with mitigate.csv/json beside it."""
    base = tmp_path_factory.mktemp("fixes")
    csv = base / "mixed.csv"
    mixed_frame(60, seed=1).to_csv(csv, index=False)
    out = base / "run"
    res = run_cli("pdtp", csv, "--model", write_spec(base / "spec.yaml", "categorical_nb"), "--out", out, "-q")
    assert res.code in (0, 1), res.stderr
    settings = pd.DataFrame({
        "setting": ["baseline", "alpha=10", "round to 1 decimal"], "family": ["baseline", "regularise", "release"],
        "change": ["none (the spec as given)", "model.params.alpha: 10 " * 4, "output.release.round: 1"],
        "max_pdtp": [1.4, 0.8, 1.1], "mean_pdtp": [0.2, 0.1, 0.15], "max_pdtp_binned": [1.4, 0.8, 1.1],
        "max_pdtp_raw": [1.3, 0.7, 1.0], "above_target": [3, 0, 1], "accuracy": [0.80, 0.84, 0.79],
        "log_loss": [0.4, 0.38, 0.5], "dtp_bound": [np.nan] * 3, "passes": [False, True, False],
        "recommendable": [True, True, True], "why_not": ["", "", ""],
    })
    settings.to_csv(out / "mitigate.csv", index=False)
    doc = {"target": 1.0, "n_audited": 60, "holdout_rows": 0, "majority_accuracy": 0.6, "sentence": "Adopt alpha=10.",
           "recommended": {"setting": "alpha=10", "family": "regularise"}, "runners_up": {}, "plan": {"line": "plan"}}
    (out / "mitigate.json").write_text(json.dumps(doc))
    return out


@pytest.fixture(scope="module")
def html(run_dir: Path) -> str:
    res = run_cli("report", run_dir, "--force")
    assert res.code == 0, res.stderr
    return (run_dir / "report.html").read_text(encoding="utf-8")


def test_navigation_links_the_mitigation_section(html: str) -> None:
    nav = html[html.index('<nav class="toc">'):html.index("</nav>")]
    assert '<a href="#mitigation">Mitigation</a>' in nav
    assert 'id="mitigation"' in html


def test_navigation_has_no_mitigation_link_without_mitigate_results(run_dir: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in ("pdtp.csv", "pdtp.json"):
        shutil.copy(run_dir / name, plain / name)
    assert run_cli("report", plain, "-q").code == 0
    assert 'href="#mitigation"' not in (plain / "report.html").read_text(encoding="utf-8")


def test_wide_tables_wrap_instead_of_scrolling(html: str) -> None:
    css = html[html.index("<style>"):html.index("</style>")]
    assert re.search(r"main \{ max-width: 13[0-9]{2}px", css)  # 1,400 px wide: the page uses the width
    assert re.search(r"\nth \{ white-space: normal;", css)  # headers wrap ...
    assert re.search(r"\ntd \{ white-space: normal; overflow-wrap: anywhere; max-width: \d+em;", css)  # text cells
    assert "td.num { white-space: nowrap; }" in css  # numbers stay whole
    assert "white-space: nowrap; }" not in css.replace("td.num { white-space: nowrap; }", "")
    assert "max_<wbr>pdtp" in html or "mean_<wbr>pdtp" in html or "p_<wbr>full" in html  # headers break at '_'


def test_recommended_point_is_inside_padded_limits() -> None:
    x, y = np.array([0.70, 0.80, 0.84]), np.array([1.4, 0.9, 0.8])
    (x_lo, x_hi), (y_lo, y_hi) = padded_limits(x, y, 1.0)
    assert x_lo < 0.70 - 0.005 and x_hi > 0.84 + 0.005  # the highest accuracy (often recommended) is off the frame
    assert y_lo == 0.0 and y_hi > 1.4
    (x_lo, x_hi), _ = padded_limits(np.array([0.9, 0.9]), np.array([0.5, 0.5]), 1.0)  # one accuracy: still padded
    assert x_lo < 0.9 < x_hi
    svg = tradeoff_plot(x, y, ["baseline", "regularise", "regularise"], ["b", "a", "c"], [False, True, True], 1.0, "c")
    assert "recommended: c" in svg


def test_history_labels_are_distinct() -> None:
    folders = ["r1", "r2", "r3"]
    minutes = ["2026-11-23T12:05:10+0000", "2026-11-23T12:06:00+0000", "2026-11-23T12:07:00+0000"]
    assert trend_labels(minutes, folders) == ["2026-11-23 12:05", "2026-11-23 12:06", "2026-11-23 12:07"]
    same_minute = ["2026-11-23T12:05:10+0000", "2026-11-23T12:05:41+0000", "—"]
    assert trend_labels(same_minute, folders) == ["2026-11-23 12:05:10", "2026-11-23 12:05:41", "r3"]
    same_second = ["2026-11-23T12:05:10+0000"] * 3
    labels = trend_labels(same_second, folders)
    assert len(set(labels)) == 3 and labels[0] == "#1 2026-11-23 12:05:10"


def test_report_quiet_prints_nothing_when_attack_files_are_missing(run_dir: Path) -> None:
    loud = run_cli("report", run_dir, "--force")
    assert loud.code == 0 and "not in" in loud.stderr  # without --quiet the missing files are named
    quiet = run_cli("report", run_dir, "--force", "--quiet")
    assert quiet.code == 0 and quiet.stderr == "" and quiet.stdout == ""


def test_cron_line_logs_the_run_folder_and_the_exit_code(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "ci-and-cron.md").read_text(encoding="utf-8")
    block = text[text.index("```cron"):]
    line = next(ln for ln in block.splitlines()[1:] if ln and not ln.startswith("#"))
    command = line.split(None, 5)[5].replace("\\%", "%")  # cron: five time fields, then the command
    home = tmp_path / "audits"
    (home / ".venv" / "bin").mkdir(parents=True)
    stub = home / ".venv" / "bin" / "mptool"
    stub.write_text('#!/bin/sh\nwhile [ "$1" != "--out" ]; do shift; done\nmkdir -p "$2"\nexit 1\n')
    stub.chmod(0o755)
    sh = shutil.which("sh")
    if sh is None:
        pytest.skip("no /bin/sh")
    subprocess.run([sh, "-c", command.replace("/srv/audits", str(home))], check=True, timeout=30)
    log = (home / "audit.log").read_text()
    folder = re.search(r"mptool pdtp: (runs/\d{8}T\d{6}Z) exit 1$", log.strip())
    assert folder is not None, log
    assert (home / folder.group(1)).is_dir()
