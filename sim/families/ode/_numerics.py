"""The ODE family's numerics (its declaration: `sim.families.ode`): models dy/dt = f(t, y;
params) solved by `solvers.OdeSolver`; configs with `[initial]` values per state component and
`[solver]` keys of an `OdeSolver`; runs advanced by the resumable `solvers.OdeLoop`;
sweeps in the batched loop of `solvers.solve_batch` where it reproduces single runs."""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pydantic

from physics import float_array, ode
from physics.ode import OdeModel
from solvers import (
    ADJOINTS,
    IMPLICIT_METHODS,
    ODE_METHODS,
    ONE_FIELD_METHODS,
    OdeEvent,
    OdeLoop,
    OdeLoopState,
    OdeSolver,
    Result,
    batched_ode_supports,
    did_you_mean,
    result_code,
    result_message,
    solve_batch,
    solve_with_events,
)

from ..._config import Config
from ..._limits import WORK_ARRAYS, memory_problem
from ..._run import (
    LoopEngine,
    Setup,
    check_finite,
    check_fixed_steps,
    frames_per_chunk,
    initial_vector,
    named_initial,
    resolve_params,
    run_plan,
    save_times,
)
from ..._sources import check_returns, model_key
from ..._stream import RunPlan
from ..._trajectory import Trajectory
from . import ODE

# The method of a model declared stiff (`OdeModel.stiff`: SBML models among them) when
# nothing names one; every other model's is OdeSolver's default.
STIFF_METHOD = "kvaerno5"

# Explicit adaptive ODE sweeps run in the batched loop of `solvers.solve_batch` (False:
# `jax.vmap` of `simulate`, as every other family).
FAST_SWEEPS = True


# ----------------------------------------------------------------------------- simulate


def default_method(model: OdeModel) -> str:
    """The method that solves `model` when none is named: `STIFF_METHOD` for a model
    declared stiff, else `OdeSolver`'s default (tsit5)."""
    return STIFF_METHOD if model.stiff else OdeSolver().method


def solver_notes(model: OdeModel, config: Config) -> tuple[str, ...]:
    """The line a run prints when it solves a stiff model with the stiff default."""
    spec = config.spec
    if spec.solver.method is not None or spec.time.dt is not None or not model.stiff:
        return ()
    what = (
        "SBML model"
        if "sbml" in config.spec.model.options
        else f"model {model.name!r} is declared stiff"
    )
    return (f"{what}: using stiff solver {STIFF_METHOD} (set [solver] method to choose)",)


def simulate(model: OdeModel, params, t, initial, solver) -> Trajectory:
    if solver is None:
        solver = OdeSolver(method=default_method(model))
    if not isinstance(solver, OdeSolver):
        raise TypeError(f"an ODE model needs an OdeSolver, got {type(solver).__name__}")
    y0 = initial_vector(model, initial, params)
    events = model.events()
    if events:
        # (parameters that events set change after them: the observables of a run with
        # events read the parameters it started with)
        solver_events = tuple(
            OdeEvent(
                trigger=e.trigger,
                apply=e.apply,
                terminal=e.terminal,
                holds=e.holds,
                initial_value=e.initial_value,
                persistent=e.persistent,
                values_at_trigger=e.values_at_trigger,
            )
            for e in events
        )
        sol, count = solve_with_events(solver, model.vector_field, t, y0, params, solver_events)
    else:
        sol = solver.solve(model.vector_field, t, y0, params)
    observables = jax.vmap(model.observables, in_axes=(0, 0, None))(t, sol.ys, params)
    stats = {"num_steps": sol.num_steps, "result": sol.result}
    if events:
        stats["num_events"] = count
    return Trajectory(time=t, observables=observables, final_state=sol.ys[-1], stats=stats)


# ----------------------------------------------------------------------------- configs and runs


class OdeSolverExtras(pydantic.BaseModel):
    """The `[solver]` key of ODE runs beyond the typed ones."""

    max_events: int = pydantic.Field(
        64, description="the most events a run may meet (1 to 100,000); more stop it"
    )


