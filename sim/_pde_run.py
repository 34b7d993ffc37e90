"""`sim run` and `sim.setup` for PDE configs: [grid], [initial] (a named field or an HDF5
dataset), [time] dt, [solver] method and dtype; the PDE run layout with /grid."""

from __future__ import annotations

import math
from typing import Any

import h5py
import jax.numpy as jnp
import numpy as np

from physics.pde import GridPdeModel, PdeModel, SpectralPdeModel
from solvers import Etdrk, MethodOfLines, did_you_mean, result_message

from ._config import Config
from ._errors import DataError
from ._pde import fd_grid, grid_coordinates, initial_field
from ._run import (
    RunPlan,
    Setup,
    SimulateEngine,
    check_finite,
    frames_per_chunk,
    plan_family,
    resolve_params,
    resolved_toml,
    save_times,
    setup_family,
    sink_result,
)
from ._result import RunSink
from ._store import DAMAGED_FILE_ERRORS, numeric_dataset

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
            raise config.error("initial.dataset", "required with initial.file (the dataset path, e.g. \"/u\")")
        if isinstance(datasets, str):
            datasets = {model.field_names[0]: datasets} if len(model.field_names) == 1 else None
            if datasets is None:
                raise config.error("initial.dataset", f"model {model.name!r} has fields {', '.join(model.field_names)}: give a table field = \"/dataset\"")
        if not isinstance(datasets, dict) or not all(isinstance(v, str) for v in datasets.values()):
            raise config.error("initial.dataset", f"expected a dataset path like \"/u\" (or a table field = \"/dataset\"), got {datasets!r}")
        if not path.is_file():
            raise DataError(path, "", "no such file; expected an HDF5 file with the initial field")
        fields = {}
        try:
            f = h5py.File(path, "r")
        except DAMAGED_FILE_ERRORS:
            raise DataError(path, "", "not a readable HDF5 file") from None
        with f:
            for name, dataset in datasets.items():
                value = numeric_dataset(f, path, dataset, "initial.dataset")
                if value.shape != tuple(model.points):
                    raise DataError(path, dataset, f"shape {value.shape} does not match the grid {tuple(model.points)}")
                if not np.all(np.isfinite(value)):
                    raise DataError(path, dataset, "expected finite values")
                fields[name] = value
        try:
            return initial_field(model, fields, params)
        except ValueError as e:
            raise config.error("initial.dataset", str(e)) from None
    kind = spec.pop("kind", None)
    if kind is not None and kind not in model.initial_kinds:
        raise config.error("initial.kind", f"unknown initial field {kind!r} (kinds: {', '.join(model.initial_kinds)}).{did_you_mean(kind, model.initial_kinds)}")
    try:
        return jnp.asarray(model.initial_field(kind, params={k: float(v) for k, v in params.items()}, **spec))
    except (TypeError, ValueError) as e:
        raise config.error("initial", str(e).splitlines()[0]) from None


def _steps_per_save(config: Config, t: np.ndarray) -> int:
    dt = config.spec.time.dt
    spacing = np.diff(t)
    if not np.allclose(spacing, spacing[0], rtol=1e-9, atol=0.0):
        raise config.error("time.save_at", "fixed-step PDE solvers need equally spaced save times")
    if dt is None:
        raise config.error("time.dt", "required key is missing (the time step of the spectral solver)")
    ratio = spacing[0] / dt
    steps = int(round(ratio))
    if steps < 1 or not math.isclose(ratio, steps, rel_tol=1e-9):
        raise config.error("time.dt", f"expected a step that divides the save interval {spacing[0]:g} a whole number of times, got {dt:g}")
    return steps


def _extras(config: Config, allowed: tuple[str, ...], family: str) -> None:
    spec = config.spec.solver
    given = [k for k in ("rtol", "atol", "dt0", "max_steps", "adjoint") if getattr(spec, k) is not None] + list(spec.extras)
    for key in given:
        if key not in allowed:
            raise config.error(f"solver.{key}", f"unknown key for {family} solvers (expected one of: {', '.join(allowed)}).{did_you_mean(key, allowed)}")


