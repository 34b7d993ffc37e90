"""The `sim` command: models, run, info (and the commands that build on them).

Exit codes: 0 success; 2 bad input (one line on stderr naming the file and key);
1 anything else. A command that fails leaves no output file behind.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from ._errors import InputError, SimError, one_line, shown
from ._interrupt import Interrupted, deferred
from ._progress import Clock

# (What computes is imported inside the commands, after `engine()`: `sim --help`,
# `sim models` and `sim info` load typer and the model table, not JAX.)


def _first_sentence(text: str) -> str:
    """The first sentence (or clause before a semicolon) of a help text, whole."""
    paragraph = " ".join((text or "").strip().split("\n\n")[0].split())
    for end in (". ", "; "):
        paragraph = paragraph.split(end)[0]
    return paragraph.rstrip(".")


# What a command's help calls the values it takes, by parameter (else by type, else the
# parameter's name in capitals): never typer's `{config}` or `<list[str]>`.
_METAVARS = {"set_": "KEY=VALUE", "scheduler": "ADDRESS", "param": "NAME", "name": "NAME"}


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


@app.callback()
def _options(
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            help="Compile every program afresh: neither load nor save compiled programs (the cache "
            "is in the user's cache folder, or SIMJAX_CACHE_DIR).",
        ),
    ] = False,
) -> None:
    """simjax: differentiable simulation of ODEs, PDEs and molecular dynamics."""
    global _no_cache
    _no_cache = no_cache
    if no_cache and _started():
        from . import _cache

        _cache.disable()


_no_cache = False


def _started() -> bool:
    """Whether the `sim` package has run its `__init__` (always, after `import sim`)."""
    return not hasattr(sys.modules[__package__], "start_package")


@contextlib.contextmanager
def _lasting_imports():
    """Python's cycle collector off while the block imports what lives as long as the
    process (JAX and simjax make about a quarter of a million objects, which the collector
    would walk several times while they are made: 0.1-0.2 s of CPU time), and what it
    made set aside after (`gc.freeze`), so that later collections walk only the
    command's own objects."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def engine() -> None:
    """Run the `sim` package's `__init__` if the `sim` command started without it (see
    `_sim_entry`), set JAX up as the command runs it (`sim.configure_jax`: float64, the
    compilation cache unless --no-cache, XLA's options) and enter the command's run-time
    checks. Every command that computes calls it first."""
    global _for_the_command
    if not _started():
        _start_engine()
    if not _configured:
        _configure()
    if _for_the_command is not None and threading.current_thread() is threading.main_thread():
        # The programs' run-time checks give NaN (`solvers.checks_as_nan`), as they do
        # throughout the `sim` process, where `_sim_entry` sets EQX_ON_ERROR: in a Python
        # process that calls `main`, too, the command's programs hold no host callback,
        # and the compilation cache keeps them. (Its solves report failure through
        # result codes, and a result that is not finite is never written.)
        from solvers import checks_as_nan

        _for_the_command.enter_context(checks_as_nan())
        _for_the_command = None


_for_the_command: contextlib.ExitStack | None = None  # what lasts as long as `main`'s command


def _start_engine() -> None:
    """Run the package's `__init__` (see `engine`)."""
    package = sys.modules[__package__]
    # Meanwhile a signal ends the command at once with the entry point's line (nothing is
    # written yet, and it says how to resume); the deferred handlers come back after.
    starting = {s: h for s, h in _entry_handlers.items() if getattr(h, "before_command", False)}
    if threading.current_thread() is not threading.main_thread():
        starting = {}
    previous = {s: signal.signal(s, h) for s, h in starting.items()}
    try:
        with _lasting_imports():
            package.start_package()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    del package.start_package


_configured = False


def _configure() -> None:
    """JAX as the command runs it (`sim.configure_jax`: float64, the compilation cache
    unless --no-cache, XLA's options): once a process, by the first command that computes."""
    global _configured
    from ._jax_config import configure_jax

    configure_jax(cache=not _no_cache)
    if _no_cache:
        from . import _cache

        _cache.disable()
    _configured = True


class _Console:
    """A rich Console made when first used: rich is imported by the commands that print
    with it, not by every command."""

    def __init__(self, **options):
        self._options = options
        self._console = None

    def __getattr__(self, name: str):
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return getattr(self._console, name)


def Table(*columns: str, **options):  # noqa: N802 - rich's Table, imported when a table is drawn
    from rich.table import Table as _Table

    return _Table(*columns, **options)


# Tables keep their columns whole even when output is piped (no terminal width).
out = _Console(width=max(120, shutil.get_terminal_size().columns))
err = _Console(stderr=True)

Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress or summary output.")]
Sets = Annotated[
    Optional[list[str]],
    typer.Option(
        "--set",
        help="Override a config key by dotted path, e.g. --set params.alpha=0.6 (repeatable).",
    ),
]
OutsideFolder = Annotated[
    bool,
    typer.Option(
        "--allow-outside-folder",
        help="PEtab: let the problem's YAML file name tables and models outside its own folder (by "
        "default every file it names must lie inside it, links resolved).",
    ),
]


