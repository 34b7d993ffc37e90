"""Sweeps of ODE models in the batched loop of `solvers` (`solvers.solve_batch`): the
model's side of it (initial states, parameters, observables on arrays of runs)."""

from __future__ import annotations

from typing import Any

import jax

from physics.ode import OdeModel
from solvers import OdeSolver, batched_ode_supports, solve_batch


def supports(model: Any, solver: Any, initial: Any) -> bool:
    """Whether the batched loop reproduces `simulate` for this set-up."""
    return (
        isinstance(model, OdeModel)
        and isinstance(solver, OdeSolver)
        and (initial is None or isinstance(initial, dict))
        and batched_ode_supports(solver)
    )


def chunk_trajectories(model: OdeModel, solver: OdeSolver, ts, swept: dict, fixed: dict, initial: dict):
    """The batched equivalent of `simulate` for a chunk of runs, with the runs on the
    last axis: observables {name: [T, ..., B]}, num_steps [B], result [B]. Swept params
    and `initial` values are [B]; fixed params are shared."""
    y0 = jax.vmap(model.initial_state)(initial)
    ys, steps, result = solve_batch(model.vector_field, solver, ts, y0, swept, fixed)
    observe = jax.vmap(lambda t, y, p: model.observables(t, y, {**fixed, **p}), in_axes=(0, 1, None), out_axes=0)
    observables = jax.vmap(lambda y, p: observe(ts, y, p), in_axes=(2, 0), out_axes=-1)(ys, swept)
    return observables, steps, result
