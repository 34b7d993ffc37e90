"""Figures of sweep files: one panel per observable over the swept values (lines, a
heatmap or a scatter), failed runs marked."""

from __future__ import annotations

import json

import numpy as np

from ._errors import DataError
from ._family import Sweepable
from ._figure import Source, _family, log_axis, log_spaced, model_order, new_figure, pretty

_MAX_PANELS = 6
_MAX_LINES = 64
_PARTICLE_ARRAYS = ("position", "velocity", "force", "image")


def sweep(src: Source):
    meta = src.meta
    attrs = src.record.attrs
    swept, values, status = _swept_values(src)
    runs = len(status)
    t = src.array("time", ndim=1) + meta.time_offset if src.has("time") else None
    logs = {name: _log_swept(meta, name, v) for name, v in values.items()}
    summaries, lines = _sweep_summaries(src, t, status)
    if not summaries:
        raise DataError(src.path, "/observables", "no observables to draw")
    # A quantity equal in every run (the density of a constant-volume MD sweep) is a
    # flat panel: said in a line instead, when something else varies.
    same = {name: v for name, (_, v) in summaries.items() if _same_in_every_run(v)}
    if len(same) < len(summaries):
        for name in same:
            del summaries[name]
    else:
        same = {}
    grid_shape = _grid_shape(attrs, values, runs)
    one_d = len(swept) == 1
    cols = 2 if one_d and lines else min(len(summaries), 3)
    rows = len(summaries) if one_d and lines else -(-len(summaries) // cols)
    fig = new_figure(5.0 * cols, 3.8 * rows + 0.4)
    gs = fig.add_gridspec(rows, cols)
    for k, (name, (label, value)) in enumerate(summaries.items()):
        if one_d and lines:
            ax = fig.add_subplot(gs[k, 0])
            _sweep_lines(
                fig,
                ax,
                t,
                *lines.get(name, (None, meta.label(name))),
                values[swept[0]],
                status,
                meta,
                swept[0],
                logs[swept[0]],
            )
            ax = fig.add_subplot(gs[k, 1])
        else:
            ax = fig.add_subplot(gs[k // cols, k % cols])
        if one_d:
            x = values[swept[0]]
            order = np.argsort(x)
            ax.plot(x[order], value[order], marker="o", ms=3)
            _mark_failed(
                ax,
                x,
                np.zeros_like(x) + np.nanmin(value)
                if np.isfinite(value).any()
                else np.zeros_like(x),
                status,
            )
            ax.set_xlabel(meta.parameter_label(swept[0]))
            ax.set_ylabel(label)
            if logs[swept[0]]:
                log_axis(ax, "x")
        elif grid_shape is not None:
            _heatmap(fig, ax, values, swept, grid_shape, value, label, meta, logs)
        else:
            x, y = values[swept[0]], values[swept[1]]
            ok = np.isfinite(value)
            points = ax.scatter(x[ok], y[ok], c=value[ok], s=12, cmap="viridis")
            fig.colorbar(points, ax=ax, label=label)
            _mark_failed(ax, x, y, status)
            _swept_axes(ax, meta, swept, logs)
            if len(swept) > 2:
                ax.set_title(f"{len(swept)} swept; first two shown", fontsize=9)
    if same:
        said = ", ".join(
            f"{meta.label(name)} {float(np.nanmean(v)):.6g}" for name, v in same.items()
        )
        fig.text(0.01, 0.005, f"the same in every run: {said}", fontsize=8, color="0.3")
    return fig


def _swept_values(src: Source) -> tuple[list[str], dict[str, np.ndarray], np.ndarray]:
    """The swept names of a sweep file (root attribute `swept`), each one's value per run
    and the runs' status."""
    attrs = src.record.attrs
    try:
        swept = [str(s) for s in json.loads(attrs["swept"])]
    except (KeyError, TypeError, ValueError):
        raise DataError(
            src.path,
            "swept",
            "missing or malformed root attribute; expected a JSON list of swept names",
        ) from None
    if not swept:
        raise DataError(src.path, "swept", "names no swept quantity")
    status = src.array("status", ndim=1)
    runs = len(status)
    values = {}
    for name in swept:
        head, _, rest = name.partition(".")
        key = f"initial/{rest}" if head == "initial" and rest else f"params/{name}"
        values[name] = src.array(key, ndim=1)
        src.check_length(key, values[name], runs, "one value per run")
    return swept, values, status


def _sweep_summaries(src: Source, t: np.ndarray | None, status: np.ndarray):
    """One number per run of each observable drawn (its label and values, NaN for failed
    runs), and the time series of those that have one per run (a full sweep's scalars)."""
    meta = src.meta
    runs = len(status)
    save = str(src.record.attrs.get("save", "full"))
    summaries, lines = {}, {}
    observables = src.group("observables")
    family = _family(src.record)
    particles = meta.particle_count(src.record)
    # Per-particle arrays of MD sweeps (positions, velocities) have no one number per run
    # worth a heatmap; the energies, temperature and pressure beside them do.
    drawn = model_order(
        [n for n in observables if n not in _PARTICLE_ARRAYS] or list(observables), meta
    )
    for name, node in [(n, observables[n]) for n in drawn][:_MAX_PANELS]:
        key = f"observables/{name}"
        if isinstance(node, dict):  # save = "summary": {min, max, mean, final}
            if not node:
                raise DataError(
                    src.path,
                    f"/{key}",
                    "is an empty group; expected the datasets min, max, mean and final",
                )
            stat = "mean" if "mean" in node else next(iter(node))
            value = src.values(node[stat], f"{key}/{stat}", min_ndim=1)
            label = f"{'final value' if stat == 'final' else 'time ' + stat} of {meta.label(name)}"
        else:
            value, label = src.values(node, key, min_ndim=1), meta.label(name)
            if isinstance(family, Sweepable):
                value, label = family.sweep_values(value, save, label)
            if save == "full" and t is not None and value.ndim >= 2 and value.shape[1] == len(t):
                if value.ndim == 2:
                    lines[name] = (value, label)
                    label = f"time mean of {label}"
                    value = np.nanmean(value, axis=1) if np.isfinite(value).any() else value[:, 0]
                else:
                    label = f"final rms of {label}"
                    value = value[:, -1]
        src.check_length(key, value, runs, "one entry per run")
        if meta.md_units is not None and name.endswith("energy") and particles:
            value = value / particles
            label = label.replace(pretty(name), f"{pretty(name)} per particle")
        if value.ndim > 1:
            value = (
                np.sqrt(np.nanmean(value.reshape(runs, -1) ** 2, axis=1))
                if np.isfinite(value).any()
                else value.reshape(runs, -1)[:, 0]
            )
            label = label if label.startswith("final rms") else f"rms of {label}"
        summaries[name] = (label, np.where(status == 1, value, np.nan))
    return summaries, lines


def _same_in_every_run(value: np.ndarray) -> bool:
    finite = value[np.isfinite(value)]
    return finite.size > 1 and float(np.ptp(finite)) <= 1e-12 * max(
        float(np.max(np.abs(finite))), 1e-300
    )


def _grid_shape(attrs, values, runs):
    """The grid's axis lengths when the runs are a full grid whose first two swept
    quantities vary along the first two axes (C order), else None."""
    try:
        shape = tuple(int(n) for n in json.loads(attrs.get("grid_shape", "null")) or ())
    except (TypeError, ValueError):
        return None
    if len(shape) < 2 or min(shape) < 1 or int(np.prod(shape)) != runs or len(shape) != len(values):
        return None
    for axis, v in enumerate(values.values()):
        grid = v.reshape(shape)
        line = grid[tuple(slice(None) if i == axis else 0 for i in range(len(shape)))]
        expected = np.expand_dims(line, tuple(i for i in range(len(shape)) if i != axis))
        if not np.allclose(grid, expected, equal_nan=True):
            return None
    return shape


def _heatmap(fig, ax, values, swept, shape, value, label, meta, logs):
    grid = value.reshape(shape)
    if len(shape) > 2:
        grid = (
            np.nanmean(grid, axis=tuple(range(2, len(shape))))
            if np.isfinite(grid).any()
            else grid[(..., *([0] * (len(shape) - 2)))]
        )
        ax.set_title("mean over " + ", ".join(pretty(s) for s in swept[2:]), fontsize=9)
    axes = [
        values[swept[0]].reshape(shape)[(slice(None), *([0] * (len(shape) - 1)))],
        values[swept[1]].reshape(shape)[(0, slice(None), *([0] * (len(shape) - 2)))],
    ]
    from matplotlib import colormaps

    cmap = colormaps["viridis"].with_extremes(bad="0.85")
    image = ax.pcolormesh(
        _edges(axes[0], logs[swept[0]]),
        _edges(axes[1], logs[swept[1]]),
        np.ma.masked_invalid(grid.T),
        cmap=cmap,
        shading="flat",
    )
    fig.colorbar(image, ax=ax, label=label)
    _swept_axes(ax, meta, swept, logs)


def _swept_axes(ax, meta, swept: list[str], logs: dict[str, bool]) -> None:
    """The first two swept quantities on x and y: labelled with their units, on log axes
    where they were swept log-spaced."""
    ax.set_xlabel(meta.parameter_label(swept[0]))
    ax.set_ylabel(meta.parameter_label(swept[1]))
    if logs[swept[0]]:
        log_axis(ax, "x")
    if logs[swept[1]]:
        log_axis(ax, "y")


def _edges(centres: np.ndarray, logarithmic: bool) -> np.ndarray:
    """Cell edges around sorted centres (geometric midpoints on a log axis)."""
    c = np.asarray(centres, dtype=float)
    if len(c) == 1:
        return (
            np.array([c[0] - 0.5, c[0] + 0.5]) if c[0] == 0 else np.array([c[0] * 0.9, c[0] * 1.1])
        )
    if logarithmic:
        lc = np.log(c)
        mid = 0.5 * (lc[1:] + lc[:-1])
        return np.exp(np.concatenate([[2 * lc[0] - mid[0]], mid, [2 * lc[-1] - mid[-1]]]))
    mid = 0.5 * (c[1:] + c[:-1])
    return np.concatenate([[2 * c[0] - mid[0]], mid, [2 * c[-1] - mid[-1]]])


def _log_swept(meta, name: str, values: np.ndarray) -> bool:
    """Whether a swept quantity goes on a log axis: as the config drew it (`logspace`,
    `loguniform`), else by the spacing of its values (`sim._figure.log_spaced`)."""
    specs = (
        meta.config.get("sweep", {}).get("params", {})
        if isinstance(meta.config.get("sweep"), dict)
        else {}
    )
    spec = specs.get(name) if isinstance(specs, dict) else None
    if isinstance(spec, dict):
        if "logspace" in spec or "loguniform" in spec:
            return bool(np.all(values[np.isfinite(values)] > 0))
        if "linspace" in spec or "uniform" in spec:
            return False
    return log_spaced(values)


def _mark_failed(ax, x, y, status) -> None:
    failed = status == 2
    if failed.any():
        ax.scatter(
            x[failed], y[failed], marker="x", color="crimson", s=20, label="failed", zorder=3
        )
        ax.legend(fontsize=7)


def _sweep_lines(fig, ax, t, value, label, x, status, meta, swept, logarithmic) -> None:
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import LogNorm, Normalize

    ok = np.flatnonzero((status == 1) & np.isfinite(x))
    if value is None or not len(ok):
        ax.set_axis_off()
        return
    ok = ok[np.linspace(0, len(ok) - 1, min(len(ok), _MAX_LINES)).round().astype(int)]
    norm = (LogNorm if logarithmic else Normalize)(
        vmin=np.nanmin(x[ok]),
        vmax=np.nanmax(x[ok]) if np.nanmax(x[ok]) > np.nanmin(x[ok]) else np.nanmin(x[ok]) + 1,
    )
    cmap = colormaps["viridis"]
    for i in ok:
        ax.plot(t, value[i], color=cmap(norm(x[i])), lw=0.9)
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label=meta.parameter_label(swept))
    ax.set_xlabel(meta.time_label())
    ax.set_ylabel(label)
