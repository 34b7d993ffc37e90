"""Molecular dynamics in `simulate`: the particle models by name, and the engine that runs
them in compiled chunks, growing the neighbour list and rerunning a chunk when it
overflowed (so a too-small capacity is never silent and never the user's job)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from physics.md import (
    BeadSpring,
    LennardJones,
    Morse,
    ParticleModel,
    SoftSphere,
    System,
    Wca,
    chains,
    lattice,
    thermalize,
)
from solvers import (
    Neighbours,
    NeighbourList,
    NoseHooverChain,
    ParticleIntegrator,
    ParticleSolver,
    ParticleState,
    VelocityVerlet,
    integrate,
)

from ._registry import register_model
from ._simulate import _simulate_driver, _simulate_family
from ._trajectory import Trajectory

for _cls in (LennardJones, Wca, Morse, SoftSphere, BeadSpring):
    register_model(_cls)

RESULT_OK = 0
RESULT_NEIGHBOUR_OVERFLOW = 1
DEFAULT_DT = 0.005


# ----------------------------------------------------------------------------- set-up


def default_system(model: ParticleModel, key: Array | None = None) -> System:
    """The system a particle model starts from when none is given: 256 particles on an
    fcc lattice at density 0.8442 with Maxwell-Boltzmann velocities at T = 1.0."""
    key = jax.random.key(0) if key is None else key
    if isinstance(model, BeadSpring):
        return thermalize(chains(key, 16, 16, density=0.85), jax.random.fold_in(key, 1), 1.0)
    return thermalize(lattice("fcc", 4, 0.8442), key, 1.0)


def as_solver(solver) -> ParticleSolver:
    """A `ParticleSolver` from what `simulate` was given (None: velocity Verlet, dt 0.005)."""
    if solver is None:
        return ParticleSolver(VelocityVerlet(dt=DEFAULT_DT))
    if isinstance(solver, ParticleIntegrator):
        return ParticleSolver(solver)
    if isinstance(solver, ParticleSolver):
        return solver
    raise TypeError(
        "a particle model needs a particle integrator (VelocityVerlet, LangevinBaoab, NoseHooverChain) "
        f"or a ParticleSolver, got {type(solver).__name__}"
    )


def _concrete(x) -> np.ndarray | None:
    """x as a numpy array if its value is known now (also under jax.grad), else None."""
    try:
        return np.asarray(jax.lax.stop_gradient(x))
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        return None


def steps_per_save(t, dt) -> int:
    """The fixed number of dt steps between consecutive save times `t`.

    Raises:
        ValueError: times not concrete, not equally spaced, or not a multiple of dt.
    """
    times = _concrete(t)
    step = _concrete(dt)
    if times is None or step is None:
        raise ValueError(
            "MD save times and the time step must be concrete numbers (the number of steps is fixed "
            "before compiling); pass them from outside jax.jit"
        )
    step = float(step)
    if not step > 0:
        raise ValueError(f"the time step dt must be > 0, got {step}")
    gaps = np.diff(times)
    if np.any(gaps <= 0) or not np.allclose(gaps, gaps[0], rtol=1e-9, atol=1e-12):
        raise ValueError("MD save times must be equally spaced and increasing (e.g. jnp.linspace(0, 10, 101))")
    count = int(round(gaps[0] / step))
    if count < 1 or abs(count * step - gaps[0]) > 1e-6 * gaps[0]:
        raise ValueError(f"the save interval {gaps[0]:g} must be a whole number of time steps dt = {step:g}")
    return count


def check_system(model: ParticleModel, system: System, params: PyTree) -> None:
    """Raise ValueError for a system the model cannot start from: parameters that do not
    fit it, a box shorter than twice the cutoff, overlapping particles. Checks only
    what is concrete (under jax.jit, values are unknown and skipped)."""
    if not isinstance(system, System):
        raise TypeError(f"initial must be a physics.md.System, got {type(system).__name__}")
    concrete_params = {k: _concrete(v) for k, v in params.items()}
    if all(v is not None for v in concrete_params.values()):
        model.check_params(system, {k: jnp.asarray(v) for k, v in concrete_params.items()})
    position = _concrete(system.position)
    if system.space.periodic:
        edges = _concrete(system.space.box)
        if edges is not None and np.any(edges < 2 * model.cutoff):
            raise ValueError(
                f"the box {np.round(edges, 6).tolist()} is shorter than twice the cutoff {model.cutoff:g} "
                f"in some direction: use more particles (a larger box) or a shorter cutoff"
            )
    else:
        edges = None
    if position is None:
        return
    if not np.all(np.isfinite(position)):
        raise ValueError("initial positions contain NaN or infinity")
    n = position.shape[0]
    if n < 2:
        return
    i, j, r = _closest_pair(position, edges)
    sigma = concrete_params.get("sigma")
    limit = 0.5 * float(np.min(sigma)) if sigma is not None and not isinstance(model, (SoftSphere, Morse)) else 1e-6
    if r < limit:
        raise ValueError(
            f"particles {i} and {j} overlap: distance {r:.3g} < {limit:.3g}; spread them out "
            "(lower the density, or start from a lattice or random_packing with min_distance)"
        )


def _closest_pair(position: np.ndarray, edges: np.ndarray | None) -> tuple[int, int, float]:
    """The closest pair of particles (chunked so memory stays O(n * 1024))."""
    best = (0, 1, math.inf)
    n = position.shape[0]
    for start in range(0, n, 1024):
        block = position[start : start + 1024]
        dr = block[:, None, :] - position[None, :, :]
        if edges is not None:
            dr = dr - edges * np.round(dr / edges)
        r2 = np.sum(dr * dr, axis=-1)
        r2[np.arange(len(block)), np.arange(start, start + len(block))] = np.inf
        k = int(np.argmin(r2))
        a, b = divmod(k, n)
        if r2[a, b] < best[2] ** 2:
            best = (start + a, b, float(np.sqrt(r2[a, b])))
    return best


# ----------------------------------------------------------------------------- compiled pieces


class _Problem(eqx.Module):
    """Everything a compiled chunk closes over: model, parameters, system, integrator."""

    model: ParticleModel
    params: PyTree
    system: System
    integrator: ParticleIntegrator
    neighbour_list: NeighbourList | None

    def force_fn(self, position, nbrs: Neighbours | None):
        nl = self.neighbour_list
        if nl is not None:
            nbrs = nl.update(nbrs, position, self.system.space.box)
        index = None if nbrs is None else nbrs.index
        return self.model.forces(self.system.at(position), self.params, index), nbrs

    def observe(self, state: ParticleState) -> dict[str, Array]:
        system = self.system.at(state.position, state.velocity)
        index = None if state.aux is None else state.aux.index
        dof = self.integrator.degrees_of_freedom(system.n, system.dim)
        out = self.model.measure(system, self.params, index, dof)
        if isinstance(self.integrator, NoseHooverChain):
            out["conserved_energy"] = out["total_energy"] + self.integrator.thermostat_energy(state)
        out["position"] = state.position
        out["velocity"] = state.velocity
        return out


@eqx.filter_jit
def _start(problem: _Problem, key) -> tuple[ParticleState, dict]:
    s = problem.system
    nl = problem.neighbour_list
    nbrs = None if nl is None else nl.build(s.position, s.space.box)
    state = problem.integrator.init(problem.force_fn, s.position, s.velocity, s.mass, nbrs, key)
    return state, problem.observe(state)


@eqx.filter_jit
def _rebuilt(problem: _Problem, state: ParticleState) -> ParticleState:
    """`state` with a neighbour list built afresh by `problem`'s (larger) list."""
    old = state.aux
    fresh = problem.neighbour_list.build(state.position, problem.system.space.box)
    fresh = eqx.tree_at(lambda nb: nb.builds, fresh, old.builds + 1)
    return eqx.tree_at(lambda s: s.aux, state, fresh)


