"""The commands that build on `inference`: `sim fit`, `sim infer` and `sim profile`, of a
config or a PEtab problem."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from .._errors import InputError, optional_module, shown
from .._progress import Clock
from ._app import (
    Coordinator,
    Distributed,
    OutsideFolder,
    ProcessCount,
    ProcessId,
    Quiet,
    Sets,
    _Command,
    _petab_only,
    app,
    join_processes,
)
from ._console import Table, _note, _warn, out
from ._engine import engine
from ._outputs import resumable, unasked, writing


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
            help="Spread the starts of a multistart fit over the first N devices (default: all; "
            "with --distributed, every process's).",
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
    distributed: Distributed = False,
    coordinator: Coordinator = None,
    processes: ProcessCount = None,
    process_id: ProcessId = None,
) -> None:
    """Fit free parameters and initial values to HDF5 observations by gradients through
    the solver; the optimiser state is checkpointed beside the output ([fit]
    checkpoint_every), and --resume continues a fit that was stopped. CONFIG may be a
    PEtab problem (.yaml), whose multistart fits are checkpointed and resumed the same
    way. The starts of a multistart fit run batched, over the local devices (--devices)
    or in blocks on a Dask cluster (--scheduler)."""
    engine()
    from inference import checkpoint_path, fit as fit_config

    from .._distributed import needs_dask

    needs_dask(scheduler)
    if not _join_fit(config, scheduler, distributed, coordinator, processes, process_id):
        quiet = True  # (the lead speaks for the fit)
    if config.suffix in (".yaml", ".yml"):
        petab = (evaluate, starts or 1, quiet, devices, scheduler, resume, checkpoint_every)
        _fit_petab(config, output, *petab, allow_outside)
        return
    if evaluate:
        raise InputError("--evaluate", str(config), "applies to a PEtab problem (.yaml)")
    _petab_only(allow_outside, config)
    cfg, path = _fit_config(config, data, output, set_, starts, checkpoint_every)
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
    _fit_summary(result, path, clock, quiet)


def _join_fit(config: Path, scheduler, distributed: bool, coordinator, count, index) -> bool:
    """`join_processes` for `sim fit`: whether this process is the lead.

    Raises:
        InputError: (--distributed) with --scheduler.
    """
    if distributed and scheduler is not None:
        raise InputError(
            "--distributed",
            str(scheduler),
            "spreads the starts of a multistart fit over several processes' devices; not with "
            "--scheduler",
        )
    return join_processes(distributed, coordinator, count, index)


def _fit_config(
    config: Path,
    data: Optional[Path],
    output: Optional[Path],
    set_: Optional[list[str]],
    starts: Optional[int],
    checkpoint_every: Optional[int],
):
    """The config of `sim fit CONFIG` and the path of its output, checked before any work."""
    from .._config import load_config
    from .._store import check_output_path

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
    return cfg, path


def _fit_summary(result, path: Path, clock: Clock, quiet: bool) -> None:
    """The table of a fit's estimates, whether it converged, the time it took and any
    warnings."""
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
        from inference import FitResult

        if isinstance(result, FitResult) and result.starts_summary:
            print(result.starts_summary, file=sys.stderr)
    _warn(result.warnings)


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

    from .._store import check_output_path

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
    _warn(result.warnings)


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
    distributed: Distributed = False,
    coordinator: Coordinator = None,
    processes: ProcessCount = None,
    process_id: ProcessId = None,
) -> None:
    """Sample the posterior of free parameters and initial values with NumPyro NUTS."""
    engine()
    from inference import infer as infer_config

    from .._config import load_config
    from .._lock import exclusive
    from .._store import atomic_file, check_output_path

    lead = join_processes(distributed, coordinator, processes, process_id)
    quiet = quiet or not lead  # (the lead speaks and writes for the run)
    if config.suffix in (".yaml", ".yml"):
        _infer_petab(config, output, chains, warmup, samples, seed, quiet, allow_outside, lead)
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
        # (arviz writes its netCDF file with h5netcdf)
        for module in ("arviz", "h5netcdf"):
            optional_module(module, "arviz", "ArviZ exports", "--arviz", str(arviz))
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
        if lead and arviz is None:  # (the lead writes: every process holds every chain's draws)
            result.save(path)
        elif lead:
            # (both files or neither: the export, under a temporary name, is kept once the posterior
            # is written)
            with atomic_file(arviz, suffix=".nc") as tmp:
                result.to_arviz().to_netcdf(str(tmp))
                result.save(path)
    if lead:
        _posterior_summary(result, path, clock, quiet)


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
    lead: bool = True,
) -> None:
    """`sim infer` of a PEtab problem; of a distributed run's processes only the lead
    writes the posterior and reports it (every process holds every chain's draws)."""
    from inference import infer_petab, load_petab, problem_files

    from .._config import seed_problem
    from .._lock import exclusive
    from .._store import check_output_path

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
        if lead:
            result.save(path)
    if lead:
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

    from .._config import load_config
    from .._lock import exclusive
    from .._store import check_output_path

    start = time.perf_counter()
    notes: list[str] = []  # (printed once the profile file is written, as `sim fit` does)
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
            result = profile_config(cfg, param, data, log=notes.append)
            result.save(path)
    if not quiet:
        for line in notes:
            _note(line)
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
