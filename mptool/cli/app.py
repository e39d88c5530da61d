"""The typer app, the options every subcommand shares, and helpers of the command modules.

Each subcommand lives in its own module (``cli/pdtp.py``, ``cli/attack.py``, ...): parse and
check flags, call :mod:`mptool.api.operations`, write the results, print, return the exit
code. :mod:`mptool.cli.main` maps exceptions to exit codes.

Start-up stays light (issue 28): the command modules import only typer and mptool's light
modules at the top (pandas, scikit-learn, scipy inside the command bodies), and
:func:`click_group` builds a subcommand's click command, whose options typer reads from the
function's signature, only when that subcommand runs or prints its own help.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
import typer.main
from typer.models import CommandInfo

from mptool.runtime import ui
from mptool.runtime.errors import InputError
from mptool.runtime.version import __version__

EXIT_CODES_HELP = (
    "Exit codes: 0 = DTP-1 holds (no record above the threshold); 1 = violation; "
    "2 = bad input or usage; 3 = unexpected internal error (rerun with --debug for a traceback); "
    "130 = interrupted (Ctrl-C); 143 = terminated (SIGTERM); 129 = hung up (SIGHUP); "
    "rerun with --resume --out DIR to continue."
)


class _LazyCommands(Mapping[str, Any]):
    """The root group's subcommands by name; each click command is built on first look-up.

    ``stubs`` answers with a command that holds only the help text (the root ``--help``
    listing needs no more); the group sets it while it lists the commands.
    """

    def __init__(self, infos: list[CommandInfo], built: Mapping[str, Any]) -> None:
        self.infos = {info.name or typer.main.get_command_name(info.callback.__name__): info for info in infos}
        self.built: dict[str, Any] = {}
        self.groups = dict(built)  # sub-groups (datasets), built by typer already
        self.stubs = False

    def __getitem__(self, name: str) -> Any:
        if name in self.groups:
            return self.groups[name]
        info = self.infos[name]
        if self.stubs:  # the same help text and flags typer gives the command (get_command_from_info)
            doc = inspect.getdoc(info.callback) if info.help is None else inspect.cleandoc(info.help)
            return typer.core.TyperCommand(name=name, help=doc, short_help=info.short_help, hidden=info.hidden,
                                           deprecated=info.deprecated, rich_markup_mode=app.rich_markup_mode)
        if name not in self.built:
            self.built[name] = typer.main.get_command_from_info(
                info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=app.rich_markup_mode
            )
        return self.built[name]

    def __iter__(self) -> Iterator[str]:
        # by name, not by registration: which subcommand module was imported first must not reorder the help
        return iter([*sorted(self.infos), *self.groups])

    def __len__(self) -> int:
        return len(self.infos) + len(self.groups)


class _LazyGroup(typer.core.TyperGroup):
    """The root group over :class:`_LazyCommands`: listing the commands builds none of them."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        commands = self.commands
        if not isinstance(commands, _LazyCommands):  # built by typer itself (typer.main.get_command(app))
            return super().format_commands(ctx, formatter)
        commands.stubs = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            commands.stubs = False


def click_group() -> typer.core.TyperGroup:
    """The root click group of :data:`app`, whose subcommands are built when first looked up.

    typer builds every command's options from its signature up front (a fifth of ``mptool
    --help``); here only the root callback and sub-groups are built at once.
    """
    shell = copy.copy(app)
    shell.registered_commands = []
    group = typer.main.get_command(shell)
    assert isinstance(group, _LazyGroup)
    group.commands = _LazyCommands(app.registered_commands, group.commands)  # type: ignore[assignment]
    return group


app = typer.Typer(
    name="mptool",
    help="Membership-privacy audit for machine-learning classifiers (PDTP/DTP, Long et al.).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    cls=_LazyGroup,
)
state = {"debug": False}

# Options every audit subcommand shares (pdtp, attack, reduce-dtp): declared once.
DataArg = Annotated[
    Path | None, typer.Argument(help="Dataset: CSV, CSV.gz or Parquet (see data.read); omit both for the demo.")
]
ModelOpt = Annotated[Path | None, typer.Option("--model", "-m", help="Model spec YAML.")]
JobsOpt = Annotated[int, typer.Option(
    "--jobs", "-j", help="Parallel workers; 0 = every core, but model fits too short to pay for starting workers "
    "run in this process (the run says which); N = N workers as given.")]
