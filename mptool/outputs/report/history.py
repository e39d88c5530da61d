"""``mptool report --history DIR``: the trend over a folder of timestamped pdtp runs.

Nightly cron audits leave one ``--out`` folder per night. This reads every subfolder of DIR
holding a ``pdtp.json`` (result files only; a folder that cannot be read is named in a
note and left out), orders the runs by the time their manifest says they started (then by
folder name), and shows max/mean PDTP and the number of violations per run (a trend plot
in HTML, a table in both formats) and the records whose PDTP changed most between their
first and last run. Records are matched as by ``--baseline`` (``data.id``, else fingerprint),
and only across runs whose records are comparable with the latest run's (same identity);
the report shows a record's row number and fingerprint, never its id or values.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from mptool.inputs.baseline import PreviousRun, load_run
from mptool.outputs.report.values import number
from mptool.outputs.report.verify import decisions_recomputed, gate_label
from mptool.runtime import ui
from mptool.runtime.errors import InputError
from mptool.runtime.version import __version__

#: Most run folders read (the oldest beyond are left out, with a note).
MAX_RUNS = 1000


@dataclass
class History:
    """The runs of a history folder, oldest first, and notes on what was left out."""

    folder: Path
    runs: list[PreviousRun]
    notes: list[str] = field(default_factory=list)


def _started(run: PreviousRun) -> str:
    m = run.summary.get("manifest")
    return str(m.get("started", "")) if isinstance(m, dict) else ""


def has_runs(folder: Path) -> bool:
    """Whether ``folder`` holds run subfolders (with a pdtp.json) rather than results itself."""
    return folder.is_dir() and not (folder / "pdtp.json").exists() and any(
        (sub / "pdtp.json").is_file() for sub in folder.iterdir() if sub.is_dir()
    )


def load_history(folder: str | Path) -> History:
    """Every readable pdtp run in the subfolders of ``folder``, in time order; InputError if there is none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"{folder}: --history needs a folder holding one subfolder per run")
    runs, notes = [], []
    subs = sorted(sub for sub in folder.iterdir() if sub.is_dir() and (sub / "pdtp.json").is_file())
    for sub in subs:
        try:
            run = load_run(sub, "run", matched=False)
            said = run.summary.get("threshold", 1.0)  # an edited run: text, null, a number beyond a float (red3-6)
            if isinstance(said, bool) or not isinstance(said, int | float) or not (number(said) or 0) > 0:
                raise InputError(f"{sub / 'pdtp.json'}: summary.threshold is not a finite number above 0")
            runs.append(run)
        except InputError as exc:
            why = str(exc).removeprefix(str(sub / "pdtp.json") + ": ")
            notes.append(f"{sub.name}: left out ({ui.excerpt(why, 120)})")
    if not runs:
        raise InputError(
            f"{folder}: no readable pdtp run in its subfolders; --history needs a folder with one "
            "'mptool pdtp --out' folder per run"
        )
    runs.sort(key=lambda r: (_started(r), r.path.parent.name))
    if len(runs) > MAX_RUNS:
        notes.append(f"{len(runs) - MAX_RUNS} oldest run(s) left out (at most {MAX_RUNS} shown)")
        runs = runs[-MAX_RUNS:]
    return History(folder, runs, notes)


def _comparable(run: PreviousRun, latest: PreviousRun) -> bool:
    keys = ("label", "id", "features", "bin_size")
    if any(run.identity.get(k) != latest.identity.get(k) for k in keys):
        return False
    if latest.identity.get("id"):
        return True
    fingerprint = latest.identity.get("fingerprint") or {}
    return bool(fingerprint.get("key_id")) and run.identity.get("fingerprint") == fingerprint  # no key: no match


def run_rows(history: History) -> pd.DataFrame:
    """One row per run: folder, started, records, max, mean, violations, threshold, verdict.

    The verdict is the records' (PDTP above the threshold), not pdtp.json's word; a run whose gate
    passed through excused records reads ``pass-with-waivers`` (or ``-baseline``), never ``fail`` or
    a plain ``pass`` (:func:`mptool.outputs.report.verify.gate_label`).
    """
    rows = []
    for run in history.runs:
        s = run.summary
        p = run.table["pdtp"].to_numpy(dtype=float)
        threshold = float(s.get("threshold", 1.0))
        said = {"violations": int((p > threshold).sum()), "verdict": "fail" if (p > threshold).any() else "pass"}
        if isinstance(s.get("replicates"), dict):  # the replicate engine: decided violations, undecided
            said = decisions_recomputed(run.table, str(run.path))
        rows.append({
            "run": run.path.parent.name, "started": _started(run) or "—", "records": int(p.size),
            "max": float(p.max()) if p.size else 0.0, "mean": float(p.mean()) if p.size else 0.0,
            "violations": said["violations"], "threshold": threshold,
            "verdict": gate_label({**s, "verdict": said["verdict"]}),
        })
    return pd.DataFrame(rows)