_ODE_SOLVER_KEYS = (
    "method",
    "rtol",
    "atol",
    "dt0",
    "max_steps",
    "adjoint",
    "dtype",
    *OdeSolverExtras.model_fields,
)


def ode_solver(config: Config, model: OdeModel) -> OdeSolver:
    """The `OdeSolver` a config's `[solver]` (and `[time] dt`) describe; without a
    method, `default_method(model)`."""
    spec = config.spec.solver
    extras = dict(spec.extras)
    max_events = extras.pop("max_events", 64)
    if (
        isinstance(max_events, bool)
        or not isinstance(max_events, int)
        or not 1 <= max_events <= 100_000
    ):
        raise config.error(
            "solver.max_events", f"expected a whole number from 1 to 100,000, got {max_events!r}"
        )
    ODE.check_solver_keys(config, _ODE_SOLVER_KEYS)
    time = config.spec.time
    # (constant steps, [time] dt, are for explicit methods: the default one then)
    method = spec.method or (default_method(model) if time.dt is None else OdeSolver().method)
    if method not in ONE_FIELD_METHODS:
        raise config.error(
            "solver.method",
            f"unknown ODE method {method!r} (methods: "
            f"{', '.join(ONE_FIELD_METHODS)}).{did_you_mean(method, ONE_FIELD_METHODS)}",
        )
    adjoint = spec.adjoint or "recursive_checkpoint"
    if adjoint not in ADJOINTS:
        raise config.error(
            "solver.adjoint",
            f"unknown adjoint {adjoint!r} (adjoints: "
            f"{', '.join(ADJOINTS)}).{did_you_mean(adjoint, ADJOINTS)}",
        )
    if spec.dtype == "float32":
        raise config.error("solver.dtype", "ODE runs are float64; expected 'float64' or no dtype")
    default = OdeSolver()
    if time.dt is None and not ODE_METHODS[method].adaptive:
        raise config.error(
            "solver.method",
            f"{method} estimates no error, so it takes constant steps only: give [time] dt, or "
            "use an adaptive method",
        )
    if time.dt is not None and method in IMPLICIT_METHODS:
        raise config.error(
            "time.dt",
            f"the implicit method {method} takes adaptive steps (its Newton iterations use "
            "rtol/atol): remove time.dt, or use an explicit method",
        )
    if adjoint == "direct" and spec.max_steps is not None:
        # Differentiating through diffrax's DirectAdjoint keeps every possible step.
        problem = memory_problem(
            WORK_ARRAYS * 8 * spec.max_steps,
            f'differentiating up to {spec.max_steps:,} steps with adjoint = "direct"',
            device=True,
        )
        if problem:
            raise config.error(
                "solver.max_steps",
                f'{problem}; lower max_steps or use adjoint = "recursive_checkpoint"',
            )
    max_steps = spec.max_steps if spec.max_steps is not None else default.max_steps
    if time.dt is not None:
        check_fixed_steps(config, time.dt, max_steps)
    return OdeSolver(
        method=method,
        rtol=spec.rtol if spec.rtol is not None else default.rtol,
        atol=spec.atol if spec.atol is not None else default.atol,
        dt0=time.dt if time.dt is not None else spec.dt0,
        adaptive=time.dt is None,
        max_steps=max_steps,
        adjoint=adjoint,
        throw=False,
        max_events=max_events,
    )


def setup(model: OdeModel, config: Config) -> Setup:
    ODE.resolve_checks(config, what="ODE runs (they only check that values stay finite)")
    params = resolve_params(config, model)
    initial = named_initial(config, model)
    solver = ode_solver(config, model)
    t = float_array(save_times(config))
    y0 = model.initial_state(initial, params)
    check_returns(
        config, model, "vector_field", (t[0], y0, params), y0.shape, f"a state of shape {y0.shape}"
    )
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
        t=t,
        solver=solver,
        resolved={"params": params, "initial": initial, "solver": solver_section},
    )


