"""Profile likelihoods: for one parameter at a time, the negative log-likelihood
minimised over all the others, traced outwards from the optimum in both directions until
it rises by the chi-square threshold (95%, one degree of freedom: 3.841 / 2 = 1.921 in
negative log-likelihood) or the parameter reaches its bound.

Each side of each profile is one walker: it moves the parameter by an adaptive step
(halved when the objective jumps by more than half the threshold, doubled while it
barely moves), re-optimises the other parameters by L-BFGS-B from where the previous
point left them, and stops at the threshold, at a bound or after `max_points` points.
All walkers run together, their evaluations batched by `run_batched`. The interval ends
are interpolated linearly where the profile crosses the threshold; a side that never
crosses it leaves the interval open there (the parameter is not identifiable on that
side; on both sides: not identifiable).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.stats import chi2

from sim.core import Result, family_of, write_group, write_root_attrs
from solvers import checks_as_nan

from ._lbfgsb import _lbfgsb, run_batched
from ._result_text import number, short_repr

THRESHOLD = float(chi2.ppf(0.95, 1) / 2)  # 1.9207...
# A config's free quantities have no bounds on their unconstrained scale: profiles are
# traced this far from the optimum at most (a factor e^10 = 22,000 for a positive one).
REACH = 10.0
# Each re-optimisation along a profile moves the others within boxes of this half-width
# (on their scales), re-centred until the optimum is inside one.
TRUST = 1.0


@dataclasses.dataclass
class Walk:
    """One side of a profile: the parameter's values on the optimiser's scale, the
    objective at each and the point reached; why it stopped (`threshold`, `bound`,
    `max_points`, `failed`)."""

    values: list[float]
    objective: list[float]
    points: list[np.ndarray]
    stop: str


def walk(
    ask,
    i: int,
    direction: int,
    x_opt,
    f_opt: float,
    lower,
    upper,
    *,
    threshold: float = THRESHOLD,
    max_points: int = 40,
    max_steps: int = 500,
    reach: float = np.inf,
) -> Walk:
    """Trace the profile of coordinate `i` from the optimum `x_opt` (objective `f_opt`)
    towards `direction` (+1 or -1), at most `reach` away; `ask(x)` gives the objective
    and its gradient."""
    lower, upper = np.array(lower, dtype=float), np.array(upper, dtype=float)
    lower[i], upper[i] = max(lower[i], x_opt[i] - reach), min(upper[i], x_opt[i] + reach)
    span = upper[i] - lower[i]
    first = min(0.05 * span, 0.1) if np.isfinite(span) else 0.1
    h, smallest, largest = first, first / 64, (0.25 * span if np.isfinite(span) else 2.0)
    x, f_prev = np.array(x_opt, dtype=float), f_opt
    out = Walk([], [], [], "max_points")
    while len(out.values) < max_points:
        target = x[i] + direction * h
        at_bound = not (lower[i] < target < upper[i])
        target = float(np.clip(target, lower[i], upper[i]))
        if target == x[i]:
            out.stop = "bound"
            break
        start = x.copy()
        start[i] = target
        point, f, ok = _lbfgsb(ask, start, lower, upper, max_steps, fixed={i: target}, trust=TRUST)
        if not ok and f >= 1e300:  # (a failed solve: a shorter step)
            if h <= smallest:
                out.stop = "failed"
                break
            h /= 2
            continue
        if f - f_prev > 0.5 * threshold and h > smallest:
            h /= 2  # (too far in one step: come closer first)
            continue
        out.values.append(target)
        out.objective.append(f)
        out.points.append(point)
        x, f_prev = point, f
        if f - f_opt > threshold:
            out.stop = "threshold"
            break
        if at_bound:
            out.stop = "bound"
            break
        if f - (out.objective[-2] if len(out.objective) > 1 else f_opt) < 0.1 * threshold:
            h = min(2 * h, largest)
    return out


def crossing(
    values, objective, value_opt: float, f_opt: float, threshold: float = THRESHOLD
) -> float:
    """Where a walk (ordered from the optimum outwards) first rises past the threshold,
    linearly interpolated; NaN if it never does."""
    previous_v, previous_f = value_opt, f_opt
    for v, f in zip(values, objective, strict=False):
        if f - f_opt > threshold:
            w = (f_opt + threshold - previous_f) / (f - previous_f)
            return float(previous_v + w * (v - previous_v))
        previous_v, previous_f = v, f
    return float("nan")


@dataclasses.dataclass
class ProfileResult(Result):
    """Profile likelihoods around an optimum.

    Attributes:
        source: the config or PEtab problem.
        model: the model's name.
        names: every estimated quantity; `optimum` its value at the optimum
            (natural/linear scale), `objective` the negative log-likelihood there.
        profiles: name -> dict with `value` [n] (natural scale, ascending, the optimum
            included), `objective` [n], `estimate` (name -> [n]) and the interval:
            `lower`, `upper` (NaN = open: the profile stays under the threshold up to
            the bound or as far as it was traced), `stop_lower`, `stop_upper`.
        threshold: the rise of the objective that bounds the 95% interval.
    """

    source: str
    model: str
    names: list[str]
    optimum: dict[str, float]
    objective: float
    profiles: dict[str, dict[str, Any]]
    threshold: float = THRESHOLD

    def __repr__(self) -> str:
        def bound(value) -> str:
            return number(value) if np.isfinite(value) else "open"

        return short_repr(
            "ProfileResult",
            [f"model={self.model!r}", f"objective={number(self.objective)}"],
            {
                n: f"{number(self.optimum[n])} in [{bound(p['lower'])}, {bound(p['upper'])}]"
                for n, p in self.profiles.items()
            },
            [],
        )

    def identifiable(self, name: str) -> str:
        p = self.profiles[name]
        closed = [np.isfinite(p["lower"]), np.isfinite(p["upper"])]
        if all(closed):
            return "identifiable"
        if not any(closed):
            return "not identifiable"
        return "not identifiable " + ("below" if not closed[0] else "above")

    def table(self) -> list[tuple[str, float, float, float, str]]:
        """(name, estimate, lower, upper, verdict) per profiled parameter."""
        return [
            (n, self.optimum[n], p["lower"], p["upper"], self.identifiable(n))
            for n, p in self.profiles.items()
        ]

    def write(self, f) -> None:
        write_root_attrs(f, format="simjax.profile", model=self.model, config=self.source)
        f.attrs["threshold"] = self.threshold
        f["objective"] = self.objective
        write_group(f, "optimum", self.optimum)
        group = f.require_group("profile")
        for name, p in self.profiles.items():
            write_group(
                group,
                name,
                {
                    "value": p["value"],
                    "objective": p["objective"],
                    "lower": p["lower"],
                    "upper": p["upper"],
                },
            )
            for key, text in (
                ("stop_lower", p["stop_lower"]),
                ("stop_upper", p["stop_upper"]),
                ("identifiable", self.identifiable(name)),
            ):
                group[name][key] = text
            write_group(group[name], "estimate", p["estimate"])


def profile(
    value_and_grad: Callable,
    x_opt,
    f_opt: float,
    lower,
    upper,
    names: list[str],
    chosen: list[str],
    to_natural: Callable[[np.ndarray], np.ndarray],
    *,
    max_points: int = 40,
    max_steps: int = 500,
    reach: float = np.inf,
) -> dict[str, dict[str, Any]]:
    """The profiles of the `chosen` names (of `names`, the coordinates of x) around the
    optimum `x_opt`; `to_natural` maps a point to natural values (same order). A
    profiled coordinate moves at most `reach` from the optimum."""
    x_opt = np.asarray(x_opt, dtype=float)
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    jobs = [(names.index(n), d) for n in chosen for d in (-1, +1)]
    tasks = [
        lambda ask, i=i, d=d: walk(
            ask,
            i,
            d,
            x_opt,
            f_opt,
            lower,
            upper,
            max_points=max_points,
            max_steps=max_steps,
            reach=reach,
        )
        for i, d in jobs
    ]
    walks = run_batched(value_and_grad, tasks, len(x_opt))
    natural_opt = to_natural(x_opt)
    out = {}
    for k, name in enumerate(chosen):
        i = names.index(name)
        down, up = walks[2 * k], walks[2 * k + 1]
        points = [*reversed(down.points), x_opt, *up.points]
        objective = np.array([*reversed(down.objective), f_opt, *up.objective])
        natural = np.stack([to_natural(p) for p in points])
        lo_scale = crossing(down.values, down.objective, x_opt[i], f_opt)
        hi_scale = crossing(up.values, up.objective, x_opt[i], f_opt)

        def at(v, i=i):
            if not np.isfinite(v):
                return float("nan")
            p = x_opt.copy()
            p[i] = v
            return float(to_natural(p)[i])

        out[name] = {
            "value": natural[:, i],
            "objective": objective,
            "estimate": {n: natural[:, j] for j, n in enumerate(names) if j != i},
            "lower": at(lo_scale),
            "upper": at(hi_scale),
            "stop_lower": down.stop,
            "stop_upper": up.stop,
            "optimum": float(natural_opt[i]),
        }
    return out


def _chosen(names: list[str], params: list[str] | None, source: str, what: str) -> list[str]:
    from sim.core import InputError
    from solvers import did_you_mean

    for name in params or []:
        if name not in names:
            raise InputError(
                source,
                f"--param {name}",
                f"not one of the {what} ({', '.join(names)}).{did_you_mean(name, names)}",
            )
    return list(params) if params else list(names)


@checks_as_nan()
def profile_petab(
    problem,
    params: list[str] | None = None,
    *,
    starts: int = 1,
    seed: int = 0,
    max_points: int = 40,
) -> ProfileResult:
    """Profile likelihoods of a PEtab problem's estimated parameters (all, or `params`)
    around the best of `starts` fits; the profiled function is the fit's (objective plus
    the table's objective priors, if any), the grid the parameters' own scales.

    Arguments:
        problem: the PEtab problem (`load_petab`).
        params: the estimated parameters to profile; None for all.
        starts: the number of starts of the fit the profiles start from (`fit_petab`).
        seed: the seed of that fit's start points.
        max_points: points per side of each profile at most.

    Returns:
        A `ProfileResult`: the optimum (linear scale), the objective there, and for each
        profiled parameter its profile and its 95% interval.

    Raises:
        InputError: a name in `params` that is not an estimated parameter.
        PetabError, SimulationError: as `fit_petab` (an estimated parameter without
            finite bounds, an objective that is not finite at any start's end).
    """
    import jax.numpy as jnp

    from ._petab_fit import fit_petab
    from ._petab_problem import to_scale

    names = problem.estimated
    chosen = _chosen(names, params, str(problem.path), "estimated parameters")
    fitted = fit_petab(problem, starts=starts, seed=seed)
    scales = [p.scale for p in problem.parameters if p.estimate]
    x_opt = np.array(
        [
            float(to_scale(np.float64(fitted.estimate[n]), sc))
            for n, sc in zip(names, scales, strict=False)
        ]
    )
    value_and_grad = problem.value_and_grad(with_priors=True)
    f_opt = float(value_and_grad(jnp.asarray(x_opt))[0])
    lower, upper = problem.bounds()
    to_natural = lambda x: np.array(
        [
            float(10.0**v if sc == "log10" else (np.exp(v) if sc == "log" else v))
            for v, sc in zip(x, scales, strict=False)
        ]
    )  # noqa: E731
    profiles = profile(
        value_and_grad, x_opt, f_opt, lower, upper, names, chosen, to_natural, max_points=max_points
    )
    return ProfileResult(
        str(problem.path),
        problem.model.name,
        names,
        dict(zip(names, to_natural(x_opt), strict=False)),
        f_opt,
        profiles,
    )


@checks_as_nan()
def _profiled_problem(config, data):
    """The fit problem of a config whose profiles are taken, with its observations and
    `[fit]` section: differentiated by forward sensitivities, whatever the fit's optimiser."""
    from ._fit import build_problem

    problem, _, obs, section = build_problem(config, data, gradient="forward_sensitivity")
    return problem, obs, section


def profile_config(
    config,
    params: list[str] | None = None,
    data=None,
    *,
    max_points: int = 40,
    log: Callable[[str], None] | None = None,
) -> ProfileResult:
    """Profile likelihoods of a config's free quantities (all, or `params`) around its
    fit (`sim fit` first, as configured): the fit's loss with every sigma given, else
    (n / 2) log(sum of squared residuals), the common noise scale profiled out; on the
    quantities' unconstrained scale (log for positive ones), at most `REACH` from the
    optimum.

    Arguments:
        config: with `[fit]` and `[data]` or `[[experiments]]`.
        params: the free quantities to profile; None for all.
        data: a file that replaces `data.file`, or None.
        max_points: points per side of each profile at most.
        log: called once the profiles have ended with each line of how they were solved
            that the config does not say (`Family.solver_notes`: a model declared stiff
            solved with the stiff default), as `sim fit` prints them; None for none.

    Returns:
        A `ProfileResult`: the optimum (natural scale), the objective there, and for each
        profiled quantity its profile and its 95% interval.

    Raises:
        InputError: a name in `params` that is not a free quantity.
        ConfigError: `loss = "mse"` (no likelihood), or a problem of the config (as
            `build_problem`).
    """
    import jax
    import jax.numpy as jnp

    from ._fit import fit, observation_models

    problem, obs, section = _profiled_problem(config, data)
    names = [f.name for f in problem.free]
    chosen = _chosen(names, params, str(config.path), "free quantities")
    if section.loss == "mse":
        raise config.error(
            "fit.loss",
            'a profile likelihood needs a likelihood: loss = "normal" or "lognormal", not "mse"',
        )
    fitted = fit(config, data)
    sigma_known = observation_models(problem) or all(
        name in o.sigma for o in (obs if isinstance(obs, list) else [obs]) for name in o.values
    )
    n = problem.count

    def unflatten(v):
        return {name: v[k] for k, name in enumerate(names)}

    def objective(v):
        loss = problem.objective(unflatten(v))[0]
        return loss if sigma_known else 0.5 * n * jnp.log(2.0 * loss)

    x_opt = np.array(
        [
            float(
                problem.unconstrained({k: jnp.asarray(v) for k, v in fitted.estimate.items()})[name]
            )
            for name in names
        ]
    )
    value_and_grad = jax.value_and_grad(objective)
    f_opt = float(objective(jnp.asarray(x_opt)))
    wide = np.full(len(names), 3 * REACH)  # (the others compensate further)

    def to_natural(v):
        natural = problem.natural(unflatten(jnp.asarray(v)))
        return np.array([float(natural[name]) for name in names])

    profiles = profile(
        value_and_grad,
        x_opt,
        f_opt,
        x_opt - wide,
        x_opt + wide,
        names,
        chosen,
        to_natural,
        max_points=max_points,
        reach=REACH,
    )
    if log is not None:
        for line in family_of(problem.model).solver_notes(problem.model, config):
            log(line)
    return ProfileResult(
        str(config.path),
        problem.model.name,
        names,
        dict(zip(names, to_natural(x_opt), strict=False)),
        f_opt,
        profiles,
    )