def changed_most(history: History, top: int) -> tuple[pd.DataFrame, int]:
    """Records of the latest run whose PDTP changed most from their first comparable run; and the runs used."""
    latest = history.runs[-1]
    used = [r for r in history.runs if _comparable(r, latest)]
    first: dict[str, float] = {}
    seen: dict[str, int] = {}
    for run in used:
        once = run.table.drop_duplicates("key")  # identical records (no id) share a key and a PDTP
        for key, pdtp in zip(once["key"], once["pdtp"], strict=True):
            first.setdefault(key, float(pdtp))
            seen[key] = seen.get(key, 0) + 1
    t = latest.table.drop_duplicates("key")
    if not _comparable(latest, latest):  # neither data.id nor MPTOOL_FINGERPRINT_KEY: records cannot be matched
        t = t.iloc[:0]
    out = pd.DataFrame({
        "row": t["row"].to_numpy(), "fingerprint": t["fingerprint"].astype(str).to_numpy(),
        "first": [first[k] for k in t["key"]], "last": t["pdtp"].to_numpy(dtype=float),
        "runs": [seen[k] for k in t["key"]],
    })
    out["change"] = out["last"] - out["first"]
    out = out[out["runs"] > 1].assign(size=lambda f: f["change"].abs().round(9))  # ties: equal to 1e-9
    out = out[out["size"] > 0].sort_values(["size", "row"], ascending=[False, True]).head(top)
    return out.drop(columns="size"), len(used)


def _table(frame: pd.DataFrame, formats: dict[str, str]) -> dict[str, Any]:
    cols = list(frame.columns)
    rows = [[(formats.get(c, "{}")).format(v) if v is not None else "—" for c, v in zip(cols, r, strict=True)]
            for r in frame.itertuples(index=False)]
    numeric = [c not in ("run", "started", "verdict", "fingerprint") for c in cols]
    return {"columns": cols, "rows": rows, "numeric": numeric}


def build_context(history: History, top: int) -> dict[str, Any]:
    """What both formats show: the runs table, the changed records, notes (formatted strings)."""
    runs = run_rows(history)
    changed, used = changed_most(history, top)
    fmt = {"max": "{:.4f}", "mean": "{:.4f}", "threshold": "{:g}", "first": "{:.4f}", "last": "{:.4f}",
           "change": "{:+.4f}"}
    last, first = runs.iloc[-1], runs.iloc[0]
    headline = (
        f"{len(runs)} run(s): max PDTP {first['max']:.4f} -> {last['max']:.4f}, violations "
        f"{first['violations']} -> {last['violations']} (first -> latest)"
    )
    notes = list(history.notes)
    if not used:
        notes.append("the latest run has neither data.id nor fingerprints (no MPTOOL_FINGERPRINT_KEY): its records "
                     "cannot be matched with earlier runs; no changed records shown")
    elif used < len(history.runs):
        notes.append(
            f"{len(history.runs) - used} run(s) have records not comparable with the latest run (other data, spec "
            "or fingerprint key): left out of the changed records, kept in the trend"
        )
    return {
        "title": f"mptool history: {history.folder.name or history.folder}",
        "folder": str(history.folder),
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "mptool_version": __version__,
        "headline": headline,
        "status": last["verdict"],
        "runs": _table(runs, fmt),
        "changed": _table(changed, fmt) if len(changed) else None,
        "compared": used,
        "notes": notes,
        "frame": runs,
    }


def trend_labels(started: list[str], folders: list[str]) -> list[str]:
    """Distinct x labels of the trend plot: the start to the minute (2026-11-23 12:05), to the second when two
    runs share a minute, with the run's index (#3) when two share a second; the folder name for a run
    without a start time."""
    def stamps(width: int) -> list[str]:
        return [ui.excerpt(s[:width].replace("T", " ") if s != "—" else r, 24)
                for s, r in zip(started, folders, strict=True)]

    labels = stamps(16)
    if len(set(labels)) < len(labels):
        labels = stamps(19)
    if len(set(labels)) < len(labels):
        labels = [f"#{i + 1} {label}" for i, label in enumerate(labels)]
    return labels


def trend_svg(runs: pd.DataFrame) -> str:
    """The trend plot of :func:`run_rows` (see :func:`mptool.outputs.report.plots.trend_plot`)."""
    from mptool.outputs.report import plots

    labels = trend_labels(runs["started"].tolist(), runs["run"].tolist())
    return plots.trend_plot(labels, runs["max"].to_numpy(float), runs["mean"].to_numpy(float),
                            runs["violations"].to_numpy(int), float(runs["threshold"].iloc[-1]))


def render_history(history: History, fmt: str, top: int = 20) -> dict[str, str]:
    """{'html': ..., 'md': ...} as ``fmt`` (html, md or both) asks."""
    from mptool.outputs.report.markdown import cell, md_table
    from mptool.outputs.report.templating import Raw, environment

    context = build_context(history, top)
    out: dict[str, str] = {}
    if fmt in ("html", "both"):
        svg = trend_svg(context["frame"])
        out["html"] = environment(autoescape=True).get_template("history.html.j2").render(
            **context, plot="data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")
        )
    if fmt in ("md", "both"):
        env = environment(autoescape=False, finalize=lambda v: v if isinstance(v, Raw) else cell(v))
        env.globals.update(md_table=md_table)
        text = env.get_template("history.md.j2").render(**context)
        while "\n\n\n" in text:
            text = text.replace("\n\n\n", "\n\n")
        out["md"] = text.strip() + "\n"
    return out