def plan(model: OdeModel, config: Config) -> RunPlan:
    s = setup(model, config)
    y0 = model.initial_state(s.initial, s.params)
    frames = len(s.t) - 1
    method = s.solver.method

    def failure(code: int) -> str:
        message = f"{config.source}: the {method} solve failed: {result_message(code)}"
        if code in (
            Result.max_steps_reached,
            Result.step_size_too_small,
            Result.implicit_solve_failed,
        ):
            # (the step-limit hint only where steps were what ran out; the other codes'
            # messages say what to change)
            message += (
                " (raise solver.max_steps, loosen rtol/atol, or use an implicit method "
                "such as kvaerno5 for stiff problems)"
            )
        return message

    def explain(state: Any) -> None:
        # A vector field undefined just past where the solver stopped (its steps shrink
        # towards that time until they run out) is bad input, not a failed solve: look
        # from there towards the save time it was going to, nearest first, the state
        # held where it stopped.
        t0 = float(state.tprev)
        target = float(s.t[min(int(state.frame), len(s.t) - 1)])
        for t in [
            t0,
            float(state.tnext),
            *(t0 + (target - t0) * 2.0**-k for k in range(48, -1, -1)),
        ]:
            why = model.undefined(jnp.asarray(t), state.y, s.params)
            if why is not None:
                raise config.error(
                    model_key(config),
                    f"{why} from t = {t:.6g} on; the solve cannot pass it (give the piecewise an "
                    "otherwise)",
                )

    problem_class = EventRunProblem if model.events() else OdeProblem
    problem = problem_class(
        model=model, params=s.params, solver=s.solver, ts=jnp.asarray(s.t), y0=jnp.asarray(y0)
    )
    engine = LoopEngine(
        problem,
        np.asarray(s.t),
        frames_per_chunk(config, int(np.size(y0)), frames),
        failure,
        explain if problem_class is OdeProblem else None,
    )
    return run_plan(config, model, s, engine, check_finite(config, "", model.checked_observables))


class OdeProblem(eqx.Module):
    """An ODE run for `LoopEngine`: `simulate`'s solve, resumable at save times
    (`solvers.OdeLoop`: the steps and values of the one-call solve)."""

    model: OdeModel
    params: Any
    solver: OdeSolver
    ts: jax.Array
    y0: jax.Array

    def _loop(self) -> OdeLoop:
        model = self.model
        return OdeLoop.from_ode_solver(
            self.solver,
            model.vector_field,
            self.ts,
            self.params,
            fn=lambda t, y, args: model.observables(t, y, args),
        )

    def init(self) -> OdeLoopState:
        return self._loop().init(self.y0)

    def advance(self, state: OdeLoopState, frames, capacity: int):
        state, saved = self._loop().advance(state, frames, capacity)
        return state, saved, result_code(state.result)

    def num_steps(self, state: OdeLoopState):
        return state.num_steps


class EventRunState(eqx.Module):
    """The whole run of a model with events, and the next frame to hand out."""

    frame: jax.Array
    observables: dict
    num_steps: jax.Array
    result: jax.Array


class EventRunProblem(eqx.Module):
    """An ODE run with events for `LoopEngine` (and framed sweeps): the solve with
    events is one compiled program over every save time (`solvers.solve_with_events`),
    made at `init`; `advance` hands out its frames. A resumed run computes it again, to
    the same numbers."""

    model: OdeModel
    params: Any
    solver: OdeSolver
    ts: jax.Array
    y0: jax.Array

    def init(self) -> EventRunState:
        traj = simulate(self.model, self.params, self.ts, self.y0, self.solver)
        return EventRunState(
            frame=jnp.asarray(0, jnp.int32),
            observables=traj.observables,
            num_steps=jnp.asarray(traj.stats["num_steps"], jnp.int32),
            result=jnp.asarray(traj.stats["result"], jnp.int32),
        )

    def advance(self, state: EventRunState, frames, capacity: int):
        T = self.ts.shape[0]

        def rows(values):
            padded = jnp.concatenate(
                [values, jnp.zeros((capacity,) + values.shape[1:], values.dtype)]
            )
            return jax.lax.dynamic_slice_in_dim(padded, jnp.minimum(state.frame, T), capacity)

        saved = {name: rows(v) for name, v in state.observables.items()}
        return eqx.tree_at(lambda s: s.frame, state, state.frame + frames), saved, state.result

    def num_steps(self, state: EventRunState):
        return state.num_steps


