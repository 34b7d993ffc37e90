"""Building a config's calibration problem: the `Problem` of its `[data]` (the data
loaded, the span of the solve set from the data's times, the solver made to turn failed
solves into large residuals, the free quantities and the observation models checked;
`make_problem`), the `Experiments` of its `[[experiments]]` (`experiment_problems`), and
the problem of its `[fit]` (`build_problem`), which chooses between the two."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

import jax.numpy as jnp
import numpy as np
import pydantic
from jaxtyping import Array

import sim
from physics import Model
from sim import Config, DataError
from sim.core import Fittable, InputError, build_model, family_of

from ._data import Observations, check_span, load_observations
from ._experiments import Extra, free_extras, preequilibration, split_params
from ._fit_free import free_quantities
from ._fit_problem import Experiments, Free, Problem, _Constant, _replace
from ._fit_section import FitSection, fit_section
from ._observation import ObservableSpec, build_observation, loader_section, observable_specs


class ExperimentTable(pydantic.BaseModel):
    """One `[[experiments]]` table: an experiment's data, start and parameter values; the
    free quantities of `[fit]` are shared by all of them."""

    name: str | None = pydantic.Field(
        None,
        description="its name (the fit file's /experiments/<name>/)",
        json_schema_extra={"default": "its position"},
    )
    file: str = pydantic.Field(
        description="its HDF5 file, relative to the config's folder",
        json_schema_extra={"required": True},
    )
    time: str = pydantic.Field(
        description="the dataset of its times", json_schema_extra={"required": True}
    )
    time_offset: float = pydantic.Field(0.0, description="model time = data time - time_offset")
    observables: dict[str, Any] = pydantic.Field(
        description="observable = dataset path, or a table of path, formula, noise and sigma",
        json_schema_extra={"required": True},
    )
    sigma: dict[str, str] = pydantic.Field(
        {}, description="observable = the dataset of its standard deviations"
    )
    initial: dict[str, float] = pydantic.Field(
        {}, description="its initial values (the others: the config's [initial])"
    )
    params: dict[str, float | str] = pydantic.Field(
        {},
        description="parameter = a value it holds fixed, or the name of a free quantity of its own",
    )
    preequilibrate: dict[str, Any] | None = pydantic.Field(
        None, description="a run to steady state it starts from: { params, initial }"
    )


EXPERIMENT_KEYS = tuple(ExperimentTable.model_fields)


def build_problem(
    config: Config,
    data: str | Path | None = None,
    *,
    gradient: Literal["forward", "forward_sensitivity", "reverse"] | None = None,
) -> tuple[Problem | Experiments, dict[str, Array], Observations | list[Observations], FitSection]:
    """Validate a config's `[data]` and `[fit]` against its model and build the problem.

    Arguments:
        config: with `[fit]` and `[data]` or `[[experiments]]`.
        data: a file that replaces `data.file`, or None.
        gradient: how the objective is differentiated; None for what the fit's optimiser
            needs (forward-mode Jacobians for levenberg_marquardt, forward sensitivities
            for the others).

    Returns:
        (problem, start values in natural units, observations, fit section): a `Problem`
        for `[data]` or `Experiments` for `[[experiments]]`; the start values by free
        quantity; one `Observations` or a list of them with `[[experiments]]`; the
        validated `[fit]` section (its optimizer bfgs where the config names none and the
        likelihood is no sum of squares).

    Raises:
        ConfigError: a weight that is not positive, levenberg_marquardt asked for where
            the likelihood is no sum of squares, another optimizer for a model with
            events, or any other problem of the config's model, data or free quantities.
        DataError: a data file that cannot be read or does not fit.
    """
    section = fit_section(config)
    for name, w in section.weights.items():
        if not w > 0:
            raise config.error(f"fit.weights.{name}", f"expected a positive weight, got {w}")
    if config.spec.experiments is not None:
        problem, start, obs = experiment_problems(config, data, section, gradient=gradient)
    else:
        problem, start, obs = make_problem(
            config,
            data,
            section.free,
            free_key="fit.free",
            loss=section.loss,
            weights=section.weights,
            bounds=section.bounds,
            # Levenberg-Marquardt builds Jacobians in forward mode; the gradient-based
            # optimisers get their gradients from forward sensitivities.
            gradient=gradient
            or ("forward" if section.optimizer == "levenberg_marquardt" else "forward_sensitivity"),
        )
    events = bool(getattr(problem.model, "events", tuple)())
    if not problem.least_squares and section.optimizer == "levenberg_marquardt":
        # (Laplace noise, or a sigma that the free quantities change: the likelihood is
        # no sum of squares; BFGS minimises it unless the config asked otherwise)
        if "optimizer" in (config.spec.fit or {}):
            raise config.error(
                "fit.optimizer",
                "levenberg_marquardt needs least squares: normal noise with sigmas that no free "
                "quantity changes; use bfgs or adam with these noise models",
            )
        section = section.model_copy(update={"optimizer": "bfgs"})
        problem = _replace(problem, forward_sensitivity=True)
    if section.optimizer != "levenberg_marquardt" and events:
        # (gradients through event times are forward mode: the event loop has no
        # reverse-mode derivative, which BFGS and Adam would ask for)
        key = "fit.optimizer" if "optimizer" in (config.spec.fit or {}) else "data.observables"
        raise config.error(
            key,
            "a model with events is fitted by levenberg_marquardt (normal noise with given "
            "sigmas); "
            "gradients through its event times are forward mode, and bfgs and adam need reverse "
            "mode",
        )
    return problem, start, obs, section


def make_problem(
    config: Config,
    data: str | Path | None,
    free_names: list[str],
    *,
    free_key: str,
    loss: str = "normal",
    weights: dict[str, float] | None = None,
    bounds: dict[str, list[float]] | None = None,
    gradient: Literal["forward", "forward_sensitivity", "reverse"] = "forward_sensitivity",
    extras: dict[str, Extra] | None = None,
    aliases: dict[str, str] | None = None,
    observation_models: bool = False,
    check_count: bool = True,
) -> tuple[Problem, dict[str, Array], Observations]:
    """The calibration problem of a config: its model, data and free quantities.

    Arguments:
        config: with a `[data]` section.
        data: a file that replaces `data.file`.
        free_names: parameter names, `initial.<component>` names and the names of
            free quantities that are not the model's (`extras`).
        free_key: the config key that lists them (for error messages).
        loss, weights, bounds: see `[fit]`.
        gradient: how derivatives of ODE predictions are taken: `forward` (forward
            mode, for Jacobians), `forward_sensitivity` (forward mode inside, usable by
            reverse-mode `jax.grad`: fast for a few free quantities), `reverse` (the
            config's adjoint, for many free quantities such as network weights).
        extras: the free quantities that are not the model's (default: those the
            observation models of `[data]` read).
        aliases: condition-specific parameters (model parameter -> free quantity).
        observation_models: describe the data by observation models even when every
            observable is a plain dataset path (`inference._observation`).
        check_count: refuse data with fewer observations than free quantities (an
            experiment's data need not determine them alone).
    """
    weights = weights or {}
    bounds = bounds or {}
    aliases = aliases or {}
    model = build_model(config)
    specs, obs = _observations(config, data, model, observation_models)
    t0 = config.spec.time.t0
    config = _spanned(config, obs, model, t0)
    setup = sim.setup(config)
    model = setup.model  # with the options its family reads from the config (MD: cutoff, shift)
    if extras is None:
        extras = free_extras(
            config,
            free_names,
            free_key,
            model,
            dict(setup.params),
            [specs] if specs else [],
            [aliases],
        )
    family = family_of(model)
    if not isinstance(family, Fittable):
        raise config.error("model.name", f"{family.describes} cannot be fitted")
    solver, forward_sensitivity = family.fit_solver(setup, gradient)
    free, start = free_quantities(config, free_names, free_key, model, setup, extras, bounds)
    for name in weights:
        if name not in obs.values:
            raise config.error(
                f"fit.weights.{name}",
                f"{name!r} is not an observed observable (observed: {', '.join(obs.values)})",
            )
    observation = _observation(
        config, specs, obs, loss, free, free_names, free_key, aliases, model, setup
    )
    if check_count and obs.count <= len(free):
        raise DataError(
            obs.path, "", f"{obs.count} observations cannot determine {len(free)} free quantities"
        )
    problem = _problem(
        config,
        setup,
        solver,
        obs,
        t0,
        free=free,
        loss=loss,
        weights=weights,
        forward_sensitivity=forward_sensitivity,
        observation=observation,
        aliases=aliases,
    )
    return problem, start, obs


def _observations(
    config: Config, data: str | Path | None, model: Model, observation_models: bool
) -> tuple[list[ObservableSpec] | None, Observations]:
    """(observable specs, observations) of a config's `[data]`: the specs None when every
    observable is a plain dataset path and `observation_models` is False."""
    specs = (
        None
        if config.spec.data is None
        else observable_specs(config, config.raw["data"], "data", force=observation_models)
    )
    if specs is None:
        obs = load_observations(config, data, model.observable_names)
    else:
        loading = Config({**config.raw, "data": loader_section(config.raw["data"])}, config.path)
        obs = load_observations(
            loading,
            data,
            [
                *model.observable_names,
                *(s.name for s in specs if s.name not in model.observable_names),
            ],
        )
    return specs, obs


def _spanned(config: Config, obs: Observations, model: Model, t0: float) -> Config:
    """The config with the span and save times of the solve a fit needs: the data within
    the span, a solve that saves where asked, up to the last observation when the config
    gives no end."""
    check_span(config, obs, t0, config.spec.time.t1)
    overrides = []
    if config.spec.time.save is not None or config.spec.time.save_at is not None:
        overrides.append("time.save=2")
        config.raw.get("time", {}).pop("save_at", None)
    own_span = any(
        getattr(config.spec.time, key, None) is not None for key in family_of(model).time_keys
    )
    if (
        config.spec.time.t1 is None and not own_span
    ):  # (a family's own [time] keys, such as MD's steps, give the span)
        last = float(obs.time[-1])
        overrides.append(f"time.t1={last if last > t0 else t0 + 1.0!r}")
    if overrides:
        config = config.with_overrides(overrides)
    return config


def _observation(
    config: Config,
    specs: list[ObservableSpec] | None,
    obs: Observations,
    loss: str,
    free: list[Free],
    free_names: list[str],
    free_key: str,
    aliases: dict[str, str],
    model: Model,
    setup: Any,
) -> Any:
    """The observation models of the data (None without specs), the observations checked
    against their noise models or the lognormal loss."""
    observation = None
    if specs is not None:
        if loss == "mse":
            raise config.error(
                "fit.loss",
                'mse is no likelihood: observables with noise models need loss = "normal" or '
                '"lognormal" (the noise model of those that name none)',
            )
        varying = (
            {f.key for f in free if f.kind == "params"}
            | set(aliases)
            | {f.name for f in free if f.kind == "extra"}
            | set(model.observable_names)
        )
        observation = build_observation(
            config,
            specs,
            model_observables=model.observable_names,
            symbols=[*model.observable_names, *setup.params, "t"],
            free=free_names,
            free_key=free_key,
            varying=varying,
            sigma_data=obs.sigma,
            default_noise="lognormal" if loss == "lognormal" else "normal",
        )
        for o in observation.observed:
            y = obs.values[o.name]
            if o.transformation != "lin" and np.any(y[np.isfinite(y)] <= 0):
                raise DataError(
                    obs.path,
                    next(s.path for s in specs if s.name == o.name),
                    f"a {o.transformation}-scale noise model needs positive observations",
                )
    elif loss == "lognormal":
        for name, y in obs.values.items():
            if np.any(y[np.isfinite(y)] <= 0):
                raise DataError(obs.path, name, "the lognormal loss needs positive observations")
    return observation


def _problem(
    config: Config,
    setup: Any,
    solver: Any,
    obs: Observations,
    t0: float,
    *,
    free: list[Free],
    loss: str,
    weights: dict[str, float],
    forward_sensitivity: bool,
    observation: Any,
    aliases: dict[str, str],
) -> Problem:
    """The `Problem` of a set-up and its data: solved from `t0` to the data's times (and
    on to the span's end when the only one is the start time); for a family that fixes
    its runs at compile time (MD), the solver, initial state and times held static."""
    model = setup.model
    skip = 0 if obs.time[0] == t0 else 1
    t_sim = jnp.asarray(obs.time if skip == 0 else np.concatenate([[t0], obs.time]))
    end = None
    if (
        t_sim.shape[0] == 1
    ):  # (observed at the start time only: the solve goes on to the span's end)
        t1 = config.spec.time.t1
        t_sim, end = jnp.asarray([t0, t1 if t1 is not None and t1 > t0 else t0 + 1.0]), 1
    md = family_of(model).static_runs  # (solver, initial state and times fixed at compile time)
    problem = Problem(
        model=model,
        solver=None if md else solver,
        params=setup.params,
        initial=None if md else setup.initial,
        t_sim=t_sim,
        skip=skip,
        free=tuple(free),
        loss=loss,
        observed={k: jnp.asarray(v) for k, v in obs.values.items()},
        sigma={k: jnp.asarray(obs.sigma.get(k, 1.0)) for k in obs.values},
        weight={k: jnp.asarray(weights.get(k, 1.0)) for k in obs.values},
        count=obs.count,
        forward_sensitivity=forward_sensitivity,
        fixed_times=tuple(float(v) for v in np.asarray(t_sim)) if md else None,
        static_solver=solver if md else None,
        static_initial=_Constant(setup.initial) if md else None,
        observation=observation,
        aliases=tuple(aliases.items()),
        end=end,
    )
    return problem


def experiment_problems(
    config: Config,
    data,
    section: FitSection,
    gradient: str | None = None,
    *,
    free_key: str = "fit.free",
) -> tuple[Experiments, dict, list[Observations]]:
    """The problems of a config's `[[experiments]]`: each experiment is the config with
    its own `[data]` (file, time, time_offset, observables, sigma) and its `initial` and
    `params` values over the config's; a `params` value that names a free quantity makes
    that parameter condition-specific, and `preequilibrate` runs the model to steady
    state first (`inference._experiments`). When one experiment describes its data by
    observation models, every experiment does (`inference._observation`).

    Arguments:
        section: the free quantities (`free_key` lists them), loss, weights and bounds.
        gradient: as `make_problem`'s (default: by the optimiser).
    """
    experiments = config.spec.experiments
    if config.spec.data is not None:
        raise config.error(
            "data",
            "a config with [[experiments]] gives each experiment's data there; remove [data]",
        )
    if data is not None:
        raise InputError(
            "--data",
            str(data),
            "a config with [[experiments]] names each experiment's file; --data cannot replace "
            "them",
        )
    if not experiments:
        raise config.error("experiments", "expected at least one [[experiments]] table")
    free = section.free
    model = build_model(config)
    values = {**model.default_params(), **(config.raw.get("params") or {})}
    names, fixed, aliases, specs = _experiment_tables(
        config, experiments, free, free_key, list(model.parameter_names)
    )
    with_models = any(s is not None for s in specs)
    if with_models:
        specs = [
            observable_specs(config, experiment, f"experiments.{k}", force=True)
            for k, experiment in enumerate(experiments)
        ]
    extras = free_extras(config, free, free_key, model, values, [s for s in specs if s], aliases)
    problems, observations, start = [], [], None
    for k, experiment in enumerate(experiments):
        problem, first, obs = _experiment_problem(
            config,
            k,
            experiment,
            section,
            gradient,
            free_key=free_key,
            extras=extras,
            fixed=fixed[k],
            aliases=aliases[2 * k],
            with_models=with_models,
        )
        problems.append(problem)
        observations.append(obs)
        start = first if start is None else start
    count = sum(o.count for o in observations)
    if count <= len(free):
        raise config.error(
            "experiments", f"{count} observations cannot determine {len(free)} free quantities"
        )
    return Experiments(tuple(problems), tuple(names)), start, observations


def _experiment_tables(
    config: Config,
    experiments: list[dict[str, Any]],
    free: list[str],
    free_key: str,
    parameters: list[str],
) -> tuple[list[str], list[dict], list[dict], list]:
    """(names, fixed parameters, condition-specific parameters, observable specs) of the
    `[[experiments]]` tables, each checked; two entries of condition-specific parameters
    per experiment: its own and its preequilibration's."""
    names, fixed, aliases, specs = [], [], [], []
    for k, experiment in enumerate(experiments):
        where = f"experiments.{k}"
        own, condition, pre_condition = _experiment_params(
            config, k, experiment, free, free_key, parameters
        )
        name = str(experiment.get("name", k))
        if not name or "/" in name or name in (".", ".."):
            # (the name is a group of the fit file: /experiments/<name>)
            raise config.error(
                f"{where}.name", f"expected a name that is not empty and has no '/', got {name!r}"
            )
        if name in names:
            raise config.error(f"{where}.name", f"{name!r} names two experiments")
        names.append(name)
        fixed.append(own)
        aliases.append(condition)
        aliases.append(pre_condition)
        specs.append(observable_specs(config, experiment, where))
    return names, fixed, aliases, specs


def _experiment_params(
    config: Config,
    k: int,
    experiment: dict[str, Any],
    free: list[str],
    free_key: str,
    parameters: list[str],
) -> tuple[dict, dict, dict]:
    """(fixed parameters, condition-specific parameters, those of its preequilibration)
    of experiment `k`, whose keys and tables are checked, and which fixes no free
    quantity."""
    where = f"experiments.{k}"
    where_free = "[fit] free" if free_key == "fit.free" else free_key
    unknown = [key for key in experiment if key not in EXPERIMENT_KEYS]
    if unknown:
        raise config.error(
            f"{where}.{unknown[0]}",
            f"unknown key; an experiment has {', '.join(EXPERIMENT_KEYS)}",
        )
    for key in ("initial", "params", "observables", "sigma"):
        if key in experiment and not isinstance(experiment[key], dict):
            raise config.error(f"{where}.{key}", "expected a table (name = value)")
    for name in experiment.get("initial", {}):
        if f"initial.{name}" in free:
            raise config.error(
                f"{where}.initial.{name}",
                f"initial.{name} is free ({where_free}): an experiment cannot also fix it",
            )
    own, condition = split_params(
        config, f"{where}.params", experiment.get("params", {}), parameters, free, free_key
    )
    for name in own:
        if name in free:
            raise config.error(
                f"{where}.params.{name}",
                f"{name} is free ({where_free}): an experiment cannot also fix it; name a free "
                f'quantity of its own (params = {{ {name} = "{name}_{k}" }}) to make it '
                "condition-specific",
            )
    pre = experiment.get("preequilibrate")
    pre_condition = {}
    if isinstance(pre, dict) and isinstance(pre.get("params"), dict):
        pre_condition = split_params(
            config, f"{where}.preequilibrate.params", pre["params"], parameters, free, free_key
        )[1]
    return own, condition, pre_condition


def _experiment_problem(
    config: Config,
    k: int,
    experiment: dict[str, Any],
    section: FitSection,
    gradient: str | None,
    *,
    free_key: str,
    extras: dict[str, Extra],
    fixed: dict,
    aliases: dict,
    with_models: bool,
) -> tuple[Problem, dict[str, Array], Observations]:
    """(problem, start values, observations) of experiment `k`: `make_problem` of the
    config with the experiment's data and values, its errors naming the experiment's
    keys, and its preequilibration."""
    where = f"experiments.{k}"
    free = section.free
    raw = {key: value for key, value in config.raw.items() if key != "experiments"}
    raw["data"] = {
        key: experiment[key]
        for key in ("file", "time", "time_offset", "observables", "sigma")
        if key in experiment
    }
    raw["initial"] = {**(config.raw.get("initial") or {}), **experiment.get("initial", {})}
    raw["params"] = {**(config.raw.get("params") or {}), **fixed}
    try:
        one = Config(raw, config.path)
        problem, first, obs = make_problem(
            one,
            None,
            free,
            free_key=free_key,
            loss=section.loss,
            weights=section.weights,
            bounds=section.bounds,
            gradient=gradient
            or ("forward" if section.optimizer == "levenberg_marquardt" else "forward_sensitivity"),
            extras=extras,
            aliases=aliases,
            observation_models=with_models,
            check_count=False,
        )
    except InputError as e:
        raise _rekeyed(e, where, experiment) from None
    if problem.observation is not None:
        problem = dataclasses.replace(
            problem, observation=problem.observation.rekeyed("data", where)
        )
    if "preequilibrate" in experiment:
        pre = preequilibration(
            config,
            f"{where}.preequilibrate",
            experiment["preequilibrate"],
            problem.model,
            problem.solver,
            base_initial=config.raw.get("initial") or {},
            replaced=experiment.get("initial", {}),
            free=free,
            free_key=free_key,
        )
        problem = dataclasses.replace(problem, preequilibration=pre)
    return problem, first, obs


def _rekeyed(e: InputError, where: str, experiment: dict[str, Any]) -> InputError:
    """The error of an experiment's problem with its key as the experiment's (`data.x`
    as `experiments.k.x`; an `initial` or `params` value the experiment sets under it)."""
    key = e.key
    for prefix, into in (
        ("data.", f"{where}."),
        ("initial.", f"{where}.initial."),
        ("params.", f"{where}.params."),
    ):
        if key.startswith(prefix) and (
            prefix == "data." or key[len(prefix) :] in experiment.get(prefix[:-1], {})
        ):
            key = into + key[len(prefix) :]
            break
    return type(e)(e.source, key, e.message)