ThresholdOpt = Annotated[float, typer.Option(help="DTP-1 threshold on PDTP (log-ratio).")]
TrainSizeOpt = Annotated[int | None, typer.Option(help="Override data.train_size.")]
SeedOpt = Annotated[int | None, typer.Option(help="Override the spec's seed.")]
BinSizeOpt = Annotated[float | None, typer.Option(help="Override output.bin_size (0 = no binning).")]
EngineOpt = Annotated[
    str, typer.Option(help="Leave-one-out engine: auto, exact or refit (pdtp also replicates: randomized training).")
]
AllowImportOpt = Annotated[
    list[str] | None, typer.Option("--allow-import", help="Module a dotted estimator path may import from.")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Only the verdict line; no progress.")]
ShowValuesOpt = Annotated[
    bool,
    typer.Option(
        "--show-values",
        help="Also write and print each record's label and worst_class (training values: off by default, so "
        "result files, the terminal and CI logs hold none; docs/outputs.md). Do not publish such results.",
    ),
]

# Scale-out and resume options shared by every subcommand with long parallel work.
BackendOpt = Annotated[
    str, typer.Option(help="Parallel backend: loky (local processes), threading or dask.")
]
SchedulerOpt = Annotated[
    str | None,
    typer.Option(help="Address of a running Dask scheduler (e.g. tcp://10.0.0.5:8786); implies --backend dask."),
]
ResumeOpt = Annotated[
    bool, typer.Option(help="Continue the interrupted run whose checkpoint is in --out DIR.")
]


def _version(value: bool) -> None:
    if value:
        print(f"mptool {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of internal errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Membership-privacy audit for machine-learning classifiers."""
    state["debug"] = debug


def parse_rows(text: str | None) -> list[int] | None:
    """``"0,5,9"`` -> [0, 5, 9]; InputError on anything else."""
    if text is None:
        return None
    try:
        rows = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"--records takes comma-separated CSV row numbers such as 0,5,9 (got '{text}')") from None
    if not rows or min(rows) < 0:
        raise InputError(f"--records takes non-negative CSV row numbers such as 0,5,9 (got '{text}')")
    return rows


def resolve_inputs(data: Path | None, model: Path | None, command: str, quiet: bool) -> tuple[Path, Path]:
    """DATA and --model, or the bundled Adult demo when both are omitted."""
    from mptool.inputs.bundled import ADULT_CSV, DEMO_CONFIG

    if data is None and model is None:
        ui.info(
            f"No data given: auditing the bundled UCI Adult data ({ADULT_CSV.name}) with configs/"
            f"{DEMO_CONFIG.name}. Run 'mptool {command} DATA.csv --model SPEC.yaml' for your own.",
            quiet,
        )
        return ADULT_CSV, DEMO_CONFIG
    if data is None:
        raise InputError(f"mptool {command}: give the DATA.csv argument together with --model")
    if model is None:
        raise InputError(f"mptool {command}: --model SPEC.yaml is required with DATA (see configs/ for examples)")
    return data, model


class CheckpointOpener:
    """Opens a run's checkpoint in ``out_dir`` when the API asks for it (with the run key).

    The API knows the run key only once the data is read; opening the checkpoint there keeps
    ``--resume`` refusals before any work. ``start_line`` is printed right after, as the run's
    first line, so a refusal stays the only line a failed resume prints.
    """

    def __init__(self, out_dir: Path, resume: bool, force: bool, start_line: str, quiet: bool) -> None:
        self.out_dir, self.resume, self.force = out_dir, resume, force
        self.start_line, self.quiet = start_line, quiet
        self.checkpoint: Any = None
        self.lines: list[str] = []  # printed after start_line (e.g. attack's plan line)

    def __call__(self, key: str) -> Any:
        from mptool.runtime.checkpoint import Checkpoint

        self.checkpoint = Checkpoint.open(self.out_dir, key, resume=self.resume, force=self.force)
        for line in (self.start_line, *self.lines):
            ui.info(line, self.quiet)
        return self.checkpoint

    def finish(self, what: str) -> None:
        """Say how much a resumed run reused, then remove the checkpoint (the results are written)."""
        ckpt = self.checkpoint
        if ckpt.reused:
            done = sum(ckpt.reused.values())
            ui.info(f"resumed: {done} finished {what} taken from {ckpt.directory}", self.quiet)
        ckpt.clear()
