"""Figures of run files: ODE time series, PDE fields, MD observables and g(r)."""

from __future__ import annotations

import numpy as np

from ._errors import DataError
from ._figure import (
    Source,
    calendar_axis,
    log_axis,
    log_time,
    model_order,
    new_figure,
    pretty,
    shared_norm,
)
from ._plot_meta import SILENT, with_unit

_SNAPSHOTS = 4
_RDF_FRAMES = 5
_RDF_PARTICLES = 1000


def snapshot_indices(count: int, n: int = _SNAPSHOTS) -> list[int]:
    """Up to `n` evenly spread indices of `count` save times, first and last included."""
    return sorted(set(np.linspace(0, count - 1, min(n, count)).round().astype(int).tolist()))


# ----------------------------------------------------------------------------- ODE


# A phase portrait needs a curve: with fewer saves it would join a handful of points.
_PHASE_MIN_SAVES = 50


# At most this many panels of observables over time; with more observables that vary,
# they share panels (at most `_CURVES` each, of like sizes, with a legend).
_PANELS = 6
_CURVES = 8


def constant(value: np.ndarray) -> bool:
    """Whether an observable takes one value all the time (to 1e-9 of its size): a
    parameter or compartment size an imported model reports, a state that never moves."""
    finite = value[np.isfinite(value)]
    return bool(
        len(finite) > 1 and np.ptp(finite) <= 1e-9 * max(float(np.max(np.abs(finite))), 1e-300)
    )


def panel_groups(series: dict[str, np.ndarray]) -> tuple[list[list[str]], list[str]]:
    """The observables of each panel, and those left out: one panel each when there are
    at most `_PANELS`, else at most `_PANELS` panels of at most `_CURVES` observables of
    like size each (by the decade of their largest magnitude: of the splits into runs of
    the observables sorted by size, the one whose panels' spans of decades, each times
    its number of curves, add up to the least), each panel in the model's order, the
    largest first."""
    names = list(series)
    if len(names) <= _PANELS:
        return [[n] for n in names], []
    order = {n: k for k, n in enumerate(names)}

    def decade(v):
        peak = np.nanmax(np.abs(v)) if np.isfinite(v).any() else 0.0
        return float(np.log10(peak)) if peak > 0 else -300.0

    size = {n: decade(v) for n, v in series.items()}
    by_size = sorted(names, key=lambda n: (-size[n], order[n]))
    kept, left_out = by_size[: _PANELS * _CURVES], by_size[_PANELS * _CURVES :]
    s = [size[n] for n in kept]
    n = len(kept)
    # best[p][k]: the least cost of the first k observables in p panels, and where the
    # last panel starts
    best = [[(np.inf, 0)] * (n + 1) for _ in range(_PANELS + 1)]
    best[0][0] = (0.0, 0)
    for p in range(1, _PANELS + 1):
        for k in range(1, n + 1):
            for start in range(max(0, k - _CURVES), k):
                cost = best[p - 1][start][0] + (s[start] - s[k - 1]) * (k - start)
                if cost < best[p][k][0] - 1e-12:
                    best[p][k] = (cost, start)
    panels = min(range(1, _PANELS + 1), key=lambda p: (best[p][n][0], -p))
    groups, k = [], n
    for p in range(panels, 0, -1):
        start = best[p][k][1]
        groups.append(kept[start:k])
        k = start
    return [sorted(g, key=order.get) for g in reversed(groups)], sorted(left_out, key=order.get)


def _note(fig, text: str) -> None:
    """A line under the panels, wrapped to the figure's width."""
    import textwrap

    width = max(40, int(fig.get_figwidth() * 72 / (8 * 0.6)))
    # ("name = value" stays on one line: its spaces are NUL while wrapping)
    wrapped = textwrap.fill(text.replace(" = ", "\0=\0"), width, break_on_hyphens=False)
    fig.supxlabel(wrapped.replace("\0", " "), fontsize=8, color="0.35", ha="center")


