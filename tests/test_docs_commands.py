"""The documentation cannot drift: every ``mptool`` command in a fenced ``bash`` block of README.md and
docs/*.md runs against the bundled data, and every relative link and anchor resolves (issue 30, item 4).

How a block runs: in a fresh folder (the block's commands in order, so ``mptool init ... > spec.yaml`` feeds the
next command), with the placeholder files of :data:`FIXTURES` made there first (an explicit, reviewed mapping
from the names the docs use to bundled data), ``MPTOOL_FINGERPRINT_KEY`` set as the docs tell CI and cron to,
in-process through the conftest CLI runner. Only ``mptool`` commands run; ``pip``, ``python`` and the like in the
same block are not (the install is what the suite itself runs in). A command either runs and exits with a
documented code (0 pass or 1 finding; never 2, bad input, or 3, internal error), or is listed in :data:`SKIP`
with a reason; :data:`FASTER` lists the commands run with smaller counts because the doc's own command takes
long, and says why. A table entry that no longer matches a documented command fails too, so the tables cannot
rot either.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import run_cli

from mptool.inputs.bundled import ADULT_CSV, DEMO_CONFIG

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
KEY = "docs-test-fingerprint-key-0123456789abcdef"  # a fixed secret: the runs below are compared (baseline, diff)


# ------------------------------------------------------------------------------------------- the doc's commands


def bash_blocks(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of each fenced ``bash`` block of ``path``."""
    text = path.read_text(encoding="utf-8")
    found = re.finditer(r"^```bash\n(.*?)^```", text, re.S | re.M)
    return [(text[: m.start()].count("\n") + 1, m.group(1)) for m in found]


def commands(block: str) -> list[list[str]]:
    """The ``mptool`` commands of a shell block, as argument lists (``>`` FILE kept as two trailing words).

    Continuation lines are joined, comments dropped; a line is cut at ``&&``, ``||``, ``;`` and ``|`` and
    only the pieces whose first word is ``mptool`` are kept.
    """
    out: list[list[str]] = []
    for line in block.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        piece: list[str] = []
        for token in [*lexer, "&&"]:
            if token in ("&&", "||", ";", "|", "&"):
                if piece and Path(piece[0]).name == "mptool":
                    out.append(piece)
                piece = []
            else:
                piece.append(token)
    return out


def text(cmd: list[str]) -> str:
    return " ".join(cmd)


def _runs(blocks: list[tuple[Path, int, str]]) -> list[tuple[Path, int, str]]:
    """The blocks to run: a block whose commands are the first commands of another block (the README's
    Quickstart and docs/pdtp.md both start with the demo), or repeats an earlier block, is run as part of
    that one."""
    seqs = [[text(c) for c in commands(body)] for _, _, body in blocks]
    return [b for i, (b, s) in enumerate(zip(blocks, seqs, strict=True))
            if not any(o != s and o[: len(s)] == s for o in seqs) and seqs.index(s) == i]


ALL_BLOCKS = [(path, line, body) for path in DOCS for line, body in bash_blocks(path) if commands(body)]
BLOCKS = _runs(ALL_BLOCKS)
DOCUMENTED = {text(c) for _, _, body in ALL_BLOCKS for c in commands(body)}


# --------------------------------------------------------------------------------------------------- the tables


def _data_csv(d: Path) -> None:
    """The first 3,000 rows of the bundled Adult file: |T| = 1,000 (adult-nb.yaml) with rows left outside T."""
    pd.read_csv(ADULT_CSV, nrows=3000, dtype=str, keep_default_na=False).to_csv(d / "data.csv", index=False)


def _census(d: Path) -> None:
    """A UCI census-income-style file (headerless, ', '-separated, '?' for missing, the label last) from the
    first 400 bundled Adult rows (as tests/test_first_hour.py builds it, without its extra code columns)."""
    frame = pd.read_csv(ADULT_CSV, nrows=400, dtype=str, keep_default_na=False).replace("", "?")
    (d / "census-income.data").write_text("\n".join(", ".join(r) for r in frame.to_numpy().tolist()) + "\n")


def _skops(d: Path) -> None:
    """A shipped model: A(T) of spec.yaml on data.csv, saved with skops (what the doc's python line does)."""
    import skops.io as sio

    from mptool.inputs.prepare import fit_checked, prepare
    from mptool.inputs.spec import load_spec

    prep = prepare(d / "data.csv", load_spec(d / "spec.yaml"))
    sio.dump(fit_checked(prep.template, prep.train), d / "model.skops")


