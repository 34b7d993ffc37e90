"""Figures of run files: ODE time series, PDE fields, MD observables and g(r)."""

from __future__ import annotations

import numpy as np

from ._errors import DataError
from ._plot import Source, new_figure, pretty

_SNAPSHOTS = 4
_RDF_FRAMES = 5
_RDF_PARTICLES = 1000


def snapshot_indices(count: int, n: int = _SNAPSHOTS) -> list[int]:
    """Up to `n` evenly spread indices of `count` save times, first and last included."""
    return sorted(set(np.linspace(0, count - 1, min(n, count)).round().astype(int).tolist()))


# ----------------------------------------------------------------------------- ODE


def ode(src: Source):
    t = src.array("time", ndim=1)
    observables = src.group("observables")
    series = {}
    for name, node in observables.items():
        value = src.values(node, f"observables/{name}", min_ndim=1)
        src.check_length(f"observables/{name}", value, len(t), "one value per save time")
        series[name] = value.reshape(len(t), -1)
    scalars = [n for n, v in series.items() if v.shape[1] == 1]
    phase = scalars if 2 <= len(scalars) <= 3 and len(series) == len(scalars) else []
    rows = len(series)
    fig = new_figure(11 if phase else 8, min(2.0 + 1.6 * rows, 12))
    grid = fig.add_gridspec(rows, 2 if phase else 1, width_ratios=[1.4, 1] if phase else None)
    log_time = len(t) > 2 and t[0] >= 0 and np.all(np.diff(t) > 0) and t[-1] > 0 and t[1] > 0 and t[-1] / t[1] > 1e3
    first = None
    for i, (name, value) in enumerate(series.items()):
        ax = fig.add_subplot(grid[i, 0], sharex=first)
        first = first or ax
        for j in range(value.shape[1]):
            label = name if value.shape[1] == 1 else f"{name}[{j}]"
            ax.plot(t, value[:, j], marker="o" if len(t) <= 12 else None, lw=1.2, label=label)
        ax.set_ylabel(pretty(name))
        if value.shape[1] > 1 and value.shape[1] <= 8:
            ax.legend(fontsize=7, loc="best")
        if log_time:
            ax.set_xscale("symlog", linthresh=float(t[1]))
        if i < rows - 1:
            ax.tick_params(labelbottom=False)
    first.figure.axes[-1].set_xlabel("time")
    if phase:
        if len(phase) == 3:
            ax = fig.add_subplot(grid[:, 1], projection="3d")
            ax.plot(*(series[n][:, 0] for n in phase), lw=0.6)
            ax.set_xlabel(pretty(phase[0]))
            ax.set_ylabel(pretty(phase[1]))
            ax.set_zlabel(pretty(phase[2]))
        else:
            ax = fig.add_subplot(grid[:, 1])
            x, y = (series[n][:, 0] for n in phase)
            ax.plot(x, y, lw=1.0)
            ax.plot(x[:1], y[:1], "o", color="k", ms=4, label="start")
            ax.set_xlabel(pretty(phase[0]))
            ax.set_ylabel(pretty(phase[1]))
            ax.legend(fontsize=7)
        ax.set_title("phase portrait", fontsize=9)
    return fig


def ensemble(src: Source):
    """An ensemble of stochastic paths ([T, paths] per observable): a few paths, the
    mean, and the band holding 90% of the paths (5% to 95%) at each save time."""
    t = src.array("time", ndim=1)
    observables = src.group("observables")
    rows = len(observables)
    fig = new_figure(8, min(2.0 + 1.8 * rows, 12))
    first = None
    for i, (name, node) in enumerate(observables.items()):
        value = src.values(node, f"observables/{name}", min_ndim=1)
        src.check_length(f"observables/{name}", value, len(t), "one value per save time")
        value = value.reshape(len(t), -1)
        ax = fig.add_subplot(rows, 1, i + 1, sharex=first)
        first = first or ax
        paths = value.shape[1]
        for j in range(min(paths, 20)):
            ax.plot(t, value[:, j], color="0.6", lw=0.5, alpha=0.6, label="paths" if j == 0 else None)
        if paths > 1:
            low, high = np.nanpercentile(value, [5, 95], axis=1)
            ax.fill_between(t, low, high, color="C0", alpha=0.2, lw=0, label="5-95%")
            ax.plot(t, np.nanmean(value, axis=1), color="C0", lw=1.8, label=f"mean of {paths} paths")
        ax.set_ylabel(pretty(name))
        ax.legend(fontsize=7, loc="best")
        if i < rows - 1:
            ax.tick_params(labelbottom=False)
    first.set_xlabel("time")
    return fig