# The arguments of the command being run (for the resume command an interrupt prints).
_argv: list[str] = []
# The signal handlers the command started with (`_sim_entry`'s, until the package is up).
_entry_handlers: dict = {}


def output_path(
    config,
    option: Optional[Path],
    default_suffix: str = ".h5",
    inputs: tuple[Optional[Path], ...] = (),
) -> Path:
    """-o if given (relative to the working folder); else `[output] file` (relative to the
    config's folder); else the config's name with `default_suffix` in the working
    folder (`unasked`: never over an existing result). Checked before any work: writable,
    a regular file, and none of the command's input files (the config, the files it
    names, `inputs`)."""
    from ._store import check_output_path

    given = [*config.input_files(), *(p for p in inputs if p is not None)]
    if option is not None:
        return check_output_path(option, "-o", inputs=given)
    if config.spec.output.file:
        path = config.resolve_path(config.spec.output.file)
        return check_output_path(
            unasked(path, f"{config.source}: output.file"),
            config.source,
            "output.file",
            inputs=given,
        )
    return check_output_path(unasked(Path(config.path.stem + default_suffix)), "-o", inputs=given)


def unasked(path: Path, named_by: str = "") -> Path:
    """The output a command writes when -o is not given: `path`, unless a file is there
    already. The one rule of every command's default output: without -o, nothing that
    exists is replaced (a second run with other settings would silently overwrite the
    first one's result).

    Raises:
        InputError: `path` exists.
    """
    if os.path.lexists(path):
        where = f" (named by {named_by})" if named_by else ""
        raise InputError(
            path,
            "",
            f"exists already{where}; without -o no command replaces a file: pass -o {shown(path)} "
            "to replace it, or -o with another name",
        )
    return path


def resume_command(output: Path) -> str:
    """The command line that continues the interrupted command: its own arguments, with
    `-o` made explicit and `--resume` added."""
    args = list(_argv)
    if not any(a in ("-o", "--output") or a.startswith(("--output=", "-o")) for a in args):
        args += ["-o", str(output)]
    if "--resume" not in args:
        args.append("--resume")
    return " ".join(shown(a) for a in ["sim", *args])


@contextlib.contextmanager
def resumable(output: Path, what: str, unfinished: Path | None = None):
    """Within the block, an interrupt (SIGINT, SIGTERM) that stopped the work is reported
    in one line with the command that resumes it, and what it keeps: the checkpoint
    written at the safe point, or, stopped at once by a second signal, the `unfinished`
    file of an earlier checkpoint where one is left on disk."""
    try:
        yield
    except Interrupted as e:
        name = signal.Signals(e.signum).name
        if e.checkpoint is not None:
            kept = f"{what} so far is checkpointed in {shown(e.checkpoint)}"
        elif unfinished is not None and unfinished.exists():
            kept = (
                f"stopped before a checkpoint; {what} up to its last checkpoint is kept in "
                f"{shown(unfinished)}"
            )
        else:
            kept = "nothing was saved yet"
        print(
            f"interrupted ({name}): {kept}; resume with: {resume_command(output)}", file=sys.stderr
        )
        raise typer.Exit(e.exit_code) from None


@contextlib.contextmanager
def writing(path: Path, what: str, unfinished: Path, resume: bool, quiet: bool):
    """The block of a resumable command (run, sweep, fit) that writes `path`: holds its
    lock, reports an interrupt with the command that resumes it, and yields whether to
    resume (--resume with nothing unfinished and no finished file starts afresh)."""
    from ._lock import exclusive

    with exclusive(path), resumable(path, f"the {what}", unfinished):
        yield resume and not nothing_to_resume(path, unfinished, what, quiet)


def nothing_to_resume(path: Path, unfinished: Path, what: str, quiet: bool) -> bool:
    """--resume with no unfinished work of `path` and no finished file: start afresh
    (a job script may always pass --resume). True when that is the case."""
    if unfinished.exists() or path.exists():
        return False
    if not quiet:
        print(f"no unfinished {what} of {shown(path)}; starting it", file=sys.stderr)
    return True


def _family_name(cls: type) -> str:
    return next(b.__name__ for b in cls.__mro__[1:] if b.__name__.endswith("Model"))


def _table_answers() -> bool:
    """Whether the built-in model table (`sim._model_table`) tells of every model there
    is: at the command line (no models registered from Python) with no plugin installed.
    Then `sim models` imports no model."""
    if _started():
        return False
    from importlib.metadata import entry_points

    return not entry_points(group="simjax.models")  # (sim._sources.PLUGIN_GROUP)


