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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._errors import DataError, InputError
from ._store import Record, Result, companion_path, read

KINDS = "run (ODE, PDE, MD), sweep, fit, posterior and profile files"
_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg")


class Source:
    """Checked access to the arrays of one record: every problem is a `DataError` naming
    the file and the dataset, never a KeyError or a plotting failure."""

    def __init__(self, record: Record):
        self.record = record
        self.path = record.path

    def lookup(self, key: str) -> Any:
        """The node at `key`; KeyError when a part of the path is missing or a dataset
        stands where a group should be."""
        try:
            return self.record[key]
        except (KeyError, TypeError, IndexError, ValueError):
            raise KeyError(key) from None

    def has(self, key: str) -> bool:
        try:
            self.lookup(key)
        except KeyError:
            return False
        return True

    def group(self, key: str) -> dict[str, Any]:
        try:
            node = self.lookup(key)
        except KeyError:
            raise DataError(self.path, f"/{key}", f"missing; a {self.kind()} file has this group") from None
        if not isinstance(node, Mapping) or not node:
            raise DataError(self.path, f"/{key}", "expected a group of datasets")
        return dict(node)

    def array(self, key: str, *, ndim: int | tuple[int, ...] | None = None, min_ndim: int = 0) -> np.ndarray:
        """A float array (inf shown as missing); `ndim` or `min_ndim` checked."""
        try:
            node = self.lookup(key)
        except KeyError:
            raise DataError(self.path, f"/{key}", f"missing; a {self.kind()} file has this dataset") from None
        return self.values(node, key, ndim=ndim, min_ndim=min_ndim)

    def values(self, node: Any, key: str, *, ndim=None, min_ndim: int = 0) -> np.ndarray:
        if isinstance(node, Mapping):
            raise DataError(self.path, f"/{key}", "is a group; expected a numeric dataset")
        try:
            value = np.asarray(node, dtype=float)
        except (TypeError, ValueError):
            kind = getattr(np.asarray(node), "dtype", type(node))
            raise DataError(self.path, f"/{key}", f"expected numbers, found {kind}") from None
        wanted = (ndim,) if isinstance(ndim, int) else ndim
        if (wanted is not None and value.ndim not in wanted) or value.ndim < min_ndim:
            expected = " or ".join(map(str, wanted)) if wanted is not None else f"at least {min_ndim}"
            raise DataError(self.path, f"/{key}", f"expected {expected} dimensions, found shape {value.shape}")
        if value.size == 0:
            raise DataError(self.path, f"/{key}", "is empty")
        return np.where(np.isfinite(value), value, np.nan)

    def kind(self) -> str:
        return self.record.format or "simjax"

    def check_length(self, key: str, value: np.ndarray, length: int, what: str) -> None:
        if value.shape[0] != length:
            raise DataError(self.path, f"/{key}", f"has {value.shape[0]} entries along its first axis; expected {length} ({what})")


def plot(result: Any, output: str | Path | None = None, *, title: str | None = None):
    """Draw a figure of a simjax result.

    Arguments:
        result: a path to a run, sweep, fit or posterior HDF5 file (or any H5MD file), a
            `sim.Record` from `sim.read`, or a result object (`RunResult`, an MD run,
            `SweepResult`, `FitResult`, `PosteriorResult`, `Trajectory`).
        output: if given, the figure is also written there (PNG, PDF or SVG by suffix),
            atomically: an existing file is only replaced by a complete figure.
        title: figure title (default: the model and the file name).

    Returns:
        The `matplotlib.figure.Figure` (Agg canvas; no display needed).

    Raises:
        DataError: the file is missing, not HDF5, or not a layout simjax can draw.
        InputError: `output` is a folder, in a missing folder, or of an unknown type.

    Example:
        >>> fig = sim.plot("lv.h5", "lv.png")
    """
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
        raise InputError(source, str(path), f"unknown figure type {path.suffix or '(no suffix)'!r}; expected .png, .pdf, .svg or .jpg")
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
    fd, tmp = tempfile.mkstemp(prefix=companion_path(path, "").name, suffix=".tmp", dir=path.parent if str(path.parent) else ".")
    os.close(fd)
    try:
        # "tight": nothing drawn outside the canvas (colour bar labels of the last column) is cut.
        fig.savefig(tmp, format=path.suffix.lower().lstrip(".").replace("jpg", "jpeg"), dpi=fig.dpi, bbox_inches="tight", pad_inches=0.08)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def _as_record(result: Any) -> Record:
    if isinstance(result, Record):
        return result
    if isinstance(result, (str, os.PathLike)):
        return read(result)
    if hasattr(result, "final_state") and hasattr(result, "observables"):  # a Trajectory
        observables = {k: np.asarray(v) for k, v in result.observables.items()}
        return Record(Path("trajectory"), {"format": "simjax.run", "model": ""}, {"time": np.asarray(result.time), "observables": observables})
    if isinstance(result, Result):
        return result.to_record()  # built in memory: no file is written
    raise TypeError(f"sim.plot draws a file path, a sim.Record or a simjax result; got {type(result).__name__}")


def _family(record: Record):
    """The family that draws a run record: the family of the model it names when that
    model is registered, else the first that recognises its layout (None: neither)."""
    from ._family import families, family_of
    from ._registry import model_class

    try:
        return family_of(model_class(str(record.attrs.get("model", ""))))
    except (TypeError, ValueError):
        return next((f for f in families() if f.recognises(record)), None)


def draw(record: Record, *, title: str | None = None):
    """The figure of one record, chosen by its `format` (H5MD for MD runs)."""
    from . import _plot_inference as inference_plots
    from . import _plot_run as run_plots

    source = Source(record)
    fmt = record.format
    if fmt == "simjax.run" or (not fmt and "h5md" in record):
        family = _family(record)
        fig = run_plots.ode(source) if family is None else family.draw_run(source)
    elif fmt == "simjax.sweep":
        fig = inference_plots.sweep(source)
    elif fmt == "simjax.fit":
        fig = inference_plots.fit(source)
    elif fmt == "simjax.posterior":
        fig = inference_plots.posterior(source)
    elif fmt == "simjax.profile":
        fig = inference_plots.profile(source)
    elif fmt:
        raise DataError(record.path, "format", f"unknown file format {fmt!r}; sim plot draws {KINDS}")
    else:
        raise DataError(
            record.path, "", f"not a simjax result (no 'format' attribute, no /h5md group); sim plot draws {KINDS}"
        )
    model = record.attrs.get("model", "")
    name = record.path.name
    fig.suptitle(title if title is not None else (f"{model}: {name}" if model else name), fontsize=11)
    return fig


def new_figure(width: float | int, height: float | int):
    """A matplotlib figure on the Agg canvas (no pyplot state, no display)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def pretty(name: str) -> str:
    """`potential_energy` -> `potential energy`."""
    return name.replace("_", " ")
