"""The PDE family: a model's symbols and terms paired with the solvers' grids and time
steppers (`simulate`), and `sim run` / `sim.setup` for PDE configs ([grid], [initial] as a
named field or an HDF5 dataset, [time] dt, [solver] method and dtype; the PDE run layout
with /grid).

- `SpectralPdeModel` (periodic): `solvers.FourierGrid` + `solvers.Etdrk` (default:
  ETDRK4, one step per save interval, 2/3 dealiasing, float64).
- `GridPdeModel` (bounded): `solvers.FdGrid` + `solvers.MethodOfLines` (default: second
  order finite differences in space, Kvaerno5 (implicit) in 1D and Tsit5 in 2D).

`initial` for a PDE is None (the model's default field), a kind name (`"gaussian"`), a
dict of arrays per field name, or an array [*points] (one field) or [C, *points].

The family's declaration (name, sections, checks, models) is `sim._pde_family`; this
module, its numerics, is imported by the first PDE work.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import equinox as eqx
import h5py
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from physics import pde
from physics.pde import GridPdeModel, PdeModel, SpectralPdeModel, TextGridModel
from solvers import (
    Etdrk,
    EtdrkCoefficients,
    EtdrkLoop,
    EtdrkLoopState,
    FdGrid,
    FourierGrid,
    MethodOfLines,
    OdeLoop,
    OdeLoopState,
    did_you_mean,
    result_code,
    result_message,
)

from ._config import Config
from ._errors import DataError, SimulationError
from ._limits import WORK_ARRAYS, memory_problem
from ._pde_family import PDE, PdeFamily
from ._result import RunSink
from ._run import (
    LoopEngine,
    RunPlan,
    Setup,
    check_fixed_steps,
    frames_per_chunk,
    resolve_params,
    resolved_toml,
    save_times,
    sink_result,
)
from ._simulate import complete_params
from ._store import DAMAGED_FILE_ERRORS, error_reason, numeric_dataset
from ._trajectory import Trajectory

MODELS = (
    pde.Heat,
    pde.AdvectionDiffusion,
    pde.Burgers,
    pde.KortewegDeVries,
    pde.KuramotoSivashinsky,
    pde.AllenCahn,
    pde.GrayScott,
    pde.NavierStokes2d,
    pde.HeatFd,
    pde.FisherKpp,
)


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


def _simulate_spectral(model, params, t, initial, solver: Etdrk, coefficients=None) -> Trajectory:
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
    grid = fd_grid(model, solver.order)
    u0 = initial_field(model, initial, params)
    p = _cast(params, dtype)
    if isinstance(model, TextGridModel):
        u0, field, observe_at = model.method_of_lines(
            p, grid, solver.kind == "imex", u0.astype(dtype), t[0]
        )
        sol = solver.stepper.solve(field, t, u0, observe_at=observe_at)
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


# --------------------------------------------------------------------- configs and runs (`sim run`)

ETDRK_METHODS = ("etdrk1", "etdrk2", "etdrk3", "etdrk4")
_SPECTRAL_KEYS = ("method", "dtype", "dealias")
_FD_KEYS = ("method", "dtype", "order", "rtol", "atol", "max_steps", "adjoint")


def _initial(config: Config, model: PdeModel, params: dict) -> jnp.ndarray:
    """The initial field from `[initial]`: `kind = "..."` with the kind's options, or
    `file = "u0.h5"` with `dataset = "/u"` (one dataset per field: a table
    field = "/dataset" for several fields)."""
    spec = dict(config.spec.initial)
    if "file" in spec:
        if not isinstance(spec["file"], str):
            raise config.error("initial.file", f"expected a file path, got {spec['file']!r}")
        path = config.resolve_path(spec.pop("file"))
        datasets = spec.pop("dataset", None)
        if spec:
            key = next(iter(spec))
            raise config.error(f"initial.{key}", "with initial.file only `dataset` may be given")
        if datasets is None:
            raise config.error(
                "initial.dataset", 'required with initial.file (the dataset path, e.g. "/u")'
            )
        if isinstance(datasets, str):
            datasets = {model.field_names[0]: datasets} if len(model.field_names) == 1 else None
            if datasets is None:
                raise config.error(
                    "initial.dataset",
                    f"model {model.name!r} has fields {', '.join(model.field_names)}: give a table "
                    'field = "/dataset"',
                )
        if not isinstance(datasets, dict) or not all(isinstance(v, str) for v in datasets.values()):
            raise config.error(
                "initial.dataset",
                'expected a dataset path like "/u" (or a table field = "/dataset"), got '
                f"{datasets!r}",
            )
        if not path.is_file():
            raise DataError(path, "", "no such file; expected an HDF5 file with the initial field")
        fields = {}
        try:
            f = h5py.File(path, "r")
        except DAMAGED_FILE_ERRORS as e:
            raise DataError(path, "", f"not a readable HDF5 file ({error_reason(e)})") from None
        with f:
            for name, dataset in datasets.items():
                value = numeric_dataset(f, path, dataset, "initial.dataset")
                if value.shape != tuple(model.points):
                    raise DataError(
                        path,
                        dataset,
                        f"shape {value.shape} does not match the grid {tuple(model.points)}",
                    )
                if not np.all(np.isfinite(value)):
                    raise DataError(path, dataset, "expected finite values")
                fields[name] = value
        try:
            return initial_field(model, fields, params)
        except ValueError as e:
            raise config.error("initial.dataset", error_reason(e)) from None
    if any(key in model.field_names for key in spec):
        return _initial_expressions(config, model, spec, params)
    kind = spec.pop("kind", None)
    if kind is not None and kind not in model.initial_kinds:
        raise config.error(
            "initial.kind",
            f"unknown initial field {kind!r} (kinds: "
            f"{', '.join(model.initial_kinds)}).{did_you_mean(kind, model.initial_kinds)}",
        )
    try:
        return jnp.asarray(
            model.initial_field(kind, params={k: float(v) for k, v in params.items()}, **spec)
        )
    except (TypeError, ValueError) as e:
        raise config.error("initial", str(e).splitlines()[0]) from None


def _initial_expressions(config: Config, model: PdeModel, spec: dict, params: dict) -> jnp.ndarray:
    """The initial field from `[initial]` field = "expression of x, y, z and the
    parameters" (or a number), one entry per field."""
    from physics.expressions import ExpressionError, parse

    coordinates = ("x", "y", "z")[: model.ndim]
    for key in spec:
        if key not in model.field_names:
            raise config.error(
                f"initial.{key}",
                f"is no field of model {model.name!r} (fields: {', '.join(model.field_names)}); an "
                "initial field written as expressions gives one per field",
            )
    missing = [name for name in model.field_names if name not in spec]
    if missing:
        raise config.error(
            f"initial.{missing[0]}",
            "required key is missing (an initial field written as expressions gives one per field)",
        )
    values: dict[str, Any] = {k: float(v) for k, v in params.items()}
    values.update({c: m for c, m in zip(coordinates, model.mesh(), strict=False)})
    channels = []
    for name in model.field_names:
        text = spec[name]
        if isinstance(text, bool) or not isinstance(text, (int, float, str)):
            raise config.error(
                f"initial.{name}",
                f"expected a number or an expression of {', '.join(coordinates)} and the "
                f"parameters, got {text!r}",
            )
        try:
            expression = parse(text if isinstance(text, str) else repr(float(text)), set(values))
        except ExpressionError as e:
            raise config.error(f"initial.{name}", str(e)) from None
        field = np.broadcast_to(np.asarray(expression(values), dtype=float), model.field_shape[1:])
        if not np.all(np.isfinite(field)):
            raise config.error(
                f"initial.{name}", "evaluates to values that are not finite on the grid"
            )
        channels.append(field)
    return jnp.asarray(np.stack(channels))


