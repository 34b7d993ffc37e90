"""The commands that compute no model: `sim plot` (figures and movies of result files)
and `sim info` (versions, devices, precision)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .._errors import shown
from ._app import Quiet, _Command, app
from ._console import out
from ._engine import _lasting_imports, engine
from ._outputs import unasked


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
    from .._lock import exclusive
    from .._movie import is_movie, movie as animate
    from .._plot import check_figure_path, plot as draw, save_figure
    from .._store import check_output_path

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

        from .._store import package_versions

    for name, version in package_versions().items():
        out.print(f"{name:<12} {version}")
    out.print(f"{'backend':<12} {jax.default_backend()}")
    out.print(f"{'devices':<12} {', '.join(str(d) for d in jax.devices())}")
    # (the commands that compute turn on jax_enable_x64; this one computes nothing)
    out.print(f"{'precision':<12} float64 by default (PDE/MD configs may ask for float32)")
