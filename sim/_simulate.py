"""`simulate`: pair a model with the solver of its family. Pure and traceable."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from physics import Model
from solvers import did_you_mean

from ._family import family_of
from ._trajectory import Trajectory


def complete_params(model: Model, params: PyTree | None) -> dict:
    """`params` with every missing declared parameter filled by its default.

    Raises:
        ValueError: a key that the model does not declare (at trace time).
    """
    names = model.parameter_names
    if params is None:
        return model.default_params()
    for key in params:
        if key not in names:
            raise ValueError(
                f"model {model.name!r} has no parameter {key!r} "
                f"(parameters: {', '.join(names)}).{did_you_mean(key, names)}"
            )
    full = dict(params)
    for p in model.parameters:
        if p.name not in full:
            # A str default describes a pytree (network weights) that only the model builds.
            full[p.name] = model.default_params()[p.name] if isinstance(p.default, str) else jnp.asarray(p.default, dtype=float)
    return full


def _as_array(x):
    """Arrays pass through; Python numbers become (strongly typed) float arrays."""
    return x if isinstance(x, (jax.Array, np.ndarray)) else jnp.asarray(x, dtype=float)


@eqx.filter_jit
def _simulate_jit(model, params, t, initial, solver, key):
    return family_of(model).simulate(model, params, t, initial, solver, key)


def _simulate_driver(model, params, t, initial, solver, key) -> Trajectory:
    """How `simulate` runs a model: as its family drives it (MD compiles chunks and
    regrows its neighbour lists), else one compiled call."""
    traj = family_of(model).drive(model, params, t, initial, solver, key)
    return _simulate_jit(model, params, t, initial, solver, key) if traj is None else traj


def simulate(
    model: Model,
    params: PyTree | None,
    t: Array | np.ndarray,
    *,
    initial: PyTree | None = None,
    solver: eqx.Module | None = None,
    key: Array | None = None,
) -> Trajectory:
    """Simulate `model` with `params`, saving at the times `t`.

    Pure and traceable: `jax.jit`, `jax.vmap` over params and `jax.grad` with respect to
    params and initial state all compose with it. Changing a parameter value, a
    tolerance or the save times (same length) does not recompile.

    Arguments:
        model: a model of any family (`sim.get_model(name)`).
        params: dict of parameter values (missing ones take the model's defaults).
        t: increasing save times [T], T >= 2; the first is the initial time.
        initial: initial state: for ODEs a dict of values per state component (missing
            ones take defaults) or an array [n]; family-specific otherwise.
        solver: the family's solver strategy (default: `OdeSolver()` for ODEs,
            tsit5 with rtol 1e-6 and atol 1e-8).
        key: PRNG key for stochastic families (Langevin dynamics, random initial states).

    Returns:
        A `Trajectory` with `time`, `observables` (name -> [T, ...]), `final_state` and
        `stats`.

    Raises:
        ValueError: an unknown parameter or state name, or a badly shaped initial state.

    Example:
        >>> import jax.numpy as jnp, sim
        >>> model = sim.get_model("lotka_volterra")
        >>> traj = sim.simulate(model, model.default_params(), jnp.linspace(0.0, 20.0, 201))
        >>> traj.observables["prey"].shape
        (201,)
    """
    # A numpy array stays one: a constant even under jax.jit, as families that fix their
    # number of steps before compiling (MD) need.
    t = t.astype(float) if isinstance(t, np.ndarray) else jnp.asarray(t, dtype=float)
    if t.ndim != 1 or t.shape[0] < 2:
        raise ValueError(f"save times t must be a 1-D array of at least 2 times, got shape {t.shape}")
    # Python numbers become arrays so that a new value never recompiles.
    params = jax.tree.map(_as_array, complete_params(model, params))
    if isinstance(initial, dict):
        initial = {k: _as_array(v) for k, v in initial.items()}
    return _simulate_driver(model, params, t, initial, solver, key)