def _list_models() -> None:
    """The table of models: name, family, description, where it comes from."""
    columns = ("model", "family", "description", "from")
    if _table_answers():
        from ._model_table import MODELS

        out.print(
            _plain_table(
                columns,
                [(name, e["kind"], e["description"], "built in") for name, e in MODELS.items()],
            )
        )
        return
    engine()
    from ._registry import is_plugin, model_class, model_names
    from ._sources import plugin_origin

    rows = []
    for name in model_names():
        origin = f"plugin {plugin_origin(name)}" if is_plugin(name) else "built in"
        try:
            cls = model_class(name)
        except ValueError as e:  # a plugin that does not load: listed with why
            rows.append((name, "?", str(e).partition(": ")[2], origin))
            continue
        rows.append((name, _family_name(cls), cls.description, origin))
    out.print(_plain_table(columns, rows))


# Where a config sets each part of a model, by family.
_OPTIONS_AT = {"md": "[model] or [params]", "pde": "[model]; points and domain also in [grid]"}


def _describe_model(label: str, e: dict) -> None:
    """`sim models NAME`: a `sim._catalogue.entry` as text."""
    out.print(f"{label} ({e['kind']}): {e['description']}", markup=False, highlight=False)
    out.print(e["summary"], markup=False, highlight=False)
    sections = [
        (
            "parameters, in [params]",
            ("parameter", "default", "unit", "constraint", "meaning"),
            e["parameters"],
        )
    ]
    if e["options"]:
        sections.append(
            (
                f"options, in {_OPTIONS_AT.get(e['family'], '[model]')}",
                ("option", "default", "type", "meaning"),
                e["options"],
            )
        )
    if e["family"] == "md":
        from ._catalogue import SYSTEM_KEYS

        sections.append(
            (
                "the starting system, in [system] (reduced units: lengths in sigma, energies in "
                "epsilon)",
                ("key", "default", "unit", "meaning"),
                SYSTEM_KEYS,
            )
        )
    if "state" in e:
        sections.append(("state, initial values in [initial]", ("state", "default"), e["state"]))
    for title, columns, rows in sections:
        out.print(f"\n{title}:", markup=False, highlight=False)
        out.print(_plain_table(columns, rows))
    if "initial_field" in e:
        out.print(
            f"\ninitial field ([initial] kind): {e['initial_field']}", markup=False, highlight=False
        )
    out.print(f"\nobservables: {', '.join(e['observables'])}", markup=False, highlight=False)


def _plain_table(columns, rows):
    """A rich table of text taken as it is (no markup: `[params]` stays)."""
    from rich.text import Text

    table = Table(*columns, box=None)
    for row in rows:
        table.add_row(*(Text(str(cell)) for cell in row))
    return table


def _describe(label: str, model) -> None:
    from ._catalogue import entry
    from ._family import family_of

    _describe_model(label, entry(model, family_of(model).name))


def _file_models(name: str) -> None:
    """`sim models FILE.py[:CLASS]`: the model classes a Python file defines, or one."""
    from ._config import split_source
    from ._sources import SourceError, file_models, source_class

    file, cls_name = split_source(name)
    try:
        if cls_name is None:
            found = file_models(Path(file))
            if not found:
                raise SourceError(
                    f"{file}: defines no model class (a subclass of OdeModel, SdeModel, "
                    "SpectralPdeModel, GridPdeModel or ParticleModel)"
                )
            table = Table("model", "family", "description", "name in files", box=None)
            for n, cls in found.items():
                table.add_row(f"{file}:{n}", _family_name(cls), cls.description, cls.name)
            out.print(table)
            return
        cls = source_class(name, Path.cwd())
        model = cls()
    except SourceError as e:
        raise InputError("argument NAME", name, str(e).partition(": ")[2]) from None
    except Exception as e:  # the class's own constructor failed
        raise InputError(
            "argument NAME",
            name,
            f"{cls_name}() failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
        ) from None
    _describe(f"{name} ({cls.name})", model)


@app.command(cls=_Command)
def models(
    name: Annotated[
        Optional[str],
        typer.Argument(
            metavar="NAME",
            help="A model name (or FILE.py, FILE.py:CLASS, FILE.xml for SBML) for its details.",
        ),
    ] = None,
) -> None:
    """List models (built in and installed plugins); with NAME, its parameters, options,
    configuration defaults, state and observables, with units and meanings."""
    if name is None:
        _list_models()
        return
    if _table_answers():
        from ._model_table import MODELS

        if name in MODELS:
            _describe_model(name, MODELS[name])
            return
    engine()
    from solvers import did_you_mean

    from ._registry import get_model, model_names

    if name.endswith(".py") or ".py:" in name:
        _file_models(name)
        return
    if name.endswith(".xml") or name.endswith(".sbml"):
        from physics.ode import SbmlError, sbml_model

        try:
            model = sbml_model(Path(name))
        except SbmlError as e:
            raise InputError("argument NAME", name, str(e).partition(": ")[2]) from None
        _describe(f"{name} ({model.name})", model)
        return
    if name not in model_names():
        raise InputError(
            "argument NAME",
            name,
            f"unknown model; `sim models` lists them.{did_you_mean(name, model_names())}",
        )
    try:
        model = get_model(name)
    except ValueError as e:  # a plugin that does not load
        raise InputError("argument NAME", name, str(e)) from None
    _describe(name, model)


