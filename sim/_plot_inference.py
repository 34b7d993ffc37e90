"""Figures of fit, profile and posterior files."""

from __future__ import annotations

import numpy as np

from ._errors import DataError
from ._figure import Source, calendar_axis, log_axis, model_order, new_figure
from ._plot_meta import with_unit
from ._plot_run import _colors, snapshot_indices

_MAX_PANELS = 6
_MAX_TRACES = 10
_MAX_PAIRS = 10
# Draws a pair-plot panel shows at most (evenly spaced over the chains; divergent ones all).
_PAIR_POINTS = 1000


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
    names = [n for n in model_order(data, src.meta) if n in prediction][:_MAX_PANELS]
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
    shown = list(estimate.items())[:30]
    width = max((len(name) for name, _ in shown), default=1)
    rows = [
        f"{name:<{width}} {float(np.ravel(src.values(node, f'estimate/{name}'))[0]):11.5g}"
        for name, node in shown
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
    from matplotlib.ticker import MaxNLocator

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
    # (up to 3 at least: starts that all agree would otherwise fill the axis with noise,
    # and no more, so that they do not sit under an empty decade)
    top = float(np.nanmax(shown)) if finite.any() else 10.0
    ax.set_ylim(0.7, max(3.0, 2.0 * top))
    log_axis(ax, "y")
    # (starts are counted: whole-number ticks, and no more room than half a start a side)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.set_xlim(0.5, len(objective) + 0.5)
    ax.set_xlabel("start, sorted by final objective")
    ax.set_ylabel(f"objective - best + 1 (best {best:.6g})")
    ax.set_title(f"waterfall: {len(objective)} starts", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")


def profile(src: Source):
    """Profile likelihoods: the objective's rise over its optimum along each profiled
    parameter (in its unit; the number of points on each side of the optimum in the
    panel's title), the 95% threshold and the interval it bounds."""
    from matplotlib.ticker import MaxNLocator

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
        # (the walk's steps are adaptive, a few points a side: said, so that the straight
        # segments between them are not read as the profile's shape)
        optimum = (
            float(np.ravel(src.array(f"optimum/{name}"))[0])
            if src.has(f"optimum/{name}")
            else float(value[np.nanargmin(rise)])
        )
        sides = f"{int(np.sum(value < optimum))} + {int(np.sum(value > optimum))} points"
        ax.set_title(f"{name}: {verdict}, {sides}" if verdict else f"{name}: {sides}", fontsize=9)
        ax.set_xlabel(with_unit(name, src.meta.parameter_unit(name)))
        if ax.get_xscale() == "linear":
            ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
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
    observed = src.group("data/observables")
    for name in model_order(observed, src.meta):
        node = observed[name]
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
    """A sampled quantity's label: its name as the file and the summary table give it
    (`sigma.predator`, `initial.prey`), with the unit of a parameter or initial value."""
    return with_unit(name, meta.parameter_unit(name)) if unit else name