def _steps_per_save(config: Config, t: np.ndarray) -> int:
    dt = config.spec.time.dt
    spacing = np.diff(t)
    if not np.allclose(spacing, spacing[0], rtol=1e-9, atol=0.0):
        raise config.error("time.save_at", "fixed-step PDE solvers need equally spaced save times")
    if dt is None:
        raise config.error(
            "time.dt", "required key is missing (the time step of the spectral solver)"
        )
    with np.errstate(all="ignore"):
        ratio = float(spacing[0] / dt)
    frames = len(t) - 1
    # The step counter of a run is a 64-bit integer: more steps overflow it (and would
    # take longer than any machine runs).
    if not math.isfinite(ratio) or ratio * frames > _MAX_STEPS:
        time = config.spec.time
        span = (
            f"t0 = {time.t0:g}, t1 = {time.t1:g}, save = {len(t)}"
            if time.t1 is not None
            else f"{len(t)} save times"
        )
        total = ratio * frames
        count = f"{total:.3g}" if math.isfinite(total) else f"more than {np.finfo(float).max:.3g}"
        raise config.error(
            "time.dt",
            f"{dt:g} would take {count} steps over the run (save interval {spacing[0]:g}; {span}): "
            f"more than a run can count (at most {_MAX_STEPS:,}); expected a larger dt or a "
            "shorter span",
        )
    steps = int(round(ratio))
    if steps < 1 or not math.isclose(ratio, steps, rel_tol=1e-9):
        raise config.error(
            "time.dt",
            f"expected a step that divides the save interval {spacing[0]:g} a whole number of "
            f"times, got {dt:g}",
        )
    return steps


