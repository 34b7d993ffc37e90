"""`sim.run(config)`: build the model, parameters, initial state and solver a config names,
simulate, and return a result that saves itself. One runner per model family."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from physics import Model
from physics.ode import OdeModel
from solvers import ADJOINTS, OdeSolver, did_you_mean, result_message

from ._config import Config
from ._errors import InputError, SimulationError
from ._limits import WORK_ARRAYS, memory_problem
from ._progress import Progress
from ._registry import model_class, model_names, model_options
from ._result import RunResult, RunSink
from ._simulate import simulate
from ._store import check_output_path
from ._stream import RunPlan, chunk_frames, collect, stream

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
    for key in ("points",):
        value = options.get(key)
        if key in options and not (_whole(value) or (isinstance(value, list) and all(_whole(v) for v in value))):
            where = ("grid." if key in (config.spec.grid or {}) else "model.") + key
            raise config.error(where, f"expected a whole number of points per dimension, like [256, 256], got {value!r}")
        value = [value] if _whole(value) else value
        if isinstance(value, list) and value and all(_whole(v) and v > 0 for v in value):
            # A field and the solver's work arrays, before anything is allocated.
            problem = memory_problem(WORK_ARRAYS * 8 * math.prod(value), f"a grid of {math.prod(value):,} points")
            if problem:
                raise config.error(("grid." if key in (config.spec.grid or {}) else "model.") + key, problem)
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


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
    # The save times and at least a value per save time, with copies.
    problem = memory_problem(4 * 8 * n, f"{n:,} save times")
    if problem:
        raise config.error("time.save", problem)
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
def plan_family(model: Model, config: Config) -> RunPlan:
    """The validated run of a config of the model's family (engine, file layout,
    result); each family registers its own (`@plan_family.register`)."""
    raise config.error("model.name", f"model {model.name!r} cannot be run from a config")


def plan_run(config: Config) -> RunPlan:
    """The validated, not yet executed run a config describes."""
    return plan_family(build_model(config), config)


def run(
    config: Config,
    *,
    progress: bool = False,
    output: str | Path | None = None,
    resume: bool = False,
) -> Any:
    """Run the simulation a config describes (what `sim run` does).

    In memory (no `output`): the run advances in chunks of saved frames and returns a
    result holding every frame. With `output`, each chunk is appended to the file as it
    completes (only one chunk is in memory), the full state is checkpointed (every
    `[output] checkpoint_every` saved frames; default after every chunk), and the file
    appears under its name only when complete; `resume=True` continues the unfinished run
    of `output` from its last checkpoint and ends with the same file as an uninterrupted
    run.

    Arguments:
        config: from `sim.load_config`.
        progress: show progress on the terminal (stderr).
        output: stream the run to this HDF5 file.
        resume: continue the unfinished run of `output`.

    Returns:
        Without `output`, a result with `.save(path)`: `RunResult` for ODE and PDE models,
        `MdRunResult` for particle models. With `output`, a `Streamed` summary (path,
        frames, the frame resumed from, solver statistics).

    Raises:
        ConfigError: the config does not fit the model (names the key).
        InputError: with `output`: an unfinished run is there (and `resume` is False), or
            nothing fits to resume (no unfinished run, a finished file, another config, a
            missing or damaged checkpoint); the files are left as they were.
        SimulationError: the solver failed (for example max_steps reached).
        StorageError: the output could not be written; the last checkpoint is kept.

    Example:
        >>> result = run(load_config("experiments/lotka_volterra.toml"))
        >>> result.save("lv.h5")
        >>> run(load_config("experiments/lj_fluid.toml"), output="lj.h5")
    """
    plan = plan_run(config)
    with Progress(enabled=progress, description=plan.description) as bar:
        if output is None:
            if resume:
                raise InputError("argument", "resume", "resuming needs the output file of the unfinished run")
            return collect(plan, bar)
        output = check_output_path(output)
        return stream(plan, output, resume=resume, checkpoint_every=config.spec.output.checkpoint_every, progress=bar)


class SimulateEngine:
    """ODE and PDE runs chunk by chunk: each chunk is one `simulate` call over its save
    times, started from the state the previous chunk ended in (the first from the
    config's initial state). Fixed-step solvers take the same steps as one call over the
    whole run; adaptive ones restart their step-size control at each chunk boundary,
    which depends only on the config.

    Arguments:
        setup: the validated `simulate` arguments.
        y0: the initial state as an array (what `simulate` returns as `final_state`).
        chunk: saved frames per chunk.
        failure: solver result code -> the message of the `SimulationError`.
    """

    def __init__(self, setup: Setup, y0: jax.Array, chunk: int, failure: Callable[[int], str]):
        self.setup = setup
        self.y0 = y0
        self.times = np.asarray(setup.t)
        self.chunk = chunk
        self.failure = failure
        self.num_steps = 0

    def start(self) -> jax.Array:
        self.num_steps = 0
        return self.y0

    def advance(self, state: jax.Array, k: int, n: int) -> tuple[jax.Array, dict[str, np.ndarray]]:
        s = self.setup
        traj = simulate(s.model, s.params, s.t[k : k + n + 1], initial=state, solver=s.solver, key=s.key)
        code = int(traj.stats["result"])
        if code != 0:
            raise SimulationError(self.failure(code))
        self.num_steps += int(traj.stats["num_steps"])
        rows = {name: np.asarray(v) for name, v in traj.observables.items()}
        if k > 0:  # frame k is the previous chunk's last
            rows = {name: v[1:] for name, v in rows.items()}
        return traj.final_state, rows

    def meta(self) -> dict[str, Any]:
        return {"num_steps": self.num_steps}

    def restore(self, meta: dict[str, Any]) -> jax.Array:
        self.num_steps = int(meta.get("num_steps", 0))
        return self.y0

    def stats(self, state: jax.Array) -> dict[str, int]:
        return {"num_steps": self.num_steps, "result": 0}


def check_finite(config: Config, hint: str) -> Callable[[dict[str, np.ndarray], int], None]:
    """A plan's check: every observable finite, else a `SimulationError` naming the
    first save time where one was not."""
    times = np.asarray(save_times_or_none(config))

    def check(rows: dict[str, np.ndarray], k: int) -> None:
        for name, values in rows.items():
            values = np.asarray(values)
            if not np.issubdtype(values.dtype, np.inexact):
                continue
            finite = np.all(np.isfinite(values.reshape(values.shape[0], -1)), axis=1)
            if not np.all(finite):
                first = int(np.argmin(finite)) + (k if k == 0 else k + 1)
                when = f" at t = {times[first]:g}" if times is not None and first < len(times) else ""
                raise SimulationError(f"{config.source}: observable {name!r} became non-finite{when}; the solution diverged{hint}")

    return check


def save_times_or_none(config: Config) -> np.ndarray | None:
    try:
        return save_times(config)
    except InputError:
        return None


def frames_per_chunk(config: Config, state_size: int, frames: int) -> int:
    """`[output] chunk`, or as many saved frames as fit in the in-memory budget (a saved
    frame is taken as four times the state: its fields plus derived observables)."""
    return chunk_frames(8 * 4 * max(state_size, 1), frames, config.spec.output.chunk, config=config)


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
    if adjoint == "direct" and spec.max_steps is not None:
        # Differentiating through diffrax's DirectAdjoint keeps every possible step.
        problem = memory_problem(WORK_ARRAYS * 8 * spec.max_steps, f"differentiating up to {spec.max_steps:,} steps with adjoint = \"direct\"")
        if problem:
            raise config.error("solver.max_steps", f"{problem}; lower max_steps or use adjoint = \"recursive_checkpoint\"")
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


@plan_family.register
def _(model: OdeModel, config: Config) -> RunPlan:
    s = setup_family(model, config)
    y0 = model.initial_state(s.initial)
    frames = len(s.t) - 1
    method = s.solver.method

    def failure(code: int) -> str:
        return (
            f"{config.source}: the {method} solve failed: {result_message(code)} "
            "(raise solver.max_steps, loosen rtol/atol, or use an implicit method such as kvaerno5 for stiff problems)"
        )

    engine = SimulateEngine(s, y0, frames_per_chunk(config, int(np.size(y0)), frames), failure)
    sink = RunSink(
        model=model.name,
        config=resolved_toml(config, **s.resolved),
        time=np.asarray(s.t),
        params={k: np.asarray(v) for k, v in s.params.items()},
        initial={k: np.asarray(v) for k, v in s.initial.items()},
    )
    return RunPlan(engine=engine, sink=sink, config=sink.config, check=check_finite(config, ""), result=sink_result(sink), description=model.name)


def sink_result(sink: RunSink) -> Callable[[dict[str, np.ndarray], dict[str, int]], RunResult]:
    """The in-memory `RunResult` of a run written by `sink`."""

    def result(rows: dict[str, np.ndarray], stats: dict[str, int]) -> RunResult:
        return RunResult(
            model=sink.model,
            config=sink.config,
            time=sink.time,
            observables=rows,
            params=sink.params,
            initial=sink.initial,
            groups=sink.groups,
            stats=stats,
            seed=sink.seed,
        )

    return result
