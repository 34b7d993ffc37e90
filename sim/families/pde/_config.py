"""The sections of a PDE config (`sim run`): [initial] (a named field or an HDF5
dataset), [time] dt, [solver] method and dtype, and [grid], checked into one `Setup`."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax.numpy as jnp
import numpy as np
import pydantic

from physics.pde import GridPdeModel, PdeModel, SpectralPdeModel, TextGridModel
from solvers import Etdrk, MethodOfLines, check_halo, check_slabs, did_you_mean

from ..._config import Config
from ..._errors import DataError
from ..._limits import WORK_ARRAYS, memory_problem
from ..._run import Setup, check_fixed_steps, resolve_params, save_times
from ..._store import error_reason, numeric_dataset, open_hdf5
from . import PDE
from ._solve import _cast, fd_grid, initial_field

ETDRK_METHODS = ("etdrk1", "etdrk2", "etdrk3", "etdrk4")


class PdeSolverExtras(pydantic.BaseModel):
    """The `[solver]` keys of PDE runs beyond the typed ones (`method`, `dtype`, and of the
    method of lines `rtol`, `atol`, `max_steps`, `adjoint`)."""

    dealias: float | None = pydantic.Field(
        2.0 / 3.0,
        description="spectral models: fraction of modes kept for the nonlinear term (Orszag's "
        "rule)",
        json_schema_extra={"default": "2/3"},
    )
    order: int = pydantic.Field(
        2, description="finite-difference models: order of the differences, 2 or 4"
    )


_SPECTRAL_KEYS = ("method", "dtype", "dealias")
_FD_KEYS = ("method", "dtype", "order", "rtol", "atol", "max_steps", "adjoint")


class PdeInitialTable(pydantic.BaseModel):
    """`[initial]` of a PDE run: one of the model's initial fields (`kind`, with the kind's
    own options beside it), an expression of the coordinates per field (`u = "sin(x)"`),
    or a field read from a file."""

    kind: str | None = pydantic.Field(
        None,
        description="the initial field (`sim models NAME` lists a model's kinds and options)",
        json_schema_extra={"default": "the model's default kind"},
    )
    file: str | None = pydantic.Field(
        None, description="an HDF5 file with the initial field, relative to the config's folder"
    )
    dataset: str | dict[str, str] | None = pydantic.Field(
        None,
        description='with file: the dataset ("/u"), or a table field = "/dataset" for several '
        "fields, one value per grid point",
    )


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
        fields = {}
        with open_hdf5(path, "an HDF5 file with the initial field") as f:
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


def _grid_devices(config: Config, model: PdeModel, order: int = 2) -> int:
    """`[grid] devices`: the local devices one run's grid is split over (1 when not
    given), checked against the grid (slabs of a spectral grid; a finite-difference
    grid's slabs also at least as thick as the ghost planes of `order` need) and the
    devices there are."""
    grid = config.spec.grid or {}
    if "devices" not in grid:
        return 1
    value = grid["devices"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise config.error(
            "grid.devices", f"expected a whole number of devices >= 1, got {value!r}"
        )
    try:
        if isinstance(model, SpectralPdeModel):
            check_slabs(tuple(model.points), value)
        else:
            check_halo(tuple(model.points), value, order=order, periodic=model.periodic_axes[0])
    except ValueError as e:
        raise config.error("grid.devices", str(e).removeprefix("devices = ")) from None
    return value


# Most steps a run takes: its step count is a signed 64-bit integer.
_MAX_STEPS = 2**63 - 1


def _setup_spectral(model: SpectralPdeModel, config: Config) -> Setup:
    PDE.check_solver_keys(config, _SPECTRAL_KEYS, "spectral PDE")
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
    devices = _grid_devices(config, model)
    try:
        solver = Etdrk(
            order=int(method[-1]),
            steps_per_save=steps,
            dtype=config.spec.solver.dtype or "float64",
            devices=devices,
            **options,
        )
    except (TypeError, ValueError) as e:
        raise config.error("solver", str(e).splitlines()[0]) from None
    u0 = _initial(config, model, params)
    return _setup(config, model, params, u0, t, solver, {"method": method, "dtype": solver.dtype})


def _setup(config: Config, model, params: dict, u0, t, solver, resolved_solver: dict) -> Setup:
    """The set-up of a PDE run, with the solver keys it resolved and its `[checks]`."""
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
    # (the limit of the operator, whichever devices the run is split over)
    solver = dataclasses.replace(solver, devices=1, linear_solver=None)
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
    PDE.check_solver_keys(config, _FD_KEYS, "finite-difference PDE")
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
    devices = _grid_devices(config, model, solver.order)
    if devices > 1:  # (implicit stages then solve by GMRES: no Jacobian is formed)
        solver = dataclasses.replace(solver, devices=devices)
    _check_sides(config, model, params, t, solver)
    if not solver.adaptive:
        check_fixed_steps(config, solver.dt0, solver.max_steps)
    if solver.kind != "explicit" and solver.stage_solver == "dense":
        # Implicit and IMEX stages solve dense linear systems of the whole grid.
        unknowns = len(model.field_names) * math.prod(model.points)
        problem = memory_problem(
            8 * 2 * unknowns**2,
            f"the dense Jacobian of {solver.method} on {unknowns:,} unknowns",
            device=True,
        )
        if problem:
            raise config.error(
                "solver.method", f"{problem}; take an explicit method (tsit5) or a smaller grid"
            )
    u0 = _initial(config, model, params)
    if not solver.adaptive:
        _check_explicit_step(config, model, params, solver, u0)
    resolved_solver = {k: v for k, v in options.items() if k not in ("dt0", "adaptive")}
    return _setup(config, model, params, u0, t, solver, resolved_solver)


class GridTable(pydantic.BaseModel):
    """`[grid]`: the box of a PDE model written in the config (a built-in
    model takes its own options here, such as `points` and `domain`: `sim models NAME`)."""

    points: list[int] = pydantic.Field(
        description="grid points per axis (1 to 3 axes)", json_schema_extra={"required": True}
    )
    domain: list[list[float]] = pydantic.Field(
        description="[low, high] per axis", json_schema_extra={"unit": "length", "required": True}
    )
    boundary: str | list[Any] | dict[str, Any] | None = pydantic.Field(
        None,
        description="per axis: periodic, dirichlet, neumann or robin (or [low, high]); a table "
        "per field; none: periodic (spectral)",
    )
    boundary_value: float | str | list[Any] | dict[str, Any] | None = pydantic.Field(
        None,
        description="per side: a number or an expression of t, the parameters and the "
        "coordinates (robin: { coefficient, value })",
        json_schema_extra={"default": "0"},
    )
    devices: int = pydantic.Field(
        1,
        description="split one run's grid over this many local devices, in slabs of the first "
        "axis (it must divide points[0]): periodic spectral grids of 2 or 3 axes, and "
        "finite-difference grids of 1 to 3 axes (slabs of at least 3 planes, 4 of order 4; "
        "1 and 2 on a periodic axis); built-in models too; `sim run --devices N` sets it",
    )


_TEXT_GRID_KEYS = tuple(GridTable.model_fields)


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
        split = (config.spec.grid or {}).get("devices", 1)  # (checked later: any >= 1 here)
        problem = memory_problem(
            WORK_ARRAYS * 8 * math.prod(counts),
            f"a grid of {math.prod(counts):,} points",
            device=True,
            devices=split if isinstance(split, int) and not isinstance(split, bool) else 1,
        )
        if problem:
            raise config.error(where, problem)