# Most steps a run takes: its step count is a signed 64-bit integer.
_MAX_STEPS = 2**63 - 1


def _extras(config: Config, allowed: tuple[str, ...], family: str) -> None:
    spec = config.spec.solver
    given = [
        k for k in ("rtol", "atol", "dt0", "max_steps", "adjoint") if getattr(spec, k) is not None
    ] + list(spec.extras)
    for key in given:
        if key not in allowed:
            raise config.error(
                f"solver.{key}",
                f"unknown key for {family} solvers (expected one of: "
                f"{', '.join(allowed)}).{did_you_mean(key, allowed)}",
            )


def _setup_spectral(model: SpectralPdeModel, config: Config) -> Setup:
    _extras(config, _SPECTRAL_KEYS, "spectral PDE")
    params = resolve_params(config, model)
    t = save_times(config)
    steps = _steps_per_save(config, t)
    method = config.spec.solver.method or "etdrk4"
    if method not in ETDRK_METHODS:
        raise config.error(
            "solver.method",
            f"unknown spectral method {method!r} (methods: "
            f"{', '.join(ETDRK_METHODS)}).{did_you_mean(method, ETDRK_METHODS)}",
        )
    extras = config.spec.solver.extras
    options = {"dealias": extras["dealias"]} if "dealias" in extras else {}
    try:
        solver = Etdrk(
            order=int(method[-1]),
            steps_per_save=steps,
            dtype=config.spec.solver.dtype or "float64",
            **options,
        )
    except (TypeError, ValueError) as e:
        raise config.error("solver", str(e).splitlines()[0]) from None
    u0 = _initial(config, model, params)
    resolved_solver = {"method": method, "dtype": solver.dtype}
    checks = PDE.resolve_checks(config, what="PDE runs")
    return Setup(
        model=model,
        params=params,
        initial=u0,
        t=jnp.asarray(t),
        solver=solver,
        resolved={"params": params, "solver": resolved_solver, "checks": checks},
    )


def _check_explicit_step(
    config: Config, model: GridPdeModel, params: dict, solver: MethodOfLines, u0
) -> None:
    """A fixed step of an explicit method beyond the stability limit of the linearised
    right-hand side at the initial field is a config error (caught before the run, not
    as a blow-up inside it). The limit comes from the semi-discrete operator itself (the
    spectral radius of its Jacobian, `MethodOfLines.stable_step`), so it is the same
    however the equation is written (D * laplace(u), laplace(D * u), ...)."""
    dtype = jnp.dtype(solver.dtype)
    grid = fd_grid(model, solver.order)
    p = _cast(params, dtype)
    t0 = float(save_times(config)[0])
    if isinstance(model, TextGridModel):
        start, field, _ = model.method_of_lines(p, grid, False, jnp.asarray(u0).astype(dtype), t0)
    else:
        start, _, field = solver.problem(
            grid, model.diffusivities(p), lambda u: model.reaction(u, p), jnp.asarray(u0)
        )
    limit = solver.stable_step(field, t0, start)
    dt = config.spec.time.dt
    if limit is not None and dt > limit:
        raise config.error(
            "time.dt",
            f"{dt:g} is beyond the stability limit {limit:.4g} of the explicit method "
            f"{solver.method} for this equation "
            "on this grid (the spectral radius of its linearised right-hand side); take a smaller "
            "step, or an implicit "
            "(kvaerno5) or IMEX (kencarp4) method",
        )


