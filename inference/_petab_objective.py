"""The traced objective of a PEtab problem: every simulation (with its preequilibration)
solved together, and the negative log-likelihood of each measurement from the
simulations' observables and the observables' formulas."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import sim

from ._observation import negative_log_likelihood
from ._petab_problem import PetabProblem, _Observable

# Models of this many states or more simulate their conditions one after the other
# (see `_each_condition`).
LOOPED_FROM = 200


@dataclasses.dataclass(frozen=True)
class Layout:
    """The index arrays of a PEtab problem's simulations, as `load_petab` reads them:
    each value an index into the parameter table's values (linear scale) followed by
    `constants`.

    Attributes:
        model: the imported SBML model; states, compartments, amount_species and
            defaults (its parameters' values) as read from it.
        param_position: model parameter -> its column in `sim_params` and `pre_params`.
        table_ids: the parameter table's ids, in its order.
        ts: save times of every simulation [G, T].
        sim_params [G, n_params], sim_initial (species -> [G], -1 where not set): each
            simulation's condition; pre_params, pre_initial: its preequilibration's
            (the simulation's own where it has none); pre_groups: the simulations with one.
        group_of_row, time_index, measured: per measurement row, its simulation, the
            index of its time and its value.
    """

    model: Any
    states: list[str]
    compartments: dict[str, str]
    amount_species: Any
    defaults: dict[str, float]
    constants: np.ndarray
    param_position: dict[str, int]
    table_ids: list[str]
    ts: jax.Array
    sim_params: np.ndarray
    sim_initial: dict[str, np.ndarray]
    pre_groups: np.ndarray
    pre_params: np.ndarray
    pre_initial: dict[str, np.ndarray]
    group_of_row: np.ndarray
    time_index: np.ndarray
    measured: np.ndarray


def _initial_state(layout: Layout, params: dict, overrides: dict, base=None):
    """The state vector of one simulation: species given by a condition (as the SBML
    symbol: a concentration unless amount-valued) replace the model's (or `base`)."""
    amounts = {}
    for sid, value in overrides.items():
        if sid in layout.compartments and sid not in layout.amount_species:
            cid = layout.compartments[sid]
            size = params[cid] if cid in params else jnp.asarray(layout.defaults.get(cid, 1.0))
            value = value * size
        amounts[sid] = value
    if base is None:
        return layout.model.initial_state(
            {k: v for k, v in amounts.items() if k in layout.states}, params
        )
    return jnp.stack([amounts.get(n, base[i]) for i, n in enumerate(layout.states)])


def _gather(ext, index):
    return ext[jnp.asarray(index)]


def _each_condition(layout: Layout, fn, *args):
    """fn over the leading axis of `args`: batched (vmap) for models of fewer than
    `LOOPED_FROM` states, in a loop (lax.map) from there on. A batched implicit solve
    steps every condition until the slowest ends and factorises a batch of matrices
    at once, which XLA does more slowly than one at a time (an LU of 500 states: 20
    ms per matrix in a batch of 8, 11 ms in a loop); for a large model that is most
    of the work."""
    if len(layout.states) >= LOOPED_FROM:
        return jax.lax.map(lambda a: fn(*a), args)
    return jax.vmap(fn)(*args)


def _run_all(layout: Layout, theta, solver):
    """The observables of every simulation (id -> [G, T]) and the values of the
    sources (`theta` followed by the constants)."""
    model, states, groups = layout.model, layout.states, len(layout.ts)
    ext = jnp.concatenate([theta, jnp.asarray(layout.constants)])

    def group_params(index):  # [G, n_params] -> dict of [G]
        return {pid: ext[jnp.asarray(index[:, j])] for pid, j in layout.param_position.items()}

    def group_initial(initial, g_rows):  # species -> [G] (NaN where not given)
        return {
            sid: jnp.where(
                jnp.asarray(idx[g_rows]) >= 0,
                ext[jnp.asarray(np.maximum(idx[g_rows], 0))],
                jnp.nan,
            )
            for sid, idx in initial.items()
        }

    params = group_params(layout.sim_params)
    given = group_initial(layout.sim_initial, np.arange(groups))

    def start(p, g_over):
        # (a species a condition leaves out (NaN) keeps the model's value)
        base = model.initial_state(None, p)
        filled = {s: jnp.where(jnp.isnan(v), jnp.nan, v) for s, v in g_over.items()}
        y = _initial_state(layout, p, {s: jnp.nan_to_num(v) for s, v in filled.items()}, base)
        mask = (
            jnp.stack(
                [~jnp.isnan(filled[n]) if n in filled else jnp.asarray(False) for n in states]
            )
            if states
            else jnp.zeros((0,), bool)
        )
        return jnp.where(mask, y, base)

    y0 = jax.vmap(start)(params, given)
    pre_groups = layout.pre_groups
    if pre_groups.size:
        pp = {k: v[pre_groups] for k, v in group_params(layout.pre_params).items()}
        pg = {
            k: v[pre_groups]
            for k, v in group_initial(layout.pre_initial, np.arange(groups)).items()
        }
        y_pre = jax.vmap(start)(pp, pg)
        y_ss = _each_condition(
            layout, lambda p, y: solver.steady_state(model.vector_field, y, p), pp, y_pre
        )

        # The simulation condition's species replace the steady state's.
        def after(y, p, g_over):
            filled = {s: v for s, v in g_over.items()}
            y_new = _initial_state(layout, p, {s: jnp.nan_to_num(v) for s, v in filled.items()}, y)
            mask = jnp.stack(
                [~jnp.isnan(filled[n]) if n in filled else jnp.asarray(False) for n in states]
            )
            return jnp.where(mask, y_new, y)

        sub = {k: v[pre_groups] for k, v in given.items()}
        sp_ = {k: v[pre_groups] for k, v in params.items()}
        y0 = y0.at[pre_groups].set(jax.vmap(after)(y_ss, sp_, sub))

    def one(p, y, t):
        return sim.simulate(model, p, t, initial=y, solver=solver).observables

    traj = _each_condition(layout, one, params, y0, layout.ts)  # id -> [G, T]
    return traj, ext


def residual_terms(
    problem: PetabProblem, layout: Layout, observables: list[_Observable]
) -> Callable[..., jax.Array]:
    """The function of x (and an optional solver in place of the problem's) giving the
    negative log-likelihood of each measurement, observable by observable."""

    def terms(x, solver=None):
        theta = problem.theta(x)
        traj, ext = _run_all(layout, theta, solver or problem.solver)
        parts = []
        for o in observables:
            g, k = layout.group_of_row[o.rows], layout.time_index[o.rows]
            values = {name: traj[name][g, k] for name in traj}
            values.update(
                {pid: theta[i] for i, pid in enumerate(layout.table_ids) if pid not in values}
            )
            values.update({name: _gather(ext, index) for name, index in o.placeholders.items()})
            h = jnp.broadcast_to(o.value(values), o.rows.shape)
            sigma = jnp.broadcast_to(o.sigma(values), o.rows.shape)
            y = jnp.asarray(layout.measured[o.rows])
            parts.append(negative_log_likelihood(y, h, sigma, o.transformation, o.distribution))
        return jnp.concatenate(parts)

    return terms