def ode(src: Source, *, discrete: bool = False):
    """The observables over time in the model's order (in the model's units): each in its
    own panel, or, with more than `_PANELS` of them, several of like size to a panel;
    observables that stay constant (an imported model's parameters and compartments) are
    named under the panels, not drawn. Beside them, the phase portrait of two or three
    scalar observables when there are enough saves to draw a curve and the times are not
    log-spaced.

    `discrete` (a map's iterates): each saved step a point, joined by a thin line over
    the step count for the eye, and the phase portrait the points alone (a map has no
    path between its iterates)."""
    meta = src.meta
    t = src.array("time", ndim=1)
    observables = src.group("observables")
    series = {}
    for name in model_order(observables, meta):
        node = observables[name]
        value = src.values(node, f"observables/{name}", min_ndim=1)
        src.check_length(f"observables/{name}", value, len(t), "one value per save time")
        series[name] = value.reshape(len(t), -1)
    fixed = {n: float(v[np.isfinite(v)][0]) for n, v in series.items() if constant(v)}
    if len(fixed) < len(series):
        series = {n: v for n, v in series.items() if n not in fixed}
    else:
        fixed = {}  # (nothing varies: draw it all)
    groups, left_out = panel_groups(series)
    logarithmic = log_time(t)
    scalars = [n for n, v in series.items() if v.shape[1] == 1]
    phase = (
        scalars
        if 2 <= len(scalars) <= 3
        and len(series) == len(scalars)
        and len(t) >= _PHASE_MIN_SAVES
        and not logarithmic
        else []
    )
    rows = len(groups)
    shared = any(len(g) > 1 for g in groups)
    fig = new_figure(11 if phase else 9 if shared else 8, min(2.0 + 1.6 * rows, 12))
    grid = fig.add_gridspec(rows, 2 if phase else 1, width_ratios=[1.4, 1] if phase else None)
    shown_t = t + meta.time_offset
    first = None
    for i, names in enumerate(groups):
        ax = fig.add_subplot(grid[i, 0], sharex=first)
        first = first or ax
        for name in names:
            value = series[name]
            for j in range(value.shape[1]):
                # (in a legend, by the name the file gives it: an imported model's ids)
                label = with_unit(name, meta.unit_of(name)) if len(names) > 1 else name
                ax.plot(
                    shown_t,
                    value[:, j],
                    marker="o" if len(t) <= 12 or discrete else None,
                    ms=(3.5 if len(t) <= 100 else 2.0) if discrete else 3.5,
                    lw=0.5 if discrete else 1.2,
                    label=label if value.shape[1] == 1 else f"{label}[{j}]",
                )
        if len(names) > 1:
            units = {meta.unit_of(n) for n in names}  # (the legend names the curves)
            unit = units.pop() if len(units) == 1 else ""
            ax.set_ylabel("" if unit.strip() in SILENT else unit.replace("*", "·"))
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        else:  # (beside legends of the file's names, by the same name)
            ax.set_ylabel(
                with_unit(names[0], meta.unit_of(names[0])) if shared else meta.label(names[0])
            )
            if 1 < series[names[0]].shape[1] <= 8:
                ax.legend(fontsize=7, loc="best")
        if i < rows - 1:
            ax.tick_params(labelbottom=False)
    if logarithmic:
        log_axis(first, "x", symlog_threshold=float(t[t > 0][0]) if t[0] <= 0 else None)
    fig.axes[rows - 1].set_xlabel("step" if discrete else meta.time_label())
    if discrete:
        from matplotlib.ticker import MaxNLocator

        first.xaxis.set_major_locator(MaxNLocator(integer=True))
    calendar_axis(first, meta)
    _left_out_note(fig, fixed, left_out)
    if phase:
        _phase_portrait(fig, grid, series, phase, meta, discrete)
    return fig