# ----------------------------------------------------------------------------- sweeps


def batched_supports(model: Any, solver: Any, initial: Any) -> bool:
    """Whether the batched loop reproduces `simulate` for this set-up."""
    return (
        isinstance(model, OdeModel)
        and isinstance(solver, OdeSolver)
        and (initial is None or isinstance(initial, dict))
        and batched_ode_supports(solver)
        and not model.events()
    )


def chunk_trajectories(
    model: OdeModel, solver: OdeSolver, ts, swept: dict, fixed: dict, initial: dict
):
    """The batched equivalent of `simulate` for a chunk of runs, with the runs on the
    last axis: observables {name: [T, ..., B]}, num_steps [B], result [B]. Swept params
    and `initial` values are [B]; fixed params are shared."""
    batch = next(iter(jax.tree.leaves((swept, initial))), None)
    if batch is None:  # (nothing differs between the runs)
        y0 = model.initial_state(initial, fixed)[None]
    else:
        y0 = jax.vmap(lambda i, p, _: model.initial_state(i, {**fixed, **p}))(
            initial, swept, jnp.zeros(batch.shape[0])
        )
    ys, steps, result = solve_batch(model.vector_field, solver, ts, y0, swept, fixed)
    observe = jax.vmap(
        lambda t, y, p: model.observables(t, y, {**fixed, **p}), in_axes=(0, 1, None), out_axes=0
    )
    observables = jax.vmap(lambda y, p: observe(ts, y, p), in_axes=(2, 0), out_axes=-1)(ys, swept)
    return observables, steps, result


def with_events(model, config: Config):
    """`model` with the events of the config's `[[events]]` added to its own."""
    try:
        events = ode.text_events(model, [e.model_dump() for e in config.spec.events])
    except ValueError as e:
        where, _, why = str(e).partition(": ")
        raise config.error(where, why) from None
    t0 = config.spec.time.t0 or 0.0
    for i, e in enumerate(config.spec.events):
        if e.at is not None and e.at[0] <= t0:
            raise config.error(
                f"events.{i}.at", f"expected times after the start t0 = {t0:g}, got {e.at[0]:g}"
            )
    return ode.with_events(model, events)


def sweep_setup(config: Config, s: Setup) -> Setup:
    """The set-up as a sweep runs it."""
    # Failures flagged per run instead of raised; nothing is differentiated, so no
    # reverse-mode bookkeeping (same steps, same values).
    return dataclasses.replace(
        s, solver=dataclasses.replace(s.solver, throw=False, adjoint="forward")
    )


def sweep_problem(s: Setup, params: dict, initial, key):
    """One run of a sweep as an engine problem (with events when the model has any)."""
    problem_class = EventRunProblem if s.model.events() else OdeProblem
    return problem_class(
        model=s.model,
        params=params,
        solver=s.solver,
        ts=jnp.asarray(s.t),
        y0=jnp.asarray(s.model.initial_state(initial, params)),
    )


def batched(s: Setup, save: str):
    """The chunk function of `solvers.solve_batch` for a set-up it supports, or None."""
    if not (FAST_SWEEPS and batched_supports(s.model, s.solver, s.initial)):
        return None
    from ..._sweep import _outputs

    def chunk(x: dict) -> dict[str, jax.Array]:
        batch = x["index"].shape[0]
        swept = {name: jnp.asarray(v, dtype=float) for name, v in x["params"].items()}
        fixed = {name: v for name, v in s.params.items() if name not in swept}
        initial = {
            name: jnp.broadcast_to(jnp.asarray(v, dtype=float), (batch,))
            for name, v in (s.initial or {}).items()
        }
        initial.update({name: jnp.asarray(v, dtype=float) for name, v in x["initial"].items()})
        obs, steps, result = chunk_trajectories(s.model, s.solver, s.t, swept, fixed, initial)
        return _outputs(obs, steps, result, save)

    return chunk
