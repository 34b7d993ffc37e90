"""`sim.movie` and `sim plot --movie`: the saved frames of a run as an animation.

PDE runs: a 1D field as a line per frame, a 2D field as an image per frame (3D: its
middle z slice), each field on one colour or value scale fixed across the frames and
labelled, so that growth and decay are seen as they are. MD runs (H5MD): the particles
projected on the x-y plane, coloured by species, with the periodic box drawn. GIF through
pillow; MP4 through ffmpeg where that program is installed (matplotlib's writers). At most
`frames` frames (200 by default), spread evenly over the run, the first and last included.

Frames are read from the file one by one (only the frames drawn), so a long run of a large
grid is never held whole in memory. The movie is written under a temporary name beside the
output and renamed when complete.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ._errors import DataError, InputError, optional_module
from ._lock import exclusive
from ._store import (
    Record,
    Result,
    atomic_file,
    check_output_path,
    open_hdf5,
)
from ._unfinished import as_text

MOVIE_SUFFIXES = (".gif", ".mp4")
FRAMES = 200  # the most frames of a movie, by default
FPS = 10.0
DPI = 100


def is_movie(path: str | Path) -> bool:
    """Whether `path` names a movie (.gif, .mp4) rather than a figure."""
    return Path(path).suffix.lower() in MOVIE_SUFFIXES


def movie(
    source: Any,
    out: str | Path,
    *,
    frames: int = FRAMES,
    fps: float | int = FPS,
    option: str = "out",
) -> Path:
    """Animate the saved frames of a PDE or MD run.

    Arguments:
        source: a run file's path (a PDE run, or an MD run or any H5MD file), a
            `sim.Record`, or a run result (`RunResult` of a PDE model, an MD run result).
        out: the movie: `.gif` (pillow) or `.mp4` (needs the ffmpeg program).
        frames: the most frames to show; a longer run is subsampled evenly, its first
            and last saved frames included.
        fps: frames per second.
        option: how error messages name `out` (the command line passes `--movie` or `-o`).

    Returns:
        The path written.

    Raises:
        InputError: `out` has another suffix, is the input, a folder or in a missing or
            read-only folder; .mp4 without ffmpeg; `frames` or `fps` not positive.
        DataError: the file is missing or unreadable, or has no frames to animate (an ODE
            or SDE run, a sweep, a fit: `sim plot` draws those), naming the dataset.
        MissingExtra: matplotlib is not installed (the 'plot' extra).

    Example:
        >>> sim.movie("gray_scott.h5", "gray_scott.gif")
    """
    optional_module("matplotlib", "plot", "movies")
    out = Path(out)
    writer = _writer(out, option, fps)
    if isinstance(frames, bool) or not isinstance(frames, (int, np.integer)) or frames < 1:
        raise InputError(
            option, "frames", f"expected a whole number of frames of at least 1, got {frames!r}"
        )
    inputs = [source] if isinstance(source, (str, os.PathLike)) else []
    check_output_path(out, option, inputs=inputs)
    with _frames_of(source) as scene, exclusive(out):
        _write(scene, out, writer, frame_indices(scene.count, int(frames)))
    return out


def frame_indices(count: int, cap: int) -> list[int]:
    """Every index of `count` frames, or `cap` of them spread evenly (first and last
    included)."""
    if count <= cap:
        return list(range(count))
    return sorted(set(np.linspace(0, count - 1, cap).round().astype(int).tolist()))


def _writer(out: Path, option: str, fps: float | int):
    from matplotlib import animation

    if not (isinstance(fps, (int, float)) and not isinstance(fps, bool) and 0 < fps <= 1000):
        raise InputError(option, "fps", f"expected frames per second in (0, 1000], got {fps!r}")
    suffix = out.suffix.lower()
    if suffix == ".gif":
        return animation.PillowWriter(fps=fps)
    if suffix == ".mp4":
        if shutil.which("ffmpeg") is None or not animation.writers.is_available("ffmpeg"):
            raise InputError(
                option,
                str(out),
                "writing an .mp4 needs the ffmpeg program, which is not on PATH; install it or "
                "write a .gif",
            )
        return animation.FFMpegWriter(fps=fps, codec="h264", extra_args=["-pix_fmt", "yuv420p"])
    raise InputError(
        option,
        str(out),
        f"unknown movie type {out.suffix or '(no suffix)'!r}; expected .gif or .mp4",
    )


# ----------------------------------------------------------------------------- reading


class _Scene:
    """What a movie shows of one file: `count` frames, drawn by `setup(fig)`, which
    returns the function that draws frame k."""

    count: int
    size: tuple[float, float]

    def setup(self, fig):
        raise NotImplementedError


@contextlib.contextmanager
def _frames_of(source: Any):
    """The scene of a path (opened with h5py, frames read as drawn), a `Record` or a
    result (in memory)."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        with open_hdf5(path, "a PDE or MD run file") as f:
            yield _scene(_Node(f), dict(f.attrs), path)
        return
    if isinstance(source, Result):
        source = source.to_record()
    if not isinstance(source, Record):
        raise TypeError(
            "sim.movie animates a file path, a sim.Record or a run result; got "
            f"{type(source).__name__}"
        )
    yield _scene(_Node(source), dict(source.attrs), source.path)