# ----------------------------------------------------------------------------- PDE


def pde(src: Source):
    t = src.array("time", ndim=1)
    grid = src.group("grid")
    axes = [a for a in ("x", "y", "z") if a in grid]
    if not axes:
        raise DataError(src.path, "/grid", "expected datasets x (and y, z) with the grid coordinates")
    coords = [src.values(grid[a], f"grid/{a}", ndim=1) for a in axes]
    shape = tuple(len(c) for c in coords)
    fields, scalars = {}, {}
    for name, node in src.group("observables").items():
        value = src.values(node, f"observables/{name}", min_ndim=1)
        src.check_length(f"observables/{name}", value, len(t), "one value per save time")
        if value.shape[1:] == shape:
            fields[name] = value
        elif value.ndim == 1:
            scalars[name] = value
        else:
            raise DataError(src.path, f"/observables/{name}", f"expected shape [{len(t)}] or [{len(t)}, {', '.join(map(str, shape))}], found {value.shape}")
    if not fields and not scalars:
        raise DataError(src.path, "/observables", "no field or scalar observables to draw")
    rows = len(fields) + (1 if scalars else 0)
    one_d = len(shape) == 1
    cols = 2 if one_d else len(snapshot_indices(len(t)))
    fig = new_figure(4.2 * cols if not one_d else 11, min(3.2 * rows + 0.5, 14))
    gs = fig.add_gridspec(rows, cols)
    for row, (name, value) in enumerate(fields.items()):
        if one_d:
            _field_1d(fig, gs, row, name, t, coords[0], value)
        else:
            _field_nd(fig, gs, row, name, t, coords, value)
    if scalars:
        ax = fig.add_subplot(gs[rows - 1, :])
        for name, value in scalars.items():
            ax.plot(t, value, label=pretty(name))
        ax.set_xlabel("time")
        ax.legend(fontsize=8)
    return fig


def _field_1d(fig, gs, row, name, t, x, value):
    ax = fig.add_subplot(gs[row, 0])
    extent = [x[0], x[-1], t[0], t[-1]] if x[-1] > x[0] and t[-1] > t[0] else None
    finite = value[np.isfinite(value)]
    diverging = finite.size and finite.min() < 0 < finite.max()
    image = ax.imshow(value, origin="lower", aspect="auto", extent=extent, cmap="RdBu_r" if diverging else "viridis")
    fig.colorbar(image, ax=ax, label=pretty(name))
    ax.set_xlabel("x")
    ax.set_ylabel("time")
    ax.set_title(f"{pretty(name)}(x, t)", fontsize=9)
    ax = fig.add_subplot(gs[row, 1])
    colors = _colors(len(snapshot_indices(len(t))))
    for color, i in zip(colors, snapshot_indices(len(t))):
        ax.plot(x, value[i], color=color, lw=1.2, label=f"t = {t[i]:.4g}")
    ax.set_xlabel("x")
    ax.set_ylabel(pretty(name))
    ax.legend(fontsize=7)
    ax.set_title("snapshots", fontsize=9)


