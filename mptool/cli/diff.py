"""``mptool diff RUN_A RUN_B``: new, fixed and changed records between two pdtp runs; exit 1 if B is worse."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mptool.cli.app import QuietOpt, app
from mptool.inputs import options as flags
from mptool.runtime import ui
from mptool.runtime.errors import EXIT_FINDING, EXIT_OK

DIFF_EXIT_HELP = (
    "Exit codes: 0 = B is not worse than A; 1 = B is worse (a new violation, or a violation whose PDTP rose by "
    "more than --tolerance; for two replicate-engine runs: a record decided above now and not in A); 2 = bad "
    "input or usage (runs of other data or spec, unreadable results, a replicate run against another engine's, a RUN_B "
    "stopped by --fail-fast); "
    "3 = unexpected internal error."
)


@app.command(epilog=DIFF_EXIT_HELP)
def diff(
    run_a: Annotated[Path, typer.Argument(help="The earlier run: a 'mptool pdtp' --out folder or its pdtp.json.")],
    run_b: Annotated[Path, typer.Argument(help="The later run, compared with RUN_A.")],
    threshold: Annotated[
        float | None, typer.Option(help="DTP-1 threshold for both runs [default: RUN_B's threshold].")
    ] = None,
    tolerance: Annotated[
        float, typer.Option(help="PDTP change (nats) within which a record counts as unchanged.")
    ] = 0.05,
    top: Annotated[int, typer.Option(help="Records listed per kind (new, worse, fixed, changed).")] = 10,
    quiet: QuietOpt = False,
) -> int:
    """Compare two pdtp runs record by record (by data.id, else by fingerprint; never by row number).

    Prints the records that are new violations, worse, fixed and changed by more than
    --tolerance, then one summary line suited to a cron log: violations, max and mean PDTP
    before -> after. Reads result files only. Exit 1 when RUN_B is worse than RUN_A.

    Two replicate-engine runs (randomized training) are compared by their decisions (above,
    below, undecided): every decision change is listed and counted; a changed estimate alone
    is not a regression (docs/randomness.md section 8).
    """
    from mptool.api.baseline import check_comparable
    from mptool.api.diff import diff_runs, summary_line
    from mptool.inputs.baseline import load_run
    from mptool.inputs.signature import check_bound

    flags.check_tolerance(tolerance, "--tolerance")
    flags.check_count(top, "--top", 0, 10_000)
    if threshold is not None:
        flags.check_threshold(threshold)
    a, b = load_run(run_a, "RUN_A"), load_run(run_b, "RUN_B")
    check_comparable(b.identity, a, "RUN_A")
    b_manifest = b.summary.get("manifest") if isinstance(b.summary.get("manifest"), dict) else {}
    check_bound(a.summary, str(b_manifest.get("spec_sha256")), str(b.summary.get("estimator")),
                str(b.summary.get("engine")), str(a.path), "RUN_A")
    limit = threshold if threshold is not None else float(b.summary.get("threshold", 1.0))
    flags.check_threshold(limit, f"{b.path}: summary.threshold")
    outcome = diff_runs(a, b, limit, tolerance)
    id_column = bool(b.identity.get("id"))
    if not quiet and top:
        from mptool.outputs.junit import record_lines

        c = outcome.summary["counts"]
        kinds = (("new", "new violations"), ("worse", "worse"), ("fixed", "fixed"),
                 ("changed", f"changed by more than {tolerance:g}"))
        if outcome.summary.get("compares") == "decisions":  # replicate runs: decisions, not estimates
            kinds = (("new", "new violations (decided above now, not decided above in RUN_A)"),
                     ("fixed", "fixed (decided below now, decided above in RUN_A)"),
                     ("changed", "decision changed (RUN_A -> RUN_B)"))
        for kind, title in kinds:
            listed = outcome.records[kind]
            if listed:
                ui.echo(f"{title} ({c[kind]}):")
                for line in record_lines(listed, id_column, top, "RUN_A").splitlines():
                    ui.echo(f"  {line}")
        if c["absent"]:
            ui.echo(f"{c['absent']} violation(s) of RUN_A are records not in RUN_B (not counted as fixed)")
    ui.echo(summary_line(outcome), limit=None)
    return EXIT_FINDING if outcome.worse else EXIT_OK
