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

This module holds what the family's methods call, the runs of `sim run` and sweeps
(`SpectralProblem`, `FdProblem`) and their blow-up checks; `simulate`'s solves are in
`._solve`, a config's sections are read by `._config`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from physics import pde
from physics.pde import GridPdeModel, PdeModel, SpectralPdeModel, TextGridModel
from solvers import (
    Etdrk,
    EtdrkCoefficients,
    EtdrkLoop,
    EtdrkLoopState,
    EtdrkSlabLoop,
    EtdrkSlabLoopState,
    FourierGrid,
    MethodOfLines,
    OdeLoop,
    OdeLoopState,
    SlabGrid,
    result_code,
    result_message,
    slab_coefficients,
)

from ..._config import Config
from ..._errors import SimulationError
from ..._run import LoopEngine, RunPlan, Setup, frames_per_chunk, run_plan
from ..._shards import blocks
from ..._trajectory import Trajectory
from . import PDE
from ._config import _TEXT_GRID_KEYS, _check_points, _setup_grid, _setup_spectral
from ._solve import (
    _cast,
    fd_grid,
    grid_coordinates,
    initial_field,
    simulate_grid,
    simulate_spectral,
)

MODELS = (
    pde.Heat,
    pde.AdvectionDiffusion,
    pde.Burgers,
    pde.KortewegDeVries,
    pde.KuramotoSivashinsky,
    pde.AllenCahn,
    pde.GrayScott,
    pde.NavierStokes2d,
    pde.NavierStokes3d,
    pde.HeatFd,
    pde.FisherKpp,
)


class SpectralProblem(eqx.Module):
    """A periodic spectral PDE run for `LoopEngine`: ETDRK steps from the field in
    Fourier space, with the coefficients of the run's step built once, so the steps taken
    never depend on where chunks fall. On one device `solvers.EtdrkLoop`; with the grid
    split over `solver.devices` devices `solvers.EtdrkSlabLoop`, whose state, coefficients
    and saved fields are split in slabs, nothing gathered onto one device."""

    model: SpectralPdeModel
    params: Any
    solver: Etdrk
    u0: jax.Array
    coefficients: EtdrkCoefficients

    def _loop(self) -> EtdrkLoop | EtdrkSlabLoop:
        model, solver = self.model, self.solver
        p = _cast(self.params, jnp.dtype(solver.dtype))
        if solver.devices > 1:
            return EtdrkSlabLoop(
                solver=solver,
                grid=slab_grid(model, solver),
                coefficients=self.coefficients,
                nonlinear=model.nonlinear,
                observe=model.observables,
                args=p,
            )
        grid = FourierGrid(model.points, model.domain, dtype=solver.dtype)
        return EtdrkLoop(
            solver=solver,
            grid=grid,
            coefficients=self.coefficients,
            nonlinear=lambda u_hat: model.nonlinear(u_hat, p, grid),
            observe=lambda u: model.observables(u, p, grid),
        )

    def init(self) -> EtdrkLoopState | EtdrkSlabLoopState:
        return self._loop().init(self.u0)

    def advance(self, state: EtdrkLoopState | EtdrkSlabLoopState, frames, capacity: int):
        return self._loop().advance(state, frames, capacity)

    def num_steps(self, state: EtdrkLoopState | EtdrkSlabLoopState):
        return jnp.maximum(state.frame - 1, 0) * self.solver.steps_per_save


def slab_grid(model: SpectralPdeModel, solver: Etdrk) -> SlabGrid:
    """The grid of `model` split over `solver.devices` devices."""
    return SlabGrid(model.points, model.domain, dtype=solver.dtype, devices=solver.devices)


@eqx.filter_jit
def _spectral_coefficients(model: SpectralPdeModel, params, solver: Etdrk, t) -> EtdrkCoefficients:
    """The ETDRK coefficients of a run, for its step (t[1] - t[0]) / steps_per_save (as
    `Etdrk.solve` builds them); on a split grid each device builds its block."""
    dt = (t[1] - t[0]) / solver.steps_per_save
    p = _cast(params, jnp.dtype(solver.dtype))
    if solver.devices > 1:
        return slab_coefficients(solver, slab_grid(model, solver), model.linear, p, dt)
    grid = FourierGrid(model.points, model.domain, dtype=solver.dtype)
    return solver.coefficients(model.linear(p, grid), dt)


class FdProblem(eqx.Module):
    """A finite-difference PDE run for `LoopEngine`: the method of lines on
    `solvers.OdeLoop` (the steps and values of `MethodOfLines.solve`, resumable at save
    times). With the grid split over `solver.devices` devices (`solvers.HaloGrid`) the
    state, the loop's dense output and the saved fields stay split in slabs."""

    model: GridPdeModel
    params: Any
    solver: MethodOfLines
    ts: jax.Array
    u0: jax.Array

    def _loop(self):
        model, solver = self.model, self.solver
        grid = solver.split(fd_grid(model, solver.order))
        p = _cast(self.params, jnp.dtype(solver.dtype))
        if isinstance(model, TextGridModel):
            u0, field, observe_at = model.method_of_lines(
                p,
                grid,
                solver.kind == "imex",
                grid.constrain(self.u0.astype(jnp.dtype(solver.dtype))),
                self.ts[0],
            )
            return OdeLoop.from_ode_solver(
                solver.stepper,
                grid.ode_rhs(field),
                self.ts,
                fn=lambda t, y, args: grid.constrain(observe_at(t, grid.ode_fields(y))),
            ), grid.ode_state(u0)
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