@eqx.filter_jit
def _chunk(problem: _Problem, state: ParticleState, saves: int, every: int, levels: int):
    return integrate(
        problem.integrator, state, problem.force_fn, saves=saves, steps_per_save=every, observe=problem.observe, levels=levels
    )


def _overflowed(state: ParticleState) -> bool | None:
    """Whether the neighbour list overflowed (None when the flag is traced)."""
    if state.aux is None:
        return False
    flag = _concrete(state.aux.overflow)
    return None if flag is None else bool(flag)


def _largest_divisor_at_most(n: int, limit: int) -> int:
    return max(d for d in range(1, min(n, max(limit, 1)) + 1) if n % d == 0)


# ----------------------------------------------------------------------------- the engine


def run_md(
    model: ParticleModel,
    params: PyTree,
    t: Array,
    *,
    initial: System | None = None,
    solver=None,
    key: Array | None = None,
    progress: Callable[[int], None] | None = None,
) -> Trajectory:
    """Simulate a particle model, saving at the equally spaced times `t` (what
    `sim.simulate` does for particle models).

    The run is split into compiled chunks of about `solver.chunk_steps` steps. After each
    chunk the neighbour-list overflow flag is read; if set, the list is reallocated with
    room for what was seen and the chunk is rerun from its start. Under `jax.jit` or
    `jax.vmap` the flag cannot be read mid-run: an overflow then makes
    `stats["result"]` 1 and the affected observables NaN.

    Returns:
        A `Trajectory` with observables potential_energy, kinetic_energy, total_energy,
        temperature, pressure (and conserved_energy with a Nose-Hoover chain) [T],
        position and velocity [T, n, dim] (unwrapped), the final `ParticleState`, and
        stats num_steps, result, neighbour_builds, capacity.
    """
    solver = as_solver(solver)
    integrator = solver.integrator
    system = default_system(model, key) if initial is None else initial
    check_system(model, system, params)
    every = steps_per_save(t, integrator.dt)
    n_saves = int(np.asarray(t).shape[0]) - 1
    dtype = system.position.dtype
    params = {k: jnp.asarray(v).astype(dtype) for k, v in params.items()}
    box = system.space.box

    nl = None
    if solver.neighbour_list:
        position = _concrete(system.position)
        edges = None if box is None else _concrete(box)
        if position is None or (box is not None and edges is None):
            raise ValueError(
                "the neighbour list is sized from the initial positions, which are traced here; "
                "pass the initial System from outside jax.jit (close over it), or use "
                "ParticleSolver(..., neighbour_list=False)"
            )
        nl = NeighbourList.allocate(position, edges, model.cutoff, solver.skin, capacity=solver.capacity)
    problem = _Problem(model, params, system, integrator, nl)
    run_key = None if key is None else jax.random.fold_in(key, 7)
    state, first = _start(problem, run_key)
    while _overflowed(state):  # the initial build did not fit (only with an explicit capacity)
        problem = dataclasses.replace(problem, neighbour_list=problem.neighbour_list.grown(state.aux, system.n))
        state, first = _start(problem, run_key)

    per_chunk = _largest_divisor_at_most(n_saves, max(1, solver.chunk_steps // every))
    pieces = []
    unresolved = jnp.asarray(False)
    for _ in range(n_saves // per_chunk):
        while True:
            new_state, obs = _chunk(problem, state, per_chunk, every, solver.checkpoint_levels)
            over = _overflowed(new_state)
            if not over:
                break
            grown = problem.neighbour_list.grown(new_state.aux, system.n)
            problem = dataclasses.replace(problem, neighbour_list=grown)
            state = _rebuilt(problem, state)
        if over is None:  # traced: flag the run, poison what followed the overflow
            unresolved = unresolved | new_state.aux.overflow
            obs = jax.tree.map(lambda a: jnp.where(unresolved, jnp.nan, a) if jnp.issubdtype(a.dtype, jnp.floating) else a, obs)
        pieces.append(obs)
        state = new_state
        if progress is not None:
            progress(per_chunk * every)

    observables = {
        name: jnp.concatenate([first[name][None]] + [p[name] for p in pieces], axis=0) for name in first
    }
    nl_final = problem.neighbour_list
    stats = {
        "num_steps": jnp.asarray(n_saves * every),
        "result": jnp.where(unresolved, RESULT_NEIGHBOUR_OVERFLOW, RESULT_OK),
        "neighbour_builds": jnp.asarray(0) if state.aux is None else state.aux.builds,
        "capacity": jnp.asarray(0 if nl_final is None else nl_final.capacity),
    }
    return Trajectory(time=jnp.asarray(t), observables=observables, final_state=state, stats=stats)


@_simulate_driver.register
def _(model: ParticleModel, params, t, initial, solver, key) -> Trajectory:
    return run_md(model, params, t, initial=initial, solver=solver, key=key)


@_simulate_family.register
def _(model: ParticleModel, params, t, initial, solver, key) -> Trajectory:
    return run_md(model, params, t, initial=initial, solver=solver, key=key)