def _field_nd(fig, gs, row, name, t, coords, value):
    indices = snapshot_indices(len(t))
    middle = tuple(len(c) // 2 for c in coords[2:])  # 3D: the middle z slice
    for col, i in enumerate(indices):
        ax = fig.add_subplot(gs[row, col])
        frame = value[(i, slice(None), slice(None), *middle)]
        extent = [coords[0][0], coords[0][-1], coords[1][0], coords[1][-1]] if coords[0][-1] > coords[0][0] and coords[1][-1] > coords[1][0] else None
        image = ax.imshow(frame.T, origin="lower", extent=extent, cmap="viridis")
        ax.set_title(f"{pretty(name)}, t = {t[i]:.4g}" + (" (middle z)" if middle else ""), fontsize=9)
        ax.set_xlabel("x")
        if col == 0:
            ax.set_ylabel("y")
        fig.colorbar(image, ax=ax, shrink=0.8)


def _colors(n: int):
    from matplotlib import colormaps

    return colormaps["viridis"](np.linspace(0.0, 0.9, max(n, 1)))


# ----------------------------------------------------------------------------- MD


_ENERGIES = ("potential_energy", "kinetic_energy", "total_energy", "conserved_energy")


def md(src: Source):
    # An H5MD file may hold positions only (an empty or absent /observables).
    observables = src.lookup("observables") if src.has("observables") else {}
    observables = dict(observables) if isinstance(observables, dict) else {}
    series = {}
    for name, node in observables.items():
        if not isinstance(node, dict) or "value" not in node:
            continue
        value = src.values(node["value"], f"observables/{name}/value", min_ndim=1)
        if value.ndim != 1:
            continue
        time = src.values(node["time"], f"observables/{name}/time", ndim=1) if "time" in node else np.arange(len(value), dtype=float)
        src.check_length(f"observables/{name}/value", value, len(time), "one value per entry of its time")
        series[name] = (time, value)
    rdf = _rdf(src)
    panels = [p for p in ("energy", "temperature", "pressure") if (p == "energy" and any(n in series for n in _ENERGIES)) or p in series]
    others = [n for n in series if n not in _ENERGIES and n not in ("temperature", "pressure")]
    panels += others
    if not panels and rdf is None:
        raise DataError(src.path, "/observables", "no scalar observables and no particle positions to draw")
    count = len(panels) + 1
    cols = 2
    rows = -(-count // cols)
    fig = new_figure(11, 3.0 * rows + 0.5)
    gs = fig.add_gridspec(rows, cols)
    for k, panel in enumerate(panels):
        ax = fig.add_subplot(gs[k // cols, k % cols])
        if panel == "energy":
            for name in _ENERGIES:
                if name in series:
                    ax.plot(*series[name], label=pretty(name))
            ax.set_ylabel("energy")
            ax.legend(fontsize=7)
        else:
            ax.plot(*series[panel])
            ax.set_ylabel(pretty(panel))
        ax.set_xlabel("time")
    ax = fig.add_subplot(gs[len(panels) // cols, len(panels) % cols])
    if rdf is None:
        ax.text(0.5, 0.5, "g(r) needs positions in a periodic box", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    else:
        r, g, frames = rdf
        ax.plot(r, g)
        ax.axhline(1.0, color="0.6", lw=0.8, ls="--")
        ax.set_xlabel("r")
        ax.set_ylabel("g(r)")
        ax.set_title(f"radial distribution, last {frames} saved frame{'s' if frames > 1 else ''}", fontsize=9)
    return fig


def _rdf(src: Source):
    """g(r) averaged over the last saved frames, or None without a periodic box."""
    if not (src.has("particles/all/position/value") and src.has("particles/all/box")):
        return None
    box = src.record["particles/all/box"]
    if not isinstance(box, dict) or "edges" not in box:  # H5MD writes edges only for a periodic box
        return None
    position = src.array("particles/all/position/value", ndim=3)
    edges_node = box["edges"]
    edges = src.values(edges_node["value"] if isinstance(edges_node, dict) else edges_node, "particles/all/box/edges", min_ndim=1)
    edges = edges.reshape(-1, position.shape[2])[-1] if edges.ndim > 1 else edges
    if edges.shape != (position.shape[2],) or not np.all(edges > 0):
        raise DataError(src.path, "/particles/all/box/edges", f"expected {position.shape[2]} positive box lengths, found {edges}")
    n, dim = position.shape[1:]
    if n < 2 or not np.all(np.isfinite(position[-1])):
        return None
    frames = position[-min(_RDF_FRAMES, len(position)):]
    r_max = 0.5 * float(np.min(edges))
    bins = np.linspace(0.0, r_max, 101)
    counts = np.zeros(len(bins) - 1)
    refs = np.linspace(0, n - 1, min(n, _RDF_PARTICLES)).astype(int)
    block = max(1, 2_000_000 // (n * dim))
    for frame in frames:
        for start in range(0, len(refs), block):
            ref = refs[start : start + block]
            d = frame[None, :, :] - frame[ref, None, :]
            d -= edges * np.round(d / edges)
            r = np.sqrt(np.sum(d * d, axis=-1))
            r[np.arange(len(ref)), ref] = np.inf
            counts += np.histogram(r, bins=bins)[0]
    density = n / float(np.prod(edges))
    shell = (np.pi * np.diff(bins**2)) if dim == 2 else (4.0 / 3.0 * np.pi * np.diff(bins**3)) if dim == 3 else 2 * np.diff(bins)
    g = counts / (len(frames) * len(refs) * density * shell)
    return 0.5 * (bins[1:] + bins[:-1]), g, len(frames)

