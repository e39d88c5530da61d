"""Options and output shared by the audit commands for CI and cron: baseline, waivers, JUnit.

``--baseline``/``--baseline-tolerance``/``--waivers`` (pdtp) and ``--format junit`` (pdtp,
attack, reduce-dtp). The gate logic is :mod:`mptool.api.baseline`; the JUnit writer
:mod:`mptool.outputs.junit`; this module reads the flags, prints and builds the test cases.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mptool.inputs.options import DEFAULT_TOLERANCE
from mptool.outputs.ending import ending_words, verdict_rests_on
from mptool.runtime import ui
from mptool.runtime.errors import InputError

if TYPE_CHECKING:  # the gate's modules load pandas: imported where used, so --help stays light
    import pandas as pd

    from mptool.api.baseline import GateOutcome
    from mptool.inputs.baseline import PreviousRun, Waiver
    from mptool.outputs.formats import OutputFile
    from mptool.outputs.junit import GateCase

FormatOpt = Annotated[
    str,
    typer.Option("--format", help="Result formats: csv and json (always written); junit adds DIR/junit.xml, "
                 "one test case per gate, e.g. --format junit."),
]
BaselineOpt = Annotated[
    Path | None,
    typer.Option(help="A previous 'mptool pdtp' run (its --out folder or pdtp.json): only records new or worse "
                 "than there fail the gate; adds column baseline_status (new|worse|unchanged|fixed)."),
]
ToleranceOpt = Annotated[
    float, typer.Option("--baseline-tolerance", help="PDTP rise (nats) within which a known violation is unchanged.")
]
WaiversOpt = Annotated[
    Path | None,
    typer.Option(help="YAML waiver file: waivers: [{record: ID-or-FINGERPRINT, reason, who, expires: YYYY-MM-DD}]; "
                 "a waived record does not fail the gate until its expiry date (MPTOOL_TODAY fixes today)."),
]
__all__ = ["FormatOpt", "BaselineOpt", "ToleranceOpt", "WaiversOpt", "DEFAULT_TOLERANCE"]


@dataclass(frozen=True)
class GateInputs:
    """What ``--baseline`` and ``--waivers`` name, read and checked before any work."""

    baseline: PreviousRun | None
    waivers: list[Waiver] | None
    tolerance: float
    today: dt.date
    clock: dt.date | None = None  # the system's date where MPTOOL_TODAY set another (an override, named)

    @property
    def active(self) -> bool:
        return self.baseline is not None or self.waivers is not None


def read_gate_inputs(baseline: Path | None, waivers: Path | None, tolerance: float) -> GateInputs:
    """Read the baseline run and the waiver file (exit 2 on anything not clearly valid)."""
    from mptool.inputs.baseline import load_run, load_waivers, today
    from mptool.inputs.fingerprint import key_from_env

    key_from_env()  # an empty key stops here, before any work
    on = today()
    return GateInputs(
        load_run(baseline) if baseline is not None else None,
        load_waivers(waivers, on) if waivers is not None else None,
        tolerance,
        on,
        None if on == dt.date.today() else dt.date.today(),
    )


def check_before_work(prep: Any, gi: GateInputs, engine: str = "auto", replicates: bool = False,
                      rule: dict[str, Any] | None = None) -> None:
    """Before the leave-one-out: ids unique (when records match by id), records matchable, the baseline
    comparable with this run and bound to its spec, estimator and engine (``engine``: the --engine choice;
    ``replicates``: the run audits with the replicate engine, so the baseline must hold decisions too, made
    under ``rule``, this run's ``api.baseline.decision_rule``)."""
    from mptool.inputs.fingerprint import KEY_ENV, identity, run_key

    if gi.active and prep.train.ids is not None:
        from mptool.api.baseline import check_unique_ids

        check_unique_ids(prep.train.rows, prep.train.ids, str(prep.spec.data.id))
    if gi.active and prep.train.ids is None and run_key() is None:
        flag = "--baseline" if gi.baseline is not None else "--waivers"
        raise InputError(
            f"{flag}: records are matched by data.id or by fingerprints keyed with {KEY_ENV}, and neither is set "
            f"(without a key no fingerprint is written: an unkeyed hash would identify records); set {KEY_ENV} "
            "to one secret for every run (a CI secret), or data.id in the spec"
        )
    if gi.baseline is not None:
        from mptool.api.baseline import check_comparable, check_decisions_baseline
        from mptool.inputs.signature import check_bound
        from mptool.loo import select_engine

        check_comparable(identity(prep.train, run_key(), prep.spec.output.bin_size), gi.baseline, "--baseline")
        check_decisions_baseline(gi.baseline, replicates, rule=rule)
        name = "replicates" if replicates else select_engine(engine, prep.spec, prep.template).name
        check_bound(gi.baseline.summary, prep.spec.sha256(), prep.choice.name, name, str(gi.baseline.path),
                    "--baseline")


def apply_gate(table: pd.DataFrame, summary: dict[str, Any], threshold: float, gi: GateInputs) -> GateOutcome | None:
    """The gate against the baseline/waivers; adds ``baseline_status`` (with a baseline) and ``waived`` to ``table``."""
    if not gi.active:
        return None
    from mptool.api.baseline import gate, rule_of
    from mptool.outputs.report.verify import gate_label

    decisions = table["violation"] if summary.get("replicates") else None  # decided violations (replicates)
    outcome = gate(table, summary["identity"], threshold, baseline=gi.baseline, tolerance=gi.tolerance,
                   waivers=gi.waivers, today=gi.today, decisions=decisions, rule=rule_of(summary))
    c = outcome.block["counts"]
    outcome.block["excused"] = c["violations"] - c["counted"]  # above the threshold, yet not counted
    raw = "fail" if c["violations"] else "undecided" if c.get("undecided") else "pass"
    outcome.block["verdict_label"] = gate_label({"verdict": raw, "baseline": outcome.block})
    if gi.baseline is not None:
        table["baseline_status"] = outcome.status
        table["baseline_pdtp"] = outcome.before
    if gi.waivers is not None:
        table["waived"] = outcome.waived
        said = outcome.block["waivers"]
        said["today_from"] = "clock" if gi.clock is None else "MPTOOL_TODAY"
        if gi.clock is not None:  # an injected date decides which waivers are in force: named (red3-1)
            said["clock"] = gi.clock.isoformat()
    return outcome


def clock_note(block: dict[str, Any]) -> str:
    """The waivers' date when ``MPTOOL_TODAY`` set one other than the system's (an override), else ''."""
    said = block.get("waivers") or {}
    if said.get("today_from") != "MPTOOL_TODAY":
        return ""
    return f"waiver expiry judged as of {said['today']} (MPTOOL_TODAY), not the system date {said['clock']}"


def gate_line(outcome: GateOutcome) -> str:
    """One line: the gate's verdict after baseline and waivers (no data values)."""
    c = outcome.block["counts"]
    if "new" in c:
        parts = f"{c['new']} new, {c['worse']} worse, {c['unchanged']} unchanged, {c['fixed']} fixed"
        parts += f", {c['absent']} absent" if c["absent"] else ""
        what = "new or worse than the baseline"
    else:
        parts = f"{c['violations']} above the threshold"
        what = "above the threshold"
    parts += f"; {c['waived']} waived"
    if "undecided" in c:  # the replicate engine: decided violations; undecided records are never waived
        what = "decided above the threshold"
        parts = f"{c['violations']} decided above the threshold; {c['waived']} waived; {c['undecided']} undecided"
        if "new" in c:  # a baseline of decisions: new and fixed by decision, no "worse" (api/baseline.py)
            what = "newly decided above the threshold (not decided above in the baseline)"
            absent = f", {c['absent']} absent" if c["absent"] else ""
            parts = f"{c['new']} new, {c['unchanged']} unchanged, {c['fixed']} fixed{absent}; {parts}"
    if note := clock_note(outcome.block):
        parts += f"; {note}"
    if outcome.verdict == "fail":
        return f"gate FAILED: {c['counted']} record(s) {what} and not waived ({parts})"
    if outcome.verdict == "undecided":
        return (f"gate not established: no record {what} that is not waived, but {c['undecided']} record(s) "
                f"undecided beyond the training randomness (fail closed; {parts})")
    excused = c["violations"] - c["counted"]
    if excused:  # a pass that rests on excused violations says so first (issue 26)
        from mptool.outputs.report.verify import gate_label

        label = gate_label({"verdict": "fail", "baseline": outcome.block})
        above = "decided above" if "undecided" in c else "above"
        return (f"gate passed ({label}): {excused} record(s) {above} the threshold excused; no record {what} "
                f"that is not waived ({parts})")
    return f"gate passed: no record {what} that is not waived ({parts})"


def evidence(summary: dict[str, Any], outcome: GateOutcome | None = None) -> list[str]:
    """What a pdtp verdict rests on beyond a full audit of T's full vector (issue 26): the release policy as
    measured, a sample, records chosen with --records, a --fail-fast stop, a baseline and waivers."""
    lines = verdict_rests_on(summary)
    if outcome is not None:
        if "path" in outcome.block:
            block = outcome.block
            how = ("its decisions beyond the training randomness" if block.get("compares") == "decisions"
                   else f"tolerance {block['tolerance']:g}")
            lines.append(f"compared with the baseline {block['path']} ({how})")
        if outcome.block["counts"]["waived"]:
            lines.append(f"{outcome.block['counts']['waived']} record(s) waived (--waivers)")
        if note := clock_note(outcome.block):
            lines.append(note)
        if "path" in outcome.block or outcome.block.get("excused"):
            lines.append(gate_line(outcome))  # a waiver file that excused nothing changes nothing
    return lines


def print_gate(outcome: GateOutcome, id_column: bool, quiet: bool) -> None:
    """Warnings (expired waivers) on stderr; the listed records unless quiet; the gate line."""
    for line in outcome.warnings:
        ui.warn(line)
    if not quiet:
        from mptool.outputs.junit import record_lines

        if "path" in outcome.block:
            how = ("decisions compared" if outcome.block.get("compares") == "decisions"
                   else f"tolerance {outcome.block['tolerance']:g}")
            ui.echo(f"baseline {outcome.block['path']} (matched by {outcome.block['matched_by']}, {how})")
        recs = outcome.block["records"]
        for status in ("new", "worse", "fixed"):
            listed = recs.get(status) or []
            if listed:
                ui.echo(f"{status}:")
                for line in record_lines(listed, id_column, 10).splitlines():
                    ui.echo(f"  {line}")
    ui.echo(gate_line(outcome), limit=None)


def junit_file(suite: str, cases: list[GateCase], seconds: float, stdout: str = "") -> OutputFile:
    """DIR/junit.xml holding ``cases``, written with the run's other files (:mod:`mptool.outputs.formats`)."""
    from mptool.outputs.formats import JunitSuite, OutputFile

    return OutputFile("junit.xml", "junit", JunitSuite(suite, tuple(cases), float(seconds), stdout))


def pdtp_cases(summary: dict[str, Any], table: pd.DataFrame, outcome: GateOutcome | None) -> list[GateCase]:
    """pdtp's one gate: DTP-1 (max PDTP <= threshold), after baseline and waivers when given."""
    from mptool.outputs.junit import GateCase, record_lines

    id_column = bool(summary["identity"].get("id"))
    keys = table["id"] if id_column else table["fingerprint"]
    # the replicate engine with --fail-fast: how the run ended (a stop, a spent --budget, or complete)
    ended = ending_words(summary) if (summary.get("replicates") or {}).get("fail_fast_spending") else ""
    col = "pdtp_raw" if summary.get("gate") == "raw" else "pdtp"  # the --gate scale (issue 18)
    name = f"DTP-1: every audited record's {'raw ' if col == 'pdtp_raw' else ''}PDTP <= {summary['threshold']:g}"
    if outcome is not None:
        counted = outcome.block["records"]["counted"]
        name += (" (not decided above in the baseline, not waived)" if outcome.block.get("compares") == "decisions"
                 else " (new or worse than the baseline, not waived)" if "path" in outcome.block else " (not waived)")
        message = ui.safe_line(gate_line(outcome), None)
    else:
        above = table["violation"].map(lambda v: v is True) if summary.get("replicates") else table[col] > summary[
            "threshold"]  # the replicate engine: records decided above (docs/randomness.md)
        bad = table[above].sort_values([col, "row"], ascending=[False, True])
        counted = [{"key": k, "row": int(r), "pdtp": float(p)}
                   for k, r, p in zip(keys[bad.index], bad["row"], bad[col], strict=True)]
        message = f"{len(counted)} of {summary['n']} records above the threshold; max PDTP {summary['max']:.4f}"
        if summary.get("replicates"):
            message += f"; {summary['undecided']} undecided (not established)"
            if ended:
                message += f"; run {ended}"
    failed = (outcome.verdict if outcome is not None else summary["verdict"]) != "pass"  # undecided fails closed
    details = message + ("\n" + record_lines(counted, id_column) if counted else "")
    return [GateCase(name, "mptool.pdtp", failed, message if failed else "", details if failed else "",
                     seconds=float(summary["timings"]["total_s"]), evidence=tuple(evidence(summary, outcome)),
                     notes=(f"run {ended}",) if ended else ())]


def attack_cases(summary: dict[str, Any]) -> list[GateCase]:
    """attack's gates: --max-accuracy and --max-auc; a gate not given is skipped, one the run cannot decide fails."""
    from mptool.outputs.junit import GateCase

    g = summary.get("gate") or {}
    exceeded = [str(e) for e in g.get("exceeded") or []]
    undecided = [str(e) for e in g.get("undecided") or []]
    cases = []
    said = (summary["release_note"],) if summary.get("release_note") else ()
    for key, flag, word in (("max_accuracy", "--max-accuracy", "accuracy"), ("max_auc", "--max-auc", "AUC")):
        limit = g.get(key)
        name = f"{flag}: strongest attack's {word} <= {limit:g}" if limit is not None else f"{flag} (not given)"
        hits = [e for e in exceeded if f" {word} " in f" {e} "]
        unsure = [e for e in undecided if f" {word} " in f" {e} "]
        if limit is None:
            cases.append(GateCase(name, "mptool.attack", False, f"{flag} not given", skipped=True))
        elif unsure and not hits:
            why = "cannot decide (fails closed): " + "; ".join(unsure)
            cases.append(GateCase(name, "mptool.attack", True, why, why, evidence=said))
        else:
            cases.append(GateCase(name, "mptool.attack", bool(hits), "; ".join(hits), "\n".join(hits),
                                  evidence=said))
    return cases


def reduce_cases(summary: dict[str, Any], table: pd.DataFrame) -> list[GateCase]:
    """reduce-dtp's gate: DTP-1 reached within --max-removals; the removals listed (row, id, PDTP before)."""
    import pandas as pd

    from mptool.outputs.junit import GateCase

    name = f"DTP-1 reached within {summary['max_removals']} removal(s) (threshold {summary['threshold']:g})"
    failed = not summary["reached"]
    message = (
        f"DTP-1 not reached: lowest max PDTP {summary['best_max']:.4f} after {summary['best_step']} removal(s) "
        f"(start {summary['initial_max']:.4f})"
    )
    lines = []
    for _, r in table.iterrows():
        if pd.isna(r.get("row")):
            continue
        ident = "" if r.get("id") is None or pd.isna(r.get("id")) else f"  id {ui.excerpt(r['id'])}"
        lines.append(f"step {r['step']}: removed row {int(r['row'])}{ident}  PDTP {r['pdtp_before']:.4f}, "
                     f"max after {r['max_pdtp_after']:.4f}")
    details = message + ("\n" + "\n".join(lines[:200]) if lines else "")
    said = (summary["release_note"],) if summary.get("release_note") else ()
    return [GateCase(name, "mptool.reduce-dtp", failed, message if failed else "", details if failed else "",
                     seconds=float(summary["timings"]["total_s"]), evidence=said)]
