"""`sim.plot` and `sim plot`: one figure for every kind of simjax file.

run (ODE): the observables over time (and a phase portrait for two or three of them);
run (PDE): space-time images and snapshot lines of 1D fields, image snapshots of 2D fields;
run (MD, H5MD): energies, temperature and pressure over time, and g(r);
sweep: heatmaps or lines over the swept quantities; fit: data and the fitted curves;
posterior: traces, pair plot and predictive bands over the data.

matplotlib is imported only when a figure is drawn, with the Agg canvas, so `import sim`
stays fast and no display is needed.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ._errors import DataError, InputError, optional_module
from ._figure import Source, _family
from ._store import Record, Result, companion_path, read

KINDS = "run (ODE, PDE, MD), sweep, fit, posterior and profile files"
_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg")


def plot(result: Any, output: str | Path | None = None, *, title: str | None = None):
    """Draw a figure of a simjax result.

    Arguments:
        result: a path to a run, sweep, fit or posterior HDF5 file (or any H5MD file), a
            `sim.Record` from `sim.read`, or a result object (`RunResult`, an MD run,
            `SweepResult`, `FitResult`, `PosteriorResult`, `Trajectory`).
        output: if given, the figure is also written there (PNG, PDF or SVG by suffix),
            atomically: an existing file is only replaced by a complete figure.
        title: figure title (default: what was run, the model and the parameters that
            differ from its defaults, then the file name).

    Returns:
        The `matplotlib.figure.Figure` (Agg canvas; no display needed).

    Raises:
        DataError: the file is missing, not HDF5, or not a layout simjax can draw.
        InputError: `output` is a folder, in a missing folder, or of an unknown type.
        MissingExtra: matplotlib is not installed (the 'plot' extra).

    Example:
        >>> fig = sim.plot("lv.h5", "lv.png")
    """
    optional_module("matplotlib", "plot", "figures")
    if output is not None:
        output = check_figure_path(output)
    record = _as_record(result)
    fig = draw(record, title=title)
    if output is not None:
        save_figure(fig, output)
    return fig


def check_figure_path(path: str | Path, source: str = "-o") -> Path:
    """Check, before drawing, that a figure can be written to `path`."""
    path = Path(path)
    if path.is_dir():
        raise InputError(source, str(path), "is a folder; expected a file path ending in .png")
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in _FORMATS:
        raise InputError(
            source,
            str(path),
            f"unknown figure type {path.suffix or '(no suffix)'!r}; expected .png, .pdf, .svg or "
            ".jpg",
        )
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(source, str(path), f"folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(source, str(path), f"folder {str(folder)!r} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(source, str(path), "exists and is not writable")
    return path


def save_figure(fig, path: Path) -> Path:
    """Write `fig` under a temporary name beside `path`, then rename it to `path`."""
    fd, tmp = tempfile.mkstemp(
        prefix=companion_path(path, "").name,
        suffix=".tmp",
        dir=path.parent if str(path.parent) else ".",
    )
    os.close(fd)
    try:
        # "tight": nothing drawn outside the canvas (colour bar labels of the last column) is cut.
        savefig(
            fig,
            tmp,
            path.suffix.lower().lstrip(".").replace("jpg", "jpeg"),
            dpi=fig.dpi,
            tight=True,
        )
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def savefig(
    fig, target, fmt: str, *, dpi: float, tight: bool = False, pad_inches: float = 0.08, **kwargs
) -> None:
    """`fig.savefig(target, format=fmt, dpi=dpi)`, cropped to what is drawn (plus
    `pad_inches`) when `tight`, as `bbox_inches="tight"` crops it: the same file. Other
    keyword arguments go to savefig.

    For a figure with a layout engine (ours: constrained), savefig first draws every
    artist without rendering, for the layout to run, and then renders. On the Agg canvas
    (PNG, JPEG) that first draw leaves nothing that the layout and the tight box do not
    compute again themselves, and it took about a sixth of the time of writing a figure:
    here the layout and the box are computed directly, then savefig renders the laid-out
    figure with its layout engine set aside. Vector formats, whose renderers measure text
    their own way, and other canvases are left to savefig.
    """
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    engine = fig.get_layout_engine()
    # (savefig lays out only a figure with axes; with "figure.autolayout" on, removing the
    # engine would put the tight layout in its place)
    if (
        engine is None
        or not fig.axes
        or fmt not in ("png", "jpeg")
        or type(fig.canvas) is not FigureCanvasAgg
        or matplotlib.rcParams["figure.autolayout"]
    ):
        fig.savefig(
            target,
            format=fmt,
            dpi=dpi,
            **({"bbox_inches": "tight", "pad_inches": pad_inches} if tight else {}),
            **kwargs,
        )
        return
    original_dpi = fig.dpi
    fig.dpi = dpi  # laid out at the dpi it is rendered at, as savefig does
    try:
        renderer = fig.canvas.get_renderer()
        engine.execute(fig)
        box = fig.get_tightbbox(renderer).padded(pad_inches) if tight else None
        fig.set_layout_engine(None)
        try:
            fig.savefig(target, format=fmt, dpi=dpi, bbox_inches=box, **kwargs)
        finally:
            fig.set_layout_engine(engine)
    finally:
        fig.dpi = original_dpi


def _as_record(result: Any) -> Record:
    if isinstance(result, Record):
        return result
    if isinstance(result, (str, os.PathLike)):
        return read(result)
    from ._trajectory import Trajectory

    if isinstance(result, Trajectory):
        # (in the model's order, as a run file's figure draws them)
        observables = {k: np.asarray(v) for k, v in result.ordered_observables().items()}
        return Record(
            Path("trajectory"),
            {"format": "simjax.run", "model": ""},
            {"time": np.asarray(result.time), "observables": observables},
        )
    if isinstance(result, Result):
        return result.to_record()  # built in memory: no file is written
    raise TypeError(
        f"sim.plot draws a file path, a sim.Record or a simjax result; got {type(result).__name__}"
    )


def draw(record: Record, *, title: str | None = None):
    """The figure of one record, chosen by its `format` (H5MD for MD runs)."""
    from . import (
        _plot_inference as inference_plots,
        _plot_run as run_plots,
        _plot_sweep as sweep_plots,
    )
    from ._family import Drawable

    source = Source(record)
    fmt = record.format
    if fmt == "simjax.run" or (not fmt and "h5md" in record):
        family = _family(record)
        fig = family.draw_run(source) if isinstance(family, Drawable) else run_plots.ode(source)
    elif fmt == "simjax.sweep":
        fig = sweep_plots.sweep(source)
    elif fmt == "simjax.fit":
        fig = inference_plots.fit(source)
    elif fmt == "simjax.posterior":
        fig = inference_plots.posterior(source)
    elif fmt == "simjax.profile":
        fig = inference_plots.profile(source)
    elif fmt:
        raise DataError(
            record.path, "format", f"unknown file format {fmt!r}; sim plot draws {KINDS}"
        )
    else:
        raise DataError(
            record.path,
            "",
            f"not a simjax result (no 'format' attribute, no /h5md group); sim plot draws {KINDS}",
        )
    if title is None:
        kind = {
            "simjax.sweep": "sweep",
            "simjax.fit": "fit",
            "simjax.posterior": "posterior",
            "simjax.profile": "profile",
        }.get(fmt, "run")
        title = f"{source.meta.title(kind, record)} · {record.path.name}"
    fit_title(fig.suptitle(title, fontsize=11), fig)
    return fig


# Lines a title wraps to at most (the last one ends in "…" when it had more to say).
_TITLE_LINES = 3


def fit_title(text, fig) -> None:
    """Wrap the title `text` (a matplotlib Text of `fig`) between words, into the
    fewest lines that fit the figure's width as drawn, at most `_TITLE_LINES` of them;
    its own line breaks are kept."""
    import re
    import textwrap

    renderer = fig.canvas.get_renderer()
    room = 0.98 * fig.bbox.width
    title = text.get_text()
    if text.get_window_extent(renderer).width <= room:
        return
    # ("name = value" and "and N more" stay on one line: their spaces are NUL while wrapping)
    keep = re.sub(r" = | (?=more\b)|(?<=\band) (?=\d)", lambda m: m[0].replace(" ", "\0"), title)
    for width in range(max(map(len, title.split("\n"))) - 1, 19, -1):
        lines = [
            w.replace("\0", " ")
            for line in keep.split("\n")
            for w in textwrap.wrap(line, width) or [""]
        ]
        if len(lines) > _TITLE_LINES:
            lines = lines[: _TITLE_LINES - 1] + [
                textwrap.shorten(" ".join(lines[_TITLE_LINES - 1 :]), width, placeholder=" …")
            ]
        text.set_text("\n".join(lines))
        if text.get_window_extent(renderer).width <= room:
            return