@app.command(cls=_Command)
def sweep(
    config: Annotated[Path, typer.Argument(help="TOML config with a [sweep] section.")],
    output: Annotated[
        Optional[Path], typer.Option("-o", "--output", help="Output HDF5 sweep file.")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the unfinished sweep of the output file.")
    ] = False,
    devices: Annotated[
        Optional[int],
        typer.Option("--devices", help="Use the first N local devices (default: all)."),
    ] = None,
    scheduler: Annotated[
        Optional[str],
        typer.Option(
            "--scheduler",
            help="Dask scheduler address, or local:N for a local cluster of N workers.",
        ),
    ] = None,
    set_: Sets = None,
    quiet: Quiet = False,
) -> None:
    """Run every point of CONFIG's [sweep], batched and sharded, into one HDF5 file."""
    engine()
    from ._config import load_config
    from ._sweep import execute
    from ._sweep_store import partial_path

    cfg = load_config(config, set_ or [])
    path = output_path(cfg, output)
    with writing(path, "sweep", partial_path(path), resume, quiet) as resume, Clock() as clock:
        summary, _ = execute(
            cfg, path, resume=resume, devices=devices, scheduler=scheduler, progress=not quiet
        )
    if not quiet:
        resumed = f", {summary.resumed_runs} resumed" if summary.resumed_runs else ""
        print(
            f"wrote {shown(summary.path)}: {summary.runs} runs ({summary.ok} ok, {summary.failed} "
            f"failed{resumed}); {clock.summary(f'{summary.runs:,} runs')}",
            file=sys.stderr,
        )
        for line in summary.failure_lines():
            print(f"  {line}", file=sys.stderr)


@app.command(cls=_Command)
def run(
    config: Annotated[Path, typer.Argument(help="TOML config file.")],
    output: Annotated[
        Optional[Path], typer.Option("-o", "--output", help="Output HDF5 file.")
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue the unfinished run of the output file from its last checkpoint.",
        ),
    ] = False,
    set_: Sets = None,
    quiet: Quiet = False,
    xdmf: Annotated[
        bool,
        typer.Option(
            "--xdmf",
            help="PDE runs: also write an XDMF sidecar (OUT.xdmf) for ParaView and VisIt ([output] "
            "xdmf).",
        ),
    ] = False,
) -> None:
    """Run the simulation CONFIG describes, streaming it to an HDF5 file chunk by chunk
    with checkpoints ([output] chunk, checkpoint_every); --resume continues a run that
    was stopped."""
    engine()
    from ._config import load_config
    from ._run import run as run_config
    from ._stream import partial_path

    # (--xdmf is [output] xdmf = true, after any --set)
    cfg = load_config(config, [*(set_ or []), *(["output.xdmf=true"] if xdmf else [])])
    path = output_path(cfg, output)
    with writing(path, "run", partial_path(path), resume, quiet) as resume, Clock() as clock:
        done = run_config(cfg, progress=not quiet, output=path, resume=resume)
    if not quiet:
        resumed = (
            f", resumed from frame {done.resumed_from}" if done.resumed_from is not None else ""
        )
        steps = (
            f"{done.stats.get('num_steps', 0):,} steps "
            f"({done.frames + 1 - (done.resumed_from or 0):,} frames written)"
        )
        if done.stats.get("devices", 1) > 1:
            steps += f" on {done.stats['devices']} CPU devices, the particles split between them"
        print(
            f"wrote {shown(done.path)}: {cfg.spec.model.name}{resumed}; {clock.summary(steps)}",
            file=sys.stderr,
        )
        if cfg.spec.output.xdmf:
            from ._xdmf import sidecar_path

            print(
                f"wrote {shown(sidecar_path(done.path))} (XDMF, for ParaView and VisIt)",
                file=sys.stderr,
            )


