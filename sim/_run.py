"""`sim.run(config)`: build the model, parameters, initial state and solver a config names,
simulate, and return a result that saves itself. One runner per model family."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from physics import Model
from physics.ode import OdeModel
from solvers import ADJOINTS, OdeSolver, did_you_mean, result_message

from ._config import Config
from ._errors import SimulationError
from ._progress import Progress
from ._registry import model_class, model_names, model_options
from ._result import RunResult
from ._simulate import simulate

DEFAULT_SAVE = 101


def build_model(config: Config) -> Model:
    """The model a config's `[model]` section names, with its options."""
    spec = config.spec.model
    try:
        cls = model_class(spec.name)
    except ValueError:
        raise config.error(
            "model.name", f"unknown model {spec.name!r}; `sim models` lists them.{did_you_mean(spec.name, model_names())}"
        ) from None
    allowed = model_options(cls)
    options = dict(spec.options)
    for key in options:
        if key not in allowed:
            listed = ", ".join(allowed) if allowed else "none"
            raise config.error(f"model.{key}", f"model {spec.name!r} has no option {key!r} (options: {listed}).{did_you_mean(key, allowed)}")
    # A PDE's [grid] (points, domain, ...) are options of its model.
    for key, value in (config.spec.grid or {}).items():
        if key not in allowed:
            raise config.error(f"grid.{key}", f"model {spec.name!r} takes no grid key {key!r}.{did_you_mean(key, allowed)}")
        options[key] = value
    try:
        return cls(**options)
    except (TypeError, ValueError) as e:
        message = str(e).splitlines()[0]
        # The model names the offending option first ("model 'heat': domain = ...").
        grid = config.spec.grid or {}
        found = [(message.find(f" {k}"), k) for k in options if f" {k}" in message]
        if found:
            name = min(found)[1]
            key = f"grid.{name}" if name in grid else f"model.{name}"
        else:
            key = "model"
        raise config.error(key, message) from None


def number(config: Config, key: str, value: Any) -> float:
    """A config value that must be a finite real number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise config.error(key, f"expected a number, got {value!r}")
    if not math.isfinite(value):
        raise config.error(key, f"expected a finite number, got {value!r}")
    return float(value)


def resolve_params(config: Config, model: Model) -> dict[str, jax.Array]:
    """Every declared parameter: the config's value (checked against the declaration)
    or the default."""
    params = model.default_params()
    for key, value in config.spec.params.items():
        if key not in params:
            raise config.error(
                f"params.{key}",
                f"model {model.name!r} has no parameter {key!r} (parameters: {', '.join(params)}).{did_you_mean(key, params)}",
            )
        declared = model.parameter(key)
        v = number(config, f"params.{key}", value)
        problem = declared.violation(v)
        if problem is not None:
            raise config.error(f"params.{key}", f"expected {problem} ({declared.doc}), got {value!r}")
        params[key] = jnp.asarray(v, dtype=float)
    return params


def save_times(config: Config) -> np.ndarray:
    """Save times from `[time]`: `save` equally spaced points over [t0, t1], or `save_at`."""
    time = config.spec.time
    if time.save_at is not None:
        return np.asarray(time.save_at, dtype=float)
    if time.t1 is None:
        raise config.error("time.t1", "required key is missing (the end time)")
    n = time.save if time.save is not None else DEFAULT_SAVE
    return np.linspace(time.t0, time.t1, n)


def resolved_toml(config: Config, **sections: dict[str, Any]) -> str:
    """The config's TOML with the given sections' defaults filled in."""
    raw = {key: dict(value) if isinstance(value, dict) else value for key, value in config.raw.items()}
    for name, values in sections.items():
        merged = dict(raw.get(name, {}))
        merged.update({k: _plain(v) for k, v in values.items()})
        raw[name] = merged
    return Config(raw, config.path).to_toml()


def _plain(value: Any) -> Any:
    if isinstance(value, (jax.Array, np.ndarray, np.generic)):
        arr = np.asarray(value)
        return arr.item() if arr.ndim == 0 else arr.tolist()
    return value


@dataclasses.dataclass(frozen=True)
class Setup:
    """Everything `simulate` needs for the run a config describes, validated.

    Sweeps batch `simulate(setup.model, params, setup.t, initial=..., solver=setup.solver,
    key=setup.key)` over changed `params` and `initial` values, so every family that
    can be swept provides a `setup_family`.

    Attributes:
        model, params, initial, t, solver, key: the arguments of `simulate`.
        resolved: config sections with every default filled in (for the resolved TOML).
    """

    model: Model
    params: dict[str, Any]
    initial: Any
    t: jax.Array
    solver: Any
    key: jax.Array | None = None
    resolved: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


@functools.singledispatch
def setup_family(model: Model, config: Config) -> Setup:
    """Validate a config against its model and build the arguments of `simulate`.
    Each family registers its own (`@setup_family.register`)."""
    raise config.error("model.name", f"model {model.name!r} cannot be set up from a config")


def setup(config: Config) -> Setup:
    """The validated `simulate` arguments of a config (model included)."""
    return setup_family(build_model(config), config)


@functools.singledispatch
def run_family(model: Model, config: Config, progress: Progress) -> Any:
    """Run a config of the model's family; each family registers its own
    (`@run_family.register`), usually `setup_family` + `simulate` + a result."""
    raise config.error("model.name", f"model {model.name!r} cannot be run from a config")


def run(config: Config, *, progress: bool = False) -> Any:
    """Run the simulation a config describes (what `sim run` does).

    Arguments:
        config: from `sim.load_config`.
        progress: show progress on the terminal (stderr).

    Returns:
        A result with `.save(path)`: `RunResult` for ODE and PDE models.

    Raises:
        ConfigError: the config does not fit the model (names the key).
        SimulationError: the solver failed (for example max_steps reached).

    Example:
        >>> result = run(load_config("experiments/lotka_volterra.toml"))
        >>> result.save("lv.h5")
    """
    model = build_model(config)
    with Progress(enabled=progress, description=f"{model.name}") as bar:
        return run_family(model, config, bar)


# ----------------------------------------------------------------------------- ODE family

_ODE_SOLVER_KEYS = ("method", "rtol", "atol", "dt0", "max_steps", "adjoint", "dtype")


def ode_solver(config: Config) -> OdeSolver:
    """The `OdeSolver` a config's `[solver]` (and `[time] dt`) describe."""
    spec = config.spec.solver
    for key in spec.extras:
        raise config.error(
            f"solver.{key}", f"unknown key for ODE solvers (expected one of: {', '.join(_ODE_SOLVER_KEYS)}).{did_you_mean(key, _ODE_SOLVER_KEYS)}"
        )
    method = spec.method or "tsit5"
    if method not in OdeSolver.methods:
        raise config.error(
            "solver.method", f"unknown ODE method {method!r} (methods: {', '.join(OdeSolver.methods)}).{did_you_mean(method, OdeSolver.methods)}"
        )
    adjoint = spec.adjoint or "recursive_checkpoint"
    if adjoint not in ADJOINTS:
        raise config.error("solver.adjoint", f"unknown adjoint {adjoint!r} (adjoints: {', '.join(ADJOINTS)}).{did_you_mean(adjoint, ADJOINTS)}")
    if spec.dtype == "float32":
        raise config.error("solver.dtype", "ODE runs are float64; expected 'float64' or no dtype")
    time = config.spec.time
    for key in ("steps", "save_every"):
        if getattr(time, key) is not None:
            raise config.error(f"time.{key}", "is for MD runs; ODE runs take t1 with save or save_at (and dt for fixed steps)")
    default = OdeSolver()
    return OdeSolver(
        method=method,
        rtol=spec.rtol if spec.rtol is not None else default.rtol,
        atol=spec.atol if spec.atol is not None else default.atol,
        dt0=time.dt if time.dt is not None else spec.dt0,
        adaptive=time.dt is None,
        max_steps=spec.max_steps if spec.max_steps is not None else default.max_steps,
        adjoint=adjoint,
        throw=False,
    )