def _check_sides(
    config: Config, model: GridPdeModel, params: dict, t, solver: MethodOfLines
) -> None:
    """A text PDE's boundary data that is not a finite number at a save time (log(-1),
    1 / t at t = 0, a value beyond the float range of the run's dtype) is a config error
    naming the side's key; the solver met it as steps it could never take."""
    if not isinstance(model, TextGridModel):
        return
    times = np.asarray(t, dtype=float)
    if times.size > 256:  # (the ends and 254 between: enough to see a value go wrong)
        times = times[np.unique(np.linspace(0, times.size - 1, 256).round().astype(int))]
    found = model.side_problem(params, fd_grid(model, solver.order), times, solver.dtype)
    if found is not None:
        raise config.error(f"grid.{found[0]}", found[1])


def _setup_grid(model: GridPdeModel, config: Config) -> Setup:
    _extras(config, _FD_KEYS, "finite-difference PDE")
    params = resolve_params(config, model)
    t = save_times(config)
    spec = config.spec.solver
    default = MethodOfLines(method="kvaerno5" if model.ndim == 1 else "tsit5")
    options: dict[str, Any] = {
        "method": spec.method or default.method,
        "dtype": spec.dtype or "float64",
    }
    for key in ("rtol", "atol", "max_steps", "adjoint"):
        if getattr(spec, key) is not None:
            options[key] = getattr(spec, key)
    if "order" in spec.extras:
        options["order"] = spec.extras["order"]
    if config.spec.time.dt is not None:
        options.update(dt0=config.spec.time.dt, adaptive=False)
    try:
        solver = MethodOfLines(**options)
    except (TypeError, ValueError) as e:
        message = str(e).splitlines()[0]
        key = "solver.method" if "method" in message else "solver"
        raise config.error(key, message) from None
    _check_sides(config, model, params, t, solver)
    if not solver.adaptive:
        check_fixed_steps(config, solver.dt0, solver.max_steps)
    if solver.kind != "explicit":
        # Implicit and IMEX stages solve dense linear systems of the whole grid.
        unknowns = len(model.field_names) * math.prod(model.points)
        problem = memory_problem(
            8 * 2 * unknowns**2, f"the dense Jacobian of {solver.method} on {unknowns:,} unknowns"
        )
        if problem:
            raise config.error(
                "solver.method", f"{problem}; take an explicit method (tsit5) or a smaller grid"
            )
    u0 = _initial(config, model, params)
    if not solver.adaptive:
        _check_explicit_step(config, model, params, solver, u0)
    resolved_solver = {k: v for k, v in options.items() if k not in ("dt0", "adaptive")}
    checks = PDE.resolve_checks(config, what="PDE runs")
    return Setup(
        model=model,
        params=params,
        initial=u0,
        t=jnp.asarray(t),
        solver=solver,
        resolved={"params": params, "solver": resolved_solver, "checks": checks},
    )


class SpectralProblem(eqx.Module):
    """A periodic spectral PDE run for `LoopEngine`: ETDRK steps from the field in
    Fourier space (`solvers.EtdrkLoop`), with the coefficients of the run's step built
    once, so the steps taken never depend on where chunks fall."""

    model: SpectralPdeModel
    params: Any
    solver: Etdrk
    u0: jax.Array
    coefficients: EtdrkCoefficients

    def _loop(self) -> EtdrkLoop:
        model, solver = self.model, self.solver
        grid = FourierGrid(model.points, model.domain, dtype=solver.dtype)
        p = _cast(self.params, jnp.dtype(solver.dtype))
        return EtdrkLoop(
            solver=solver,
            grid=grid,
            coefficients=self.coefficients,
            nonlinear=lambda u_hat: model.nonlinear(u_hat, p, grid),
            observe=lambda u: model.observables(u, p, grid),
        )

    def init(self) -> EtdrkLoopState:
        return self._loop().init(self.u0)

    def advance(self, state: EtdrkLoopState, frames, capacity: int):
        return self._loop().advance(state, frames, capacity)

    def num_steps(self, state: EtdrkLoopState):
        return jnp.maximum(state.frame - 1, 0) * self.solver.steps_per_save