def _run(name: str) -> Callable[[Path], None]:
    """A previous ``mptool pdtp`` run of data.csv with spec.yaml, under the test's key, in ``name``."""

    def make(d: Path) -> None:
        res = run_cli("pdtp", d / "data.csv", "--model", d / "spec.yaml", "--out", d / name, "--quiet", "--jobs", "1")
        assert res.code in (0, 1), res.stderr

    return make


# name used in the docs -> how it is made (in this order; a file a command of the block writes is not made)
FIXTURES: dict[str, Callable[[Path], None]] = {
    "data.csv": _data_csv,
    "spec.yaml": lambda d: shutil.copy(DEMO_CONFIG, d / "spec.yaml"),  # configs/adult-nb.yaml, the demo's spec
    "census-income.data": _census,
    "model.skops": _skops,
    "runs/last-accepted": _run("runs/last-accepted"),
    "runs/yesterday": _run("runs/yesterday"),
    "runs/today": _run("runs/today"),
}

# commands not run, and why
SKIP: dict[str, str] = {
    "mptool pdtp data.csv --model spec.yaml --scheduler tcp://HOST:8786 --out audit/":
        "needs a running Dask scheduler (tests/test_dask_cluster.py starts one and runs pdtp on it)",
    "mptool attack data.csv --model spec.yaml --scheduler tcp://HOST:8786 --out attack/":
        "needs a running Dask scheduler",
    "mptool reduce-dtp data.csv --model spec.yaml --scheduler tcp://HOST:8786 --out reduce/":
        "needs a running Dask scheduler",
}

# commands run with smaller counts than the doc shows, and why: the doc's own command is long
_SMALL_ATTACK = ["--candidates", "200", "--iterations", "1", "--targets", "10", "--shadow-pool", "8",
                 "--shadows", "4", "--pdtp-iterations", "1"]
_WHY_ATTACK = "the default attack is 104 model fits and 2,000 targets (about 14 CPU s here): a small budget"
FASTER: dict[str, tuple[list[str], str]] = {
    "mptool attack data.csv --model spec.yaml --out attack": (_SMALL_ATTACK, _WHY_ATTACK),
    "mptool attack data.csv --model spec.yaml --attacks threshold,lira,attribute:relationship --out attribute":
        (_SMALL_ATTACK, _WHY_ATTACK),
    "mptool attack data.csv --model spec.yaml --trained model.skops": (_SMALL_ATTACK, _WHY_ATTACK),
}

# the exit code a doc states for a command (others: 0 or 1)
EXPECTED_EXIT: dict[str, int] = {
    "mptool pdtp": 1,  # README Quickstart: the demo "exits 1 because DTP-1 is violated"
}


def test_every_table_entry_names_a_documented_command() -> None:
    stale = (set(SKIP) | set(FASTER) | set(EXPECTED_EXIT)) - DOCUMENTED
    assert not stale, f"entries for commands no doc shows any more: {sorted(stale)}"
    assert not set(SKIP) & set(FASTER)
    assert len(DOCUMENTED) >= 20  # the README's and every command page's examples are found


@pytest.mark.parametrize(("path", "line", "body"), BLOCKS,
                         ids=[f"{p.relative_to(REPO)}:{n}" for p, n, _ in BLOCKS])
