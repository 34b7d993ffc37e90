"""The SDE family: Ito equations dy = f dt + g dW (`physics.sde.SdeModel`), ensembles of
paths solved by `solvers.SdeLoop`; configs are those of ODE models plus `[solver] dt`
(the largest step) and `[ensemble] paths, seed`; a run writes each observable as
`/observables/<name>` [T, paths] ([T] for one path). The family's declaration (name,
section, models) is `sim.families.sde`; this module, its numerics, is imported by the
first SDE work."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pydantic

from physics import float_array, sde
from physics.sde import SdeModel
from solvers import SdeEnsemble, SdeLoop, SdeLoopState, SdeSolver, did_you_mean, result_message

from ..._config import Config
from ..._run import (
    LoopEngine,
    Setup,
    check_finite,
    frames_per_chunk,
    initial_vector,
    named_initial,
    number,
    resolve_params,
    run_plan,
    save_times,
)
from ..._sources import check_returns
from ..._stream import RunPlan
from ..._trajectory import Trajectory
from . import SDE, EnsembleSection

MODELS = (sde.OrnsteinUhlenbeck, sde.GeometricBrownianMotion, sde.StochasticLotkaVolterra)


class SdeSolverExtras(pydantic.BaseModel):
    """The `[solver]` key of SDE runs beyond `method` and `max_steps`."""

    dt: float = pydantic.Field(
        description="the fixed step (required)",
        json_schema_extra={"unit": "time", "required": True},
    )


_SOLVER_KEYS = ("method", *SdeSolverExtras.model_fields, "max_steps")


# ----------------------------------------------------------------------------- simulate


def _ensemble(solver: Any) -> tuple[SdeEnsemble, bool]:
    """The ensemble to run, and whether the caller asked for a single path."""
    if isinstance(solver, SdeEnsemble):
        return solver, False
    if isinstance(solver, SdeSolver):
        return SdeEnsemble(solver, 1), True
    raise TypeError(
        "an SDE model needs an SdeSolver (with its step dt) or an SdeEnsemble, got "
        f"{type(solver).__name__}"
    )


def _observe(model: SdeModel, ts: jax.Array, ys: jax.Array, params) -> dict[str, jax.Array]:
    """Observables of states [T, paths, n] at times [T]: {name: [T, paths]}."""
    per_path = jax.vmap(model.observables, in_axes=(None, 0, None))
    return jax.vmap(per_path, in_axes=(0, 0, None))(ts, ys, params)


def _loop(model: SdeModel, params, ts, ensemble: SdeEnsemble, key) -> SdeLoop:
    return SdeLoop(ensemble, model.drift, model.diffusion, ts, params, key, noise=model.noise)


def simulate(model: SdeModel, params, t, initial, solver, key) -> Trajectory:
    if key is None:
        raise ValueError(
            f"simulating the SDE model {model.name!r} needs a key (jax.random.key(seed)): it draws "
            "the Brownian motions"
        )
    ensemble, single = _ensemble(solver)
    ys, state = _loop(model, params, t, ensemble, key).solve(
        initial_vector(model, initial, params)
    )  # [paths, T, n]
    ys = jnp.moveaxis(ys, 0, 1)
    observables = _observe(model, t, ys, params)
    if single:
        observables = {name: v[:, 0] for name, v in observables.items()}
    stats = {"num_steps": state.num_steps, "result": state.result}
    return Trajectory(
        time=t, observables=observables, final_state=ys[-1, 0] if single else ys[-1], stats=stats
    )


# ----------------------------------------------------------------------------- configs and runs


def _solver(config: Config, model: SdeModel) -> tuple[SdeEnsemble, dict[str, Any]]:
    spec = config.spec.solver
    SDE.check_solver_keys(config, _SOLVER_KEYS)
    if config.spec.time.dt is not None:
        raise config.error("time.dt", "SDE runs take their step as [solver] dt")
    if "dt" not in spec.extras:
        raise config.error(
            "solver.dt", "required key is missing: the largest step of the SDE solver"
        )
    dt = number(config, "solver.dt", spec.extras["dt"])
    if not dt > 0:
        raise config.error("solver.dt", f"expected a number > 0, got {spec.extras['dt']!r}")
    method = spec.method or "euler"
    if method not in SdeSolver.methods:
        raise config.error(
            "solver.method",
            f"unknown SDE method {method!r} (methods: "
            f"{', '.join(SdeSolver.methods)}).{did_you_mean(method, SdeSolver.methods)}",
        )
    options = {"max_steps": spec.max_steps} if spec.max_steps is not None else {}
    solver = SdeSolver(method=method, dt=dt, **options)
    try:
        solver._check_noise(model.noise)
    except ValueError as e:
        raise config.error("solver.method", str(e)) from None
    steps = float(jnp.sum(solver.steps(jnp.asarray(save_times(config)))))
    if not steps <= solver.max_steps:
        taken = f"{steps:,.0f}" if np.isfinite(steps) else "more than 1e308"
        raise config.error(
            "solver.dt",
            f"{dt:g} takes {taken} steps from t0 to t1, beyond solver.max_steps = "
            f"{solver.max_steps:,}; take a larger step or raise solver.max_steps",
        )
    section = config.spec.ensemble or EnsembleSection()
    resolved = {"method": method, "dt": dt, "max_steps": solver.max_steps}
    available = len(jax.devices())
    if section.devices > available:
        raise config.error(
            "ensemble.devices",
            f"= {section.devices}: only {available} local devices (on a CPU, "
            "XLA_FLAGS=--xla_force_host_platform_device_count=N before JAX starts)",
        )
    try:
        return SdeEnsemble(solver, section.paths, devices=section.devices), resolved
    except ValueError as e:
        raise config.error("ensemble.devices", str(e).removeprefix("devices = ")) from None


def setup(model: SdeModel, config: Config) -> Setup:
    SDE.resolve_checks(config, what="SDE runs (they only check that values stay finite)")
    params = resolve_params(config, model)
    initial = named_initial(config, model)
    ensemble, solver_section = _solver(config, model)
    section = config.spec.ensemble or EnsembleSection()
    t = float_array(save_times(config))
    y0 = model.initial_state(initial, params)
    of = f"a state of shape {y0.shape}"
    check_returns(config, model, "drift", (t[0], y0, params), y0.shape, of)
    if model.noise == "general":
        check_returns(
            config,
            model,
            "diffusion",
            (t[0], y0, params),
            (*y0.shape, model.brownian_dims),
            f"{of} and brownian_dims = {model.brownian_dims} (general noise)",
        )
    else:
        check_returns(
            config, model, "diffusion", (t[0], y0, params), y0.shape, f"{of} ({model.noise} noise)"
        )
    return Setup(
        model=model,
        params=params,
        initial=initial,
        t=t,
        solver=ensemble,
        key=jax.random.key(section.seed),
        resolved={
            "params": params,
            "initial": initial,
            "solver": solver_section,
            "ensemble": section.model_dump(),
        },
    )


class SdeProblem(eqx.Module):
    """An SDE run for `LoopEngine`: `simulate`'s ensemble, save time by save time."""

    model: SdeModel
    params: Any
    ensemble: SdeEnsemble
    ts: jax.Array
    y0: jax.Array
    key: jax.Array

    def _loop(self) -> SdeLoop:
        return _loop(self.model, self.params, self.ts, self.ensemble, self.key)

    def init(self) -> SdeLoopState:
        return self._loop().init(self.y0)

    def advance(self, state: SdeLoopState, frames, capacity: int):
        new, saved = self._loop().advance(state, frames, capacity)  # [capacity, paths, n]
        rows = jnp.clip(
            state.frame + jnp.arange(capacity, dtype=jnp.int32), 0, self.ts.shape[0] - 1
        )
        observables = _observe(self.model, self.ts[rows], saved, self.params)
        if self.ensemble.paths == 1:
            observables = {name: v[:, 0] for name, v in observables.items()}
        return new, observables, new.result

    def num_steps(self, state: SdeLoopState):
        return state.num_steps