class _Node:
    """Uniform access to an open h5py file or a `Record`'s tree: `get(key)` gives a
    dataset (h5py, read lazily) or array, a group as a Mapping, or None."""

    def __init__(self, root):
        self.root = root

    def get(self, key: str):
        try:
            return self.root[key]
        except (KeyError, TypeError, ValueError, IndexError):
            return None


def _scene(node: _Node, attrs: dict, path: Path) -> _Scene:
    fmt = as_text(attrs.get("format", ""))
    if node.get("h5md") is not None:
        return _MdScene(node, attrs, path)
    if fmt != "simjax.run":
        what = f"a {fmt.removeprefix('simjax.')} file" if fmt else "not a simjax run file"
        raise DataError(
            path,
            "format",
            f"{what}: a movie shows the saved frames of a PDE run (fields on a grid) or an MD run "
            "(particles); `sim plot` draws this file",
        )
    if node.get("grid") is None:
        raise DataError(
            path,
            "/grid",
            "missing: this run has no fields on a grid or particle frames to animate (an ODE or "
            "SDE run); `sim plot` draws its time series",
        )
    return _FieldScene(node, attrs, path)


def _array(node: _Node, path: Path, key: str, ndim: int | None = None):
    item = node.get(key)
    if item is None or isinstance(item, (Mapping, h5py.Group)):
        raise DataError(path, f"/{key}", "missing; a run file with frames has this dataset")
    shape = np.shape(item)
    dtype = getattr(item, "dtype", np.asarray(item).dtype)
    if (
        (ndim is not None and len(shape) != ndim)
        or np.dtype(dtype).kind not in "biuf"
        or 0 in shape
    ):
        raise DataError(
            path,
            f"/{key}",
            f"expected {ndim if ndim is not None else 'some'} dimension(s) of numbers, found shape "
            f"{shape} of {dtype}",
        )
    return item


def _frame(item, k: int) -> np.ndarray:
    return np.asarray(item[k], dtype=float)


def _limits(
    item, indices: list[int], path: Path, key: str, symmetric: bool = False
) -> tuple[float, float]:
    """One value scale for every shown frame: the finite range of those frames."""
    low, high = np.inf, -np.inf
    for k in indices:
        frame = _frame(item, k)
        finite = frame[np.isfinite(frame)]
        if finite.size:
            low, high = min(low, float(finite.min())), max(high, float(finite.max()))
    if low > high:
        raise DataError(
            path, f"/{key}", "has no finite values in the frames to show (a failed run?)"
        )
    _check_drawable(max(-low, high), path, key)
    if symmetric and low < 0 < high and min(-low, high) > 0.05 * max(-low, high):
        bound = max(-low, high)  # a field of both signs: centred on zero
        return -bound, bound
    if high == low:
        pad = abs(high) * 0.05 or 1.0
        return low - pad, high + pad
    return low, high


# Values beyond this magnitude overflow the arithmetic of axes and colour bars.
LARGEST = 1e300


def _check_drawable(magnitude: float, path: Path, key: str) -> None:
    if magnitude > LARGEST:
        raise DataError(
            path,
            f"/{key}",
            f"has values of magnitude {magnitude:.3g}, beyond what can be drawn ({LARGEST:g}; a "
            "blown-up run?)",
        )


def _meta(attrs: dict, node: _Node):
    """The other figures' labels (units of time and observables), where available."""
    from ._plot_meta import Meta

    return Meta(_AttrsOnly(attrs, node))


class _AttrsOnly:
    """What `Meta` reads of a record: its attributes and whether it is H5MD."""

    def __init__(self, attrs: dict, node: _Node):
        self.attrs = {k: as_text(v) if isinstance(v, bytes) else v for k, v in attrs.items()}
        self._node = node

    def __contains__(self, key: str) -> bool:
        return self._node.get(key) is not None

    def __getitem__(self, key: str):
        item = self._node.get(key)
        if item is None:
            raise KeyError(key)
        return item


# ----------------------------------------------------------------------------- PDE fields