def _phase_portrait(fig, grid, series: dict, phase: list[str], meta, discrete: bool) -> None:
    """The phase portrait of two or three scalar observables in the right column of `grid`
    (a map's iterates as points alone)."""
    style = {"ls": "none", "marker": "o", "ms": 1.5} if discrete else {"lw": 0.6}
    if len(phase) == 3:
        ax = fig.add_subplot(grid[:, 1], projection="3d")
        ax.plot(*(series[n][:, 0] for n in phase), **style)
        ax.set_xlabel(meta.label(phase[0]))
        ax.set_ylabel(meta.label(phase[1]))
        ax.set_zlabel(meta.label(phase[2]))
    else:
        ax = fig.add_subplot(grid[:, 1])
        x, y = (series[n][:, 0] for n in phase)
        ax.plot(x, y, **(style if discrete else {"lw": 1.0}))
        ax.plot(x[:1], y[:1], "o", color="k", ms=4, label="start")
        ax.set_xlabel(meta.label(phase[0]))
        ax.set_ylabel(meta.label(phase[1]))
        ax.legend(fontsize=7)
    ax.set_title("phase portrait", fontsize=9)


def _left_out_note(fig, fixed: dict[str, float], left_out: list[str]) -> None:
    """Name under the panels the constant observables and those beyond the panels."""
    notes = []
    if fixed:
        notes.append(
            "constant, not drawn: " + ", ".join(f"{n} = {v:.4g}" for n, v in fixed.items())
        )
    if left_out:
        notes.append(f"not drawn ({_PANELS} panels of {_CURVES} at most): " + ", ".join(left_out))
    if notes:
        _note(fig, "; ".join(notes))


def ensemble(src: Source):
    """An ensemble of stochastic paths ([T, paths] per observable): a few paths, the
    mean, and the band holding 90% of the paths (5% to 95%) at each save time."""
    meta = src.meta
    t = src.array("time", ndim=1)
    observables = src.group("observables")
    rows = len(observables)
    fig = new_figure(8, min(2.0 + 1.8 * rows, 12))
    first = None
    shown_t = t + meta.time_offset
    for i, name in enumerate(model_order(observables, meta)):
        value = src.values(observables[name], f"observables/{name}", min_ndim=1)
        src.check_length(f"observables/{name}", value, len(t), "one value per save time")
        value = value.reshape(len(t), -1)
        ax = fig.add_subplot(rows, 1, i + 1, sharex=first)
        first = first or ax
        paths = value.shape[1]
        for j in range(min(paths, 20)):
            ax.plot(
                shown_t,
                value[:, j],
                color="0.6",
                lw=0.5,
                alpha=0.6,
                label="paths" if j == 0 else None,
            )
        if paths > 1:
            low, high = np.nanpercentile(value, [5, 95], axis=1)
            ax.fill_between(shown_t, low, high, color="C0", alpha=0.2, lw=0, label="5-95%")
            ax.plot(
                shown_t,
                np.nanmean(value, axis=1),
                color="C0",
                lw=1.8,
                label=f"mean of {paths} paths",
            )
        ax.set_ylabel(meta.label(name))
        ax.legend(fontsize=7, loc="best")
        if i < rows - 1:
            ax.tick_params(labelbottom=False)
    if log_time(t):
        log_axis(first, "x", symlog_threshold=float(t[t > 0][0]) if t[0] <= 0 else None)
    fig.axes[-1].set_xlabel(meta.time_label())
    return fig


# ----------------------------------------------------------------------------- PDE