def finite_rows(values) -> np.ndarray:
    """Per frame [T], whether every value of `values` [T, ...] is finite (an array split
    over devices is read one device's block at a time)."""
    finite = None
    for _, block in blocks(values):
        rows = np.all(np.isfinite(block.reshape(block.shape[0], -1)), axis=1)
        finite = rows if finite is None else finite & rows
    return finite


def blocked_field_norm(fields: list) -> np.ndarray:
    """`field_norm` of fields [T, *points] that may be split over devices, read one
    device's block at a time (two passes: the peak, then the scaled squares)."""
    peak = None
    for field in fields:
        for _, block in blocks(field):
            p = np.max(np.abs(block.reshape(block.shape[0], -1)), axis=1)
            peak = p if peak is None else np.maximum(peak, p)
    safe = np.where(peak > 0, peak, 1.0)
    total, count = 0.0, 0
    for field in fields:
        for _, block in blocks(field):
            flat = block.reshape(block.shape[0], -1)
            total = total + np.sum((flat / safe[:, None]) ** 2, axis=1)
            count += flat.shape[1]
    return peak * np.sqrt(total / count)


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
            if np.issubdtype(np.dtype(values.dtype), np.inexact):
                failed[name] = ~finite_rows(values)
        with np.errstate(all="ignore"):
            norm = blocked_field_norm([rows[name] for name in limits.names])
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


def plan(model: PdeModel, config: Config) -> RunPlan:
    s = PDE.setup(model, config)
    u0 = np.asarray(s.initial)
    frames = len(s.t) - 1
    # The chunk is checked against the memory before the solver's coefficients are built.
    chunk = frames_per_chunk(config, int(u0.size), frames)

    def failure(code: int) -> str:
        return f"{config.source}: the PDE solve failed: {result_message(code)}"

    problem = discretisation(model).problem(
        model, s.params, s.solver, jnp.asarray(s.t), jnp.asarray(s.initial)
    )
    engine = LoopEngine(problem, np.asarray(s.t), chunk, failure)
    return run_plan(
        config,
        model,
        s,
        engine,
        growth_check(config, s),
        initial={name: u0[i] for i, name in enumerate(model.field_names)},
        groups={"grid": grid_coordinates(model)},
    )


def model_options(config: Config) -> dict[str, tuple[str, Any]]:
    """The model options of `[grid]` (points, domain, boundary, ...), checked."""
    # (`devices` says how the run is laid on the machine, not what the model is)
    options = {
        key: (f"grid.{key}", value)
        for key, value in (config.spec.grid or {}).items()
        if key != "devices"
    }
    where, points = options.get("points", ("model.points", config.spec.model.options.get("points")))
    _check_points(config, where, points)
    return options


def text_model(config: Config):
    """The model of a config's `[model.fields]` on its `[grid]`, or None without fields."""
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


class _Spectral:
    """A periodic spectral model: ETDRK on `solvers.FourierGrid`."""

    simulate = staticmethod(simulate_spectral)
    setup = staticmethod(_setup_spectral)

    @staticmethod
    def problem(model, params, solver, t, u0) -> SpectralProblem:
        coefficients = _spectral_coefficients(model, params, solver, t)
        return SpectralProblem(
            model=model, params=params, solver=solver, u0=u0, coefficients=coefficients
        )


class _FiniteDifference:
    """A finite-difference model on a bounded grid: the method of lines."""

    simulate = staticmethod(simulate_grid)
    setup = staticmethod(_setup_grid)

    @staticmethod
    def problem(model, params, solver, t, u0) -> FdProblem:
        return FdProblem(model=model, params=params, solver=solver, ts=t, u0=u0)


def discretisation(model: PdeModel) -> type[_Spectral] | type[_FiniteDifference]:
    """How a PDE model is discretised: the one place the two kinds of model part ways
    (its simulate, its config's set-up and its engine problem)."""
    return _Spectral if isinstance(model, SpectralPdeModel) else _FiniteDifference


def simulate(model, params, t, initial, solver, key) -> Trajectory:
    """`sim.simulate`'s body: ETDRK for a spectral model, the method of lines otherwise."""
    return discretisation(model).simulate(model, params, t, initial, solver)


def setup(model, config: Config) -> Setup:
    """The set-up of a spectral or a finite-difference model's config."""
    return discretisation(model).setup(model, config)


def sweep_setup(config: Config, s: Setup) -> Setup:
    """The set-up as a sweep runs it (method-of-lines failures flagged per run; a grid
    split over devices refused: a sweep splits its runs instead)."""
    if isinstance(s.solver, (Etdrk, MethodOfLines)) and s.solver.devices > 1:
        raise config.error(
            "grid.devices",
            f"= {s.solver.devices} splits one run's grid over devices; a sweep splits its runs "
            "over the devices instead (sim sweep --devices N): leave grid.devices out",
        )
    if isinstance(s.solver, MethodOfLines):  # failures flagged per run, not raised
        return dataclasses.replace(s, solver=dataclasses.replace(s.solver, throw=False))
    return s


def run_bounds(s: Setup):
    """The traceable growth bound of one run's fields."""
    return PdeLimits(s.model, s.resolved["checks"]).within


def sweep_problem(s: Setup, params: dict, initial, key):
    """One run of a sweep as an engine problem."""
    model, t = s.model, jnp.asarray(s.t)
    u0 = initial_field(model, initial, params)
    return discretisation(model).problem(model, params, s.solver, t, u0)
