"""PDE models solved from `simulate`'s arguments: the initial field, the spectral
(ETDRK) and finite-difference (method of lines) solves, and the spectral stepper of a
model that a Python loop advances."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from physics.pde import GridPdeModel, PdeModel, SpectralPdeModel, TextGridModel
from solvers import (
    Etdrk,
    EtdrkCoefficients,
    FdGrid,
    FourierGrid,
    MethodOfLines,
    SlabGrid,
    did_you_mean,
    solve_slabs,
)

from ..._simulate import complete_params
from ..._trajectory import Trajectory


def initial_field(model: PdeModel, initial: Any, params: PyTree | None = None) -> Array:
    """The initial state [C, *points] of `model` from what `simulate` was given.

    Raises:
        ValueError: an unknown kind or field name, or an array whose shape is not the
            grid's.
    """
    shape = model.field_shape
    if initial is None or isinstance(initial, str):
        concrete = None if params is None else _concrete(params)
        return jnp.asarray(model.initial_field(initial, params=concrete))
    if isinstance(initial, dict):
        names = model.field_names
        for name in initial:
            if name not in names:
                raise ValueError(
                    f"model {model.name!r} has no field {name!r} (fields: "
                    f"{', '.join(names)}).{did_you_mean(name, names)}"
                )
        missing = [n for n in names if n not in initial]
        if missing:
            raise ValueError(
                f"initial fields of {model.name!r} are missing {', '.join(missing)} (give every "
                "field)"
            )
        channels = []
        for name in names:
            value = jnp.asarray(initial[name])
            if value.shape != tuple(model.points):
                raise ValueError(
                    f"initial field {name!r} of {model.name!r} has shape {value.shape}; expected "
                    f"the grid shape {tuple(model.points)}"
                )
            channels.append(value)
        return jnp.stack(channels)
    value = jnp.asarray(initial)
    if value.shape == tuple(model.points) and shape[0] == 1:
        return value[None]
    if value.shape != shape:
        expected = (
            f"{tuple(model.points)} or {shape}"
            if shape[0] == 1
            else f"{shape} (fields {', '.join(model.field_names)})"
        )
        raise ValueError(
            f"initial field of {model.name!r} has shape {value.shape}; expected {expected}"
        )
    return value


def _concrete(params: PyTree) -> PyTree | None:
    """Params as floats when they are concrete (None under tracing: then the defaults
    shape a named initial field)."""
    try:
        return {k: float(v) for k, v in params.items()}
    except (jax.errors.ConcretizationTypeError, TypeError):
        return None


def _cast(params: PyTree, dtype) -> PyTree:
    return jax.tree.map(lambda v: jnp.asarray(v).astype(dtype), params)


def _etdrk(solver: Etdrk | None) -> Etdrk:
    if solver is None:
        return Etdrk()
    if not isinstance(solver, Etdrk):
        raise TypeError(
            "a periodic spectral PDE model needs a solvers.Etdrk solver, got "
            f"{type(solver).__name__}"
        )
    return solver


def _simulate_slabs(model, params, t, initial, solver: Etdrk) -> Trajectory:
    """`_simulate_spectral` with the grid split over `solver.devices` devices."""
    try:
        grid = SlabGrid(model.points, model.domain, dtype=solver.dtype, devices=solver.devices)
    except ValueError as e:
        raise ValueError(f"model {model.name!r}: {e}") from None
    u0 = initial_field(model, initial, params)
    sol = solve_slabs(
        solver,
        grid,
        model.linear,
        model.nonlinear,
        u0,
        t,
        model.observables,
        args=_cast(params, jnp.dtype(solver.dtype)),
    )
    stats = {"num_steps": sol.num_steps, "result": sol.result}
    return Trajectory(time=t, observables=sol.saved, final_state=sol.final, stats=stats)


def _simulate_spectral(model, params, t, initial, solver: Etdrk, coefficients=None) -> Trajectory:
    if solver.devices > 1:
        if coefficients is not None:
            raise ValueError(
                "a spectral stepper's prebuilt coefficients are for one device; build the "
                "stepper with an Etdrk of devices = 1"
            )
        return _simulate_slabs(model, params, t, initial, solver)
    grid = FourierGrid(model.points, model.domain, dtype=solver.dtype)
    u0 = initial_field(model, initial, params)
    p = _cast(params, jnp.dtype(solver.dtype))

    def observe(u):
        return model.observables(u, p, grid)

    linear = model.linear(p, grid) if coefficients is None else None
    sol = solver.solve(
        grid, linear, lambda u_hat: model.nonlinear(u_hat, p, grid), u0, t, observe, coefficients
    )
    stats = {"num_steps": sol.num_steps, "result": sol.result}
    return Trajectory(time=t, observables=sol.saved, final_state=sol.final, stats=stats)


def simulate_spectral(model: SpectralPdeModel, params, t, initial, solver) -> Trajectory:
    """The traced body of `simulate` for a periodic spectral model (ETDRK)."""
    return _simulate_spectral(model, params, t, initial, _etdrk(solver))


class SpectralStepper(eqx.Module):
    """A periodic spectral model with its parameters and the ETDRK coefficients of one
    step dt, built once (as an exponax stepper holds them): `simulate` from any initial
    field and save times with that step reuses them instead of rebuilding the contour
    integrals on every call. Build one with `spectral_stepper`; a new parameter set needs
    a new stepper. It is a pytree: pass it into `jax.jit`-ed functions as an argument;
    gradients with respect to its `params` and `coefficients` leaves flow as usual.

    Attributes:
        model: the `SpectralPdeModel`.
        params: its complete parameters.
        solver: the `solvers.Etdrk` strategy.
        coefficients: `solver.coefficients(model.linear(params), dt)`.
    """

    model: SpectralPdeModel
    params: PyTree
    solver: Etdrk
    coefficients: EtdrkCoefficients

    @property
    def dt(self) -> Array:
        return self.coefficients.dt

    def simulate(self, t: Array, *, initial: Any = None) -> Trajectory:
        """`sim.simulate(model, params, t, initial=initial, solver=solver)` with the
        prebuilt coefficients.

        Arguments:
            t: equally spaced save times [T] with (t[1] - t[0]) / solver.steps_per_save
                equal to the stepper's dt.
            initial: as for `simulate` (None: the model's default field).

        Raises:
            EqxRuntimeError (at run time): save times whose step is not the stepper's dt.
        """
        t = jnp.asarray(t, dtype=float)
        return _simulate_spectral(
            self.model, self.params, t, initial, self.solver, self.coefficients
        )


def spectral_stepper(
    model: SpectralPdeModel, params: PyTree | None, dt: float, *, solver: Etdrk | None = None
) -> SpectralStepper:
    """Build the ETDRK coefficients of `model` at `params` for steps of `dt` once.

    Arguments:
        model: a periodic spectral model.
        params: its parameters (missing ones take defaults).
        dt: the time step.
        solver: the `solvers.Etdrk` strategy (default: ETDRK4, float64).

    Returns:
        A `SpectralStepper`.

    Example:
        >>> model = sim.get_model("kuramoto_sivashinsky")
        >>> stepper = sim.spectral_stepper(model, None, 0.25, solver=Etdrk(steps_per_save=4))
        >>> traj = stepper.simulate(jnp.linspace(0.0, 10.0, 11))
    """
    if not isinstance(model, SpectralPdeModel):
        raise TypeError(
            f"spectral_stepper needs a periodic spectral model, got {type(model).__name__}"
        )
    solver = _etdrk(solver)
    params = jax.tree.map(jnp.asarray, complete_params(model, params))
    grid = FourierGrid(model.points, model.domain, dtype=solver.dtype)
    linear = model.linear(_cast(params, jnp.dtype(solver.dtype)), grid)
    coefficients = solver.coefficients(linear, jnp.asarray(dt, dtype=float))
    return SpectralStepper(model=model, params=params, solver=solver, coefficients=coefficients)


def fd_grid(model: GridPdeModel, order: int) -> FdGrid:
    """The finite-difference grid of a bounded model."""
    return FdGrid(
        model.points, model.domain, model.boundary_kinds, model.boundary_values, order=order
    )


def default_method_of_lines(model: GridPdeModel) -> MethodOfLines:
    """Kvaerno5 (implicit, dense Jacobian) in 1D; Tsit5 (explicit, adaptive) in 2D."""
    return MethodOfLines(method="kvaerno5" if model.ndim == 1 else "tsit5")


def simulate_grid(model: GridPdeModel, params, t, initial, solver) -> Trajectory:
    """The traced body of `simulate` for a finite-difference model (method of lines)."""
    if solver is None:
        solver = default_method_of_lines(model)
    if not isinstance(solver, MethodOfLines):
        raise TypeError(
            "a finite-difference PDE model needs a solvers.MethodOfLines solver, got "
            f"{type(solver).__name__}"
        )
    dtype = jnp.dtype(solver.dtype)
    try:
        grid = solver.split(fd_grid(model, solver.order))
    except ValueError as e:
        raise ValueError(f"model {model.name!r}: {e}") from None
    u0 = initial_field(model, initial, params)
    p = _cast(params, dtype)
    if isinstance(model, TextGridModel):
        u0, field, observe_at = model.method_of_lines(
            p, grid, solver.kind == "imex", grid.constrain(u0.astype(dtype)), t[0]
        )
        sol = solver.stepper.solve(
            grid.ode_rhs(field),
            t,
            grid.ode_state(u0),
            observe_at=lambda t, y: grid.constrain(observe_at(t, grid.ode_fields(y))),
        )
        saved = jax.tree.map(lambda leaf: jnp.where(sol.result != 0, jnp.nan, leaf), sol.ys)
        final = jnp.stack([saved[name][-1] for name in model.field_names])
        return Trajectory(
            time=t,
            observables=saved,
            final_state=final,
            stats={"num_steps": sol.num_steps, "result": sol.result},
        )

    def observe(u):
        return model.observables(u, p, grid)

    sol = solver.solve(grid, model.diffusivities(p), lambda u: model.reaction(u, p), u0, t, observe)
    final = jnp.stack([sol.saved[name][-1] for name in model.field_names])
    stats = {"num_steps": sol.num_steps, "result": sol.result}
    return Trajectory(time=t, observables=sol.saved, final_state=final, stats=stats)


def grid_coordinates(model: PdeModel) -> dict[str, np.ndarray]:
    """The run file's `/grid` group: x (and y, z) node coordinates."""
    return {name: c for name, c in zip(("x", "y", "z"), model.coordinates(), strict=False)}
