"""The commands that simulate: `sim sweep` (every point of a [sweep]) and `sim run` (one
run streamed to its file)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .._errors import InputError, shown
from .._progress import Clock
from ._app import (
    Coordinator,
    Distributed,
    ProcessCount,
    ProcessId,
    Quiet,
    Sets,
    _Command,
    app,
    join_processes,
)
from ._engine import engine
from ._outputs import output_path, writing


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
        typer.Option(
            "--devices",
            help="Use the first N devices (default: all; with --distributed, every process's).",
        ),
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
    distributed: Distributed = False,
    coordinator: Coordinator = None,
    processes: ProcessCount = None,
    process_id: ProcessId = None,
) -> None:
    """Run every point of CONFIG's [sweep], batched and sharded, into one HDF5 file."""
    engine()
    if not join_processes(distributed, coordinator, processes, process_id):
        quiet = True  # (the lead speaks for the run)
    if distributed and scheduler is not None:
        raise InputError(
            "--scheduler",
            scheduler,
            "a Dask cluster runs a sweep's chunks, --distributed "
            "one program over processes: give one of them",
        )
    from .._config import load_config
    from .._distributed import needs_dask
    from .._sweep import execute
    from .._sweep_store import partial_path

    needs_dask(scheduler)
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


def devices_key(cfg, devices: int, option: str = "--devices") -> str:
    """The config key `sim run --devices` (or `--distributed`, `option`) sets for the
    model of `cfg` (its family's `devices_key`).

    Raises:
        InputError: (`option`) the family runs one run on one device.
    """
    from .._errors import InputError
    from .._family import family_of
    from .._run import build_model

    family = family_of(build_model(cfg))
    if family.devices_key is None:
        raise InputError(
            option,
            str(devices),
            f"splits one run of a PDE (its grid), an SDE ensemble (its paths) or MD (its box, "
            f"by slabs) over devices; "
            f"{family.describes} run on one device (sim sweep {option} splits a sweep's runs)",
        )
    return family.devices_key


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
    devices: Annotated[
        Optional[int],
        typer.Option(
            "--devices",
            help="Split this one run over the first N local devices: a PDE's grid, spectral or "
            "finite-difference ([grid] devices = N), an SDE ensemble's paths ([ensemble] "
            "devices = N), an MD box by slabs ([solver] slabs = N); sim sweep --devices splits "
            "a sweep's runs instead.",
        ),
    ] = None,
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
    distributed: Distributed = False,
    coordinator: Coordinator = None,
    processes: ProcessCount = None,
    process_id: ProcessId = None,
) -> None:
    """Run the simulation CONFIG describes, streaming it to an HDF5 file chunk by chunk
    with checkpoints ([output] chunk, checkpoint_every); --resume continues a run that
    was stopped."""
    engine()
    if not join_processes(distributed, coordinator, processes, process_id):
        quiet = True  # (the lead speaks for the run)
    from .._config import load_config
    from .._run import run as run_config
    from .._stream import partial_path

    # (--xdmf is [output] xdmf = true and --devices N the family's `devices_key` = N, such
    # as [grid] devices, after any --set)
    sets = [*(set_ or []), *(["output.xdmf=true"] if xdmf else [])]
    cfg = load_config(config, sets)
    option = "--devices"
    if distributed and devices is None:
        import jax

        devices, option = jax.device_count(), "--distributed"  # (every process's devices)
    if devices is not None:
        cfg = load_config(config, [*sets, f"{devices_key(cfg, devices, option)}={devices}"])
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
            from .._xdmf import sidecar_path

            print(
                f"wrote {shown(sidecar_path(done.path))} (XDMF, for ParaView and VisIt)",
                file=sys.stderr,
            )
