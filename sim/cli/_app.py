"""The typer application of the `sim` command: its commands' help in capitals (CONFIG,
FILE, N, KEY=VALUE), the options several commands share, and the exit of a command
that a model file's own code stopped."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .._errors import InputError


def _first_sentence(text: str) -> str:
    """The first sentence (or clause before a semicolon) of a help text, whole."""
    paragraph = " ".join((text or "").strip().split("\n\n")[0].split())
    for end in (". ", "; "):
        paragraph = paragraph.split(end)[0]
    return paragraph.rstrip(".")


# What a command's help calls the values it takes, by parameter (else by type, else the
# parameter's name in capitals): never typer's `{config}` or `<list[str]>`.
_METAVARS = {
    "set_": "KEY=VALUE",
    "scheduler": "ADDRESS",
    "coordinator": "HOST:PORT",
    "param": "NAME",
    "name": "NAME",
}


def _metavar(p) -> str:
    if p.name in _METAVARS:
        return _METAVARS[p.name]
    if isinstance(p, typer.core.TyperArgument) and p.name in ("config", "file"):
        return p.name.upper()
    described = p.type_descriptor
    if described.is_path:
        return "FILE"
    kind = described.annotation
    return {int: "N", float: "X"}.get(kind, p.name.upper())


class _Command(typer.core.TyperCommand):
    """A `sim` command whose help names its arguments and values in capitals (CONFIG,
    FILE, N, KEY=VALUE)."""

    def invoke(self, ctx):
        # Typer ends a KeyboardInterrupt with exit code 130 and no word. Within a command
        # signals are deferred (`sim._interrupt`): Ctrl-C never raises one, so one that
        # comes here was raised by code, a model file's most likely.
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as e:
            _model_code_error(e)
            raise RuntimeError("KeyboardInterrupt raised by code, not by a signal") from e

    def get_params(self, ctx):
        params = super().get_params(ctx)
        for p in params:
            if p.metavar is None and not getattr(p, "is_flag", False):
                p.metavar = _metavar(p)
        return params

    def collect_usage_pieces(self, ctx):
        pieces = [self.options_metavar] if self.options_metavar else []
        for p in self.get_params(ctx):
            if isinstance(p, typer.core.TyperArgument):
                pieces.append(p.metavar if p.required else f"[{p.metavar}]")
        return pieces

    def format_options(self, ctx, formatter):
        arguments, options = [], []
        for p in self.get_params(ctx):
            record = p.get_help_record(ctx)
            if record is None:
                continue
            if isinstance(p, typer.core.TyperArgument):
                arguments.append((p.metavar, record[1]))
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class _Commands(typer.core.TyperGroup):
    """The `sim` command: its help lists each command with its first sentence whole."""

    def format_commands(self, ctx, formatter):
        rows = [
            (name, _first_sentence(self.get_command(ctx, name).help))
            for name in self.list_commands(ctx)
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


app = typer.Typer(
    cls=_Commands,
    name="sim",
    help="simjax: differentiable simulation of ODEs, PDEs and molecular dynamics.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress or summary output.")]
Sets = Annotated[
    Optional[list[str]],
    typer.Option(
        "--set",
        help="Override a config key by dotted path, e.g. --set params.alpha=0.6 (repeatable).",
    ),
]
Distributed = Annotated[
    bool,
    typer.Option(
        "--distributed",
        help="One run over several processes (jax.distributed), each started with this command: "
        "--coordinator, --processes and --process-id, or Slurm's or Open MPI's environment; "
        "process 0 writes the files.",
    ),
]
Coordinator = Annotated[
    Optional[str],
    typer.Option(
        "--coordinator",
        help="--distributed: HOST:PORT where process 0 listens (default: from Slurm or Open MPI).",
    ),
]
ProcessCount = Annotated[
    Optional[int],
    typer.Option("--processes", help="--distributed: how many processes the run has."),
]
ProcessId = Annotated[
    Optional[int],
    typer.Option("--process-id", help="--distributed: this process's number, 0 to N-1."),
]
OutsideFolder = Annotated[
    bool,
    typer.Option(
        "--allow-outside-folder",
        help="PEtab: let the problem's YAML file name tables and models outside its own folder (by "
        "default every file it names must lie inside it, links resolved).",
    ),
]


def _petab_only(allow_outside: bool, config: Path) -> None:
    """--allow-outside-folder is refused for a config, which may name any path already."""
    if allow_outside:
        raise InputError(
            "--allow-outside-folder",
            str(config),
            "applies to a PEtab problem (.yaml); a config may name files anywhere",
        )


def _model_code_error(error: BaseException) -> None:
    """Exit 2 with one line (`FILE: line N: ...`) when `error` was raised inside the code
    of a Python model file a config named: the user's program, as an error while the file
    is first run is (`sim._sources.code_error`)."""
    sources = sys.modules.get("sim._sources")  # (not imported: no model file was run)
    found = sources.code_error(error) if sources is not None else None
    if found is not None:
        print(f"error: {found}", file=sys.stderr)
        sys.exit(2)


joined = False
"""Whether this command's process joined a distributed run (`join_processes`)."""


def join_processes(
    distributed: bool, coordinator: str | None, count: int | None, index: int | None
) -> bool:
    """Join the other processes of a `--distributed` run (`sim._processes`), after
    `engine()` and before anything computes; whether this process is the lead (process
    0, which writes the files and speaks), True without --distributed.

    Raises:
        InputError: a process option without --distributed; see `sim._processes.resolve`
            and `join`.
    """
    global joined
    if not distributed:
        for option, value in (
            ("--coordinator", coordinator),
            ("--processes", count),
            ("--process-id", index),
        ):
            if value is not None:
                raise InputError(option, str(value), "applies with --distributed only")
        return True
    from .. import _processes

    _processes.join(_processes.resolve(coordinator, count, index))
    joined = True
    if not _processes.lead():
        # (what the command prints as its result, a fit's table, is the lead's to print)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the rest of the process
    return _processes.lead()
