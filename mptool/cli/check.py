"""``mptool check``: a dry run -- validate DATA and the spec, print T, the columns, the engines and the cost."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mptool.cli.app import app, parse_rows
from mptool.inputs import options as flags
from mptool.runtime import startup, ui
from mptool.runtime.errors import EXIT_OK

CHECK_EPILOG = "Exit codes: 0 = the spec and data are usable (the plan is printed); 2 = bad input (one error line)."


def print_plan(plan, jobs: int) -> None:
    """The plan as plain lines (data-derived names escaped)."""
    from mptool.api.costs import duration
    from mptool.inputs.spec import yaml_value

    p = plan.prep
    T, spec = p.train, p.spec
    echo = ui.out_console.print  # markup off: data like '[red]' is printed as written
    read = spec.data.read
    how = "" if plan.fmt != "CSV" else (
        f" (separator {read.separator!r}, header {yaml_value(read.header if read.header is not None else True)}, "
        f"encoding {read.encoding}, decimal {read.decimal!r}{', skip_spaces' if read.skip_spaces else ''})"
    )
    echo(ui.safe_line(f"data: {plan.source}, {plan.fmt}{how}", None))
    echo(
        f"rows: {plan.rows_usable + plan.rows_dropped} read, {plan.rows_dropped} dropped for a missing cell, "
        f"{plan.rows_usable} usable; T: {T.n} records (train_size {yaml_value(spec.data.train_size)}, seed {spec.seed})"
    )
    classes = ", ".join(f"{ui.quoted(c)} {n}" for c, n in plan.class_counts[:20])
    more = f" and {len(plan.class_counts) - 20} more" if len(plan.class_counts) > 20 else ""
    n_classes = len(plan.class_counts)
    echo(ui.safe_line(f"label {ui.quoted(spec.data.label)}: {n_classes} classes in T: {classes}{more}", None))
    est = f"{p.choice.name} ({p.choice.cls.__name__})"
    echo(ui.safe_line(f"estimator: {est}, preprocess {spec.model.preprocess}", None))
    echo(ui.safe_line(f"release policy: {plan.release}", None))
    echo(f"columns ({len(plan.columns)} features; dropped: {ui.listing(spec.data.drop, 10) or 'none'}):")
    width = max((len(ui.excerpt(n)) for n, _, _ in plan.columns), default=4)
    for name, use, why in plan.columns:
        echo(ui.safe_line(f"  {ui.excerpt(name):<{width}}  {use:<16}  {why}", None))
    echo(f"engine: {plan.chosen}")
    for name, why in plan.engines:
        echo(ui.safe_line(f"  {name}: {'accepts the spec' if why is None else 'no, ' + why}", None))
    if plan.chosen.split()[0] == "refit":
        from mptool.cli.estimators import RANDOMNESS_TEXT

        echo(ui.safe_line(RANDOMNESS_TEXT.replace(
            "Randomness detection: where the engine is refit, ",
            "randomness: this dry run refits the largest timed subset of T with other seeds (its pdtp line names "
            "the engine that follows); "), None))
    echo(ui.safe_line(f"DTP upper bound: {plan.bound}", None))
    sizes = ", ".join(f"{n:,}" for n, _ in plan.timed_sizes)
    last = plan.timed_sizes[-1][0] if plan.timed_sizes else 0
    how = "measured on all of T" if last == T.n else f"extrapolated from the largest ({last:,} records)"
    echo(f"timing: one fit of A(T) takes about {duration(plan.fit_seconds)} (fits timed on {sizes} records of T, "
         f"{how}); estimates for --jobs {jobs} on this machine as loaded now:")
    for c in plan.commands:
        span = duration(c.seconds) if c.seconds_high is None else (
            f"{duration(c.seconds)} to {duration(c.seconds_high)}")
        echo(f"  {c.command:<10}  engine {c.engine}, {c.fits:,} fit(s), about {span}: {c.detail}")


@app.command(epilog=CHECK_EPILOG)
def check(
    data: Annotated[Path, typer.Argument(help="Dataset (CSV, CSV.gz or Parquet).")],
    model: Annotated[Path, typer.Option("--model", "-m", help="Model spec YAML.")],
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Workers the estimate assumes; 0 = every core.")] = 0,
    train_size: Annotated[int | None, typer.Option(help="Override data.train_size.")] = None,
    seed: Annotated[int | None, typer.Option(help="Override the spec's seed.")] = None,
    records: Annotated[str | None, typer.Option(help="Only these CSV rows, e.g. 0,5,9 (must be in T).")] = None,
    sample: Annotated[int | None, typer.Option(help="Only K records of T, drawn with the seed.")] = None,
    engine: Annotated[str, typer.Option(help="Leave-one-out engine: auto, exact or refit.")] = "auto",
    allow_import: Annotated[
        list[str] | None, typer.Option("--allow-import", help="Module a dotted estimator path may import from.")
    ] = None,
) -> int:
    """Dry run: check DATA against the spec and print what pdtp, reduce-dtp and attack would do.

    Prints the size of T, its classes, how each column is used and why, the leave-one-out
    engine and why the others refuse, the DTP upper bound that applies, and for each command
    the number of model fits and an estimated time from timing a few fits. Writes nothing.
    """
    with ui.progress(1, "check: starting (importing pandas, scikit-learn, mptool)", steps=False) as advance:
        from mptool.api.costs import process_age
        from mptool.api.plan import check_plan
        from mptool.inputs.spec import load_spec
        from mptool.runtime.parallel import resolve_jobs

        advance(1)  # 2 s idle, 12 s at load 10 (2 cores): a line after 5 s
    startup.loaded()  # the start-up's objects frozen, the collector back to its defaults

    flags.check_run_flags(jobs=jobs, scheduler=None, seed=seed, bin_size=None, allow_import=allow_import)
    flags.check_pdtp_flags(threshold=1.0, train_size=train_size, sample=sample)
    spec = load_spec(model, {"data.train_size": train_size, "seed": seed})
    plan = check_plan(data, spec, engine, tuple(allow_import or ()), jobs or None, parse_rows(records), sample,
                      process_age(), lambda n, label: ui.progress(n, label, steps=False))  # a line after 5 s
    for note in plan.notes:
        ui.warn(note)
    print_plan(plan, resolve_jobs(jobs or None))
    ui.info("ok: the spec and data are usable; run 'mptool pdtp' with the same arguments", False)
    return EXIT_OK