@eqx.filter_jit
def _spectral_coefficients(model: SpectralPdeModel, params, solver: Etdrk, t) -> EtdrkCoefficients:
    """The ETDRK coefficients of a run, for its step (t[1] - t[0]) / steps_per_save (as
    `Etdrk.solve` builds them)."""
    grid = FourierGrid(model.points, model.domain, dtype=solver.dtype)
    dt = (t[1] - t[0]) / solver.steps_per_save
    return solver.coefficients(model.linear(_cast(params, jnp.dtype(solver.dtype)), grid), dt)


class FdProblem(eqx.Module):
    """A finite-difference PDE run for `LoopEngine`: the method of lines on
    `solvers.OdeLoop` (the steps and values of `MethodOfLines.solve`, resumable at save
    times)."""

    model: GridPdeModel
    params: Any
    solver: MethodOfLines
    ts: jax.Array
    u0: jax.Array

    def _loop(self):
        model, solver = self.model, self.solver
        grid = fd_grid(model, solver.order)
        p = _cast(self.params, jnp.dtype(solver.dtype))
        if isinstance(model, TextGridModel):
            u0, field, observe_at = model.method_of_lines(
                p, grid, solver.kind == "imex", self.u0.astype(jnp.dtype(solver.dtype)), self.ts[0]
            )
            return OdeLoop.from_ode_solver(
                solver.stepper, field, self.ts, fn=lambda t, y, args: observe_at(t, y)
            ), u0
        return OdeLoop.from_method_of_lines(
            solver,
            grid,
            model.diffusivities(p),
            lambda u: model.reaction(u, p),
            self.u0,
            self.ts,
            lambda u: model.observables(u, p, grid),
        )

    def init(self) -> OdeLoopState:
        loop, y0 = self._loop()
        return loop.init(y0)

    def advance(self, state: OdeLoopState, frames, capacity: int):
        loop, _ = self._loop()
        state, saved = loop.advance(state, frames, capacity)
        return state, saved, result_code(state.result)

    def num_steps(self, state: OdeLoopState):
        return state.num_steps


# ----------------------------------------------------------------------------- blow-up checks


def field_norm(fields: list, xp=np):
    """Per frame [T], the root mean square of `fields` (each [T, *points]) taken together
    over the grid; scaled by the largest magnitude, so that fields beyond the square root
    of the largest float give their norm rather than infinity. NaN or inf: NaN."""
    flat = xp.concatenate([f.reshape(f.shape[0], -1) for f in fields], axis=1)
    peak = xp.max(xp.abs(flat), axis=1)
    safe = xp.where(peak > 0, peak, 1.0)
    return peak * xp.sqrt(xp.mean((flat / safe[:, None]) ** 2, axis=1))


class PdeLimits:
    """The `[checks]` bound of a PDE run, checked at saved frames: the root mean square of
    the fields (`field_norm`) may grow to `max_growth` times max(its initial value,
    `growth_floor`); beyond that (or NaN) the run blew up."""

    def __init__(self, model: PdeModel, bounds: dict):
        self.names = tuple(model.field_names)
        self.max_growth = float(bounds["max_growth"])
        self.floor = float(bounds["growth_floor"])

    def reference(self, norm0, xp=np):
        return xp.maximum(norm0, self.floor)

    def excess(self, obs: dict, reference, xp=np):
        """Per frame [T]: the growth over its limit (> 1 or NaN: blown up)."""
        return field_norm([obs[name] for name in self.names], xp) / (reference * self.max_growth)

    def within(self, obs: dict) -> jnp.ndarray:
        """Whether a whole run (fields [T, *points], frame 0 first) stayed within the bound
        (traceable: a sweep's per-run test)."""
        reference = self.reference(field_norm([obs[name][:1] for name in self.names], jnp)[0], jnp)
        return jnp.all(self.excess(obs, reference, jnp) <= 1)