@setup_family.register
def _(model: SpectralPdeModel, config: Config) -> Setup:
    _extras(config, _SPECTRAL_KEYS, "spectral PDE")
    for key in ("steps", "save_every"):
        if getattr(config.spec.time, key) is not None:
            raise config.error(f"time.{key}", "is for MD runs; PDE runs take t1 with save (and dt)")
    params = resolve_params(config, model)
    t = save_times(config)
    steps = _steps_per_save(config, t)
    method = config.spec.solver.method or "etdrk4"
    if method not in ETDRK_METHODS:
        raise config.error("solver.method", f"unknown spectral method {method!r} (methods: {', '.join(ETDRK_METHODS)}).{did_you_mean(method, ETDRK_METHODS)}")
    extras = config.spec.solver.extras
    options = {"dealias": extras["dealias"]} if "dealias" in extras else {}
    try:
        solver = Etdrk(order=int(method[-1]), steps_per_save=steps, dtype=config.spec.solver.dtype or "float64", **options)
    except (TypeError, ValueError) as e:
        raise config.error("solver", str(e).splitlines()[0]) from None
    u0 = _initial(config, model, params)
    resolved_solver = {"method": method, "dtype": solver.dtype}
    return Setup(model=model, params=params, initial=u0, t=jnp.asarray(t), solver=solver, resolved={"params": params, "solver": resolved_solver})


def _check_explicit_step(config: Config, model: GridPdeModel, params: dict, solver: MethodOfLines) -> None:
    """A fixed step of an explicit method beyond its diffusive stability limit is a
    config error (caught before the run, not as a blow-up inside it)."""
    diffusivity = float(np.max(np.asarray(model.diffusivities(params))))
    limit = solver.stability_limit(fd_grid(model, solver.order), diffusivity)
    dt = config.spec.time.dt
    if limit is not None and dt > limit:
        raise config.error(
            "time.dt",
            f"{dt:g} is beyond the diffusive stability limit {limit:.3g} of the explicit method {solver.method} "
            "on this grid; take a smaller step, or an implicit (kvaerno5) or IMEX (kencarp4) method",
        )


@setup_family.register
def _(model: GridPdeModel, config: Config) -> Setup:
    _extras(config, _FD_KEYS, "finite-difference PDE")
    params = resolve_params(config, model)
    t = save_times(config)
    spec = config.spec.solver
    default = MethodOfLines(method="kvaerno5" if model.ndim == 1 else "tsit5")
    options: dict[str, Any] = {"method": spec.method or default.method, "dtype": spec.dtype or "float64"}
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
    if not solver.adaptive:
        _check_explicit_step(config, model, params, solver)
    u0 = _initial(config, model, params)
    resolved_solver = {k: v for k, v in options.items() if k not in ("dt0", "adaptive")}
    return Setup(model=model, params=params, initial=u0, t=jnp.asarray(t), solver=solver, resolved={"params": params, "solver": resolved_solver})


@plan_family.register
def _(model: PdeModel, config: Config) -> RunPlan:
    s = setup_family(model, config)
    u0 = np.asarray(s.initial)
    frames = len(s.t) - 1

    def failure(code: int) -> str:
        return f"{config.source}: the PDE solve failed: {result_message(code)}"

    engine = SimulateEngine(s, jnp.asarray(s.initial), frames_per_chunk(config, int(u0.size), frames), failure)
    sink = RunSink(
        model=model.name,
        config=resolved_toml(config, **s.resolved),
        time=np.asarray(s.t),
        params={k: np.asarray(v) for k, v in s.params.items()},
        initial={name: u0[i] for i, name in enumerate(model.field_names)},
        groups={"grid": grid_coordinates(model)},
    )
    check = check_finite(config, " (reduce time.dt or raise the resolution)")
    return RunPlan(engine=engine, sink=sink, config=sink.config, check=check, result=sink_result(sink), description=model.name)