@app.command(cls=_Command)
def fit(
    config: Annotated[Path, typer.Argument(help="TOML config with [data] and [fit] sections.")],
    data: Annotated[
        Optional[Path], typer.Option("--data", help="HDF5 observations (replaces data.file).")
    ] = None,
    output: Annotated[
        Optional[Path], typer.Option("-o", "--output", help="Output HDF5 fit file.")
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", help="Continue the unfinished fit of the output file from its checkpoint."
        ),
    ] = False,
    set_: Sets = None,
    quiet: Quiet = False,
    evaluate: Annotated[
        bool,
        typer.Option(
            "--evaluate", help="PEtab: only compute the objective at the nominal parameters."
        ),
    ] = False,
    starts: Annotated[
        Optional[int],
        typer.Option(
            "--starts",
            min=1,
            help="Number of starts (Latin hypercube within the bounds; for a config, [fit] "
            "starts).",
        ),
    ] = None,
    devices: Annotated[
        Optional[int],
        typer.Option(
            "--devices",
            help="Spread the starts of a multistart fit over the first N local devices (default: "
            "all).",
        ),
    ] = None,
    scheduler: Annotated[
        Optional[str],
        typer.Option(
            "--scheduler",
            help="Spread the starts of a multistart fit over a Dask cluster: its scheduler "
            "address, or local:N for a local cluster of N workers.",
        ),
    ] = None,
    checkpoint_every: Annotated[
        Optional[int],
        typer.Option(
            "--checkpoint-every",
            min=1,
            help="Checkpoint every N iterations (PEtab: rounds of evaluations); default at most "
            "every 30 s. For a config, [fit] checkpoint_every.",
        ),
    ] = None,
    allow_outside: OutsideFolder = False,
) -> None:
    """Fit free parameters and initial values to HDF5 observations by gradients through
    the solver; the optimiser state is checkpointed beside the output ([fit]
    checkpoint_every), and --resume continues a fit that was stopped. CONFIG may be a
    PEtab problem (.yaml), whose multistart fits are checkpointed and resumed the same
    way. The starts of a multistart fit run batched, over the local devices (--devices)
    or in blocks on a Dask cluster (--scheduler)."""
    engine()
    from inference import checkpoint_path, fit as fit_config

    from ._config import load_config
    from ._store import check_output_path

    if config.suffix in (".yaml", ".yml"):
        _fit_petab(
            config,
            output,
            evaluate,
            starts or 1,
            quiet,
            devices,
            scheduler,
            resume,
            checkpoint_every,
            allow_outside,
        )
        return
    if evaluate:
        raise InputError("--evaluate", str(config), "applies to a PEtab problem (.yaml)")
    _petab_only(allow_outside, config)
    # (--starts N and --checkpoint-every N on a config are [fit] starts = N and
    # [fit] checkpoint_every = N, after any --set)
    given = [
        *([f"fit.starts={starts}"] if starts is not None else []),
        *([f"fit.checkpoint_every={checkpoint_every}"] if checkpoint_every is not None else []),
    ]
    cfg = load_config(config, [*(set_ or []), *given])
    path = check_output_path(
        output if output is not None else unasked(Path(cfg.path.stem + "_fit.h5")),
        "-o",
        inputs=[*cfg.input_files(), *([data] if data else [])],
    )
    with writing(path, "fit", checkpoint_path(path), resume, quiet) as resume, Clock() as clock:
        result = fit_config(
            cfg,
            data,
            progress=not quiet,
            output=path,
            resume=resume,
            devices=devices,
            scheduler=scheduler,
        )
    table = Table("quantity", "estimate", "std. error", box=None)
    for name, value, err_ in result.table():
        table.add_row(name, f"{value:.6g}", f"{err_:.3g}")
    out.print(table)
    if not quiet:
        status = "converged" if result.converged else f"did not converge: {result.message}"
        steps = len(result.loss_history) - 1
        print(
            f"wrote {shown(path)}: {status}, final loss {result.loss_history[-1]:.6g}; "
            f"{clock.summary(f'{steps:,} steps')}",
            file=sys.stderr,
        )
    _warn(result.warnings)


def _petab_only(allow_outside: bool, config: Path) -> None:
    """--allow-outside-folder is refused for a config, which may name any path already."""
    if allow_outside:
        raise InputError(
            "--allow-outside-folder",
            str(config),
            "applies to a PEtab problem (.yaml); a config may name files anywhere",
        )


def _fit_petab(
    problem_file: Path,
    output: Optional[Path],
    evaluate: bool,
    starts: int,
    quiet: bool,
    devices: Optional[int],
    scheduler: Optional[str],
    resume: bool,
    checkpoint_every: Optional[int],
    allow_outside: bool,
) -> None:
    from inference import checkpoint_path, fit_petab, load_petab, problem_files

    from ._store import check_output_path

    problem = load_petab(problem_file, allow_outside=allow_outside)
    path = check_output_path(
        output if output is not None else unasked(Path(problem_file.stem + "_fit.h5")),
        "-o",
        inputs=problem_files(problem_file),
    )
    start = time.perf_counter()
    with writing(path, "fit", checkpoint_path(path), resume, quiet) as resume:
        report = (
            None
            if quiet
            else (
                lambda k, f: print(
                    f"start {k} of {starts} done: objective {f:.6g}", file=sys.stderr
                )
            )
        )
        result = fit_petab(
            problem,
            starts=starts,
            evaluate=evaluate,
            on_start=report,
            devices=devices,
            scheduler=scheduler,
            output=path,
            resume=resume,
            checkpoint_every=checkpoint_every,
        )
    if not quiet:
        what = "objective at the nominal parameters" if evaluate else f"{result.message}, objective"
        print(
            f"wrote {shown(path)}: {what} {result.objective:.10g} "
            f"({time.perf_counter() - start:.2f} s)",
            file=sys.stderr,
        )