def growth_check(config: Config, s: Setup):
    """The plan's check of a PDE run: every observable finite, and the fields within the
    growth bound of `[checks]`; else a `SimulationError` naming the step, time and
    quantity."""
    limits = PdeLimits(s.model, s.resolved["checks"])
    times = np.asarray(s.t)
    u0 = np.asarray(s.initial)
    norm0 = float(field_norm([u0.reshape(1, -1)])[0])
    reference = float(limits.reference(norm0))
    solver = s.solver
    if isinstance(solver, Etdrk):
        per_save = solver.steps_per_save
        hint = "lower time.dt or loosen the bound"
    elif isinstance(solver, MethodOfLines) and not solver.adaptive:
        per_save = (times[1] - times[0]) / float(solver.dt0)
        hint = "lower time.dt or loosen the bound"
    else:  # adaptive steps: no fixed step count per frame
        per_save = None
        hint = "tighten solver.rtol and solver.atol or loosen the bound"

    def where(frame: int) -> str:
        at = (
            f"step {int(round(frame * per_save))}"
            if per_save is not None
            else f"saved frame {frame}"
        )
        return f"{config.source}: the run blew up at {at} (t = {float(times[frame]):g})"

    def check(rows: dict[str, np.ndarray], k: int) -> None:
        offset = 0 if k == 0 else k + 1
        failed = {}
        for name, values in rows.items():
            values = np.asarray(values)
            if np.issubdtype(values.dtype, np.inexact):
                failed[name] = ~np.all(np.isfinite(values.reshape(values.shape[0], -1)), axis=1)
        with np.errstate(all="ignore"):
            norm = field_norm([np.asarray(rows[name]) for name in limits.names])
        failed["growth"] = ~(norm / (reference * limits.max_growth) <= 1)
        bad = np.any(np.stack(list(failed.values())), axis=0)
        if not np.any(bad):
            return
        i = int(np.argmax(bad))
        what = next(name for name, flags in failed.items() if flags[i])
        if what != "growth":
            raise SimulationError(
                f"{where(offset + i)}: {what} became non-finite (the solution diverged); {hint}"
            )
        raise SimulationError(
            f"{where(offset + i)}: the root mean square of {', '.join(limits.names)} grew to "
            f"{norm[i]:.3g}, "
            f"{norm[i] / reference:.3g} times max(its start {norm0:.3g}, checks.growth_floor = "
            f"{limits.floor:g}) "
            f"(limit checks.max_growth = {limits.max_growth:g}); {hint}"
        )

    return check


def _plan(model: PdeModel, config: Config) -> RunPlan:
    s = PDE.setup(model, config)
    u0 = np.asarray(s.initial)
    frames = len(s.t) - 1
    # The chunk is checked against the memory before the solver's coefficients are built.
    chunk = frames_per_chunk(config, int(u0.size), frames)

    def failure(code: int) -> str:
        return f"{config.source}: the PDE solve failed: {result_message(code)}"

    t = jnp.asarray(s.t)
    if isinstance(model, SpectralPdeModel):
        coefficients = _spectral_coefficients(model, s.params, s.solver, t)
        problem = SpectralProblem(
            model=model,
            params=s.params,
            solver=s.solver,
            u0=jnp.asarray(s.initial),
            coefficients=coefficients,
        )
    else:
        problem = FdProblem(
            model=model, params=s.params, solver=s.solver, ts=t, u0=jnp.asarray(s.initial)
        )
    engine = LoopEngine(problem, np.asarray(s.t), chunk, failure)
    sink = RunSink(
        model=model.name,
        config=resolved_toml(config, **s.resolved),
        time=np.asarray(s.t),
        params={k: np.asarray(v) for k, v in s.params.items()},
        initial={name: u0[i] for i, name in enumerate(model.field_names)},
        groups={"grid": grid_coordinates(model)},
    )
    check = growth_check(config, s)
    return RunPlan(
        engine=engine,
        sink=sink,
        config=sink.config,
        check=check,
        result=sink_result(sink),
        description=model.name,
    )


_TEXT_GRID_KEYS = ("points", "domain", "boundary", "boundary_value")


