"""What the figures of `sim.plot` share: checked access to a record's arrays (`Source`),
new figures, labels, the axes of time, logarithmic and calendar scales, colour norms, and
the family that draws a run record."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._errors import DataError
from ._store import Record


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
            raise DataError(
                self.path, f"/{key}", f"missing; a {self.kind()} file has this group"
            ) from None
        if not isinstance(node, Mapping) or not node:
            raise DataError(self.path, f"/{key}", "expected a group of datasets")
        return dict(node)

    def array(
        self, key: str, *, ndim: int | tuple[int, ...] | None = None, min_ndim: int = 0
    ) -> np.ndarray:
        """A float array (inf shown as missing); `ndim` or `min_ndim` checked."""
        try:
            node = self.lookup(key)
        except KeyError:
            raise DataError(
                self.path, f"/{key}", f"missing; a {self.kind()} file has this dataset"
            ) from None
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
            expected = (
                " or ".join(map(str, wanted)) if wanted is not None else f"at least {min_ndim}"
            )
            raise DataError(
                self.path, f"/{key}", f"expected {expected} dimensions, found shape {value.shape}"
            )
        if value.size == 0:
            raise DataError(self.path, f"/{key}", "is empty")
        return np.where(np.isfinite(value), value, np.nan)

    def kind(self) -> str:
        return self.record.format or "simjax"

    @functools.cached_property
    def meta(self):
        """Units, time origin, data names and title of the record (`sim._plot_meta.Meta`)."""
        from ._plot_meta import Meta

        return Meta(self.record)

    def check_length(self, key: str, value: np.ndarray, length: int, what: str) -> None:
        if value.shape[0] != length:
            raise DataError(
                self.path,
                f"/{key}",
                f"has {value.shape[0]} entries along its first axis; expected {length} ({what})",
            )


def _family(record: Record):
    """The family that draws a run record: the family of the model it names when that
    model is registered, else the first that recognises its layout (None: neither)."""
    from ._family import Drawable, families, family_of
    from ._registry import model_class

    try:
        return family_of(model_class(str(record.attrs.get("model", ""))))
    except (TypeError, ValueError):
        drawers = (f for f in families() if isinstance(f, Drawable))
        return next((f for f in drawers if f.recognises(record)), None)


def model_order(names, meta) -> list[str]:
    """`names` in the model's declared order of its states: a file that iterates them
    alphabetically (written before the run layout kept the order) is put back in it."""
    names = list(names)
    declared = [n for n in meta.state_names if n in names]
    if not declared or names != sorted(names):
        return names
    return declared + [n for n in names if n not in declared]


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


def evenly_spaced(values: np.ndarray, tolerance: float = 0.25) -> bool:
    """Whether the steps between sorted values are all within `tolerance` of each other."""
    steps = np.diff(values)
    return bool(len(steps) and steps.min() > 0 and steps.max() <= (1 + tolerance) * steps.min())


def log_spaced(values: np.ndarray) -> bool:
    """Whether distinct positive values are spaced evenly in their logarithm and not in
    themselves (a logspace, save times at each decade), or, spaced evenly in neither, are
    spread over more than two decades with steps more alike in the logarithm: the spacing
    decides, never the ratio of the largest to the smallest alone."""
    v = np.unique(np.asarray(values, dtype=float)[np.isfinite(values)])
    if len(v) < 3 or v[0] <= 0:
        return False
    if evenly_spaced(v):
        return False
    logs = np.log(v)
    if evenly_spaced(logs):
        return True
    spread = lambda d: np.std(d) / np.mean(d)  # noqa: E731
    return bool(v[-1] / v[0] > 100 and spread(np.diff(logs)) < spread(np.diff(v)))


def log_time(t: np.ndarray) -> bool:
    """Whether save times are log-spaced (after a first time of 0 or below)."""
    t = np.asarray(t, dtype=float)
    positive = t[np.isfinite(t) & (t > 0)]
    return bool(
        len(positive) >= 3
        and len(t) - len(positive) <= 1
        and np.all(np.diff(t) > 0)
        and log_spaced(positive)
    )


def _tick_text(value: float) -> str:
    """A tick label: plain digits between 1e-3 and 1e4, else a power of ten."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e4:
        return f"{value:g}"
    exponent = int(np.floor(np.log10(magnitude) + 1e-9))
    mantissa = value / 10.0**exponent
    return (
        f"$10^{{{exponent}}}$"
        if abs(abs(mantissa) - 1) < 1e-9
        else f"${mantissa:g}\\times10^{{{exponent}}}$"
    )


def log_axis(ax, which: str = "y", symlog_threshold: float | None = None) -> None:
    """Put `ax`'s x or y axis on a log scale (symlog with a linear part up to
    `symlog_threshold` when the data reach 0), with at most about six labelled ticks, each
    a plain number or a power of ten (never "6x10^0"): within a decade, minor ticks at 2
    and 5 carry the labels."""
    from matplotlib.ticker import (
        FixedLocator,
        FuncFormatter,
        LogLocator,
        NullFormatter,
        NullLocator,
    )

    axis = ax.xaxis if which == "x" else ax.yaxis
    if symlog_threshold is not None:
        (ax.set_xscale if which == "x" else ax.set_yscale)(
            "symlog", linthresh=symlog_threshold, linscale=0.3
        )
        low, high = ax.get_xlim() if which == "x" else ax.get_ylim()
        first, last = (
            int(np.ceil(np.log10(symlog_threshold) - 1e-9)),
            int(np.floor(np.log10(max(high, symlog_threshold)) + 1e-9)),
        )
        every = max(1, -(-(last - first + 1) // 6))
        decades = [10.0**k for k in range(last, first - 1, -every)][::-1]
        axis.set_major_locator(FixedLocator([0.0, *decades] if low <= 0 else decades))
        axis.set_minor_locator(NullLocator())
    else:
        (ax.set_xscale if which == "x" else ax.set_yscale)("log")
        low, high = ax.get_xlim() if which == "x" else ax.get_ylim()
        decades = np.log10(high) - np.log10(low) if low > 0 and high > low else 1.0
        if decades < 1.2:
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
        else:
            axis.set_major_locator(LogLocator(base=10, numticks=7))
        axis.set_minor_formatter(NullFormatter())
    axis.set_major_formatter(FuncFormatter(lambda value, _: _tick_text(value)))


def shared_norm(arrays, diverging: bool | None = None):
    """One colour scale for several panels of one quantity: a `Normalize` over the finite
    values of all of them (centred on 0 when they take both signs), and its colour map."""
    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    finite = (
        np.concatenate([np.asarray(a, dtype=float)[np.isfinite(a)].ravel() for a in arrays])
        if arrays
        else np.array([])
    )
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if (
        diverging is None
    ):  # (both signs, each beyond a twentieth of the other: not round-off below 0)
        diverging = low < -0.05 * high and high > -0.05 * low
    if diverging:
        bound = max(abs(low), abs(high)) or 1.0
        low, high = -bound, bound
    if high <= low:
        low, high = low - 0.5, high + 0.5
    cmap = colormaps["RdBu_r" if diverging else "viridis"].with_extremes(bad="0.85")
    return Normalize(vmin=low, vmax=high), cmap


def calendar_axis(ax, meta) -> None:
    """Whole-number ticks on a time axis that reads as calendar time (an offset such as
    the year 1900): never 1902.5."""
    from matplotlib.ticker import MaxNLocator, ScalarFormatter

    if meta.time_offset:
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True, steps=[1, 2, 5, 10]))
        formatter = ScalarFormatter(useOffset=False)
        ax.xaxis.set_major_formatter(formatter)