@app.command(cls=_Command)
def infer(
    config: Annotated[Path, typer.Argument(help="TOML config with [data] and [infer] sections.")],
    data: Annotated[
        Optional[Path], typer.Option("--data", help="HDF5 observations (replaces data.file).")
    ] = None,
    output: Annotated[
        Optional[Path], typer.Option("-o", "--output", help="Output HDF5 posterior file.")
    ] = None,
    chains: Annotated[
        Optional[int], typer.Option("--chains", min=1, help="Number of chains.")
    ] = None,
    warmup: Annotated[
        Optional[int], typer.Option("--warmup", min=1, help="Warmup iterations per chain.")
    ] = None,
    samples: Annotated[
        Optional[int], typer.Option("--samples", min=1, help="Draws per chain.")
    ] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="PRNG seed.")] = None,
    init_from: Annotated[
        Optional[Path],
        typer.Option("--init-from", help="Start the chains at a fit file's estimates."),
    ] = None,
    arviz: Annotated[
        Optional[Path], typer.Option("--arviz", help="Also export ArviZ InferenceData (netCDF).")
    ] = None,
    set_: Sets = None,
    quiet: Quiet = False,
    allow_outside: OutsideFolder = False,
) -> None:
    """Sample the posterior of free parameters and initial values with NumPyro NUTS."""
    engine()
    from inference import infer as infer_config

    from ._config import load_config
    from ._lock import exclusive
    from ._store import atomic_file, check_output_path

    if config.suffix in (".yaml", ".yml"):
        _infer_petab(config, output, chains, warmup, samples, seed, quiet, allow_outside)
        return
    _petab_only(allow_outside, config)
    cfg = load_config(config, set_ or [])
    inputs = [*cfg.input_files(), *(p for p in (data, init_from) if p is not None)]
    path = check_output_path(
        output if output is not None else unasked(Path(cfg.path.stem + "_posterior.h5")),
        "-o",
        inputs=inputs,
    )
    if arviz is not None:
        check_output_path(arviz, "--arviz", inputs=inputs)
        if os.path.realpath(arviz) == os.path.realpath(path) or (
            arviz.exists() and path.exists() and os.path.samefile(arviz, path)
        ):
            raise InputError(
                "--arviz", str(arviz), "is the -o posterior file; expected another path"
            )
        try:
            import arviz as _  # noqa: F401
        except ImportError:
            raise InputError(
                "--arviz", str(arviz), "needs the arviz package (pip install arviz)"
            ) from None
    if init_from is not None and not init_from.is_file():
        raise InputError("--init-from", str(init_from), "no such fit file")
    with exclusive(path), contextlib.ExitStack() as stack, Clock() as clock:
        if arviz is not None:
            stack.enter_context(exclusive(arviz))
        result = infer_config(
            cfg,
            data,
            chains=chains,
            warmup=warmup,
            samples=samples,
            seed=seed,
            init_from=init_from,
            progress=not quiet,
            log=None if quiet else _note,
        )
        if arviz is None:
            result.save(path)
        else:
            # (both files or neither: the export, under a temporary name, is kept once the posterior
            # is written)
            with atomic_file(arviz, suffix=".nc") as tmp:
                result.to_arviz().to_netcdf(str(tmp))
                result.save(path)
    _posterior_summary(result, path, clock, quiet)


def _note(line: str) -> None:
    print(line, file=sys.stderr)


def _warn(lines: list[str]) -> None:
    """Warnings go to stderr even with --quiet: they say the result may be wrong."""
    for line in lines:
        print(line, file=sys.stderr)


def _posterior_summary(result, path: Path, clock: Clock, quiet: bool) -> None:
    """The table of a posterior, its divergences, the time it took and any warnings."""
    from inference import sampling_warnings

    table = Table("quantity", "mean", "sd", "5%", "50%", "95%", "ess_bulk", "r_hat", box=None)
    for name, row in result.summary.items():
        table.add_row(
            name,
            *(f"{row[k]:.4g}" for k in ("mean", "sd", "5%", "50%", "95%")),
            f"{row['ess_bulk']:.0f}",
            f"{row['r_hat']:.3f}",
        )
    out.print(table)
    out.print(f"divergences: {result.divergences}")
    if not quiet:
        print(f"wrote {shown(path)}; {clock.summary('sampling')}", file=sys.stderr)
    _warn(sampling_warnings(result.posterior, result.diverging, result.summary))


