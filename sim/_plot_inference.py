"""Figures of sweep, fit and posterior files."""

from __future__ import annotations

import json

import numpy as np

from ._errors import DataError
from ._plot import Source, _family, calendar_axis, log_axis, log_spaced, new_figure, pretty
from ._plot_meta import with_unit
from ._plot_run import _colors, snapshot_indices

_MAX_PANELS = 6
_MAX_TRACES = 10
_MAX_PAIRS = 10
# Draws a pair-plot panel shows at most (evenly spaced over the chains; divergent ones all).
_PAIR_POINTS = 1000
_MAX_LINES = 64
_PARTICLE_ARRAYS = ("position", "velocity", "force", "image")

# ----------------------------------------------------------------------------- sweep


def sweep(src: Source):
    meta = src.meta
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
    t = src.array("time", ndim=1) + meta.time_offset if src.has("time") else None
    logs = {name: _log_swept(meta, name, v) for name, v in values.items()}
    save = str(attrs.get("save", "full"))
    summaries, lines = {}, {}
    observables = src.group("observables")
    family = _family(src.record)
    particles = meta.particle_count(src.record)
    # Per-particle arrays of MD sweeps (positions, velocities) have no one number per run
    # worth a heatmap; the energies, temperature and pressure beside them do.
    drawn = [n for n in observables if n not in _PARTICLE_ARRAYS] or list(observables)
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
            if family is not None:
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
    `loguniform`), else by the spacing of its values (`sim._plot.log_spaced`)."""
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


# ----------------------------------------------------------------------------- fit


def fit(src: Source):
    if src.has("rdf/target"):
        return _rdf_fit(src)
    if not src.has("data") and src.has("objective"):
        return _problem_fit(src)
    data_t = src.array("data/time", ndim=1)
    data = src.group("data/observables")
    t = src.array("time", ndim=1)
    prediction = src.group("prediction")
    names = [n for n in data if n in prediction][:_MAX_PANELS]
    if not names:
        raise DataError(
            src.path,
            "/prediction",
            f"no prediction for the observed {', '.join(data) or 'observables'}",
        )
    fig = new_figure(11, 2.6 * max(len(names), 1.5) + 0.5)
    gs = fig.add_gridspec(len(names), 2, width_ratios=[1.75, 1.25])
    side = gs[:, 1].subgridspec(2, 1, height_ratios=[1.2, 1])
    for k, name in enumerate(names):
        ax = fig.add_subplot(gs[k, 0])
        observed = src.values(data[name], f"data/observables/{name}", min_ndim=1)
        predicted = src.values(prediction[name], f"prediction/{name}", min_ndim=1)
        src.check_length(
            f"data/observables/{name}", observed, len(data_t), "one value per observation time"
        )
        src.check_length(f"prediction/{name}", predicted, len(t), "one value per entry of /time")
        _data_and_curve(ax, src.meta, name, data_t, observed, t, predicted)
    ax = fig.add_subplot(side[0])
    if src.has("starts/objective") and src.has("objective"):
        _waterfall(ax, src, float(src.array("objective")))
    else:
        loss = src.array("loss_history", ndim=1)
        ax.plot(np.arange(len(loss)), loss, marker="o" if len(loss) < 30 else None, ms=3)
        if (
            np.isfinite(loss).any()
            and np.nanmin(loss) > 0
            and np.nanmax(loss) > 10 * np.nanmin(loss)
        ):
            log_axis(ax, "y")
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("iteration")
        ax.set_ylabel("loss")
        ax.set_title("loss history", fontsize=9)
    ax = fig.add_subplot(side[1])
    ax.set_axis_off()
    estimate = src.group("estimate")
    stderr = src.group("stderr") if src.has("stderr") else {}
    shown = list(estimate.items())[:12]
    width = max(len(name) for name, _ in shown)
    rows = []
    for name, node in shown:
        value = float(np.ravel(src.values(node, f"estimate/{name}"))[0])
        err = (
            f" ± {float(np.ravel(src.values(stderr[name], f'stderr/{name}'))[0]):.2g}"
            if name in stderr
            else ""
        )
        rows.append(
            f"{name:<{width}} {value:.5g}{err} {src.meta.parameter_unit(name).replace('*', '·')}"
        )
    ax.text(
        0.0,
        1.0,
        ("estimates ± standard error\n" if stderr else "estimates\n") + "\n".join(rows),
        va="top",
        ha="left",
        family="monospace",
        fontsize=8,
        transform=ax.transAxes,
    ).set_in_layout(False)
    return fig


def _rdf_fit(src: Source):
    """A fit to a target g(r) (`inference._fit_rdf`): the target, the first run's and the
    fitted g(r); the loss and the parameters run by run; the estimates."""
    from matplotlib.ticker import MaxNLocator

    r = src.array("rdf/r", ndim=1)
    curves = {}
    for name in ("target", "start", "fitted"):
        value = src.array(f"rdf/{name}", min_ndim=1)
        if value.shape[-1] != len(r):
            raise DataError(
                src.path,
                f"/rdf/{name}",
                f"expected {len(r)} bins (one per entry of /rdf/r), found {value.shape[-1]}",
            )
        curves[name] = value.reshape(-1, len(r))
    meta = src.meta
    fig = new_figure(11, 6.0)
    gs = fig.add_gridspec(2, 2, width_ratios=[1.6, 1])
    ax = fig.add_subplot(gs[:, 0])
    pairs = len(curves["target"])
    colors = _colors(pairs)
    for k in range(pairs):
        suffix = f" (pair {k})" if pairs > 1 else ""
        ax.plot(r, curves["target"][k], "o", ms=3, color=colors[k], label=f"target{suffix}")
        ax.plot(r, curves["start"][k], ":", lw=1.0, color=colors[k], label=f"first run{suffix}")
        ax.plot(r, curves["fitted"][k], "-", lw=1.4, color=colors[k], label=f"fitted{suffix}")
    ax.axhline(1.0, color="0.6", lw=0.8, ls="--")
    ax.set_xlabel(with_unit("r", (meta.md_units or {}).get("length", "")))
    ax.set_ylabel("g(r)")
    ax.legend(fontsize=7)
    ax.set_title("radial distribution: target and time averages of the runs", fontsize=9)
    ax = fig.add_subplot(gs[0, 1])
    loss = src.array("loss_history", ndim=1)
    runs = np.arange(1, len(loss) + 1)
    ax.plot(runs, loss, marker="o", ms=3)
    if np.isfinite(loss).any() and np.nanmin(loss) > 0 and np.nanmax(loss) > 10 * np.nanmin(loss):
        log_axis(ax, "y")
    ax.set_xlabel("run")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("loss of the run's g(r)")
    ax.set_title("loss, run by run (gradients by reweighting)", fontsize=9)
    ax = fig.add_subplot(gs[1, 1])
    estimate = src.group("estimate")
    for name in list(estimate)[:_MAX_TRACES]:
        if src.has(f"path/{name}"):
            path = src.array(f"path/{name}", ndim=1)
            value = float(np.ravel(src.values(estimate[name], f"estimate/{name}"))[0])
            (line,) = ax.plot(
                np.arange(1, len(path) + 1),
                path / value,
                marker="o",
                ms=3,
                label=f"{name} (fitted {value:.5g})",
            )
            aim = src.array(f"aim/{name}", ndim=1) if src.has(f"aim/{name}") else None
            if (
                aim is not None and len(aim) == len(path) and np.isfinite(aim[-1])
            ):  # (where the last step leads)
                ax.plot(
                    [len(path), len(path) + 1],
                    [path[-1] / value, aim[-1] / value],
                    ls="--",
                    lw=1.0,
                    marker="o",
                    ms=4,
                    mfc="none",
                    color=line.get_color(),
                )
    ax.axhline(1.0, color="0.6", lw=0.8, ls="--")
    ax.set_xlabel("run (open marker: where the last step leads)" if src.has("aim") else "run")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("parameter / estimate")
    ax.legend(fontsize=7)
    return fig


# Starts whose objectives are within this of the best reached the same optimum.
_SAME_OPTIMUM = 0.1


def _problem_fit(src: Source):
    """A fit of a PEtab problem: the waterfall plot of every start's final objective,
    sorted, and the best estimates."""
    best = float(src.array("objective"))
    fig = new_figure(11, 4.5)
    gs = fig.add_gridspec(1, 2, width_ratios=[2.2, 1])
    ax = fig.add_subplot(gs[0, 0])
    if src.has("starts/objective"):
        _waterfall(ax, src, best)
    else:
        ax.set_axis_off()
        ax.text(
            0.0,
            1.0,
            f"objective at the nominal parameters: {best:.10g}",
            va="top",
            transform=ax.transAxes,
        )
    ax = fig.add_subplot(gs[0, 1])
    ax.set_axis_off()
    estimate = src.group("estimate")
    rows = [
        f"{name:<24} {float(np.ravel(src.values(node, f'estimate/{name}'))[0]):11.5g}"
        for name, node in list(estimate.items())[:30]
    ]
    more = f"\n... and {len(estimate) - 30} more" if len(estimate) > 30 else ""
    ax.text(
        0.0,
        1.0,
        f"objective {best:.8g}\n\nestimates\n" + "\n".join(rows) + more,
        va="top",
        ha="left",
        family="monospace",
        fontsize=8,
        transform=ax.transAxes,
    )
    return fig


def _waterfall(ax, src: Source, best: float) -> None:
    """Every start's final objective, sorted (offset by the best, plus 1, on a log axis:
    the pyPESTO convention); the starts within `_SAME_OPTIMUM` of the best in blue."""
    objective = np.sort(np.ravel(src.array("starts/objective")))
    finite = np.isfinite(objective)
    rank = np.arange(1, len(objective) + 1)
    same = finite & (objective <= best + _SAME_OPTIMUM)
    shown = np.where(finite, objective - best + 1.0, np.nan)
    ax.plot(rank[finite], shown[finite], color="0.6", lw=0.8, zorder=1)
    ax.scatter(
        rank[same],
        shown[same],
        s=14,
        color="C0",
        zorder=2,
        label=f"{int(same.sum())} within {_SAME_OPTIMUM} of the best",
    )
    if (finite & ~same).any():
        ax.scatter(
            rank[finite & ~same],
            shown[finite & ~same],
            s=14,
            color="C1",
            zorder=2,
            label="other local optima",
        )
    if (~finite).any():
        ax.text(
            0.99,
            0.02,
            f"{int((~finite).sum())} start(s) failed",
            ha="right",
            va="bottom",
            transform=ax.transAxes,
            fontsize=8,
        )
    ax.set_yscale("log")
    # (at least a decade: starts that all agree would otherwise fill the axis with noise)
    top = float(np.nanmax(shown)) if finite.any() else 10.0
    ax.set_ylim(0.7, max(10.0, 2.0 * top))
    ax.set_xlabel("start, sorted by final objective")
    ax.set_ylabel(f"objective - best + 1 (best {best:.6g})")
    ax.set_title(f"waterfall: {len(objective)} starts", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")


def profile(src: Source):
    """Profile likelihoods: the objective's rise over its optimum along each profiled
    parameter, the 95% threshold and the interval it bounds."""
    threshold = float(src.record.attrs.get("threshold", 1.92))
    best = float(src.array("objective"))
    names = list(src.group("profile"))
    shown = names[:12]
    columns = min(len(shown), 3)
    rows = -(-len(shown) // columns)
    fig = new_figure(4.2 * columns, 3.2 * rows + 0.6)
    for k, name in enumerate(shown):
        ax = fig.add_subplot(rows, columns, k + 1)
        value = src.array(f"profile/{name}/value", ndim=1)
        rise = src.array(f"profile/{name}/objective", ndim=1) - best
        src.check_length(
            f"profile/{name}/objective", rise, len(value), "one value per profile point"
        )
        ax.plot(value, rise, marker="o", ms=3, color="C0")
        ax.axhline(threshold, color="C3", ls="--", lw=1, label="95% threshold")
        group = src.group(f"profile/{name}")
        lower, upper = (float(group[k]) if k in group else np.nan for k in ("lower", "upper"))
        for v in (lower, upper):
            if np.isfinite(v):
                ax.axvline(v, color="0.4", ls=":", lw=1)
        if np.all(value > 0) and value.max() / value.min() > 20:
            ax.set_xscale("log")
        verdict = str(group.get("identifiable", ""))
        ax.set_title(f"{name}: {verdict}" if verdict else name, fontsize=9)
        ax.set_xlabel(name)
        ax.set_ylabel("objective rise")
        ax.set_ylim(
            bottom=min(-0.1, float(np.nanmin(rise)) - 0.1),
            top=max(
                threshold * 1.5,
                float(np.nanmax(rise[rise < 10 * threshold]))
                if np.any(rise < 10 * threshold)
                else threshold * 1.5,
            ),
        )
        if k == 0:
            ax.legend(fontsize=8)
    return fig


def _data_and_curve(ax, meta, name, data_t, observed, t, predicted, band=None) -> None:
    """Scalar observables over time (real-world time where the config gives an offset),
    named as the data name them; fields as a few snapshots over the grid."""
    data_t, t = data_t + meta.time_offset, t + meta.time_offset
    model_name = f" ({name})" if meta.data_names.get(name, name) != name else ""
    if observed.ndim == 1:
        if band is not None:
            ax.fill_between(
                t, band[0], band[1], color="C0", alpha=0.25, lw=0, label="90% predictive"
            )
        ax.plot(
            t,
            predicted,
            color="C0",
            lw=1.5,
            label=("posterior median" if band is not None else "fit") + model_name,
        )
        ax.plot(data_t, observed, "o", color="k", ms=3.5, label="data")
        ax.set_xlabel(meta.time_label())
        ax.set_ylabel(meta.label(name, data_name=True))
        ax.legend(fontsize=7)
        calendar_axis(ax, meta)
        return
    obs = observed.reshape(len(data_t), -1)
    pred = predicted.reshape(len(t), -1)
    grid, axis = _grid_of(meta, obs.shape[1])
    for color, i in zip(
        _colors(len(snapshot_indices(len(data_t)))), snapshot_indices(len(data_t)), strict=False
    ):
        j = int(np.argmin(np.abs(t - data_t[i])))
        if band is not None:
            lo, hi = (b.reshape(len(t), -1)[j] for b in band)
            ax.fill_between(grid, lo, hi, color=color, alpha=0.2, lw=0)
        ax.plot(grid, pred[j], color=color, lw=1.4, label=f"t = {data_t[i]:.3g}")
        ax.plot(grid, obs[i], "o", color=color, ms=2.5)
    ax.set_xlabel(axis)
    ax.set_ylabel(meta.label(name, data_name=True))
    ax.legend(fontsize=7, title="lines: model, dots: data", title_fontsize=7)


def _grid_of(meta, points: int):
    """The x coordinates of a 1D field of `points` values from the config's `[grid]`
    (periodic: the left end included, the right one not; with `boundary`: both), else
    the grid index."""
    grid = meta.config.get("grid", {})
    try:
        (n,), ((low, high),) = grid["points"], grid["domain"]
        if int(n) == points and high > low:
            if "boundary" in grid:
                return np.linspace(low, high, points), "x"
            return low + (high - low) * np.arange(points) / points, "x"
    except (KeyError, TypeError, ValueError):
        pass
    return np.arange(points), "grid point"


# ----------------------------------------------------------------------------- posterior


def posterior(src: Source):
    """Traces and the pair plot of every scalar quantity sampled (a note on the figure
    names any left out, and why), and the posterior predictive bands over the data."""
    meta = src.meta
    draws, left_out = {}, []
    for name, node in src.group("posterior").items():
        value = src.values(node, f"posterior/{name}", min_ndim=2)
        if value.ndim == 2:
            draws[name] = value
        else:
            left_out.append(f"{name} (shape {tuple(value.shape[2:])} per draw)")
    if not draws:
        raise DataError(src.path, "/posterior", "no scalar quantity with draws [chain, draw]")
    shape = next(iter(draws.values())).shape
    for name, value in draws.items():
        if value.shape != shape:
            raise DataError(
                src.path,
                f"/posterior/{name}",
                f"expected shape {shape} like the other quantities, found {value.shape}",
            )
    diverging = (
        src.array("sample_stats/diverging", ndim=2)
        if src.has("sample_stats/diverging")
        else np.zeros(shape)
    )
    if diverging.shape != shape:
        diverging = np.zeros(shape)
    traced = list(draws)[:_MAX_TRACES]
    paired = list(draws)[:_MAX_PAIRS]
    if len(draws) > _MAX_PAIRS:
        left_out.append(
            f"{', '.join(list(draws)[_MAX_PAIRS:])} (only the first {_MAX_PAIRS} fit a pair plot)"
        )
    observed = _predictive(src)
    size = len(paired)
    fig = new_figure(
        17 if size > 5 else 16,
        min(max(1.3 * len(traced), 2.8 * max(len(observed), 1), 1.3 * size + 1.0, 7.0), 13.0) + 0.4,
    )
    left, middle, right = fig.subfigures(
        1, 3, width_ratios=[1.0, 1.6 if size > 5 else 1.4, 1.1] if observed else [1.0, 1.6, 0.05]
    )
    _traces(left, draws, traced, meta)
    _pairs(middle, draws, paired, diverging.astype(bool), meta)
    for k, (name, (data_t, obs, t, bands)) in enumerate(observed.items()):
        ax = right.add_subplot(len(observed), 1, k + 1)
        _data_and_curve(
            ax, meta, name, data_t, obs, t, bands["50%"], band=(bands["5%"], bands["95%"])
        )
    if observed:
        right.suptitle("posterior predictive", fontsize=9)
    if left_out:
        fig.text(
            0.5,
            0.002,
            "not drawn: " + "; ".join(left_out),
            ha="center",
            va="bottom",
            fontsize=8,
            color="crimson",
        )
    return fig


def _predictive(src: Source) -> dict:
    if not (src.has("predictive/time") and src.has("data/time") and src.has("data/observables")):
        return {}
    t = src.array("predictive/time", ndim=1)
    data_t = src.array("data/time", ndim=1)
    out = {}
    for name, node in src.group("data/observables").items():
        if not src.has(f"predictive/{name}"):
            continue
        obs = src.values(node, f"data/observables/{name}", min_ndim=1)
        src.check_length(
            f"data/observables/{name}", obs, len(data_t), "one value per observation time"
        )
        bands = {}
        for q in ("5%", "50%", "95%"):
            bands[q] = src.array(f"predictive/{name}/{q}", min_ndim=1)
            src.check_length(
                f"predictive/{name}/{q}",
                bands[q],
                len(t),
                "one value per entry of /predictive/time",
            )
        out[name] = (data_t, obs, t, bands)
    return dict(list(out.items())[:_MAX_PANELS])


def _traces(subfig, draws, names, meta) -> None:
    axes = subfig.subplots(len(names), 1, sharex=True, squeeze=False)[:, 0]
    for ax, name in zip(axes, names, strict=False):
        for c, chain in enumerate(draws[name]):
            ax.plot(chain, lw=0.6, alpha=0.8, label=f"chain {c}")
        ax.set_ylabel(_quantity(meta, name).replace(" (", "\n("), fontsize=8)
        ax.tick_params(labelsize=7)
    axes[-1].set_xlabel("draw")
    if draws[names[0]].shape[0] <= 8:
        axes[0].legend(fontsize=6, ncols=min(draws[names[0]].shape[0], 4), loc="upper right")
    subfig.suptitle("traces", fontsize=9)


def _pairs(subfig, draws, names, diverging, meta) -> None:
    from matplotlib.ticker import MaxNLocator, NullFormatter

    n = len(names)
    # Panels on and below the diagonal only: the places above it stay empty (axes turned
    # off there drew nothing and took no room, but creating them took half the time of
    # building the figure). Inner panels hide their tick labels by a formatter that
    # writes none: set_xticklabels([]) would build every tick at once, and the drawing
    # builds them again.
    grid = subfig.add_gridspec(n, n)
    flat = {name: draws[name].ravel() for name in names}
    div = diverging.ravel()
    shown = np.flatnonzero(~div)
    total = shown.size
    if total > _PAIR_POINTS:
        shown = shown[np.linspace(0, total - 1, _PAIR_POINTS).astype(int)]
    for i, yname in enumerate(names):
        for j, xname in enumerate(names[: i + 1]):
            ax = subfig.add_subplot(grid[i, j])
            ax.tick_params(labelsize=6)
            ax.xaxis.set_major_locator(MaxNLocator(3))
            ax.yaxis.set_major_locator(MaxNLocator(3))
            x = flat[xname]
            if i == j:
                finite = x[np.isfinite(x)]
                if len(finite):
                    ax.hist(finite, bins=min(30, max(5, len(finite) // 10)), color="C0", alpha=0.7)
                ax.set_yticks([])
            else:
                y = flat[yname]
                ax.scatter(x[shown], y[shown], s=2, alpha=0.4, color="C0", rasterized=True)
                if div.any():
                    ax.scatter(x[div], y[div], s=6, color="crimson", label="divergent")
            if i == n - 1:
                ax.set_xlabel(_quantity(meta, xname, unit=False), fontsize=7)
                ax.tick_params(axis="x", labelrotation=45)
            else:
                ax.xaxis.set_major_formatter(NullFormatter())
            if j == 0 and i > 0:
                ax.set_ylabel(_quantity(meta, yname, unit=False), fontsize=7)
            elif j > 0 and i != j:
                ax.yaxis.set_major_formatter(NullFormatter())
    thinned = f", {shown.size:,} of {total:,} draws shown" if shown.size < total else ""
    subfig.suptitle(
        "pair plot"
        + thinned
        + (f" ({int(div.sum())} divergent draws in red)" if div.any() else ""),
        fontsize=9,
    )


def _quantity(meta, name: str, unit: bool = True) -> str:
    """A sampled quantity's label: a noise scale by the data's name for its observable,
    a parameter or initial value (with its unit)."""
    head, _, rest = name.partition(".")
    if head == "sigma" and rest:
        return f"sigma {meta.data_names.get(rest, rest)}"
    return meta.parameter_label(name) if unit else name.replace(".", " ").replace("_", " ")