def ode_initial(config: Config, model: OdeModel) -> dict[str, jax.Array]:
    """Initial values per state component: the config's, or the model's defaults."""
    initial = model.default_initial()
    for key, value in config.spec.initial.items():
        if key not in initial:
            raise config.error(
                f"initial.{key}",
                f"model {model.name!r} has no state component {key!r} (state: {', '.join(model.state_names)}).{did_you_mean(key, initial)}",
            )
        initial[key] = jnp.asarray(number(config, f"initial.{key}", value), dtype=float)
    return initial


@setup_family.register
def _(model: OdeModel, config: Config) -> Setup:
    params = resolve_params(config, model)
    initial = ode_initial(config, model)
    solver = ode_solver(config)
    solver_section = {
        "method": solver.method,
        "rtol": float(solver.rtol),
        "atol": float(solver.atol),
        "max_steps": solver.max_steps,
        "adjoint": solver.adjoint,
    }
    return Setup(
        model=model,
        params=params,
        initial=initial,
        t=jnp.asarray(save_times(config)),
        solver=solver,
        resolved={"params": params, "initial": initial, "solver": solver_section},
    )


@run_family.register
def _(model: OdeModel, config: Config, progress: Progress) -> RunResult:
    s = setup_family(model, config)
    progress.start(total=1)
    traj = simulate(model, s.params, s.t, initial=s.initial, solver=s.solver)
    result_code = int(traj.stats["result"])
    progress.advance(1)
    if result_code != 0:
        raise SimulationError(
            f"{config.source}: the {s.solver.method} solve failed: {result_message(result_code)} "
            "(raise solver.max_steps, loosen rtol/atol, or use an implicit method such as kvaerno5 for stiff problems)"
        )
    observables = {k: np.asarray(v) for k, v in traj.observables.items()}
    for name, values in observables.items():
        if not np.all(np.isfinite(values)):
            raise SimulationError(f"{config.source}: observable {name!r} became non-finite; the solution diverged")
    return RunResult(
        model=model.name,
        config=resolved_toml(config, **s.resolved),
        time=np.asarray(s.t),
        observables=observables,
        params={k: np.asarray(v) for k, v in s.params.items()},
        initial={k: np.asarray(v) for k, v in s.initial.items()},
        stats={"num_steps": int(traj.stats["num_steps"]), "result": result_code},
    )