def pde(src: Source):
    """1D fields: a space-time image and snapshot lines; 2D and 3D fields: snapshots on one
    colour scale per field with one labelled colour bar; scalar observables (energies,
    mass) each in a panel of their own below."""
    meta = src.meta
    t = src.array("time", ndim=1)
    grid = src.group("grid")
    axes = [a for a in ("x", "y", "z") if a in grid]
    if not axes:
        raise DataError(
            src.path, "/grid", "expected datasets x (and y, z) with the grid coordinates"
        )
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
            raise DataError(
                src.path,
                f"/observables/{name}",
                f"expected shape [{len(t)}] or [{len(t)}, {', '.join(map(str, shape))}], found "
                f"{value.shape}",
            )
    if not fields and not scalars:
        raise DataError(src.path, "/observables", "no field or scalar observables to draw")
    one_d = len(shape) == 1
    cols = 2 if one_d else len(snapshot_indices(len(t)))
    scalar_rows = -(-len(scalars) // cols)
    heights = [3.2] * len(fields) + [2.4] * scalar_rows
    fig = new_figure(4.2 * cols if not one_d else 11, min(sum(heights) + 0.6, 14))
    gs = fig.add_gridspec(len(heights), cols, height_ratios=heights)
    t = t + meta.time_offset
    for row, (name, value) in enumerate(fields.items()):
        if one_d:
            _field_1d(fig, gs, row, name, t, coords[0], value, meta)
        else:
            _field_nd(fig, gs, row, name, t, coords, value, meta)
    for k, (name, value) in enumerate(scalars.items()):
        ax = fig.add_subplot(gs[len(fields) + k // cols, k % cols])
        ax.plot(t, value, marker="o" if len(t) <= 12 else None, ms=3, lw=1.2)
        ax.set_xlabel(meta.time_label())
        ax.set_ylabel(meta.label(name))
        _note_if_conserved(
            ax,
            value,
            max(
                (float(np.nanmax(np.abs(f))) for f in fields.values() if np.isfinite(f).any()),
                default=0.0,
            ),
        )
    return fig


def _note_if_conserved(ax, value, reference: float) -> None:
    """A scalar that changes by less than 1e-9 of its size (or of the fields' size, for
    one that stays at 0) is drawn flat at its mean, its change written on the panel: a
    line of round-off noise would read as dynamics, a bare flat line as nothing."""
    finite = value[np.isfinite(value)]
    if len(finite) < 2:
        return
    scale = max(float(np.max(np.abs(finite))), reference)
    change = float(np.ptp(finite))
    if scale > 0 and change <= 1e-9 * scale:
        middle = float(np.mean(finite))
        ax.lines[-1].set_ydata(np.where(np.isfinite(value), middle, np.nan))
        ax.set_ylim(middle - 0.1 * scale, middle + 0.1 * scale)
        ax.text(
            0.02,
            0.06,
            f"conserved: varies by {change:.1e}",
            transform=ax.transAxes,
            fontsize=8,
            color="0.3",
        )


def _field_1d(fig, gs, row, name, t, x, value, meta):
    ax = fig.add_subplot(gs[row, 0])
    extent = [x[0], x[-1], t[0], t[-1]] if x[-1] > x[0] and t[-1] > t[0] else None
    norm, cmap = shared_norm([value])
    image = ax.imshow(
        np.ma.masked_invalid(value),
        origin="lower",
        aspect="auto",
        extent=extent,
        cmap=cmap,
        norm=norm,
        interpolation="nearest",
    )
    # (the title names the field and its unit; the snapshots' axis beside the colour bar
    # names it again, so the bar carries no label of its own)
    fig.colorbar(image, ax=ax)
    ax.set_xlabel("x")
    ax.set_ylabel(meta.time_label())
    ax.set_title(with_unit(f"{pretty(name)}(x, t)", meta.unit_of(name)), fontsize=9)
    ax = fig.add_subplot(gs[row, 1])
    colors = _colors(len(snapshot_indices(len(t))))
    for color, i in zip(colors, snapshot_indices(len(t)), strict=False):
        ax.plot(x, value[i], color=color, lw=1.2, label=f"t = {t[i]:.4g}")
    ax.set_xlabel("x")
    ax.set_ylabel(meta.label(name))
    ax.legend(fontsize=7)
    ax.set_title("snapshots", fontsize=9)


def _field_nd(fig, gs, row, name, t, coords, value, meta):
    indices = snapshot_indices(len(t))
    middle = tuple(len(c) // 2 for c in coords[2:])  # 3D: the middle z slice
    frames = [value[(i, slice(None), slice(None), *middle)] for i in indices]
    norm, cmap = shared_norm(frames)
    extent = (
        [coords[0][0], coords[0][-1], coords[1][0], coords[1][-1]]
        if coords[0][-1] > coords[0][0] and coords[1][-1] > coords[1][0]
        else None
    )
    axes = []
    for col, (i, frame) in enumerate(zip(indices, frames, strict=False)):
        ax = fig.add_subplot(gs[row, col])
        image = ax.imshow(
            np.ma.masked_invalid(frame.T), origin="lower", extent=extent, cmap=cmap, norm=norm
        )
        ax.set_title(f"t = {t[i]:.4g}" + (" (middle z)" if middle else ""), fontsize=9)
        ax.set_xlabel("x")
        if col == 0:
            ax.set_ylabel("y")
        else:
            ax.tick_params(labelleft=False)
        axes.append(ax)
    fig.colorbar(image, ax=axes, shrink=0.85, label=meta.label(name))


def _colors(n: int):
    from matplotlib import colormaps

    return colormaps["viridis"](np.linspace(0.0, 0.9, max(n, 1)))


# ----------------------------------------------------------------------------- MD


_ENERGIES = ("potential_energy", "kinetic_energy", "total_energy", "conserved_energy")


def md(src: Source):
    """Energies per particle, temperature and pressure over time in the run's unit system
    (reduced Lennard-Jones units unless the config says otherwise), and g(r)."""
    meta = src.meta
    units = meta.md_units or {
        "energy": "",
        "temperature": "",
        "pressure": "",
        "length": "",
        "time": "",
    }
    series, particles = _md_series(src)
    rdf = _stored_rdf(src) or _rdf(src)
    panels = [
        p
        for p in ("energy", "temperature", "pressure")
        if (p == "energy" and any(n in series for n in _ENERGIES)) or p in series
    ]
    others = [n for n in series if n not in _ENERGIES and n not in ("temperature", "pressure")]
    # (a quantity the run holds fixed, such as the volume and density at constant volume,
    # is named under the panels rather than drawn as a flat line)
    fixed = [n for n in others if constant(series[n][1])]
    panels += [n for n in others if n not in fixed]
    dim = _dimension(src)
    units = {**units, **_per_dimension(units, dim)}
    if not panels and rdf is None:
        raise DataError(
            src.path, "/observables", "no scalar observables and no particle positions to draw"
        )
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
                    ax.plot(*series[name], label=pretty(name).replace(" energy", ""))
            ax.set_ylabel(
                with_unit("energy per particle" if particles else "energy (total)", units["energy"])
            )
            ax.legend(fontsize=7, ncols=2)
        else:
            ax.plot(*series[panel])
            ax.set_ylabel(with_unit(pretty(panel), units.get(panel, "")))
            target = (
                meta.config.get("solver", {}).get("temperature")
                if panel == "temperature" and isinstance(meta.config.get("solver"), dict)
                else None
            )
            if isinstance(target, (int, float)) and not isinstance(target, bool):
                ax.axhline(
                    float(target), color="0.5", ls="--", lw=0.8, label=f"thermostat {target:g}"
                )
                ax.legend(fontsize=7)
        ax.set_xlabel(with_unit("time", units["time"]))
    ax = fig.add_subplot(gs[len(panels) // cols, len(panels) % cols])
    if rdf is None:
        ax.text(
            0.5,
            0.5,
            "g(r) needs positions in a periodic box",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        ax.set_axis_off()
    else:
        r, curves, title = rdf
        for label, g in curves:
            ax.plot(r, g, label=label)
        if len(curves) > 1:
            ax.legend(fontsize=7)
        ax.axhline(1.0, color="0.6", lw=0.8, ls="--")
        ax.set_xlabel(with_unit("r", units["length"]))
        ax.set_ylabel("g(r)")
        ax.set_title(title, fontsize=9)
    if fixed:
        values = (f"{pretty(n)} = {series[n][1][0]:.4g} {units.get(n, '')}".strip() for n in fixed)
        _note(fig, "constant in this run, not drawn: " + ", ".join(values))
    return fig


def _dimension(src: Source) -> int:
    """The number of space dimensions of an MD file (3 unless its positions say)."""
    if src.has("particles/all/position/value"):
        shape = np.shape(src.lookup("particles/all/position/value"))
        if len(shape) == 3:
            return int(shape[2])
    return 3


def _per_dimension(units: dict, dim: int) -> dict:
    """Volume and number density in a space of `dim` dimensions: length^dim and its
    inverse (an area in 2D)."""
    length = units.get("length", "")
    if not length or dim == 3:
        return {}
    power = {1: "", 2: "²"}.get(dim, f"^{dim}")
    inverse = {1: "⁻¹", 2: "⁻²"}.get(dim, f"^-{dim}")
    return {"volume": f"{length}{power}", "density": f"{length}{inverse}"}


def _md_series(src: Source) -> tuple[dict, int | None]:
    """The scalar observables of an MD run file, each (time, value) (energies per
    particle), and the number of particles (None: no positions)."""
    # An H5MD file may hold positions only (an empty or absent /observables).
    observables = src.lookup("observables") if src.has("observables") else {}
    observables = dict(observables) if isinstance(observables, dict) else {}
    particles = (
        src.lookup("particles/all/position/value").shape[1]
        if src.has("particles/all/position/value")
        and np.ndim(src.lookup("particles/all/position/value")) == 3
        else None
    )
    series = {}
    for name, node in observables.items():
        if not isinstance(node, dict) or "value" not in node or name == "rdf":
            continue
        value = src.values(node["value"], f"observables/{name}/value", min_ndim=1)
        if value.ndim != 1:
            continue
        time = (
            src.values(node["time"], f"observables/{name}/time", ndim=1)
            if "time" in node
            else np.arange(len(value), dtype=float)
        )
        src.check_length(
            f"observables/{name}/value", value, len(time), "one value per entry of its time"
        )
        if name in _ENERGIES and particles:
            value = value / particles
        series[name] = (time, value)
    return series, particles


def _stored_rdf(src: Source):
    """The run's time-averaged g(r) (`/observables/rdf`, `sim.families.md._rdf`), or None."""
    if not (src.has("observables/rdf/r") and src.has("observables/rdf/value")):
        return None
    r = src.array("observables/rdf/r", ndim=1)
    value = src.array("observables/rdf/value", min_ndim=2)
    if value.shape[-1] != len(r):
        raise DataError(
            src.path,
            "/observables/rdf/value",
            f"expected {len(r)} bins (one per entry of /observables/rdf/r), found "
            f"{value.shape[-1]}",
        )
    rows = value[-1].reshape(-1, len(r))
    # (pairs of species in the order (0, 0), (0, 1), ..., (1, 1), ...: S (S + 1) / 2 rows)
    species = int(round((np.sqrt(8 * len(rows) + 1) - 1) / 2))
    labels = (
        ["g(r)"]
        if len(rows) == 1
        else [f"species {a}-{b}" for a in range(species) for b in range(a, species)]
    )
    averaged = np.any(np.isfinite(value.reshape(len(value), -1)), axis=1)
    since = ""
    if src.has("observables/rdf/time") and np.any(averaged):
        t = src.array("observables/rdf/time", ndim=1)
        since = f" from t = {float(t[int(np.argmax(averaged))]):g}" if len(t) == len(value) else ""
    return r, list(zip(labels, rows, strict=False)), f"radial distribution, time average{since}"


def _rdf(src: Source):
    """g(r) averaged over the last saved frames, or None without a periodic box."""
    if not (src.has("particles/all/position/value") and src.has("particles/all/box")):
        return None
    box = src.record["particles/all/box"]
    if not isinstance(box, dict) or "edges" not in box:  # H5MD writes edges only for a periodic box
        return None
    position = src.array("particles/all/position/value", ndim=3)
    edges_node = box["edges"]
    edges = src.values(
        edges_node["value"] if isinstance(edges_node, dict) else edges_node,
        "particles/all/box/edges",
        min_ndim=1,
    )
    edges = edges.reshape(-1, position.shape[2])[-1] if edges.ndim > 1 else edges
    if edges.shape != (position.shape[2],) or not np.all(edges > 0):
        raise DataError(
            src.path,
            "/particles/all/box/edges",
            f"expected {position.shape[2]} positive box lengths, found {edges}",
        )
    n, dim = position.shape[1:]
    if n < 2 or not np.all(np.isfinite(position[-1])):
        return None
    frames = position[-min(_RDF_FRAMES, len(position)) :]
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
    shell = (
        (np.pi * np.diff(bins**2))
        if dim == 2
        else (4.0 / 3.0 * np.pi * np.diff(bins**3))
        if dim == 3
        else 2 * np.diff(bins)
    )
    g = counts / (len(frames) * len(refs) * density * shell)
    return (
        0.5 * (bins[1:] + bins[:-1]),
        [("g(r)", g)],
        f"radial distribution, last {len(frames)} saved frame{'s' if len(frames) > 1 else ''}",
    )