def _infer_petab(
    problem_file: Path,
    output: Optional[Path],
    chains,
    warmup,
    samples,
    seed,
    quiet: bool,
    allow_outside: bool,
) -> None:
    from inference import infer_petab, load_petab, problem_files

    from ._config import seed_problem
    from ._lock import exclusive
    from ._store import check_output_path

    if seed is not None and seed_problem(seed):
        raise InputError("--seed", "", seed_problem(seed))
    problem = load_petab(problem_file, allow_outside=allow_outside)
    path = check_output_path(
        output if output is not None else unasked(Path(problem_file.stem + "_posterior.h5")),
        "-o",
        inputs=problem_files(problem_file),
    )
    with exclusive(path), resumable(path, "the sampling"), Clock() as clock:
        result = infer_petab(
            problem,
            chains=chains or 4,
            warmup=warmup or 500,
            samples=samples or 500,
            seed=seed or 0,
            progress=not quiet,
            log=None if quiet else _note,
        )
        result.save(path)
    _posterior_summary(result, path, clock, quiet)


@app.command(cls=_Command)
def profile(
    config: Annotated[
        Path,
        typer.Argument(
            help="TOML config with [data] and [fit] sections, or a PEtab problem (.yaml)."
        ),
    ],
    param: Annotated[
        Optional[list[str]],
        typer.Option(
            "--param", help="A parameter to profile (repeat for several; default: every free one)."
        ),
    ] = None,
    data: Annotated[
        Optional[Path], typer.Option("--data", help="HDF5 observations (replaces data.file).")
    ] = None,
    output: Annotated[
        Optional[Path], typer.Option("-o", "--output", help="Output HDF5 profile file.")
    ] = None,
    starts: Annotated[
        int,
        typer.Option("--starts", min=1, help="PEtab: starts of the fit the profiles begin from."),
    ] = 1,
    set_: Sets = None,
    quiet: Quiet = False,
    allow_outside: OutsideFolder = False,
) -> None:
    """Profile likelihoods: fit, then for each chosen parameter re-optimise the others
    along its axis until the negative log-likelihood rises by the 95% chi-square
    threshold (1.92) or the parameter reaches its bound; report each 95% confidence
    interval or that the parameter is not identifiable."""
    engine()
    from inference import profile_config, profile_petab

    from ._config import load_config
    from ._lock import exclusive
    from ._store import check_output_path

    start = time.perf_counter()
    if config.suffix in (".yaml", ".yml"):
        from inference import load_petab, problem_files

        problem = load_petab(config, allow_outside=allow_outside)
        path = check_output_path(
            output if output is not None else unasked(Path(config.stem + "_profile.h5")),
            "-o",
            inputs=problem_files(config),
        )
        with exclusive(path), resumable(path, "the profile"):
            result = profile_petab(problem, param, starts=starts)
            result.save(path)
    else:
        _petab_only(allow_outside, config)
        cfg = load_config(config, set_ or [])
        path = check_output_path(
            output if output is not None else unasked(Path(cfg.path.stem + "_profile.h5")),
            "-o",
            inputs=[*cfg.input_files(), *([data] if data else [])],
        )
        with exclusive(path), resumable(path, "the profile"):
            result = profile_config(cfg, param, data)
            result.save(path)
    import math

    table = Table("quantity", "estimate", "95% lower", "95% upper", "", box=None)
    for name, value, lower, upper, verdict in result.table():
        table.add_row(
            name,
            f"{value:.6g}",
            f"{lower:.6g}" if math.isfinite(lower) else "-",
            f"{upper:.6g}" if math.isfinite(upper) else "-",
            verdict,
        )
    out.print(table)
    if not quiet:
        print(
            f"wrote {shown(path)}: {len(result.profiles)} profile(s) in "
            f"{time.perf_counter() - start:.1f} s",
            file=sys.stderr,
        )


@app.command(cls=_Command)
def plot(
    file: Annotated[
        Path, typer.Argument(help="A run, sweep, fit or posterior HDF5 file (or H5MD).")
    ],
    output: Annotated[
        Optional[Path],
        typer.Option(
            "-o",
            "--output",
            help="Figure file (.png, .pdf, .svg), or a movie (.gif, .mp4) as with --movie; default "
            "FILE's name with .png.",
        ),
    ] = None,
    quiet: Quiet = False,
    movie: Annotated[
        Optional[Path],
        typer.Option(
            "--movie",
            help="PDE and MD runs: animate the saved frames into OUT.gif (or OUT.mp4 where ffmpeg "
            "is installed).",
        ),
    ] = None,
    frames: Annotated[
        int,
        typer.Option(
            "--frames",
            min=1,
            help="With --movie: show at most N frames, spread evenly over the run.",
        ),
    ] = 200,
) -> None:
    """Draw FILE: time series, fields, MD observables and g(r), sweeps, fits or posteriors;
    --movie animates the frames of a PDE or MD run."""
    engine()
    from ._lock import exclusive
    from ._movie import is_movie, movie as animate
    from ._plot import check_figure_path, plot as draw, save_figure
    from ._store import check_output_path

    if movie is None and output is not None and is_movie(output):
        movie, output = output, None
        option = "-o"
    else:
        option = "--movie"
    if movie is not None:
        if output is not None:
            check_output_path(
                check_figure_path(output), "-o", inputs=[file, movie]
            )  # (checked before the movie is made)
        animate(file, movie, frames=frames, option=option)
        if not quiet:
            print(f"wrote {shown(movie)}", file=sys.stderr)
        if output is None:
            return
    path = check_figure_path(output if output is not None else Path(file.with_suffix(".png").name))
    check_output_path(path, "-o", inputs=[file])
    # (FILE is judged first: a bad FILE is named even where its figure's name is taken)
    figure = draw(file)
    if output is None:
        unasked(path)
    with exclusive(path):
        save_figure(figure, path)
    if not quiet:
        print(f"wrote {shown(path)}", file=sys.stderr)