class _FieldScene(_Scene):
    def __init__(self, node: _Node, attrs: dict, path: Path):
        self.path = path
        self.meta = _meta(attrs, node)
        self.time = np.asarray(_array(node, path, "time", 1)[()], dtype=float)
        grid = node.get("grid")
        axes = [a for a in ("x", "y", "z") if a in grid]
        if not axes or axes != ["x", "y", "z"][: len(axes)]:
            raise DataError(
                path, "/grid", "expected datasets x (and y, z) with the grid coordinates"
            )
        self.coords = [
            np.asarray(_array(node, path, f"grid/{a}", 1)[()], dtype=float) for a in axes
        ]
        shape = tuple(len(c) for c in self.coords)
        observables = node.get("observables")
        self.fields = {}
        for name in observables if observables is not None else ():
            item = observables[name]
            if not isinstance(item, (Mapping, h5py.Group)) and np.shape(item) == (
                len(self.time),
                *shape,
            ):
                self.fields[name] = _array(node, path, f"observables/{name}")
        if not self.fields:
            raise DataError(
                path,
                "/observables",
                f"no field of shape [{len(self.time)}, {', '.join(map(str, shape))}] (time by "
                "grid) to animate",
            )
        self.count = len(self.time)
        one_d = len(shape) == 1
        n = len(self.fields)
        self.size = (7.2, 2.4 * n + 0.8) if one_d else (4.4 * n + 0.4, 4.2)

    def setup(self, fig, indices: list[int]):
        one_d = len(self.coords) == 1
        middle = tuple(len(c) // 2 for c in self.coords[2:])  # 3D: the middle z slice
        time_label = self.meta.time_label()
        artists = []
        for i, (name, item) in enumerate(self.fields.items()):
            key = f"observables/{name}"
            label = self.meta.label(name)
            if one_d:
                ax = fig.add_subplot(len(self.fields), 1, i + 1)
                low, high = _limits(item, indices, self.path, key)
                pad = 0.1 * (high / 2 - low / 2)  # (halves first: no overflow at +-1e308)
                (line,) = ax.plot(self.coords[0], np.full(len(self.coords[0]), np.nan), lw=1.4)
                ax.set_xlim(self.coords[0][0], self.coords[0][-1])
                ax.set_ylim(low - pad, high + pad)
                ax.set_ylabel(label)
                ax.set_xlabel("x")
                artists.append((line, item, None))
            else:
                ax = fig.add_subplot(1, len(self.fields), i + 1)
                low, high = _limits(item, indices, self.path, key, symmetric=True)
                x, y = self.coords[0], self.coords[1]
                extent = (
                    [*_cell_edges(x), *_cell_edges(y)]
                    if len(x) > 1 and len(y) > 1 and x[-1] > x[0] and y[-1] > y[0]
                    else None
                )
                cmap = "RdBu_r" if low == -high else "viridis"  # (centred on zero by `_limits`)
                image = ax.imshow(
                    np.full((len(y), len(x)), np.nan),
                    origin="lower",
                    extent=extent,
                    cmap=cmap,
                    vmin=low,
                    vmax=high,
                    interpolation="nearest",
                )
                fig.colorbar(image, ax=ax, shrink=0.85, label=label)
                ax.set_xlabel("x")
                ax.set_ylabel("y")
                ax.set_title(pretty(name) + (" (middle z)" if middle else ""), fontsize=10)
                artists.append((image, item, middle))
        title = fig.suptitle("", fontsize=10)

        def draw(k: int) -> None:
            for artist, item, middle in artists:
                frame = _frame(item, k)
                if middle is None:
                    artist.set_ydata(frame)
                else:
                    artist.set_data(frame[(slice(None), slice(None), *middle)].T)
            title.set_text(
                f"{self.meta.model or 'run'}: {time_label} = {self.time[k]:.4g}  (frame {k + 1} of "
                f"{self.count})"
            )

        return draw


def _cell_edges(c: np.ndarray) -> tuple[float, float]:
    """The outer edges of the pixels centred on nodes `c` (evenly spaced)."""
    half = 0.5 * (c[-1] - c[0]) / (len(c) - 1)
    return float(c[0] - half), float(c[-1] + half)


def pretty(name: str) -> str:
    return name.replace("_", " ")


# ----------------------------------------------------------------------------- MD particles


class _MdScene(_Scene):
    def __init__(self, node: _Node, attrs: dict, path: Path):
        self.path = path
        self.meta = _meta(attrs, node)
        self.position = _array(node, path, "particles/all/position/value", 3)
        count, n, dim = np.shape(self.position)
        time = node.get("particles/all/position/time")
        self.time = (
            np.asarray(time[()], dtype=float)
            if time is not None and np.shape(time) == (count,)
            else np.arange(count, dtype=float)
        )
        species = node.get("particles/all/species")
        self.species = (
            np.asarray(species[()]).astype(int)
            if species is not None and np.shape(species) == (n,)
            else np.zeros(n, dtype=int)
        )
        edges = node.get("particles/all/box/edges")
        if isinstance(edges, (Mapping, h5py.Group)):
            edges = edges.get("value")
        self.edges = None
        if edges is not None:
            value = np.asarray(edges[()], dtype=float).reshape(-1, dim)
            if value.shape[0] not in (1, count) or not np.all(np.isfinite(value) & (value > 0)):
                raise DataError(
                    path,
                    "/particles/all/box/edges",
                    f"expected {dim} positive box lengths (per frame or constant), found shape "
                    f"{value.shape}",
                )
            _check_drawable(float(value.max()), path, "particles/all/box/edges")
            self.edges = value
        self.count, self.dim, self.n = count, dim, n
        self.size = (5.6, 5.2)

    def setup(self, fig, indices: list[int]):
        from matplotlib import colormaps
        from matplotlib.patches import Rectangle

        ax = fig.add_subplot(1, 1, 1)
        ax.set_aspect("equal")
        length = self.meta.md_units["length"] if self.meta.md_units else ""
        unit = f" ({length})" if length else ""
        ax.set_xlabel(f"x{unit}")
        ax.set_ylabel(f"y{unit}" if self.dim > 1 else "")
        kinds = np.unique(self.species)
        colours = colormaps["tab10"](np.arange(len(kinds)) % 10)
        colour = colours[np.searchsorted(kinds, self.species)]
        size = float(np.clip(4000.0 / max(self.n, 1), 2.0, 60.0))
        scatter = ax.scatter(
            np.zeros(self.n), np.zeros(self.n), s=size, c=colour, edgecolors="none"
        )
        if len(kinds) > 1:
            for kind, c in zip(kinds, colours, strict=False):
                ax.scatter([], [], s=20, color=c, label=f"species {kind}")
            ax.legend(fontsize=7, loc="upper right", framealpha=0.8)
        box = None
        if self.edges is not None:
            edges = self.edges[0]
            box = Rectangle(
                (0.0, 0.0),
                edges[0],
                edges[1] if self.dim > 1 else 0.0,
                fill=False,
                lw=1.0,
                color="0.3",
            )
            ax.add_patch(box)
            high = np.max(self.edges[:, : min(self.dim, 2)], axis=0)
            low = np.zeros_like(high)
        else:
            low, high = self._extent(indices)
        pad = 0.04 * float(np.max(high - low) or 1.0)
        ax.set_xlim(low[0] - pad, high[0] + pad)
        ax.set_ylim((low[1] - pad, high[1] + pad) if self.dim > 1 else (-1.0, 1.0))
        projection = " (projected on x-y)" if self.dim > 2 else ""
        time_label = self.meta.time_label()

        def draw(k: int) -> None:
            frame = _frame(self.position, k)
            xy = frame[:, :2] if self.dim > 1 else np.column_stack([frame[:, 0], np.zeros(self.n)])
            scatter.set_offsets(xy)
            if box is not None and self.edges.shape[0] > 1:
                box.set_width(self.edges[k, 0])
                if self.dim > 1:
                    box.set_height(self.edges[k, 1])
            ax.set_title(
                f"{self.n} particles{projection}, {time_label} = {self.time[k]:.4g}", fontsize=10
            )

        return draw

    def _extent(self, indices: list[int]):
        axes = min(self.dim, 2)
        low, high = np.full(axes, np.inf), np.full(axes, -np.inf)
        for k in indices:
            frame = _frame(self.position, k)[:, :axes]
            finite = frame[np.all(np.isfinite(frame), axis=1)]
            if finite.size:
                low, high = (
                    np.minimum(low, finite.min(axis=0)),
                    np.maximum(high, finite.max(axis=0)),
                )
        if not np.all(low <= high):
            raise DataError(
                self.path,
                "/particles/all/position/value",
                "has no finite positions in the frames to show (a failed run?)",
            )
        _check_drawable(
            float(np.max(np.abs([low, high]))), self.path, "particles/all/position/value"
        )
        if axes == 1:
            low, high = np.append(low, -1.0), np.append(high, 1.0)
        return low, high


# ----------------------------------------------------------------------------- writing


def _write(scene: _Scene, out: Path, writer, indices: list[int]) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # Whole pixels in even numbers (video encoders take no odd sizes).
    width, height = (2 * round(v * DPI / 2) / DPI for v in scene.size)
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    draw = scene.setup(fig, indices)
    # The layout is made once, for the first frame, and kept: nothing moves between frames.
    draw(indices[0])
    fig.canvas.draw()
    fig.set_layout_engine("none")
    with (
        atomic_file(out, suffix=f".tmp{out.suffix.lower()}") as tmp,
        writer.saving(fig, str(tmp), DPI),
    ):
        for k in indices:
            draw(k)
            writer.grab_frame()