def test_documented_commands_run(path: Path, line: int, body: str, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPTOOL_FINGERPRINT_KEY", KEY)
    cmds = commands(body)
    written = {c[i + 1].rstrip("/") for c in cmds for i, w in enumerate(c[:-1]) if w in (">", "--out")}
    needed = {w.rstrip("/") for c in cmds for w in c} & set(FIXTURES)
    if needed - {"data.csv", "spec.yaml", "census-income.data"}:
        needed |= {"data.csv", "spec.yaml"}  # a model file or a run is made from them
    for name, make in FIXTURES.items():
        if name in needed - written:
            make(tmp_path)
    for cmd in cmds:
        key = text(cmd)
        if key in SKIP:
            continue
        args, stdout = cmd[1:], None
        if len(args) > 1 and args[-2] == ">":
            args, stdout = args[:-2], args[-1]
        args = args + FASTER.get(key, ([], ""))[0]
        res = run_cli(*args)
        where = f"{path.relative_to(REPO)}:{line}: {key}"
        assert res.code in (0, 1), f"{where} exited {res.code}: {res.stderr[-600:]}"
        if key in EXPECTED_EXIT:
            assert res.code == EXPECTED_EXIT[key], f"{where} exited {res.code}, the doc says {EXPECTED_EXIT[key]}"
        if stdout:
            Path(stdout).write_text(res.stdout)


# ------------------------------------------------------------------------------------------------------- links


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces as '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file (a repeated heading gets -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    body = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    for m in re.finditer(r"^#{1,6} +(.+?) *#*$", body, re.M):
        s = slug(m.group(1))
        out.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return out


def links(path: Path) -> list[str]:
    """The relative link targets of a Markdown file, code blocks and code spans left out."""
    body = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    body = re.sub(r"`[^`\n]*`", "", body)
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", body) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(REPO)) for p in DOCS])
def test_relative_links_and_anchors_resolve(path: Path) -> None:
    broken = []
    for target in links(path):
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            broken.append(f"{target}: no heading with this anchor in {dest.name}")
    assert not broken, f"{path.relative_to(REPO)}: " + "; ".join(broken)


# ------------------------------------------------------------------------------- the README's CI and cron recipes


def test_readme_baseline_workflow_reads_an_earlier_runs_artifact() -> None:
    """The README's workflow: download-artifact gets the run id of the last successful run on main (found with
    gh run list) and a token that may read it; it downloads what the workflow uploads; the key is passed only
    when set (a set but empty key is refused)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "download-artifact" in b)
    workflow = yaml.safe_load(block)
    assert workflow["permissions"]["actions"] == "read"
    steps = workflow["jobs"]["privacy"]["steps"]
    download = next(s for s in steps if str(s.get("uses", "")).startswith("actions/download-artifact@v4"))
    assert {"name", "path", "run-id", "github-token"} <= set(download["with"])
    finder = next(s for s in steps if s.get("id") == download["with"]["run-id"].split(".")[1])
    assert "gh run list" in finder["run"] and "--status success" in finder["run"] and "GH_TOKEN" in finder["env"]
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@v4"))
    assert upload["with"]["name"] == download["with"]["name"] and upload["if"] == "always()"
    gate = next(s for s in steps if "mptool pdtp" in str(s.get("run", "")))
    assert gate["env"]["KEY"] == "${{ secrets.MPTOOL_FINGERPRINT_KEY }}"
    assert 'if [ -n "$KEY" ]; then export MPTOOL_FINGERPRINT_KEY' in gate["run"]
    assert "--baseline" in gate["run"] and download["with"]["path"] in gate["env"]["BASELINE"]
    # the results folder lies outside the checkout (a pull request cannot commit one), and the report step runs
    # only when the gate's mptool exited 0 or 1 (it wrote its results then), never on a folder it did not write
    assert upload["with"]["path"] == "${{ runner.temp }}/privacy-audit"
    assert '--out "$RUNNER_TEMP/privacy-audit"' in gate["run"]
    assert 'echo "exit-code=$rc" >> "$GITHUB_OUTPUT"' in gate["run"]
    report = next(s for s in steps if "mptool report" in str(s.get("run", "")))
    done = f"steps.{gate['id']}.outputs.exit-code"
    assert report["if"] == f"always() && ({done} == '0' || {done} == '1')"
    assert '"$RUNNER_TEMP/privacy-audit"' in report["run"] and "privacy-audit/report.md" in report["run"]
    ci = readme.split("## In CI (GitHub Actions)")[1].split("\n## ")[0]
    assert "MPTOOL_FINGERPRINT_KEY" in ci and "openssl rand -hex 32" in ci


def test_readme_cron_line_logs_the_run_folder_and_mptools_exit_code() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    cron = re.search(r"```cron\n(.*?)```", readme, re.S).group(1)
    line = next(x for x in cron.splitlines() if x and not x.startswith("#"))
    assert "%" not in line.replace("\\%", "")  # a bare % ends a crontab command
    folder = re.search(r'--out "\$(\w+)"', line).group(1)  # each run in its own folder, named in the log
    assert line.index("rc=$?") < line.index("echo") and f"${folder}" in line.split("echo")[1] and "$rc" in line