def plan(model: SdeModel, config: Config) -> RunPlan:
    s = setup(model, config)
    y0 = model.initial_state(s.initial, s.params)
    frames = len(s.t) - 1
    method = s.solver.solver.method

    def failure(code: int) -> str:
        return (
            f"{config.source}: the {method} solve failed: {result_message(code)} (raise "
            "solver.max_steps or take a smaller solver.dt)"
        )

    problem = SdeProblem(
        model=model,
        params=s.params,
        ensemble=s.solver,
        ts=jnp.asarray(s.t),
        y0=jnp.asarray(y0),
        key=s.key,
    )
    engine = LoopEngine(
        problem,
        np.asarray(s.t),
        frames_per_chunk(config, int(np.size(y0)) * s.solver.paths, frames),
        failure,
    )
    return run_plan(
        config, model, s, engine, check_finite(config, ""), seed=int(s.resolved["ensemble"]["seed"])
    )


def text_model(config: Config):
    """The model of a config's `[model.states]` and `[model.noise]`, or None without noise."""
    options = config.spec.model.options
    if "noise" not in options:
        return None
    if "fields" in options:
        raise ValueError("noise: is for models with [model.states]; a PDE written as text has none")
    if "states" not in options:
        raise ValueError(
            "noise: is the diffusion of [model.states], which the config does not write"
        )
    return sde.sde_model(
        config.spec.model.name,
        options["states"],
        options["noise"],
        options.get("parameters"),
        options.get("observables"),
    )


def sweep_problem(s, params: dict, initial, key):
    """One run of a sweep as an engine problem: its ensemble of paths."""
    y0 = jnp.asarray(initial_vector(s.model, initial, params))
    return SdeProblem(
        model=s.model, params=params, ensemble=s.solver, ts=jnp.asarray(s.t), y0=y0, key=key
    )