@app.command(cls=_Command)
def info() -> None:
    """Versions, devices and precision."""
    with _lasting_imports():
        import jax

        from ._store import package_versions

    for name, version in package_versions().items():
        out.print(f"{name:<12} {version}")
    out.print(f"{'backend':<12} {jax.default_backend()}")
    out.print(f"{'devices':<12} {', '.join(str(d) for d in jax.devices())}")
    # (the commands that compute turn on jax_enable_x64; this one computes nothing)
    out.print(f"{'precision':<12} float64 by default (PDE/MD configs may ask for float32)")


def check_platform() -> None:
    """A `JAX_PLATFORMS` naming a device this machine does not have is bad input."""
    wanted = os.environ.get("JAX_PLATFORMS", "")
    if wanted in ("", "cpu"):
        return
    import jax

    try:
        jax.devices()
    except Exception as e:  # noqa: BLE001 - JAX raises RuntimeError or AssertionError
        reason = " ".join(str(e).split())[:160] or type(e).__name__
        raise InputError(
            "JAX_PLATFORMS",
            wanted,
            f"no such device on this machine ({reason}); unset JAX_PLATFORMS, or install JAX for "
            "it (the cuda12 extra)",
        ) from None


def _model_code_error(error: BaseException) -> None:
    """Exit 2 with one line (`FILE: line N: ...`) when `error` was raised inside the code
    of a Python model file a config named: the user's program, as an error while the file
    is first run is (`sim._sources.code_error`)."""
    sources = sys.modules.get("sim._sources")  # (not imported: no model file was run)
    found = sources.code_error(error) if sources is not None else None
    if found is not None:
        print(f"error: {found}", file=sys.stderr)
        sys.exit(2)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `sim` command."""
    global _argv, _entry_handlers, _for_the_command
    argv = sys.argv[1:] if argv is None else list(argv)
    _argv = argv
    _entry_handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    # Signal handlers can only be installed from the main thread.
    guard = (
        deferred()
        if threading.current_thread() is threading.main_thread()
        else contextlib.nullcontext()
    )
    try:
        with guard, contextlib.ExitStack() as for_the_command:
            # (a JAX setting is per thread: entered and left in the main thread only)
            _for_the_command = (
                for_the_command if threading.current_thread() is threading.main_thread() else None
            )
            check_platform()
            code = app(args=argv or ["--help"], prog_name="sim", standalone_mode=False)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort as e:
        # (click turns a KeyboardInterrupt into Abort; with signals deferred, one raised
        # by a model file's code is that code's, not the user's Ctrl-C)
        _model_code_error(e)
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except typer.TyperException as e:
        # Usage errors of the command line itself (unknown option, missing argument).
        ctx = getattr(e, "ctx", None)
        name = f"sim {ctx.info_name}" if ctx is not None and ctx.info_name != "sim" else "sim"
        # (format_message names the option a bad value was given to; str(e) does not)
        message = " ".join((e.format_message() if hasattr(e, "format_message") else str(e)).split())
        print(f"error: {name}: {message} (see `{name} --help`)", file=sys.stderr)
        sys.exit(2)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except (
        SimError
    ) as e:  # (a failed run's line may name its files: one line whatever they are called)
        print(f"error: {one_line(e)}", file=sys.stderr)
        sys.exit(1)
    except Interrupted as e:  # work that keeps nothing (infer, plot, models)
        print(
            f"interrupted ({signal.Signals(e.signum).name}); nothing was written", file=sys.stderr
        )
        sys.exit(e.exit_code)
    except KeyboardInterrupt as e:
        _model_code_error(e)
        print("interrupted; nothing was written", file=sys.stderr)
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - last resort: one line, exit 1
        _model_code_error(e)
        message = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(f"error: internal error: {type(e).__name__}: {message}", file=sys.stderr)
        sys.exit(1)
    finally:
        _for_the_command = None
    # In this (non-standalone) mode click returns the code of a `typer.Exit` raised
    # inside a command instead of raising it.
    if isinstance(code, int) and code:
        sys.exit(code)


if __name__ == "__main__":
    main()