def _check_points(config: Config, where: str, points: Any) -> None:
    """Points per dimension are whole numbers, and a field and the solver's work arrays
    fit in memory (checked before anything is allocated)."""
    if points is None:
        return
    whole = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
    if not (whole(points) or (isinstance(points, list) and all(whole(v) for v in points))):
        raise config.error(
            where,
            f"expected a whole number of points per dimension, like [256, 256], got {points!r}",
        )
    counts = [points] if whole(points) else points
    if counts and all(v > 0 for v in counts):
        problem = memory_problem(
            WORK_ARRAYS * 8 * math.prod(counts), f"a grid of {math.prod(counts):,} points"
        )
        if problem:
            raise config.error(where, problem)


class PdeMethods(PdeFamily):
    """The PDE family's methods that need its numerics (`sim._pde_family.PdeFamily`
    calls them)."""

    def model_options(self, config: Config) -> dict[str, tuple[str, Any]]:
        # [grid] (points, domain, boundary, ...) holds options of the model.
        options = {key: (f"grid.{key}", value) for key, value in (config.spec.grid or {}).items()}
        where, points = options.get(
            "points", ("model.points", config.spec.model.options.get("points"))
        )
        _check_points(config, where, points)
        return options

    def text_model(self, config: Config):
        options = config.spec.model.options
        if "fields" not in options or "states" in options or "noise" in options:
            return None
        grid = dict(config.spec.grid or {})
        for key in grid:
            if key not in _TEXT_GRID_KEYS:
                raise config.error(
                    f"grid.{key}",
                    "is not a key of the grid of a PDE written as text (keys: "
                    f"{', '.join(_TEXT_GRID_KEYS)})",
                )
        if "points" not in grid:
            raise config.error(
                "grid.points",
                "required key is missing (a PDE written as text needs its grid: points = [64] or "
                "[64, 64])",
            )
        _check_points(config, "grid.points", grid["points"])
        if "boundary_value" in grid and "boundary" not in grid:
            raise config.error(
                "grid.boundary_value",
                "given without grid.boundary (the kind of each side: dirichlet, neumann, robin or "
                "periodic)",
            )
        try:
            return pde.pde_model(
                config.spec.model.name,
                options["fields"],
                options.get("parameters"),
                options.get("observables"),
                points=grid["points"],
                domain=grid.get("domain"),
                boundary=grid.get("boundary"),
                boundary_value=grid.get("boundary_value"),
            )
        except ValueError as e:
            text = str(e)
            # (the grid's own check, shared with the built-in models, names the model first)
            named = f"model {config.spec.model.name!r}: "
            rest = text.removeprefix(named)
            key = rest.split("[")[0].split(" ")[0]
            if rest != text and key in ("points", "domain"):
                raise config.error(f"grid.{key}", rest) from None
            where, _, why = text.partition(": ")
            if where.split(".")[0].split("[")[0] in ("boundary", "boundary_value"):
                raise config.error(f"grid.{where}", why) from None
            raise

    def simulate(self, model, params, t, initial, solver, key) -> Trajectory:
        if isinstance(model, SpectralPdeModel):
            return simulate_spectral(model, params, t, initial, solver)
        return simulate_grid(model, params, t, initial, solver)

    def setup(self, model, config: Config) -> Setup:
        if isinstance(model, SpectralPdeModel):
            return _setup_spectral(model, config)
        return _setup_grid(model, config)

    def plan(self, model, config: Config) -> RunPlan:
        return _plan(model, config)

    def sweep_setup(self, config: Config, s: Setup) -> Setup:
        if isinstance(s.solver, MethodOfLines):  # failures flagged per run, not raised
            return dataclasses.replace(s, solver=dataclasses.replace(s.solver, throw=False))
        return s

    def run_bounds(self, s: Setup):
        return PdeLimits(s.model, s.resolved["checks"]).within

    def sweep_problem(self, s: Setup, params: dict, initial, key):
        model, t = s.model, jnp.asarray(s.t)
        u0 = initial_field(model, initial, params)
        if isinstance(model, SpectralPdeModel):
            coefficients = _spectral_coefficients(model, params, s.solver, t)
            return SpectralProblem(
                model=model, params=params, solver=s.solver, u0=u0, coefficients=coefficients
            )
        return FdProblem(model=model, params=params, solver=s.solver, ts=t, u0=u0)
