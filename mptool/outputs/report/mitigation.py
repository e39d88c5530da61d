"""The mitigation section of ``mptool report``: mitigate.csv/json -> table, Pareto front, plot, sentence.

Reads only ``mptool mitigate``'s result files. Every value shown is a setting's aggregate
(max/mean PDTP, accuracy, log loss): no training record and no record value appears.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mptool.outputs.report import plots
from mptool.outputs.report.values import number

FILES = ("mitigate.csv", "mitigate.json")
#: Columns of the report's table (mitigate.csv's names) and their headings.
SHOWN = {"setting": "setting", "family": "family", "change": "change", "max_pdtp": "max PDTP",
         "mean_pdtp": "mean PDTP", "max_pdtp_binned": "max PDTP binned", "max_pdtp_raw": "max PDTP raw",
         "above_target": "records above", "decided_below": "decided below", "undecided": "undecided",
         "accuracy": "accuracy",
         "log_loss": "log loss", "dtp_bound": "DTP bound (eps)", "passes": "passes", "why_not": "not recommended"}


#: Count columns; ``decided_below`` and ``undecided`` are in mitigate.csv only for randomized training
#: (docs/randomness.md section 8), where ``above_target`` counts records *decided* above.
COUNTS = ("above_target", "decided_below", "undecided")


def load_mitigation(results_dir: Path, notes: list[str]) -> tuple[pd.DataFrame | None, dict[str, Any] | None]:
    """mitigate.csv and mitigate.json when both are present and readable, else (None, None) with a note."""
    import json

    if not all((results_dir / n).is_file() for n in FILES):
        return None, None
    try:
        table = pd.read_csv(results_dir / "mitigate.csv")
        doc = json.loads((results_dir / "mitigate.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        notes.append(f"mitigate results cannot be read ({exc.__class__.__name__}); mitigation section skipped")
        return None, None
    needed = {"setting", "family", "max_pdtp", "accuracy", "passes"}
    if not isinstance(doc, dict) or not needed <= set(table.columns):
        notes.append("mitigate results lack the expected columns; mitigation section skipped")
        return None, None
    return table, doc


def pareto_front(max_pdtp: np.ndarray, accuracy: np.ndarray) -> np.ndarray:
    """True for settings no other setting beats on both axes (lower max PDTP and higher accuracy, one strictly)."""
    pts = np.column_stack([np.asarray(max_pdtp, float), np.asarray(accuracy, float)])
    ok = np.isfinite(pts).all(axis=1)
    front = np.zeros(len(pts), dtype=bool)
    for i in np.flatnonzero(ok):
        others = pts[ok]
        dominated = (others[:, 0] <= pts[i, 0]) & (others[:, 1] >= pts[i, 1]) & (
            (others[:, 0] < pts[i, 0]) | (others[:, 1] > pts[i, 1]))
        front[i] = not dominated.any()
    return front


def _cell(column: str, value: Any) -> str:
    if column == "passes":
        return "yes" if str(value).lower() == "true" else "no"
    if column == "why_not":
        return "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)
    if column in ("max_pdtp", "mean_pdtp", "max_pdtp_binned", "max_pdtp_raw", "accuracy", "log_loss", "dtp_bound"):
        v = number(value)
        return "—" if v is None else f"{v:.4f}"
    if column in COUNTS:
        v = number(value)
        return "—" if v is None else str(int(v))
    return str(value)


def mitigation_block(table: pd.DataFrame | None, doc: dict[str, Any] | None) -> dict[str, Any] | None:
    """The section's context: the one-sentence recommendation, key facts and the settings table."""
    if table is None or doc is None:
        return None
    cols = [c for c in SHOWN if c in table.columns]
    front = pareto_front(table["max_pdtp"].to_numpy(float), table["accuracy"].to_numpy(float))
    rows = [[_cell(c, r[c]) + (" (Pareto)" if c == "setting" and front[i] else "") for c in cols]
            for i, (_, r) in enumerate(table.iterrows())]
    rec = doc.get("recommended") if isinstance(doc.get("recommended"), dict) else None
    items = [("target (max PDTP)", f"{number(doc.get('target')) or 1.0:g}"),
             ("records audited", str(doc.get("n_audited", "—"))),
             ("rows outside T (utility)", str(doc.get("holdout_rows", "—"))),
             ("always the majority class (accuracy)",
              "—" if number(doc.get("majority_accuracy")) is None else f"{number(doc.get('majority_accuracy')):.4f}"),
             ("recommended", "none" if rec is None else f"{rec.get('setting')} ({rec.get('family')})"),
             ("runner-up per family", ", ".join(f"{k}: {v}" for k, v in (doc.get("runners_up") or {}).items()) or "—"),
             ("plan", str((doc.get("plan") or {}).get("line", "—")))]
    if rec is not None and rec.get("command"):
        items.append(("re-audit", str(rec["command"])))
    decided = "undecided" in table.columns  # the replicate engine: settings judged by decisions
    heads = {**SHOWN, "above_target": "records decided above"} if decided else SHOWN
    table_ctx = {"columns": [heads[c] for c in cols], "rows": rows,
                 "numeric": [c in ("max_pdtp", "mean_pdtp", "max_pdtp_binned", "max_pdtp_raw", *COUNTS,
                                   "accuracy", "log_loss", "dtp_bound") for c in cols],
                 "highlight": [rec is not None and r["setting"] == rec.get("setting") for _, r in table.iterrows()]}
    return {"sentence": str(doc.get("sentence", "")), "items": items, "table": table_ctx,
            "notes": [str(n) for n in _listed(doc.get("notes"))]}


def _listed(value: Any) -> list[Any]:
    """A list read from mitigate.json; anything else (a number in an edited file, red3-8) as no entries."""
    return value if isinstance(value, list) else []


def tradeoff_svg(table: pd.DataFrame, doc: dict[str, Any]) -> str:
    """The privacy-utility plot: max PDTP against accuracy per setting, Pareto front, target line."""
    x = table["accuracy"].to_numpy(float)
    y = table["max_pdtp"].to_numpy(float)
    usable = table["recommendable"].astype(bool).to_numpy() if "recommendable" in table else np.ones(len(x), bool)
    front = np.zeros(len(x), dtype=bool)  # the front of the settings one may adopt (not a temperature, not removal)
    front[usable] = pareto_front(y[usable], x[usable])
    rec = doc.get("recommended") if isinstance(doc.get("recommended"), dict) else None
    best = None if rec is None else rec.get("setting")
    return plots.tradeoff_plot(x, y, table["family"].astype(str).tolist(), table["setting"].astype(str).tolist(),
                               front, number(doc.get("target")) or 1.0, best, usable)
